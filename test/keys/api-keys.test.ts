// API key management (docs/api.md §4; keys as credentials: §2 "Credentials"): creation, listing
// without values, hashed storage, validation, revocation, last use.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ISO_8601, expectProblemAt, problemFields } from '../support/expect.ts';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';

const KEYS = '/gw/api/rest/_apikeys';
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t?.close());

const asManager = { key: MANAGEMENT_TOKEN };
const keyCount = async () =>
  Number((await t.db.query<{ n: string }>('select count(*) as n from svcgen.api_keys'))[0]!.n);

async function createKey(body: Record<string, unknown>, environment?: string) {
  const res = await t.request('POST', KEYS, { ...asManager, environment, body });
  expect(res.status, res.text).toBe(201);
  return res.body.data as {
    id: string;
    name: string;
    prefix: string;
    roles: string[];
    environment: string;
    createdAt: string;
    key: string;
  };
}

describe('POST /_apikeys', () => {
  it('201 { data: { id, name, prefix, roles, environment, createdAt, key } } and nothing else', async () => {
    const started = Date.now();
    const res = await t.request('POST', KEYS, {
      ...asManager,
      body: { name: 'ci deploy', prefix: 'Token', roles: ['catalog'], environment: 'master', context: { team: 'ops' } },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.body)).toEqual(['data']);
    expect(Object.keys(res.body.data).sort()).toEqual([
      'createdAt',
      'environment',
      'id',
      'key',
      'name',
      'prefix',
      'roles',
    ]);
    expect(res.body.data).toEqual({
      id: expect.any(String),
      name: 'ci deploy',
      prefix: 'Token',
      roles: ['catalog'],
      environment: 'master',
      createdAt: expect.stringMatching(ISO_8601),
      key: expect.any(String),
    });
    expect(res.body.data.key.length).toBeGreaterThanOrEqual(32);
    expect(Date.parse(res.body.data.createdAt)).toBeGreaterThanOrEqual(started - 5000);
    expect(Date.parse(res.body.data.createdAt)).toBeLessThanOrEqual(Date.now() + 5000);
  });

  it('the key works at once, with its prefix or as Bearer, and carries its roles', async () => {
    const { key } = await createKey({ name: 'reader', prefix: 'Reader', roles: ['catalog'], environment: 'master' });
    expect(
      (await t.request('GET', '/gw/api/rest/Product', { headers: { authorization: `Reader ${key}` } })).status,
    ).toBe(200);
    expect((await t.request('GET', '/gw/api/rest/Product', { key })).status).toBe(200);
    expectProblemAt(await t.request('GET', '/gw/api/rest/Order', { key }), 403, '/gw/api/rest/Order', 'forbidden');
  });

  it('a key for staging works in staging only', async () => {
    const { key, environment } = await createKey(
      { name: 'staging', prefix: 'Bearer', roles: ['admin'], environment: 'staging' },
      'staging',
    );
    expect(environment).toBe('staging');
    expect((await t.request('GET', '/gw/api/rest/City', { key, environment: 'staging' })).status).toBe(200);
    expectProblemAt(await t.request('GET', '/gw/api/rest/City', { key }), 401, '/gw/api/rest/City', 'unauthorized');
  });

  it('stores the key hashed: no column of its row contains the value', async () => {
    const { id, key } = await createKey({
      name: 'hashed',
      prefix: 'ApiKey',
      roles: ['admin'],
      environment: 'master',
      context: { a: 'b' },
    });
    const [row] = await t.db.query<{ key_hash: string; r: string }>(
      'select key_hash, row_to_json(k)::text as r from svcgen.api_keys k where id = $1',
      [id],
    );
    expect(row).toBeDefined();
    expect(row!.key_hash).not.toBe(key);
    expect(row!.r).not.toContain(key);
    expect(row!.r).not.toContain(key.replace(/^[a-z]+_/, ''));
    const anywhere = await t.db.query<{ n: string }>(
      `select count(*) as n from svcgen.api_keys k where row_to_json(k)::text like '%' || $1 || '%'`,
      [key.slice(-24)],
    );
    expect(anywhere[0]!.n).toBe('0');
  });

  const valid = { name: 'v', prefix: 'Token', roles: ['admin'], environment: 'master' };
  it.each([
    ['unknown role', { ...valid, roles: ['admin', 'root'] }, /^roles(\[1\]|\.1)?$/],
    ['no roles', { ...valid, roles: [] }, /^roles$/],
    ['roles not an array', { ...valid, roles: 'admin' }, /^roles$/],
    ['unknown environment', { ...valid, environment: 'production' }, /^environment$/],
    ['missing environment', { name: 'v', prefix: 'Token', roles: ['admin'] }, /^environment$/],
    ['prefix with a space', { ...valid, prefix: 'My Key' }, /^prefix$/],
    ['prefix starting with a digit', { ...valid, prefix: '1Key' }, /^prefix$/],
    ['empty prefix', { ...valid, prefix: '' }, /^prefix$/],
    ['prefix with a colon', { ...valid, prefix: 'Key:' }, /^prefix$/],
    ['missing prefix', { name: 'v', roles: ['admin'], environment: 'master' }, /^prefix$/],
    ['missing name', { prefix: 'Token', roles: ['admin'], environment: 'master' }, /^name$/],
    ['empty name', { ...valid, name: '' }, /^name$/],
    ['unknown field', { ...valid, expiresAt: '2030-01-01' }, /^expiresAt$/],
    ['context value not a string', { ...valid, context: { region: 1 } }, /^context(\.region|\[.region.\])?$/],
  ])('%s → 422 naming the field, no key stored', async (_name, body, field) => {
    const before = await keyCount();
    const res = await t.request('POST', KEYS, { ...asManager, body });
    expectProblemAt(res, 422, KEYS, 'validation');
    expect(problemFields(res), res.text).toContainEqual(expect.stringMatching(field));
    expect(res.text).not.toMatch(/svk_/);
    expect(await keyCount()).toBe(before);
  });

  it.each([
    ['invalid JSON', '{"name":', 'application/json', 400],
    ['no body', undefined, 'application/json', 400],
    ['text/plain', JSON.stringify(valid), 'text/plain', 415],
  ])('%s → %i, no key stored', async (_name, raw, contentType, status) => {
    const before = await keyCount();
    const res = await t.request('POST', KEYS, { ...asManager, raw, headers: { 'content-type': contentType } });
    expectProblemAt(res, status, KEYS);
    expect(await keyCount()).toBe(before);
  });

  it.each([
    ['no credentials', { key: false as const }, 401, 'unauthorized'],
    ['an unknown bearer token', { headers: { authorization: 'Bearer wrong-management-token' } }, 401, 'unauthorized'],
    ['an admin API key', {}, 403, 'forbidden'],
    ['no project', { ...asManager, project: false as const }, 400, 'missing-project'],
  ])('with %s → %i', async (_name, options, status, kind) => {
    const before = await keyCount();
    expectProblemAt(await t.request('POST', KEYS, { ...options, body: valid }), status, KEYS, kind);
    expect(await keyCount()).toBe(before);
  });
});

