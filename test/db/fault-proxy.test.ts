/**
 * Database connections cut without a word under load (docs/deployment.md "What survives what"):
 * the fault proxy (test/support/tcp-proxy.ts) ends every socket between the server and PostgreSQL
 * with a FIN mid-stream, as a network cut, a PgBouncer restart, a failover or a NAT timeout does.
 * The server process survives (no unhandled 'error' event of a pg client), requests caught by the
 * cut answer 503 with Retry-After (never 500), and the next ones are served again.
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../runtime/db/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { expectProblem, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { until } from '../support/until.ts';
import { collectUnhandled } from '../support/unhandled.ts';

/** Errors no handler caught in this process (the server runs in it): each would end `svcgen serve`. */
const unhandled = collectUnhandled();

function expectUnavailable(res: TestResponse): void {
  expectProblem(res, 503);
  expect(res.headers.get('retry-after')).toBe('1');
  expect(['/errors/database-unavailable', '/errors/database-busy']).toContain(res.body.type);
}

/**
 * A GraphQL mutation caught by a cut: a 503 Problem when the cut came before the mutation ran, or
 * (docs/graphql.md "Errors") 200 with the field's DATABASE_UNAVAILABLE / DATABASE_BUSY error, and
 * Retry-After either way.
 */
function expectGraphqlUnavailable(res: TestResponse): void {
  expect(res.headers.get('retry-after'), res.text).toBe('1');
  if (res.status === 503) {
    expectUnavailable(res);
    return;
  }
  expect(res.status, res.text).toBe(200);
  expect(res.body.errors, res.text).toHaveLength(1);
  expect(['DATABASE_UNAVAILABLE', 'DATABASE_BUSY']).toContain(res.body.errors[0].extensions.code);
}

let database: TestDatabase;
let proxy: TcpProxy;
let t: TestServer;
/** SQL straight to the database, past the proxy. */
let direct: Database;
/** The local-disk storage root of the server's files. */
let filesRoot: string;

beforeAll(async () => {
  database = await createTestDatabase();
  const target = new URL(database.url);
  proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  filesRoot = await mkdtemp(path.join(tmpdir(), 'svcgen-fault-proxy-'));
  t = await startTestServer({
    databaseUrl: proxy.url(database.url),
    configPatch: (raw) => {
      raw.storage.root = filesRoot;
      // The load of this file is not what the rate limits are for (test/db/fault-proxy-background.test.ts cuts those).
      raw.rateLimits = { dataPerMinutePerProject: 1_000_000, dataPerMinutePerCaller: 1_000_000 };
    },
  });
  direct = openDatabase(database.url, { max: 2 });
}, 60_000);

afterAll(async () => {
  await t?.close();
  await direct?.close();
  await proxy?.close();
  await database?.drop();
  if (filesRoot) await rm(filesRoot, { recursive: true, force: true });
});

/**
 * Runs `send` from `clients` concurrent loops; once `before` answers succeeded, cuts every database
 * connection (or plays `fault`) `cuts` times (each after `between` more successes), and stops
 * after `after` successes past the last cut. Answers every response in the order received.
 */
async function underCuts(
  clients: number,
  send: (n: number) => Promise<{ res: TestResponse; ok: boolean }>,
  plan = { before: 24, cuts: 4, between: 12, after: 24 },
  fault: () => number = () => proxy.cut(),
): Promise<{ responses: TestResponse[]; cutConnections: number[] }> {
  const responses: TestResponse[] = [];
  let successes = 0;
  let stop = false;
  let n = 0;
  const loops = Array.from({ length: clients }, async () => {
    while (!stop) {
      const { res, ok } = await send(n++);
      responses.push(res);
      if (ok) successes++;
    }
  });
  const cutConnections: number[] = [];
  try {
    const successesReach = (count: number, what: string) =>
      until(
        async () => ({ successes, unhandled: unhandled.length }),
        (s) => s.successes >= count || s.unhandled > 0,
        20_000,
        what,
      );
    await successesReach(plan.before, 'successes before the first cut');
    for (let i = 0; i < plan.cuts && unhandled.length === 0; i++) {
      cutConnections.push(fault());
      await successesReach(successes + plan.between, `successes after cut ${i + 1}`);
    }
    await successesReach(successes + plan.after, 'successes after the last cut');
  } finally {
    stop = true;
    await Promise.allSettled(loops);
  }
  await Promise.all(loops);
  return { responses, cutConnections };
}

