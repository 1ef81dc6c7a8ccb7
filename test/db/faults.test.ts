/**
 * Database faults seen from the API: an outage (through a TCP proxy the test takes down and brings
 * back) answers retryable 503 Problems on every route and /readyz says not ready; everything comes
 * back without a restart, nothing acknowledged is lost, and the LISTEN connection returns (so key
 * revocation reaches the cache again). Statement and pool-wait timeouts answer 503 too.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  databaseFault,
  newClient,
  openDatabase,
  raisedAtConnectionStart,
  Readiness,
  type Database,
} from '../../runtime/db/index.ts';
import { revokeApiKey } from '../../runtime/keys/index.ts';
import { createTestDatabase, databaseServerUrl, type TestDatabase } from '../support/database.ts';
import {
  expectProblem,
  MANAGEMENT_TOKEN,
  startTestServer,
  type TestResponse,
  type TestServer,
} from '../support/server.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { until, waitingForLock } from '../support/until.ts';

function expectUnavailable(res: TestResponse): void {
  expectProblem(res, 503);
  expect(res.headers.get('retry-after')).toBe('1');
  expect(['/errors/database-unavailable', '/errors/database-busy']).toContain(res.body.type);
}

describe('a database outage through a proxy', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let t: TestServer;
  let direct: Database;
  let keyLookups = 0;

  beforeAll(async () => {
    database = await createTestDatabase();
    const target = new URL(database.url);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    t = await startTestServer({
      databaseUrl: proxy.url(database.url),
      onQuery: (text) => {
        if (text.includes('FROM svcgen.api_keys WHERE key_hash')) keyLookups++;
      },
    });
    direct = openDatabase(database.url, { max: 2 });
  }, 60_000);

  afterAll(async () => {
    await t?.close();
    await direct?.close();
    await proxy?.close();
    await database?.drop();
  });

  const readyz = () => t.request('GET', '/readyz', { key: false, project: false });

  it('answers 503 with Retry-After on every route while the database is away, and 200 again after it is back, without a restart', async () => {
    expect((await readyz()).status).toBe(200);
    proxy.outage();
    const notReady = await until(
      readyz,
      (r) => r.status === 503 && r.body.checks.database === 'unreachable',
      1500,
      '/readyz turns 503',
    );
    expectProblem(notReady, 503, 'unavailable');
    expect(notReady.headers.get('retry-after')).toBe('1');
    expect(notReady.body.checks.database).toBe('unreachable');
    expect(notReady.body.detail).toContain('the database cannot be reached');

    expectUnavailable(await t.request('GET', '/gw/api/rest/City'));
    expectUnavailable(await t.request('POST', '/gw/api/rest/City', { body: { name: 'Oslo', country: 'NO' } }));
    expectUnavailable(await t.request('GET', '/gw/api/rest/_apikeys', { key: MANAGEMENT_TOKEN }));
    expectUnavailable(
      await t.request('GET', '/gw/api/rest/_webhooks', { key: MANAGEMENT_TOKEN, headers: { environment: 'master' } }),
    );
    expectUnavailable(
      await t.request('POST', '/auth/login', {
        key: false,
        body: { email: 'nobody@example.com', password: 'secret123' },
      }),
    );

    proxy.restore();
    const ready = await until(readyz, (r) => r.status === 200, 3000, '/readyz turns 200');
    expect(ready.body).toEqual({
      status: 'ready',
      checks: { database: 'ok', migrations: 'ok', listener: 'ok', server: 'ok' },
    });
    expect((await t.request('GET', '/gw/api/rest/City')).status).toBe(200);
    expect((await t.request('POST', '/gw/api/rest/City', { body: { name: 'Oslo', country: 'NO' } })).status).toBe(201);
    expect((await t.request('GET', '/gw/api/rest/_apikeys', { key: MANAGEMENT_TOKEN })).status).toBe(200);
    expect(
      (await t.request('GET', '/gw/api/rest/_webhooks', { key: MANAGEMENT_TOKEN, headers: { environment: 'master' } }))
        .status,
    ).toBe(200);
    const login = await t.request('POST', '/auth/login', {
      key: false,
      body: { email: 'nobody@example.com', password: 'secret123' },
    });
    expect(login.status, login.text).toBe(401);
  }, 20_000);

  it('loses no acknowledged create and invents none across an outage under a write load', async () => {
    const attempted = new Set<string>();
    const acknowledged = new Set<string>();
    const statuses = new Map<number, number>();
    let stop = false;
    let n = 0;
    const writer = async () => {
      while (!stop) {
        const name = `load-${n++}`;
        attempted.add(name);
        const res = await t.request('POST', '/gw/api/rest/City', { body: { name, country: 'LD' } });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 201) acknowledged.add(name);
        else expectUnavailable(res);
      }
    };
    const writers = Array.from({ length: 8 }, writer);
    try {
      await until(
        async () => acknowledged.size,
        (c) => c >= 50,
        10_000,
        'creates before the outage',
      );
      proxy.outage();
      await until(
        async () => statuses.get(503) ?? 0,
        (c) => c >= 20,
        10_000,
        '503s during the outage',
      );
      proxy.restore();
      const before = acknowledged.size;
      await until(
        async () => acknowledged.size,
        (c) => c >= before + 50,
        10_000,
        'creates after the outage',
      );
    } finally {
      proxy.restore();
      stop = true;
      await Promise.allSettled(writers);
    }
    await Promise.all(writers);

    const rows = await direct.query<{ name: string }>(`SELECT name FROM env_master."City" WHERE country = 'LD'`);
    const stored = new Set(rows.map((r) => r.name));
    expect(rows.length, 'no name stored twice').toBe(stored.size);
    expect(
      [...acknowledged].filter((name) => !stored.has(name)),
      'acknowledged but missing',
    ).toEqual([]);
    expect(
      [...stored].filter((name) => !attempted.has(name)),
      'stored but never sent',
    ).toEqual([]);
    // A commit whose answer was cut by the outage can land unacknowledged; it is one of the 503s.
    expect(stored.size - acknowledged.size).toBeLessThanOrEqual(statuses.get(503)!);
    expect([...statuses.keys()].sort()).toEqual([201, 503]);
  }, 40_000);

  it('reconnects the LISTEN connection after an outage: a key revoked afterwards gets 401 at once, and keys are cached again', async () => {
    proxy.outage();
    await until(readyz, (r) => r.status === 503 && r.body.checks.listener === 'down', 1500, 'listener reported down');
    // Longer than the old listener survived (about a second), so its backoff has grown meanwhile.
    const downSince = Date.now();
    await until(
      async () => Date.now() - downSince,
      (ms) => ms >= 2500,
      3000,
      'outage lasting 2.5 s',
    );
    proxy.restore();
    await until(readyz, (r) => r.status === 200, 6000, '/readyz turns 200 (listener back)');
    const listening = await direct.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'svcgen-listen'`,
    );
    expect(listening[0]!.n).toBeGreaterThanOrEqual(1);

    const key = await t.createKey(['admin']);
    const lookupsBefore = keyLookups;
    for (let i = 0; i < 20; i++)
      expect((await t.request('GET', '/gw/api/rest/City?limit=1', { key: key.key })).status).toBe(200);
    expect(keyLookups - lookupsBefore, 'the key is looked up once, then served from the cache').toBe(1);

    expect(await revokeApiKey(direct, t.config.project.id, key.id)).toBeDefined();
    expectProblem(await t.request('GET', '/gw/api/rest/City?limit=1', { key: key.key }), 401);
  }, 30_000);

  it('reconnects the LISTEN connection after a black-hole outage, where a reconnect attempt is never answered', async () => {
    proxy.outage('blackhole');
    await until(readyz, (r) => r.status === 503 && r.body.checks.listener === 'down', 1500, 'listener reported down');
    // The listener's first retry (100 ms after the drop) is now stalled in the black hole: it must
    // time out rather than wait forever.
    const downAt = Date.now();
    await until(
      async () => ({ stalled: proxy.stalled, ms: Date.now() - downAt }),
      (s) => s.stalled >= 1 && s.ms >= 300,
      3000,
      'a stalled attempt',
    );
    proxy.restore();
    const ready = await until(readyz, (r) => r.status === 200, 12_000, '/readyz turns 200 (listener back)');
    expect(ready.body.checks.listener).toBe('ok');
    // Other clients' stalled attempts would hold close() until their connect timeouts.
    proxy.resetStalled();
    const key = await t.createKey(['admin']);
    expect((await t.request('GET', '/gw/api/rest/City?limit=1', { key: key.key })).status).toBe(200);
    expect(await revokeApiKey(direct, t.config.project.id, key.id)).toBeDefined();
    expectProblem(await t.request('GET', '/gw/api/rest/City?limit=1', { key: key.key }), 401);
  }, 30_000);
});

describe('the database dropped under a running server', () => {
  it('answers 503 database-unavailable (not 500) when new connections are refused, and still stops', async () => {
    const t = await startTestServer();
    try {
      expect((await t.request('GET', '/gw/api/rest/City')).status).toBe(200);
      await t.db.close();
      await t.database.drop();
      for (const res of [
        await t.request('GET', '/gw/api/rest/City'),
        await t.request('GET', '/gw/api/rest/_webhooks', { key: MANAGEMENT_TOKEN, headers: { environment: 'master' } }),
      ]) {
        expectProblem(res, 503, 'database-unavailable');
        expect(res.headers.get('retry-after')).toBe('1');
        expect(res.body.detail).toMatch(
          /^the database (refused this server's connection|is not accepting connections)/,
        );
      }
    } finally {
      await t.server.close();
    }
  }, 60_000);
});

describe('the database set to ALLOW_CONNECTIONS false under a running server (docs/deployment.md "What survives what")', () => {
  it('answers 503 database-unavailable with Retry-After (not 500) once its pool must open a connection, and 200 again after ALLOW_CONNECTIONS true', async () => {
    const t = await startTestServer();
    const admin = new pg.Client({ connectionString: databaseServerUrl() });
    await admin.connect();
    const allow = (on: boolean) =>
      admin.query(`ALTER DATABASE ${admin.escapeIdentifier(t.database.name)} ALLOW_CONNECTIONS ${on}`);
    try {
      expect((await t.request('GET', '/gw/api/rest/City')).status).toBe(200);
      await allow(false);
      // The pool's idle connections (and every other) end, so the next request must open one.
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [t.database.name]);
      const refused = await until(
        () => t.request('GET', '/gw/api/rest/City'),
        (res) => res.status !== 503 || res.body.detail === 'the database is not accepting connections',
        10_000,
        'a request refused at connection start',
      );
      expectProblem(refused, 503, 'database-unavailable');
      expect(refused.headers.get('retry-after')).toBe('1');
      expectProblem(await t.request('POST', '/gw/api/rest/City', { body: { name: 'Shut', country: 'NO' } }), 503);
      // Told apart from a statement's 55000 by where it was raised, not by the server's (translatable) words.
      const refusal = await newClient({ connectionString: t.database.url })
        .connect()
        .then(
          () => undefined,
          (error: Error & { code?: string; severity?: string }) => error,
        );
      expect(refusal?.code).toBe('55000');
      expect(raisedAtConnectionStart(refusal)).toBe(true);
      // As a server with lc_messages = 'de_DE' words it.
      expect(databaseFault(Object.assign(refusal!, { severity: 'SCHWERWIEGEND' }))?.kind).toBe('unavailable');
      await allow(true);
      const back = await until(
        () => t.request('GET', '/gw/api/rest/City'),
        (res) => res.status === 200,
        10_000,
        'served again',
      );
      expect(back.status).toBe(200);
      expect((await t.request('POST', '/gw/api/rest/City', { body: { name: 'Open', country: 'NO' } })).status).toBe(
        201,
      );
    } finally {
      await allow(true).catch(() => {});
      await admin.end();
      await t.close();
    }
  }, 60_000);
});

describe('writes that deadlock with a concurrent transaction (docs/api.md §6.2 "Concurrent writes")', () => {
  /**
   * Cities a and b, and another transaction that holds b. `write` starts a request that takes a and
   * then waits for b; once it waits, the other transaction wants a too: a deadlock, in which
   * PostgreSQL rolls back the one that waited longer, the request. The other then commits. Answers
   * the request's response and what GET answers for a and b afterwards.
   */
  async function deadlocked(write: (t: TestServer, a: string, b: string) => Promise<TestResponse>) {
    const t = await startTestServer();
    const other = new pg.Client({ connectionString: t.database.url });
    try {
      const ids: string[] = [];
      for (const name of ['Lockby', 'Waitham']) {
        const res = await t.request('POST', '/gw/api/rest/City', { body: { name, country: 'NO' } });
        expect(res.status, res.text).toBe(201);
        ids.push(String(res.body.data.id));
      }
      const [a, b] = ids as [string, string];
      await other.connect();
      await other.query('BEGIN');
      await other.query('UPDATE env_master."City" SET country = country WHERE id = $1', [b]);
      const response = write(t, a, b);
      await waitingForLock(t.db, '', 'the request waiting for the row the other transaction holds');
      await other.query('UPDATE env_master."City" SET country = country WHERE id = $1', [a]);
      await other.query('COMMIT');
      const res = await response;
      const after = [];
      for (const id of [a, b]) {
        const got = await t.request('GET', `/gw/api/rest/City/${id}`);
        after.push(got.status === 200 ? got.body.data.name : got.status);
      }
      return { res, after };
    } finally {
      await other.end().catch(() => {});
      await t.close();
    }
  }

  it('an update by filter (one statement) rolled back as the deadlock victim runs again: 200', async () => {
    const { res, after } = await deadlocked((t, a, b) =>
      t.request('PATCH', `/gw/api/rest/City?id=in.(${a},${b})`, { body: { name: 'Patched' } }),
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 2 } });
    expect(after).toEqual(['Patched', 'Patched']);
  }, 60_000);

  it('a bulk delete (one transaction) rolled back as the deadlock victim runs again whole: 200, both deleted', async () => {
    const { res, after } = await deadlocked((t, a, b) =>
      t.request('DELETE', '/gw/api/rest/City/_bulk', { body: { ids: [Number(a), Number(b)] } }),
    );
    expect(res.status, res.text).toBe(200);
    expect(after).toEqual([404, 404]);
  }, 60_000);

  it('a create under an Idempotency-Key runs again with its key: 201, and that answer is the one kept', async () => {
    const t = await startTestServer();
    const other = new pg.Client({ connectionString: t.database.url });
    try {
      const [x, y] = [900_001, 900_002];
      const insert = (id: number) =>
        other.query(
          `INSERT INTO env_master."City" (id, name, country, "updatedAt") VALUES ($1, 'Other', 'NO', now())`,
          [id],
        );
      // The other transaction inserts y; the keyed bulk create inserts x, then waits for y ...
      await other.connect();
      await other.query('BEGIN');
      await insert(y);
      const body = {
        items: [
          { id: x, name: 'Keyed', country: 'NO' },
          { id: y, name: 'Keyed', country: 'NO' },
        ],
      };
      const headers = { 'idempotency-key': 'deadlock-key-1' };
      const creating = t.request('POST', '/gw/api/rest/City/_bulk', { body, headers });
      await waitingForLock(t.db, '', 'the keyed create waiting for the key the other transaction inserted');
      // ... which now inserts x: the keyed create is rolled back; the other gives up, and the create runs again.
      await insert(x);
      await other.query('ROLLBACK');
      const res = await creating;
      expect(res.status, res.text).toBe(201);
      const again = await t.request('POST', '/gw/api/rest/City/_bulk', { body, headers });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotency-replayed')).toBe('true');
      expect(again.text).toBe(res.text);
      for (const id of [x, y]) expect((await t.request('GET', `/gw/api/rest/City/${id}`)).body.data.name).toBe('Keyed');
    } finally {
      await other.end().catch(() => {});
      await t.close();
    }
  }, 60_000);

  it("a write that meets the database's lock_timeout answers 503 database-busy with Retry-After (not 500)", async () => {
    const database = await createTestDatabase();
    const system = new pg.Client({ connectionString: database.url });
    await system.connect();
    await system.query(`ALTER DATABASE ${system.escapeIdentifier(database.name)} SET lock_timeout = '300ms'`);
    const t = await startTestServer({ databaseUrl: database.url });
    const other = new pg.Client({ connectionString: database.url });
    try {
      const created = await t.request('POST', '/gw/api/rest/City', { body: { name: 'Slowby', country: 'NO' } });
      expect(created.status, created.text).toBe(201);
      const id = String(created.body.data.id);
      await other.connect();
      await other.query('BEGIN');
      await other.query('UPDATE env_master."City" SET country = country WHERE id = $1', [id]);
      const res = await t.request('PATCH', `/gw/api/rest/City/${id}`, { body: { name: 'Never' } });
      await other.query('COMMIT');
      expectProblem(res, 503, 'database-busy');
      expect(res.headers.get('retry-after')).toBe('1');
      expect(res.body.detail).toBe("a lock the write needed was not granted within the database's lock_timeout");
      expect((await t.request('GET', `/gw/api/rest/City/${id}`)).body.data.name).toBe('Slowby');
    } finally {
      await other.end().catch(() => {});
      await system.end();
      await t.close();
      await database.drop();
    }
  }, 60_000);
});