describe('GET /_apikeys', () => {
  it("lists the environment's keys without any key value or hash", async () => {
    const master = await createKey({
      name: 'listed',
      prefix: 'Listed',
      roles: ['catalog', 'customer'],
      environment: 'master',
      context: { shop: 'north' },
    });
    const staging = await createKey(
      { name: 'listed-staging', prefix: 'Bearer', roles: ['admin'], environment: 'staging' },
      'staging',
    );
    const res = await t.request('GET', KEYS, asManager);
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.body)).toEqual(['data']);
    expect(Array.isArray(res.body.data)).toBe(true);
    const item = res.body.data.find((k: { id: string }) => k.id === master.id);
    expect(item).toMatchObject({
      id: master.id,
      name: 'listed',
      prefix: 'Listed',
      roles: ['catalog', 'customer'],
      environment: 'master',
      createdAt: master.createdAt,
    });
    for (const k of res.body.data) {
      expect(k).not.toHaveProperty('key');
      expect(k).not.toHaveProperty('keyHash');
      expect(k).not.toHaveProperty('key_hash');
      expect(k.environment).toBe('master');
    }
    expect(res.text).not.toContain(master.key);
    expect(res.text).not.toMatch(/svk_/);
    expect(res.body.data.map((k: { id: string }) => k.id)).not.toContain(staging.id);

    const inStaging = await t.request('GET', KEYS, { ...asManager, environment: 'staging' });
    expect(inStaging.status).toBe(200);
    expect(inStaging.body.data.map((k: { id: string }) => k.id)).toContain(staging.id);
    expect(inStaging.text).not.toContain(staging.key);
  });

  it('needs the management token', async () => {
    expectProblemAt(await t.request('GET', KEYS, { key: false }), 401, KEYS, 'unauthorized');
    expectProblemAt(await t.request('GET', KEYS), 403, KEYS, 'forbidden');
  });
});

describe('DELETE /_apikeys/{id}', () => {
  it('204 with no body; the key answers 401 afterwards and leaves the list', async () => {
    const { id, key } = await createKey({ name: 'doomed', prefix: 'Bearer', roles: ['admin'], environment: 'master' });
    expect((await t.request('GET', '/gw/api/rest/City', { key })).status).toBe(200);
    const res = await t.request('DELETE', `${KEYS}/${id}`, asManager);
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
    expectProblemAt(await t.request('GET', '/gw/api/rest/City', { key }), 401, '/gw/api/rest/City', 'unauthorized');
    expect((await t.request('GET', KEYS, asManager)).body.data.map((k: { id: string }) => k.id)).not.toContain(id);
    expectProblemAt(await t.request('DELETE', `${KEYS}/${id}`, asManager), 404, `${KEYS}/${id}`, 'not-found');
  });

  it('an unknown id → 404', async () => {
    expectProblemAt(
      await t.request('DELETE', `${KEYS}/key_doesnotexist`, asManager),
      404,
      `${KEYS}/key_doesnotexist`,
      'not-found',
    );
  });
});

describe('last use', () => {
  // The server batches last_used_at (a flush every 10 s, and one on close). Closing a server of our
  // own is the deterministic way to see it without waiting.
  it('records when a key was last used (flushed at the latest on close)', async () => {
    const own = await startTestServer();
    let serverClosed = false;
    try {
      const used = await own.createKey(['admin']);
      const unused = await own.createKey(['admin']);
      const before = new Date();
      expect((await own.request('GET', '/gw/api/rest/City', { key: used.key })).status).toBe(200);
      const after = new Date();
      await own.server.close();
      serverClosed = true;
      const rows = await own.db.query<{ id: string; last_used_at: Date | null }>(
        'select id, last_used_at from svcgen.api_keys where id = any($1) order by id',
        [[used.id, unused.id]],
      );
      const at = new Map(rows.map((r) => [r.id, r.last_used_at]));
      expect(at.get(unused.id)).toBeNull();
      const last = at.get(used.id);
      expect(last).toBeInstanceOf(Date);
      expect(last!.getTime()).toBeGreaterThanOrEqual(before.getTime());
      expect(last!.getTime()).toBeLessThanOrEqual(after.getTime());
    } finally {
      if (!serverClosed) await own.server.close();
      await own.db.close();
      await own.database.drop();
    }
  });
});