describe('every database connection cut without a word', () => {
  it('12 clients sending keyed GraphQL mutations: the process survives, cut ones answer 503 or DATABASE_UNAVAILABLE with Retry-After, and a replay of every key leaves exactly one row', async () => {
    const key = (n: number) => `cut-gql-${n}`;
    const mutation = (n: number) => ({
      query: `mutation { createCity(data: { name: "${key(n)}", country: "GQ" }) { name } }`,
    });
    const send = (n: number) =>
      t.request('POST', '/gw/api/graphql', {
        body: mutation(n),
        headers: { accept: 'application/graphql-response+json', 'idempotency-key': key(n) },
      });
    const { responses, cutConnections } = await underCuts(12, async (n) => {
      const res = await send(n);
      return { res, ok: res.status === 200 && res.body?.errors === undefined };
    });
    expect(unhandled, 'errors no handler caught').toEqual([]);
    expect(
      cutConnections.every((c) => c > 0),
      'each cut ended live connections',
    ).toBe(true);

    const answered = new Map<string, TestResponse>();
    let caught = 0;
    for (const res of responses) {
      if (res.status === 200 && res.body.errors === undefined) {
        answered.set(res.body.data.createCity.name, res);
        continue;
      }
      caught++;
      expectGraphqlUnavailable(res);
    }
    expect(caught, 'requests caught by the cuts').toBeGreaterThan(0);

    // Every key sent again: a committed one replays its answer, one that never committed runs now.
    const sent = responses.length;
    for (let n = 0; n < sent; n++) {
      const replay = await send(n);
      expect(replay.status, replay.text).toBe(200);
      expect(replay.body, replay.text).toEqual({ data: { createCity: { name: key(n) } } });
      const first = answered.get(key(n));
      if (first) expect(replay.headers.get('idempotency-replayed')).toBe('true');
    }
    const rows = await direct.query<{ name: string; n: number }>(
      `SELECT name, count(*)::int AS n FROM env_master."City" WHERE country = 'GQ' GROUP BY name`,
    );
    expect(rows.length, 'one row per key sent').toBe(sent);
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    expect(unhandled, 'errors no handler caught').toEqual([]);
  }, 90_000);

  it('8 clients reading and writing over REST: the process survives, cut requests answer 503 with Retry-After, every acknowledged create is stored once', async () => {
    const name = (n: number) => `cut-rest-${n}`;
    const { responses } = await underCuts(8, async (n) => {
      const res =
        n % 2 === 0
          ? await t.request('POST', '/gw/api/rest/City', { body: { name: name(n), country: 'RS' } })
          : await t.request('GET', '/gw/api/rest/City?country=equals.RS&limit=5');
      return { res, ok: res.status === 200 || res.status === 201 };
    });
    expect(unhandled, 'errors no handler caught').toEqual([]);
    const acknowledged = new Set<string>();
    let caught = 0;
    for (const res of responses) {
      if (res.status === 201) acknowledged.add(res.body.data.name);
      else if (res.status !== 200) {
        caught++;
        expectUnavailable(res);
      }
    }
    expect(caught, 'requests caught by the cuts').toBeGreaterThan(0);
    const rows = await direct.query<{ name: string; n: number }>(
      `SELECT name, count(*)::int AS n FROM env_master."City" WHERE country = 'RS' GROUP BY name`,
    );
    expect(rows.filter((r) => r.n !== 1)).toEqual([]);
    const stored = new Set(rows.map((r) => r.name));
    expect(
      [...acknowledged].filter((n) => !stored.has(n)),
      'acknowledged but missing',
    ).toEqual([]);
  }, 90_000);

  it('an ALL_OR_NOTHING bulk create cut mid-transaction answers 503 with Retry-After and writes none of its items; sent again, 201 with all', async () => {
    const items = ['bulk-cut-a', 'bulk-cut-b', 'bulk-cut-c'].map((name) => ({ name, country: 'BK' }));
    const stored = async () =>
      (
        await direct.query<{ name: string }>(`SELECT name FROM env_master."City" WHERE country = 'BK' ORDER BY name`)
      ).map((r) => r.name);
    // The statement carrying the second item reaches PostgreSQL inside the transaction; its answer never comes back.
    const cut = proxy.cutNextAnswer({ after: 'bulk-cut-b' });
    const res = await t.request('POST', '/gw/api/rest/City/_bulk', { body: { items } });
    await cut;
    expectProblem(res, 503, 'database-unavailable');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.body.detail).toBe('the connection to the database was lost');
    expect(await stored(), 'nothing half-written').toEqual([]);
    const again = await t.request('POST', '/gw/api/rest/City/_bulk', { body: { items } });
    expect(again.status, again.text).toBe(201);
    expect(await stored()).toEqual(['bulk-cut-a', 'bulk-cut-b', 'bulk-cut-c']);
    expect(unhandled, 'errors no handler caught').toEqual([]);
  }, 30_000);

  it('an upload under an Idempotency-Key cut during its metadata transaction answers 503 with Retry-After and leaves no row and no bytes; sent again with the key, 201', async () => {
    const upload = () =>
      t.request('POST', '/gw/api/rest/_files/attachments?name=meta-cut.txt', {
        raw: 'bytes of a cut upload',
        headers: { 'content-type': 'text/plain', 'idempotency-key': 'upload-cut-1' },
      });
    const rows = () => direct.query(`SELECT id FROM svcgen.files WHERE name = 'meta-cut.txt'`);
    const files = async () =>
      (await readdir(filesRoot, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).length;
    const filesBefore = await files();
    // The metadata row's INSERT (the file's name is one of its values) is cut before PostgreSQL answers it.
    const cut = proxy.cutNextAnswer({ after: 'meta-cut.txt' });
    const res = await upload();
    await cut;
    expectProblem(res, 503, 'database-unavailable');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await rows(), 'no orphan row').toEqual([]);
    expect(await files(), 'no orphan bytes').toBe(filesBefore);
    const again = await upload();
    expect(again.status, again.text).toBe(201);
    expect(again.body.data.name).toBe('meta-cut.txt');
    expect(await rows()).toHaveLength(1);
    expect(unhandled, 'errors no handler caught').toEqual([]);
  }, 30_000);

  it('a PgBouncer restart or a failover as the proxy plays it (every connection ended, new ones refused for 1 s): 503 with Retry-After meanwhile, served again after, by itself', async () => {
    const { responses, cutConnections } = await underCuts(
      8,
      async () => {
        const res = await t.request('GET', '/gw/api/rest/City?limit=1');
        return { res, ok: res.status === 200 };
      },
      { before: 16, cuts: 1, between: 16, after: 16 },
      () => {
        const n = proxy.cut();
        proxy.refuseFor(1000);
        return n;
      },
    );
    expect(unhandled, 'errors no handler caught').toEqual([]);
    expect(cutConnections[0]).toBeGreaterThan(0);
    const refused = responses.filter((r) => r.status !== 200);
    expect(refused.length, 'requests while refused').toBeGreaterThan(0);
    for (const res of refused) expectUnavailable(res);
    expect(responses.at(-1)!.status).toBe(200);
  }, 60_000);
});