describe('stopping while the database is black-holed', () => {
  const DRAIN_MS = 1000;

  it('close() finishes within http.drainTimeoutMs + 6 s though no connection attempt is ever answered (webhook runner, outbox drain, pools)', async () => {
    const database = await createTestDatabase();
    const target = new URL(database.url);
    const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    let closing: Promise<void> | undefined;
    try {
      // The in-process webhook worker runs (startServer's default): its runner and outbox drain reconnect through the proxy.
      const t = await startTestServer({
        databaseUrl: proxy.url(database.url),
        configPatch: (raw) => (raw.http = { drainTimeoutMs: DRAIN_MS }),
      });
      expect((await t.request('GET', '/gw/api/rest/City')).status).toBe(200);
      await t.db.close();
      proxy.outage('blackhole');
      // Past the runner's restart (500 ms after it loses its connection) and many outbox drains: attempts are stalled now.
      const since = Date.now();
      await until(
        async () => ({ stalled: proxy.stalled, ms: Date.now() - since }),
        (s) => s.stalled >= 3 && s.ms >= 1500,
        5000,
        'stalled connection attempts',
      );
      const started = performance.now();
      closing = t.server.close();
      let bound: NodeJS.Timeout | undefined;
      const outcome = await Promise.race([
        closing.then(() => 'closed'),
        new Promise((resolve) => (bound = setTimeout(() => resolve('still closing'), DRAIN_MS + 6000))),
      ]);
      clearTimeout(bound);
      expect(outcome).toBe('closed');
      expect(performance.now() - started).toBeLessThan(DRAIN_MS + 6000);
    } finally {
      // A close that hung is let go once the stalled attempts are reset, so the test file can end.
      proxy.resetStalled();
      await closing?.catch(() => {});
      await proxy.close();
      await database.drop();
    }
  }, 40_000);
});

