// Idempotency-Key on POST (docs/api.md §5.16: a retry returns the first call's answer instead of
// creating a duplicate, also across processes: docs/deployment.md "One machine: --workers"). A server killed mid-request: test/rest/idempotency-crash.test.ts.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDEMPOTENCY_LOCK_NAMESPACE } from '../../runtime/idempotency/index.ts';
import { countRows, expectProblemAt } from '../support/expect.ts';
import { startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
let customerId: string;

beforeAll(async () => {
  t = await startTestServer();
  const c = await t.request('POST', `${BASE}/Customer`, {
    body: { email: `idem-${randomUUID()}@example.com`, name: 'Idem' },
  });
  expect(c.status, c.text).toBe(201);
  customerId = c.body.data.id;
});
afterAll(() => t?.close());

const newKey = () => `idem-${randomUUID()}`;
const city = (name = `Idem ${randomUUID()}`) => ({ name, country: 'ID' });
const cities = (name: string) => countRows(t.db, 'City', 'master', 'name = $1', [name]);
const post = (path: string, body: unknown, key: string, options: { apiKey?: string; server?: TestServer } = {}) =>
  (options.server ?? t).request('POST', `${BASE}${path}`, {
    body,
    key: options.apiKey,
    headers: { 'idempotency-key': key },
  });

function expectReplayOf(replay: TestResponse, first: TestResponse) {
  expect(replay.status, replay.text).toBe(first.status);
  expect(replay.headers.get('idempotency-replayed')).toBe('true');
  expect(replay.headers.get('location')).toBe(first.headers.get('location'));
  expect(replay.headers.get('content-type')).toBe(first.headers.get('content-type'));
  expect(replay.text).toBe(first.text);
}

describe('Idempotency-Key', () => {
  it('same key, same body → the first status, Location and body with Idempotency-Replayed: true; one row', async () => {
    const key = newKey();
    const body = city();
    const first = await post('/City', body, key);
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    expect(first.headers.get('location')).toBe(`${BASE}/City/${first.body.data.id}`);
    const second = await post('/City', body, key);
    expectReplayOf(second, first);
    const third = await post('/City', body, key);
    expectReplayOf(third, first);
    expect(await cities(body.name)).toBe(1);
  });

  it('the same JSON with other whitespace or key order is a different body → 422 (bodies compare as sent) or a replay, never a second row', async () => {
    const key = newKey();
    const body = city();
    const first = await post('/City', body, key);
    expect(first.status, first.text).toBe(201);
    const raw = ` { "country": "ID",  "name": ${JSON.stringify(body.name)} } `;
    const again = await t.request('POST', `${BASE}/City`, {
      raw,
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
    });
    expect([201, 422], again.text).toContain(again.status);
    if (again.status === 201) expectReplayOf(again, first);
    expect(await cities(body.name)).toBe(1);
  });

  it('Prefer: return=minimal is replayed as sent: 201, Location, no body', async () => {
    const key = newKey();
    const body = city();
    const send = () =>
      t.request('POST', `${BASE}/City`, { body, headers: { 'idempotency-key': key, prefer: 'return=minimal' } });
    const first = await send();
    expect(first.status, first.text).toBe(201);
    expect(first.text).toBe('');
    const second = await send();
    expect(second.status).toBe(201);
    expect(second.text).toBe('');
    expect(second.headers.get('location')).toBe(first.headers.get('location'));
    expect(second.headers.get('idempotency-replayed')).toBe('true');
    expect(await cities(body.name)).toBe(1);
  });

  it('same key, different body → 422 Problem naming Idempotency-Key; nothing created', async () => {
    const key = newKey();
    const body = city();
    expect((await post('/City', body, key)).status).toBe(201);
    const other = city();
    const res = await post('/City', other, key);
    expectProblemAt(res, 422, `${BASE}/City`, 'validation', 'Idempotency-Key');
    expect(await cities(other.name)).toBe(0);
    expect(await cities(body.name)).toBe(1);
  });

  it('same key on another table (another path) → 422, nothing created', async () => {
    const key = newKey();
    expect((await post('/City', city(), key)).status).toBe(201);
    const before = await countRows(t.db, 'Customer');
    const res = await post('/Customer', { email: `idem-${randomUUID()}@example.com`, name: 'Other path' }, key);
    expectProblemAt(res, 422, `${BASE}/Customer`, 'validation', 'Idempotency-Key');
    expect(await countRows(t.db, 'Customer')).toBe(before);
  });

  it('two concurrent requests with the same key (10 rounds) → exactly one row; the other answer is the replay or 409', async () => {
    const outcomes: string[] = [];
    for (let round = 0; round < 10; round++) {
      const key = newKey();
      const body = city();
      const answers = await Promise.all([post('/City', body, key), post('/City', body, key)]);
      expect(
        await cities(body.name),
        `round ${round}: ${answers.map((a) => `${a.status} ${a.text}`).join(' | ')}`,
      ).toBe(1);
      const fresh = answers.filter((a) => a.status === 201 && a.headers.get('idempotency-replayed') === null);
      expect(fresh, answers.map((a) => `${a.status} ${a.text}`).join(' | ')).toHaveLength(1);
      const other = answers.find((a) => a !== fresh[0])!;
      if (other.status === 201) {
        expectReplayOf(other, fresh[0]!);
        outcomes.push('replay');
      } else {
        expectProblemAt(other, 409, `${BASE}/City`, 'conflict');
        outcomes.push('409');
      }
    }
    expect(outcomes).toHaveLength(10);
  });

  it('keys are per caller: another API key may use the same key value and gets its own record', async () => {
    const key = newKey();
    const body = city();
    const other = (await t.createKey(['admin'])).key;
    const mine = await post('/City', body, key);
    const theirs = await post('/City', body, key, { apiKey: other });
    expect(mine.status, mine.text).toBe(201);
    expect(theirs.status, theirs.text).toBe(201);
    expect(theirs.headers.get('idempotency-replayed')).toBeNull();
    expect(theirs.body.data.id).not.toBe(mine.body.data.id);
    expect(await cities(body.name)).toBe(2);
    expectReplayOf(await post('/City', body, key, { apiKey: other }), theirs);
    expect(await cities(body.name)).toBe(2);
  });

  it('keys are per environment: the same key value in staging creates its own record', async () => {
    const key = newKey();
    const body = city();
    const staging = (await t.createKey(['admin'], { environment: 'staging' })).key;
    expect((await post('/City', body, key)).status).toBe(201);
    const res = await t.request('POST', `${BASE}/City`, {
      body,
      key: staging,
      environment: 'staging',
      headers: { 'idempotency-key': key },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('idempotency-replayed')).toBeNull();
    expect(await countRows(t.db, 'City', 'staging', 'name = $1', [body.name])).toBe(1);
  });

  it('a failed first call (422) is not stored: the same key with a fixed body then succeeds, and replays after that', async () => {
    const key = newKey();
    const name = `Idem ${randomUUID()}`;
    const bad = await post('/City', { name }, key);
    expectProblemAt(bad, 422, `${BASE}/City`, 'validation', 'country');
    const badAgain = await post('/City', { name }, key);
    expect(badAgain.status, badAgain.text).toBe(422);
    expect(badAgain.headers.get('idempotency-replayed')).toBeNull();
    const fixed = await post('/City', { name, country: 'ID' }, key);
    expect(fixed.status, fixed.text).toBe(201);
    expect(fixed.headers.get('idempotency-replayed')).toBeNull();
    expectReplayOf(await post('/City', { name, country: 'ID' }, key), fixed);
    expect(await cities(name)).toBe(1);
  });

  it('a failed first call from the database (unique violation, 409) frees the key too', async () => {
    const key = newKey();
    const email = `idem-${randomUUID()}@example.com`;
    expect((await t.request('POST', `${BASE}/Customer`, { body: { email, name: 'First' } })).status).toBe(201);
    const clash = await post('/Customer', { email, name: 'Second' }, key);
    expect(clash.status, clash.text).toBe(409);
    const fixed = await post('/Customer', { email: `other-${email}`, name: 'Second' }, key);
    expect(fixed.status, fixed.text).toBe(201);
    expect(fixed.headers.get('idempotency-replayed')).toBeNull();
  });

  it('POST /_bulk: same key, same body → the replay of the envelope, rows inserted once', async () => {
    const key = newKey();
    const name = `Bulk ${randomUUID()}`;
    const body = {
      items: [
        { name, country: 'B1' },
        { name, country: 'B2' },
      ],
    };
    const first = await post('/City/_bulk', body, key);
    expect(first.status, first.text).toBe(201);
    expect(first.body.data).toMatchObject({ success: true, totalSucceeded: 2 });
    expectReplayOf(await post('/City/_bulk', body, key), first);
    expect(await cities(name)).toBe(2);
  });

  it('POST /_bulk BEST_EFFORT 207 is stored and replayed', async () => {
    const key = newKey();
    const email = `idem-${randomUUID()}@example.com`;
    const body = {
      items: [
        { email, name: 'a' },
        { email, name: 'dup' },
      ],
      transactionMode: 'BEST_EFFORT',
    };
    const first = await post('/Customer/_bulk', body, key);
    expect(first.status, first.text).toBe(207);
    expectReplayOf(await post('/Customer/_bulk', body, key), first);
    expect(await countRows(t.db, 'Customer', 'master', 'email = $1', [email])).toBe(1);
  });

  it('POST /_bulk ALL_OR_NOTHING 422 is not stored: the key works with a fixed body', async () => {
    const key = newKey();
    const name = `Bulk ${randomUUID()}`;
    const bad = await post('/City/_bulk', { items: [{ name, country: 'OK' }, { name }] }, key);
    expect(bad.status, bad.text).toBe(422);
    const fixed = await post(
      '/City/_bulk',
      {
        items: [
          { name, country: 'OK' },
          { name, country: 'OK' },
        ],
      },
      key,
    );
    expect(fixed.status, fixed.text).toBe(201);
    expect(fixed.headers.get('idempotency-replayed')).toBeNull();
    expect(await cities(name)).toBe(2);
  });

  it('_query ignores the header: two calls both answer fresh, no replay header, nothing stored', async () => {
    const key = newKey();
    const body = { filter: [{ field: 'customerId', operator: 'equals', value: customerId }] };
    const a = await post('/Order/_query', body, key);
    const b = await post('/Order/_query', body, key);
    for (const res of [a, b]) {
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('idempotency-replayed')).toBeNull();
    }
    const other = await post('/Order/_query', { filter: [] }, key);
    expect(other.status, other.text).toBe(200);
    expect(other.headers.get('idempotency-replayed')).toBeNull();
    expect(await t.db.query('select 1 from svcgen.idempotency where key = $1', [key])).toHaveLength(0);
  });

  it.each([
    ['longer than 255 characters', 'k'.repeat(256)],
    ['empty', ''],
    ['with spaces', 'a key with spaces'],
  ])('a key %s → 400 naming Idempotency-Key, nothing created', async (_name, key) => {
    const body = city();
    const res = await post('/City', body, key);
    expectProblemAt(res, 400, `${BASE}/City`, undefined, 'Idempotency-Key');
    expect(await cities(body.name)).toBe(0);
  });

  it('a key of exactly 255 characters is accepted', async () => {
    const key = `${randomUUID()}${'k'.repeat(255 - 36)}`;
    const body = city();
    const first = await post('/City', body, key);
    expect(first.status, first.text).toBe(201);
    expectReplayOf(await post('/City', body, key), first);
  });

  it('an invalid request never creates (the key check comes with validation, not after a write)', async () => {
    const body = city();
    const res = await t.request('POST', `${BASE}/City`, {
      raw: JSON.stringify(body),
      headers: { 'content-type': 'text/plain', 'idempotency-key': newKey() },
    });
    expectProblemAt(res, 415, `${BASE}/City`, 'unsupported-media-type');
    expect(await cities(body.name)).toBe(0);
  });
});

describe('Idempotency-Key while the first request runs', () => {
  const STILL_RUNNING = 'a request with this Idempotency-Key is still running; retry later';
  /** Idempotency keys whose advisory lock is held now (by a request between its lock and its commit). */
  const heldKeys = async () =>
    (
      await t.db.query<{ n: number }>(
        `select count(*)::int as n from pg_locks where locktype = 'advisory' and classid = $1 and objsubid = 2 and granted`,
        [IDEMPOTENCY_LOCK_NAMESPACE],
      )
    )[0]!.n;

  it('the same key while the first holds its lock → 409 (whatever the body); once the first commits → its replay; one row', async () => {
    const key = newKey();
    const body = city();
    // The first request's INSERT waits behind this lock, inside its transaction, holding the key.
    const blocker = new pg.Client({ connectionString: t.database.url });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('LOCK TABLE env_master."City" IN SHARE MODE');
      const first = post('/City', body, key);
      await until(heldKeys, (n) => n === 1, 10_000, 'the first request holds the key');
      for (const again of [await post('/City', body, key), await post('/City', city(), key)]) {
        expect(again.status, again.text).toBe(409);
        expect(again.headers.get('content-type')).toBe('application/problem+json');
        expect(again.body).toEqual({
          type: '/errors/conflict',
          title: 'Conflict',
          status: 409,
          detail: STILL_RUNNING,
          instance: `${BASE}/City`,
          errors: [],
        });
        expect(again.headers.get('idempotency-replayed')).toBeNull();
      }
      expect(await cities(body.name)).toBe(0);
      await blocker.query('COMMIT');
      const done = await first;
      expect(done.status, done.text).toBe(201);
      expect(done.headers.get('idempotency-replayed')).toBeNull();
      expectReplayOf(await post('/City', body, key), done);
      expect(await cities(body.name)).toBe(1);
      expect(await heldKeys()).toBe(0);
    } finally {
      await blocker.query('ROLLBACK').catch(() => {});
      await blocker.end();
    }
  });

  it('the key is free as soon as a failed first request rolled back: no record, no lock left', async () => {
    const key = newKey();
    const name = `Idem ${randomUUID()}`;
    expectProblemAt(await post('/City', { name }, key), 422, `${BASE}/City`, 'validation', 'country');
    expect(await heldKeys()).toBe(0);
    expect(await t.db.query('select 1 from svcgen.idempotency where key = $1', [key])).toHaveLength(0);
  });

  it("a 'running' row left by an older version answers nothing: the key runs, and its answer replaces the row", async () => {
    const key = newKey();
    const body = city();
    const probe = newKey();
    expect((await post('/City', city(), probe)).status).toBe(201);
    const caller = (
      await t.db.query<{ id: string }>(`select caller as id from svcgen.idempotency where key = $1`, [probe])
    )[0]!.id;
    await t.db.query(
      `insert into svcgen.idempotency (caller, project_id, environment, key, request_hash, state, expires_at)
       values ($1, 'shop', 'master', $2, 'stale', 'running', now() + interval '1 hour')`,
      [caller, key],
    );
    const first = await post('/City', body, key);
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    expectReplayOf(await post('/City', body, key), first);
    expect(await t.db.query(`select state, status from svcgen.idempotency where key = $1`, [key])).toEqual([
      { state: 'done', status: 201 },
    ]);
    expect(await cities(body.name)).toBe(1);
  });

  it('a record past its 24 hours no longer answers: the key runs again, and its new answer is replayed', async () => {
    const key = newKey();
    const body = city();
    const first = await post('/City', body, key);
    expect(first.status, first.text).toBe(201);
    const [stored] = await t.db.query<{ status: number; state: string; hours: number }>(
      `select status, state, round(extract(epoch from expires_at - created_at) / 3600)::int as hours from svcgen.idempotency where key = $1`,
      [key],
    );
    expect(stored).toEqual({ status: 201, state: 'done', hours: 24 });
    await t.db.query(`update svcgen.idempotency set expires_at = now() - interval '1 second' where key = $1`, [key]);
    const second = await post('/City', body, key);
    expect(second.status, second.text).toBe(201);
    expect(second.headers.get('idempotency-replayed')).toBeNull();
    expect(second.body.data.id).not.toBe(first.body.data.id);
    expectReplayOf(await post('/City', body, key), second);
    expect(await cities(body.name)).toBe(2);
  });
});

