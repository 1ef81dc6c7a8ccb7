/**
 * Through a transaction-pooling PgBouncer (Debian's; .ci/run installs it): requests on the pooled
 * URL, migrations, LISTEN and the webhook runner on the direct one. The key paths that keep state
 * across statements run here too: user sessions (rotation, the logout denylist), the shared rate
 * limit, idempotency, bulk savepoints and the per-transaction statement timeout. Also the libpq TLS
 * parameters' mapping, and a schema installed by a role that owns its database but is not superuser.
 * Without /usr/sbin/pgbouncer the PgBouncer tests skip, except under CI, where they fail.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadService } from '../../cli/project.ts';
import {
  connectionConfig,
  ConnectionStringError,
  ensureSystemSchema,
  openDatabase,
  type Database,
} from '../../runtime/db/index.ts';
import { createApiKey, revokeApiKey } from '../../runtime/keys/index.ts';
import { startServer, type RunningServer } from '../../runtime/server/index.ts';
import { installDeliveryQueue } from '../../runtime/webhooks/index.ts';
import { createTestDatabase, databaseServerUrl, type TestDatabase } from '../support/database.ts';
import {
  expectAuthError,
  PASSWORD,
  relaxedLimits,
  startMailServer,
  type MailServer,
  type Session,
} from '../support/auth.ts';
import { freshWindows } from '../support/clock.ts';
import { countRows, expectProblemAt } from '../support/expect.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, readResponse, SHOP, type TestResponse } from '../support/server.ts';

const PGBOUNCER = '/usr/sbin/pgbouncer';
const hasPgbouncer = existsSync(PGBOUNCER);
if (!hasPgbouncer && process.env.CI) throw new Error(`${PGBOUNCER} is missing: .ci/run installs Debian's pgbouncer`);
const REST = '/gw/api/rest';
/** The `limited` server's data requests a minute and statement timeout. */
const LIMIT = 3;
const STATEMENT_TIMEOUT_MS = 300;

describe('libpq TLS parameters', () => {
  const dir = os.tmpdir();
  const ca = path.join(dir, `svcgen-test-ca-${process.pid}.pem`);
  beforeAll(() => writeFile(ca, 'CA PEM'));
  afterAll(() => rm(ca, { force: true }));

  it('leaves a URL without them to pg', () => {
    expect(connectionConfig('postgres://u:p@db:5432/app?application_name=x')).toEqual({
      connectionString: 'postgres://u:p@db:5432/app?application_name=x',
    });
  });
  it('disable and allow: no TLS; the parameters leave the string', () => {
    expect(connectionConfig('postgres://u@db/app?sslmode=disable')).toEqual({
      connectionString: 'postgres://u@db/app',
      ssl: false,
    });
    expect(connectionConfig('postgres://u@db/app?sslmode=allow&x=1')).toEqual({
      connectionString: 'postgres://u@db/app?x=1',
      ssl: false,
    });
  });
  it('prefer and require: TLS without verification', () => {
    expect(connectionConfig('postgres://u@db/app?sslmode=require')).toEqual({
      connectionString: 'postgres://u@db/app',
      ssl: { rejectUnauthorized: false },
    });
    expect(connectionConfig('postgres://u@db/app?sslmode=prefer')).toEqual({
      connectionString: 'postgres://u@db/app',
      ssl: { rejectUnauthorized: false },
    });
  });
  it('require with sslrootcert and verify-ca: the chain against the CA, not the host name', () => {
    for (const mode of ['require', 'verify-ca']) {
      const config = connectionConfig(`postgres://u@db/app?sslmode=${mode}&sslrootcert=${encodeURIComponent(ca)}`);
      const ssl = config.ssl as import('node:tls').ConnectionOptions;
      expect(ssl.ca).toBe('CA PEM');
      expect(ssl.rejectUnauthorized).toBeUndefined();
      expect(ssl.checkServerIdentity!('db', {} as never)).toBeUndefined();
    }
  });
  it("verify-full: chain and host name; sslrootcert=system keeps Node's CA store", () => {
    expect(connectionConfig(`postgres://u@db/app?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`)).toEqual({
      connectionString: 'postgres://u@db/app',
      ssl: { ca: 'CA PEM' },
    });
    expect(connectionConfig('postgres://u@db/app?sslmode=verify-full&sslrootcert=system')).toEqual({
      connectionString: 'postgres://u@db/app',
      ssl: {},
    });
  });
  it('refuses an unknown sslmode and an unreadable file', () => {
    expect(() => connectionConfig('postgres://u@db/app?sslmode=sometimes')).toThrow(
      new ConnectionStringError(
        'the database URL\'s sslmode "sometimes" is not one of disable, allow, prefer, require, verify-ca, verify-full',
      ),
    );
    expect(() => connectionConfig('postgres://u@db/app?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem')).toThrow(
      new ConnectionStringError("the database URL's sslrootcert /nonexistent/ca.pem cannot be read: ENOENT"),
    );
  });
});