describe('statement and pool-wait timeouts', () => {
  let t: TestServer;
  let lockHolder: pg.Client;

  afterAll(async () => {
    await lockHolder?.end().catch(() => {});
    await t?.close();
  });

  /** Holds a row lock in another session, so a write to that row waits as long as the lock is held. */
  async function lockCity(url: string): Promise<{ id: number; release: () => Promise<void> }> {
    lockHolder = new pg.Client({ connectionString: url });
    // The database is dropped at the end, which terminates this session.
    lockHolder.on('error', () => {});
    await lockHolder.connect();
    await lockHolder.query('BEGIN');
    const { rows } = await lockHolder.query(
      `INSERT INTO env_master."City" (name, country, "updatedAt") VALUES ('Locked', 'LK', now()) RETURNING id`,
    );
    await lockHolder.query('COMMIT');
    await lockHolder.query('BEGIN');
    await lockHolder.query('SELECT 1 FROM env_master."City" WHERE id = $1 FOR UPDATE', [rows[0].id]);
    return {
      id: rows[0].id,
      release: async () => {
        await lockHolder.query('ROLLBACK');
      },
    };
  }

  it('cancels a statement past database.statementTimeoutMs in PostgreSQL and answers 503 statement-timeout', async () => {
    t = await startTestServer({ configPatch: (raw) => (raw.database = { statementTimeoutMs: 200 }) });
    const lock = await lockCity(t.database.url);
    try {
      const started = performance.now();
      const res = await t.request('PATCH', `/gw/api/rest/City/${lock.id}`, { body: { name: 'Changed' } });
      const took = performance.now() - started;
      expectProblem(res, 503, 'statement-timeout');
      expect(res.body.detail).toBe('the database statement took longer than the statement timeout and was cancelled');
      expect(res.headers.get('retry-after')).toBe('1');
      // Not before the timeout; the status shows it was the timeout (the lock is held until later).
      expect(took).toBeGreaterThanOrEqual(150);
      // The waiting UPDATE is gone from the server, not merely abandoned by the client.
      const waiting = await t.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' AND query ILIKE '%UPDATE%City%'`,
      );
      expect(waiting[0]!.n).toBe(0);
    } finally {
      await lock.release();
    }
    expect((await t.request('PATCH', `/gw/api/rest/City/${lock.id}`, { body: { name: 'Changed' } })).status).toBe(200);
  }, 30_000);

  it('rejects an out-of-range database setting with the path named', async () => {
    await expect(
      startTestServer({
        configPatch: (raw) =>
          (raw.database = { poolSize: 0, statementTimeoutMs: -1, poolWaitTimeoutMs: 'a', extra: 1 }),
      }),
    ).rejects.toThrow(
      [
        'test config is invalid:',
        '  - $.database.poolSize: Too small: expected number to be >=1',
        '  - $.database.statementTimeoutMs: Too small: expected number to be >=0',
        '  - $.database.poolWaitTimeoutMs: Invalid input: expected number, received string',
        '  - $.database: unknown key "extra"',
      ].join('\n'),
    );
  });

  it('answers 503 database-busy within the pool wait timeout when every pool connection is held', async () => {
    await t.close();
    t = await startTestServer({
      configPatch: (raw) => (raw.database = { poolSize: 1, poolWaitTimeoutMs: 300, statementTimeoutMs: 0 }),
    });
    const lock = await lockCity(t.database.url);
    try {
      // The only pool connection waits on the lock inside this PATCH.
      const held = t.request('PATCH', `/gw/api/rest/City/${lock.id}`, { body: { name: 'Held' } });
      await until(
        () =>
          t.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          ),
        (rows) => rows[0]!.n === 1,
        5000,
        'the PATCH waiting on the lock',
      );
      const started = performance.now();
      const res = await t.request('GET', '/gw/api/rest/City');
      const took = performance.now() - started;
      expectProblem(res, 503, 'database-busy');
      expect(res.headers.get('retry-after')).toBe('1');
      // Not before the wait bound; the status shows it was the bound (the PATCH holds the connection until later).
      expect(took).toBeGreaterThanOrEqual(250);
      expect((await t.request('GET', '/readyz', { key: false })).status, 'a busy pool is load, not an outage').toBe(
        200,
      );
      await lock.release();
      expect((await held).status).toBe(200);
    } finally {
      await lock.release().catch(() => {});
    }
  }, 30_000);
});