describe('Idempotency-Key across server processes', () => {
  let b: TestServer;
  beforeAll(async () => {
    b = await startTestServer({ databaseUrl: t.database.url });
  });
  afterAll(() => b?.close());

  it('a key used on server A replays on server B (same caller); one row', async () => {
    const key = newKey();
    const body = { total: 12.5, customerId };
    const first = await post('/Order', body, key);
    expect(first.status, first.text).toBe(201);
    const onB = await post('/Order', body, key, { apiKey: t.adminKey, server: b });
    expectReplayOf(onB, first);
    expect(await countRows(t.db, 'Order', 'master', 'total = 12.5 and "customerId" = $1', [customerId])).toBe(1);
  });

  it('a different body on server B → 422', async () => {
    const key = newKey();
    expect((await post('/City', city(), key)).status).toBe(201);
    const other = city();
    expectProblemAt(
      await post('/City', other, key, { apiKey: t.adminKey, server: b }),
      422,
      `${BASE}/City`,
      'validation',
      'Idempotency-Key',
    );
    expect(await cities(other.name)).toBe(0);
  });

  it('concurrent first calls on A and B (10 rounds) → exactly one row each time', async () => {
    for (let round = 0; round < 10; round++) {
      const key = newKey();
      const body = city();
      const answers = await Promise.all([
        post('/City', body, key),
        post('/City', body, key, { apiKey: t.adminKey, server: b }),
      ]);
      const detail = answers.map((a) => `${a.status} ${a.headers.get('idempotency-replayed')} ${a.text}`).join(' | ');
      expect(await cities(body.name), detail).toBe(1);
      expect(
        answers.filter((a) => a.status === 201 && a.headers.get('idempotency-replayed') === null),
        detail,
      ).toHaveLength(1);
      for (const a of answers) expect([201, 409], detail).toContain(a.status);
    }
  });
});