describe('a role that owns its database but is not superuser', () => {
  let database: TestDatabase;
  let admin: pg.Client;
  const role = `svcgen_owner_${process.pid}`;
  beforeAll(async () => {
    database = await createTestDatabase();
    admin = new pg.Client({ connectionString: database.url });
    admin.on('error', () => {});
    await admin.connect();
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
    // A password, since the embedded PostgreSQL authenticates with SCRAM (the system one may trust).
    await admin.query(`CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '${role}-pw'`);
    await admin.query(`ALTER DATABASE ${database.name} OWNER TO ${role}`);
    await admin.query(`ALTER SCHEMA public OWNER TO ${role}`);
  });
  afterAll(async () => {
    await admin?.end();
    await database?.drop();
    const server = new pg.Client({ connectionString: databaseServerUrl() });
    await server.connect();
    await server.query(`DROP ROLE IF EXISTS ${role}`).finally(() => server.end());
  });

  it('installs the system schema and the job queue', async () => {
    const url = new URL(database.url);
    url.username = role;
    url.password = `${role}-pw`;
    const db = openDatabase(url.toString(), { max: 1 });
    try {
      const [me] = await db.query<{ rolsuper: boolean }>('SELECT rolsuper FROM pg_roles WHERE rolname = current_user');
      expect(me!.rolsuper).toBe(false);
      await ensureSystemSchema(db);
      await installDeliveryQueue(url.toString(), (m) => expect.fail(m));
      const [row] = await db.query<{ owner: string }>(
        "SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 'svcgen'",
      );
      expect(row!.owner).toBe(role);
    } finally {
      await db.close();
    }
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as import('node:net').AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

describe.skipIf(!hasPgbouncer)('through PgBouncer in transaction mode', () => {
  let database: TestDatabase;
  let bouncer: ChildProcess;
  let dir: string;
  let server: RunningServer;
  /** A second server on the pooled URL with a low data rate limit and a short statement timeout. */
  let limited: RunningServer;
  let direct: Database;
  let receiver: Receiver;
  let mail: MailServer;
  let pooledUrl: string;
  let adminKey: string;
  const logs: string[] = [];
  const projectId = 'shop';

  beforeAll(async () => {
    database = await createTestDatabase();
    const target = new URL(database.url);
    dir = await mkdtemp(path.join(os.tmpdir(), 'svcgen-pgbouncer-'));
    const port = await freePort();
    await writeFile(
      path.join(dir, 'pgbouncer.ini'),
      `${[
        '[databases]',
        // The server login's user and password (the embedded PostgreSQL wants one; clients are trusted).
        `${database.name} = host=${target.hostname} port=${target.port || 5432} dbname=${database.name}` +
          (target.password
            ? ` user=${decodeURIComponent(target.username)} password=${decodeURIComponent(target.password)}`
            : ''),
        '[pgbouncer]',
        'listen_addr = 127.0.0.1',
        `listen_port = ${port}`,
        `unix_socket_dir =`,
        'auth_type = trust',
        `auth_file = ${path.join(dir, 'users.txt')}`,
        'pool_mode = transaction',
        // Fewer server connections than the API pool asks for: statements must not assume one.
        'default_pool_size = 4',
        'max_client_conn = 200',
        'ignore_startup_parameters = extra_float_digits',
      ].join('\n')}\n`,
    );
    await writeFile(
      path.join(dir, 'users.txt'),
      `"${decodeURIComponent(target.username) || 'postgres'}" "${decodeURIComponent(target.password)}"\n`,
    );
    // PgBouncer refuses to run as root (CI's containers): -u drops to the postgres user Debian's package made.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) await chmod(dir, 0o755);
    bouncer = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    bouncer.stderr!.on('data', (d) => logs.push(String(d)));
    bouncer.stdout!.on('data', (d) => logs.push(String(d)));
    const pooled = new URL(database.url);
    pooled.host = `127.0.0.1:${port}`;
    pooledUrl = pooled.toString();
    // Ready once it answers a query; it exits at once on a bad ini, which ends the wait too.
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (bouncer.exitCode !== null) throw new Error(`pgbouncer exited: ${logs.join('')}`);
      const c = new pg.Client({ connectionString: pooledUrl });
      c.on('error', () => {});
      const ok = await c
        .connect()
        .then(
          () => c.query('SELECT 1'),
          () => undefined,
        )
        .then(
          (r) => r !== undefined,
          () => false,
        );
      await c.end().catch(() => {});
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`pgbouncer did not answer within 10 s: ${logs.join('')}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    receiver = await startReceiver();
    mail = await startMailServer();
    const { service, config: loaded } = await loadService(SHOP);
    const config = {
      ...loaded,
      webhooks: {
        ...loaded.webhooks,
        allowHttp: true,
        allowPrivateTargets: true,
        retryDelaysMs: [0, 100, 100],
        timeoutMs: 1000,
      },
      mail: { ...loaded.mail, smtpUrl: mail.url, from: 'shop <no-reply@shop.test>' },
    };
    relaxedLimits(config);
    const serve = (c: typeof config) =>
      startServer({
        projectDir: SHOP,
        service,
        config: c,
        databaseUrl: pooledUrl,
        directDatabaseUrl: database.url,
        port: 0,
        host: '127.0.0.1',
        managementToken: MANAGEMENT_TOKEN,
        log: (m) => logs.push(m),
        passwordCost: 4,
      });
    server = await serve(config);
    limited = await serve({
      ...config,
      rateLimits: { ...config.rateLimits, dataPerMinutePerProject: LIMIT, dataPerMinutePerCaller: LIMIT },
      database: { ...config.database, statementTimeoutMs: STATEMENT_TIMEOUT_MS },
    });
    direct = openDatabase(database.url, { max: 2 });
    adminKey = (
      await createApiKey(direct, {
        projectId,
        environment: 'master',
        name: 'pgb',
        prefix: 'ApiKey',
        roles: ['admin'],
        context: {},
      })
    ).key;
  }, 60_000);

  afterAll(async () => {
    vi.useRealTimers();
    await server?.close();
    await limited?.close();
    await direct?.close();
    await receiver?.close();
    await mail?.close();
    bouncer?.kill('SIGTERM');
    if (bouncer && bouncer.exitCode === null) await new Promise((resolve) => bouncer.once('exit', resolve));
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** A request to `base` with `token` as Bearer (none when null). */
  const call = async (
    base: string,
    method: string,
    p: string,
    body?: unknown,
    headers: Record<string, string> = {},
    token: string | null = adminKey,
  ): Promise<TestResponse> =>
    readResponse(
      await fetch(`${base}${p}`, {
        method,
        headers: {
          'x-project-id': projectId,
          ...(token === null ? {} : { authorization: `Bearer ${token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );
  const request = (method: string, p: string, body?: unknown, headers: Record<string, string> = {}, key = adminKey) =>
    call(server.url, method, p, body, headers, key);
  const auth = (p: string, body?: unknown, token: string | null = null) =>
    call(server.url, 'POST', `/auth/${p}`, body, {}, token);

  it("serves every request through PgBouncer: the API pool's connections are its", async () => {
    const res = await request('GET', `${REST}/City`);
    expect(res.status, res.text).toBe(200);
    const [row] = await direct.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name NOT IN ('svcgen-listen') AND client_addr IS NOT NULL AND backend_type = 'client backend'",
    );
    expect(row!.n).toBeGreaterThan(0);
  });

  it('create, get, list with filters, patch, delete', async () => {
    const created = await Promise.all(
      ['Lyon', 'Lille', 'Nice'].map((name) => request('POST', `${REST}/City`, { name, country: 'FR' })),
    );
    for (const c of created) expect(c.status, c.text).toBe(201);
    const id = created[0]!.body.data.id;
    expect((await request('GET', `${REST}/City/${id}`)).body.data.name).toBe('Lyon');
    // Repeated so statements land on several server connections, which never prepared them.
    for (let i = 0; i < 6; i++) {
      const list = await request('GET', `${REST}/City?name=starts_with.L&country=equals.FR&sort=name`);
      expect(list.status, list.text).toBe(200);
      expect(list.body.data.map((c: { name: string }) => c.name)).toEqual(['Lille', 'Lyon']);
    }
    const patched = await request('PATCH', `${REST}/City/${id}`, { name: 'Lyons' });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.data.name).toBe('Lyons');
    expect((await request('DELETE', `${REST}/City/${id}`)).status).toBe(204);
    expect((await request('GET', `${REST}/City/${id}`)).status).toBe(404);
  });

  it('bulk and idempotency', async () => {
    const bulk = await request('POST', `${REST}/City/_bulk`, {
      items: [
        { name: 'B1', country: 'BB' },
        { name: 'B2', country: 'BB' },
      ],
    });
    expect(bulk.status, bulk.text).toBe(201);
    const first = await request(
      'POST',
      `${REST}/City`,
      { name: 'Once', country: 'ID' },
      { 'idempotency-key': 'pgb-once-1' },
    );
    const again = await request(
      'POST',
      `${REST}/City`,
      { name: 'Once', country: 'ID' },
      { 'idempotency-key': 'pgb-once-1' },
    );
    expect(first.status, first.text).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body.data.id).toBe(first.body.data.id);
    const [row] = await direct.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM env_master."City" WHERE name = 'Once'`,
    );
    expect(row!.n).toBe(1);
  });

  it('a key revoked elsewhere is refused at once (LISTEN on the direct URL)', async () => {
    const key = await createApiKey(direct, {
      projectId,
      environment: 'master',
      name: 'gone',
      prefix: 'ApiKey',
      roles: ['admin'],
      context: {},
    });
    expect((await request('GET', `${REST}/City`, undefined, {}, key.key)).status).toBe(200);
    await revokeApiKey(direct, projectId, key.id);
    expect((await request('GET', `${REST}/City`, undefined, {}, key.key)).status).toBe(401);
  });

  it('a webhook subscription delivers an event (graphile-worker on the direct URL)', async () => {
    const created = await request(
      'POST',
      `${REST}/_webhooks`,
      {
        projectId,
        environment: 'master',
        table: 'City',
        events: ['INSERT'],
        url: `${receiver.url}/pgb`,
        secret: 's3cret',
      },
      { environment: 'master' },
      MANAGEMENT_TOKEN,
    );
    expect(created.status, created.text).toBe(201);
    expect((await request('POST', `${REST}/City`, { name: 'Hooked', country: 'WH' })).status).toBe(201);
    const [got] = await receiver.waitFor('/pgb', 1);
    expect(got!.body.record.name).toBe('Hooked');
  });

  it('user sessions: signup, confirmation, login, refresh rotation with reuse refused, logout denylist, role permissions', async () => {
    const email = `pgb-user-${process.pid}@example.com`;
    const signup = await auth('signup', { email, password: PASSWORD, firstName: 'Pooled', lastName: 'User' });
    expect(signup.status, signup.text).toBe(201);
    const confirmed = await auth('confirm-signup', { email, code: (await mail.nextMail(email)).code });
    expect(confirmed.status, confirmed.text).toBe(200);
    const login = await auth('login', { email, password: PASSWORD });
    expect(login.status, login.text).toBe(200);
    expect(Object.keys(login.body).sort()).toEqual(['accessToken', 'refreshToken', 'user']);
    expect(login.body.user).toEqual({
      id: confirmed.body.user.id,
      email,
      firstName: 'Pooled',
      lastName: 'User',
      roles: ['customer'],
    });
    const session = login.body as Session;

    // The customer role reads City, may not create one, and does not see Customer at all.
    const asUser = (token: string, method: string, p: string, body?: unknown) => request(method, p, body, {}, token);
    expect((await asUser(session.accessToken, 'GET', `${REST}/City`)).status).toBe(200);
    expectProblemAt(
      await asUser(session.accessToken, 'POST', `${REST}/City`, { name: 'Nope', country: 'NO' }),
      403,
      `${REST}/City`,
      'forbidden',
    );
    expectProblemAt(await asUser(session.accessToken, 'GET', `${REST}/Customer`), 403, `${REST}/Customer`, 'forbidden');
    expect(await countRows(direct, 'City', 'master', 'name = $1', ['Nope'])).toBe(0);

    // Rotation: the new pair works; the spent refresh token is refused and ends the whole session.
    const rotated = await auth('refresh-token', { refreshToken: session.refreshToken });
    expect(rotated.status, rotated.text).toBe(200);
    expect(Object.keys(rotated.body).sort()).toEqual(['accessToken', 'refreshToken']);
    expect(rotated.body.refreshToken).not.toBe(session.refreshToken);
    expect((await asUser(rotated.body.accessToken, 'GET', `${REST}/City`)).status).toBe(200);
    expectAuthError(await auth('refresh-token', { refreshToken: session.refreshToken }), 401, 'AUTH_TOKEN_INVALID');
    expectAuthError(
      await auth('refresh-token', { refreshToken: rotated.body.refreshToken }),
      401,
      'AUTH_TOKEN_INVALID',
    );
    expectProblemAt(await asUser(rotated.body.accessToken, 'GET', `${REST}/City`), 401, `${REST}/City`, 'unauthorized');

    // Logout: the access token lands on the denylist at once, and its refresh token dies with the session.
    const second = (await auth('login', { email, password: PASSWORD })).body as Session;
    expect((await asUser(second.accessToken, 'GET', `${REST}/City`)).status).toBe(200);
    const out = await auth('logout', undefined, second.accessToken);
    expect(out.status, out.text).toBe(200);
    expect(Object.keys(out.body)).toEqual(['message']);
    expectProblemAt(await asUser(second.accessToken, 'GET', `${REST}/City`), 401, `${REST}/City`, 'unauthorized');
    expectAuthError(await auth('refresh-token', { refreshToken: second.refreshToken }), 401, 'AUTH_TOKEN_INVALID');
    expectAuthError(await auth('logout', undefined, second.accessToken), 401, 'AUTH_TOKEN_INVALID');
  });

  it('idempotency: a retry replays the first answer byte for byte; another body under the key → 422; one row', async () => {
    const post = (body: unknown) => request('POST', `${REST}/City`, body, { 'idempotency-key': 'pgb-idem-2' });
    const first = await post({ name: 'Idem', country: 'IP' });
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    for (let i = 0; i < 3; i++) {
      const again = await post({ name: 'Idem', country: 'IP' });
      expect(again.status, again.text).toBe(201);
      expect(again.headers.get('idempotency-replayed')).toBe('true');
      expect(again.headers.get('location')).toBe(`${REST}/City/${first.body.data.id}`);
      expect(again.text).toBe(first.text);
    }
    expectProblemAt(await post({ name: 'Other', country: 'IP' }), 422, `${REST}/City`, 'validation', 'Idempotency-Key');
    expect(await countRows(direct, 'City', 'master', "country = 'IP'")).toBe(1);
  });

  it('bulk savepoints: ALL_OR_NOTHING with a database failure rolls back every item; BEST_EFFORT keeps the others', async () => {
    const tag = `pgb-bulk-${process.pid}`;
    const path = `${REST}/Customer/_bulk`;
    const items = [
      { email: `${tag}-a@example.com`, name: 'a' },
      { email: `${tag}-dup@example.com`, name: 'b' },
      { email: `${tag}-dup@example.com`, name: 'c' },
    ];
    const failed = await request('POST', path, { items });
    expect(failed.status, failed.text).toBe(422);
    expect(failed.headers.get('content-type')).toBe('application/problem+json');
    expect(failed.body).toMatchObject({ type: '/errors/validation', status: 422, instance: path });
    expect(failed.body.data).toEqual({
      success: false,
      transactionMode: 'ALL_OR_NOTHING',
      totalRequested: 3,
      totalSucceeded: 0,
      totalFailed: 3,
      items: [],
      errors: [{ index: 2, message: expect.stringMatching(/email/) }],
    });
    expect(await countRows(direct, 'Customer', 'master', 'email LIKE $1', [`${tag}-%`])).toBe(0);

    const partial = await request('POST', `${path}?mode=BEST_EFFORT`, { items });
    expect(partial.status, partial.text).toBe(207);
    expect(partial.body.data).toMatchObject({
      success: false,
      transactionMode: 'BEST_EFFORT',
      totalSucceeded: 2,
      totalFailed: 1,
      errors: [{ index: 2 }],
    });
    const rows = await direct.query<{ name: string }>(
      `SELECT name FROM env_master."Customer" WHERE email LIKE $1 ORDER BY name`,
      [`${tag}-%`],
    );
    expect(rows.map((r) => r.name)).toEqual(['a', 'b']);
  });

  describe('rate limit and statement timeout (a server with low limits)', () => {
    const freshWindow = freshWindows();
    afterAll(() => vi.useRealTimers());

    it(`the data rate limit counts through PgBouncer: ${LIMIT} pass, then 429 with Retry-After and RateLimit-*`, async () => {
      freshWindow();
      const path = `${REST}/City`;
      for (let i = 0; i < LIMIT; i++) {
        const res = await call(limited.url, 'GET', path);
        expect(res.status, res.text).toBe(200);
        expect(res.headers.get('ratelimit-remaining')).toBe(String(LIMIT - 1 - i));
      }
      const over = await call(limited.url, 'POST', path, { name: 'Over', country: 'OV' });
      expectProblemAt(over, 429, path, 'rate-limited');
      expect(over.headers.get('retry-after')).toBe('30');
      expect({
        limit: over.headers.get('ratelimit-limit'),
        remaining: over.headers.get('ratelimit-remaining'),
        reset: over.headers.get('ratelimit-reset'),
      }).toEqual({ limit: String(LIMIT), remaining: '0', reset: '30' });
      expect(await countRows(direct, 'City', 'master', "name = 'Over'")).toBe(0);
    });

    // Single statements outside a transaction get no SET LOCAL through the pooler (docs/deployment.md:
    // the role's statement_timeout or PgBouncer's query_timeout bound those), so a bulk write it is.
    it('SET LOCAL statement_timeout holds inside a pooled transaction: a bulk write blocked past it → 503 statement-timeout', async () => {
      freshWindow();
      const [row] = await direct.query<{ id: number }>(
        `INSERT INTO env_master."City" (name, country, "updatedAt") VALUES ('Locked', 'LK', now()) RETURNING id`,
      );
      const path = `${REST}/City/_bulk`;
      // A row lock held on the direct URL: the bulk delete waits for it until the statement timeout cancels it.
      const holder = new pg.Client({ connectionString: database.url });
      holder.on('error', () => {});
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('SELECT 1 FROM env_master."City" WHERE id = $1 FOR UPDATE', [row!.id]);
        const started = performance.now();
        const res = await call(limited.url, 'DELETE', path, { ids: [row!.id] });
        const took = performance.now() - started;
        expectProblemAt(res, 503, path, 'statement-timeout');
        expect(res.body.detail).toBe('the database statement took longer than the statement timeout and was cancelled');
        expect(res.headers.get('retry-after')).toBe('1');
        // Not before the timeout; the status shows it was the timeout (the lock is held until later).
        expect(took).toBeGreaterThanOrEqual(STATEMENT_TIMEOUT_MS - 50);
        // Cancelled in PostgreSQL, not merely abandoned by the client.
        const [waiting] = await direct.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        expect(waiting!.n).toBe(0);
        await holder.query('ROLLBACK');
      } finally {
        await holder.end();
      }
      expect(await countRows(direct, 'City', 'master', 'id = $1', [row!.id])).toBe(1);
      // The SET LOCAL ended with its transaction: the server connection PgBouncer hands out next has no leftover.
      const deleted = await call(limited.url, 'DELETE', path, { ids: [row!.id] });
      expect(deleted.status, deleted.text).toBe(200);
      expect(deleted.body.data).toMatchObject({ success: true, totalSucceeded: 1, items: [{ id: row!.id }] });
      expect(await countRows(direct, 'City', 'master', 'id = $1', [row!.id])).toBe(0);
    });
  });

  it('PgBouncer logged no protocol errors', () => {
    expect(logs.join('').match(/prepared statement .* does not exist|unsupported startup parameter/g)).toBeNull();
  });
});