describe('readiness state', () => {
  it('is not ready while migrations are pending after the database comes back, and says which', async () => {
    let fail: Error | undefined = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), {
      code: 'ECONNREFUSED',
    });
    let pending = ['20260101000000_add_stock in master'];
    const readiness = new Readiness({
      probe: async () => {
        if (fail) throw fail;
      },
      pendingMigrations: async () => pending,
      listenerLive: () => true,
    });
    expect(readiness.report().ready).toBe(true);
    await readiness.check();
    expect(readiness.report()).toEqual({
      ready: false,
      checks: { database: 'unreachable', migrations: 'unknown', listener: 'ok', server: 'ok' },
      reasons: ['the database cannot be reached'],
    });
    fail = undefined;
    await readiness.check();
    expect(readiness.report()).toEqual({
      ready: false,
      checks: { database: 'ok', migrations: 'pending', listener: 'ok', server: 'ok' },
      reasons: ['migrations are pending: 20260101000000_add_stock in master'],
    });
    pending = [];
    await readiness.check();
    expect(readiness.report()).toEqual({
      ready: true,
      checks: { database: 'ok', migrations: 'ok', listener: 'ok', server: 'ok' },
      reasons: [],
    });
  });

  it('is not ready once the server drains, though the database answers, and stays so', async () => {
    const readiness = new Readiness({
      probe: async () => {},
      pendingMigrations: async () => [],
      listenerLive: () => true,
    });
    readiness.drain();
    await readiness.check();
    expect(readiness.report()).toEqual({
      ready: false,
      checks: { database: 'ok', migrations: 'ok', listener: 'ok', server: 'draining' },
      reasons: ['the server is stopping (finishing in-flight requests)'],
    });
  });

  it('takes a slow probe on a busy pool as load, not as an outage', async () => {
    const readiness = new Readiness({
      probe: () => new Promise(() => {}),
      pendingMigrations: async () => [],
      listenerLive: () => true,
      poolBusy: () => true,
      probeTimeoutMs: 20,
    });
    await readiness.check();
    expect(readiness.report().checks.database).toBe('ok');
  });
});

describe('database fault classification', () => {
  it.each([
    [{ code: '57P01', message: 'terminating connection due to administrator command' }, 'unavailable'],
    [{ code: '57P03', message: 'the database system is starting up' }, 'unavailable'],
    [{ code: '08006', message: 'connection failure' }, 'unavailable'],
    [{ code: '53300', message: 'sorry, too many clients already' }, 'unavailable'],
    [{ code: '53100', message: 'could not extend file "base/16384/16385": No space left on device' }, 'unavailable'],
    [{ code: '3D000', message: 'database "shop" does not exist' }, 'unavailable'],
    [{ code: '28P01', message: 'password authentication failed for user "svc"' }, 'unavailable'],
    [{ code: '28000', message: 'role "svc" does not exist' }, 'unavailable'],
    [{ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' }, 'unavailable'],
    [{ code: 'ECONNRESET', message: 'read ECONNRESET' }, 'unavailable'],
    [new Error('Connection terminated unexpectedly'), 'unavailable'],
    [
      new Error('Connection terminated due to connection timeout', { cause: new Error('timeout expired') }),
      'unavailable',
    ],
    [new Error('timeout exceeded when trying to connect'), 'pool-timeout'],
    [{ code: '57014', message: 'canceling statement due to statement timeout' }, 'statement-timeout'],
    [{ code: '57014', message: 'canceling statement due to user request' }, 'unavailable'],
    [{ code: '40P01', message: 'deadlock detected' }, 'lock-conflict'],
    [{ code: '40001', message: 'could not serialize access due to concurrent update' }, 'lock-conflict'],
    [{ code: '55P03', message: 'canceling statement due to lock timeout' }, 'lock-conflict'],
    [
      { code: '55000', severity: 'FATAL', message: 'database "shop" is not currently accepting connections' },
      'unavailable',
    ],
  ])('%o → %s', (error, kind) => {
    expect(databaseFault(error)?.kind).toBe(kind);
  });

  it.each([
    [{ code: '23505', message: 'duplicate key value violates unique constraint' }],
    [{ code: '42P01', message: 'relation "x" does not exist' }],
    // 55000 raised by a statement on an open session is the statement's own (docs/deployment.md "What survives what").
    [{ code: '55000', severity: 'ERROR', message: 'currval of sequence "s" is not yet defined in this session' }],
    [new TypeError("Cannot read properties of undefined (reading 'id')")],
  ])('%o is not a database fault (it stays a 4xx or a 500)', (error) => {
    expect(databaseFault(error)).toBeUndefined();
  });
});

describe('a write inside a transaction does not wait for a second pool connection', () => {
  it('a keyed create as the first write of a server whose pool has one connection answers 201 (the watched-tables cache is not loaded through the pool it holds)', async () => {
    const t = await startTestServer({
      configPatch: (raw) => (raw.database = { poolSize: 1, poolWaitTimeoutMs: 2000 }),
    });
    try {
      const body = { name: 'Coldstart', country: 'NO' };
      const headers = { 'idempotency-key': 'cold-cache-1' };
      const res = await t.request('POST', '/gw/api/rest/City', { body, headers });
      expect(res.status, res.text).toBe(201);
      const bulk = await t.request('POST', '/gw/api/rest/City/_bulk', { body: { items: [body] } });
      expect(bulk.status, bulk.text).toBe(201);
      const replay = await t.request('POST', '/gw/api/rest/City', { body, headers });
      expect(replay.headers.get('idempotency-replayed')).toBe('true');
    } finally {
      await t.close();
    }
  }, 30_000);
});
