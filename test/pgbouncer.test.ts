/**
 * Through a transaction-pooling PgBouncer (Debian's; .ci/run installs it): requests on the pooled
 * URL, migrations, LISTEN and the webhook runner on the direct one. Also the libpq TLS parameters'
 * mapping, and a schema installed by a role that owns its database but is not superuser.
 * Without /usr/sbin/pgbouncer the PgBouncer tests skip, except under CI, where they fail.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadService } from '../cli/project.ts';
import { connectionConfig, ConnectionStringError, ensureSystemSchema, openDatabase, type Database } from '../runtime/db/index.ts';
import { createApiKey, revokeApiKey } from '../runtime/keys/index.ts';
import { startServer, type RunningServer } from '../runtime/server/index.ts';
import { installDeliveryQueue } from '../runtime/webhooks/index.ts';
import { createTestDatabase, databaseServerUrl, type TestDatabase } from './support/database.ts';
import { startReceiver, type Receiver } from './support/receiver.ts';
import { MANAGEMENT_TOKEN, readResponse, SHOP, type TestResponse } from './support/server.ts';

const PGBOUNCER = '/usr/sbin/pgbouncer';
const hasPgbouncer = existsSync(PGBOUNCER);
if (!hasPgbouncer && process.env.CI) throw new Error(`${PGBOUNCER} is missing: .ci/run installs Debian's pgbouncer`);
const REST = '/gw/api/rest';

describe('libpq TLS parameters', () => {
  const dir = os.tmpdir();
  const ca = path.join(dir, `svcgen-test-ca-${process.pid}.pem`);
  beforeAll(() => writeFile(ca, 'CA PEM'));
  afterAll(() => rm(ca, { force: true }));

  it('leaves a URL without them to pg', () => {
    expect(connectionConfig('postgres://u:p@db:5432/app?application_name=x')).toEqual({ connectionString: 'postgres://u:p@db:5432/app?application_name=x' });
  });
  it('disable and allow: no TLS; the parameters leave the string', () => {
    expect(connectionConfig('postgres://u@db/app?sslmode=disable')).toEqual({ connectionString: 'postgres://u@db/app', ssl: false });
    expect(connectionConfig('postgres://u@db/app?sslmode=allow&x=1')).toEqual({ connectionString: 'postgres://u@db/app?x=1', ssl: false });
  });
  it('prefer and require: TLS without verification', () => {
    expect(connectionConfig('postgres://u@db/app?sslmode=require')).toEqual({ connectionString: 'postgres://u@db/app', ssl: { rejectUnauthorized: false } });
    expect(connectionConfig('postgres://u@db/app?sslmode=prefer')).toEqual({ connectionString: 'postgres://u@db/app', ssl: { rejectUnauthorized: false } });
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
  it('verify-full: chain and host name; sslrootcert=system keeps Node\'s CA store', () => {
    expect(connectionConfig(`postgres://u@db/app?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`)).toEqual({ connectionString: 'postgres://u@db/app', ssl: { ca: 'CA PEM' } });
    expect(connectionConfig('postgres://u@db/app?sslmode=verify-full&sslrootcert=system')).toEqual({ connectionString: 'postgres://u@db/app', ssl: {} });
  });
  it('refuses an unknown sslmode and an unreadable file', () => {
    expect(() => connectionConfig('postgres://u@db/app?sslmode=sometimes')).toThrow(
      new ConnectionStringError('the database URL\'s sslmode "sometimes" is not one of disable, allow, prefer, require, verify-ca, verify-full'),
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
    await admin.query('ALTER SCHEMA public OWNER TO ' + role);
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
      const [row] = await db.query<{ owner: string }>("SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = 'svcgen'");
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
  let direct: Database;
  let receiver: Receiver;
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
      [
        '[databases]',
        // The server login's user and password (the embedded PostgreSQL wants one; clients are trusted).
        `${database.name} = host=${target.hostname} port=${target.port || 5432} dbname=${database.name}` +
          (target.password ? ` user=${decodeURIComponent(target.username)} password=${decodeURIComponent(target.password)}` : ''),
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
      ].join('\n') + '\n',
    );
    await writeFile(path.join(dir, 'users.txt'), `"${decodeURIComponent(target.username) || 'postgres'}" "${decodeURIComponent(target.password)}"\n`);
    // PgBouncer refuses to run as root (CI's containers): -u drops to the postgres user Debian's package made.
    const asRoot = process.getuid?.() === 0;
    if (asRoot) await chmod(dir, 0o755);
    bouncer = spawn(PGBOUNCER, [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
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
      const ok = await c.connect().then(() => c.query('SELECT 1'), () => undefined).then((r) => r !== undefined, () => false);
      await c.end().catch(() => {});
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`pgbouncer did not answer within 10 s: ${logs.join('')}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    receiver = await startReceiver();
    const { service, config: loaded } = await loadService(SHOP);
    const config = { ...loaded, webhooks: { ...loaded.webhooks, allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0, 100, 100], timeoutMs: 1000 } };
    server = await startServer({
      projectDir: SHOP,
      service,
      config,
      databaseUrl: pooledUrl,
      directDatabaseUrl: database.url,
      port: 0,
      host: '127.0.0.1',
      managementToken: MANAGEMENT_TOKEN,
      log: (m) => logs.push(m),
      passwordCost: 4,
    });
    direct = openDatabase(database.url, { max: 2 });
    adminKey = (await createApiKey(direct, { projectId, environment: 'master', name: 'pgb', prefix: 'ApiKey', roles: ['admin'], context: {} })).key;
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    await direct?.close();
    await receiver?.close();
    bouncer?.kill('SIGTERM');
    if (bouncer && bouncer.exitCode === null) await new Promise((resolve) => bouncer.once('exit', resolve));
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const request = async (method: string, p: string, body?: unknown, headers: Record<string, string> = {}, key = adminKey): Promise<TestResponse> =>
    readResponse(
      await fetch(`${server.url}${p}`, {
        method,
        headers: { 'x-project-id': projectId, authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      }),
    );

  it('serves every request through PgBouncer: the API pool\'s connections are its', async () => {
    const res = await request('GET', `${REST}/City`);
    expect(res.status, res.text).toBe(200);
    const [row] = await direct.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name NOT IN ('svcgen-listen') AND client_addr IS NOT NULL AND backend_type = 'client backend'",
    );
    expect(row!.n).toBeGreaterThan(0);
  });

  it('create, get, list with filters, patch, delete', async () => {
    const created = await Promise.all(['Lyon', 'Lille', 'Nice'].map((name) => request('POST', `${REST}/City`, { name, country: 'FR' })));
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
    const bulk = await request('POST', `${REST}/City/_bulk`, { items: [{ name: 'B1', country: 'BB' }, { name: 'B2', country: 'BB' }] });
    expect(bulk.status, bulk.text).toBe(201);
    const first = await request('POST', `${REST}/City`, { name: 'Once', country: 'ID' }, { 'idempotency-key': 'pgb-once-1' });
    const again = await request('POST', `${REST}/City`, { name: 'Once', country: 'ID' }, { 'idempotency-key': 'pgb-once-1' });
    expect(first.status, first.text).toBe(201);
    expect(again.status).toBe(201);
    expect(again.body.data.id).toBe(first.body.data.id);
    const [row] = await direct.query<{ n: number }>(`SELECT count(*)::int AS n FROM env_master."City" WHERE name = 'Once'`);
    expect(row!.n).toBe(1);
  });

  it('a key revoked elsewhere is refused at once (LISTEN on the direct URL)', async () => {
    const key = await createApiKey(direct, { projectId, environment: 'master', name: 'gone', prefix: 'ApiKey', roles: ['admin'], context: {} });
    expect((await request('GET', `${REST}/City`, undefined, {}, key.key)).status).toBe(200);
    await revokeApiKey(direct, projectId, key.id);
    expect((await request('GET', `${REST}/City`, undefined, {}, key.key)).status).toBe(401);
  });

  it('a webhook subscription delivers an event (graphile-worker on the direct URL)', async () => {
    const created = await request('POST', `${REST}/_webhooks`, {
      projectId, environment: 'master', table: 'City', events: ['INSERT'], url: `${receiver.url}/pgb`, secret: 's3cret',
    }, { environment: 'master' }, MANAGEMENT_TOKEN);
    expect(created.status, created.text).toBe(201);
    expect((await request('POST', `${REST}/City`, { name: 'Hooked', country: 'WH' })).status).toBe(201);
    const [got] = await receiver.waitFor('/pgb', 1);
    expect(got!.body.record.name).toBe('Hooked');
  });

  it('PgBouncer logged no protocol errors', () => {
    expect(logs.join('').match(/prepared statement .* does not exist|unsupported startup parameter/g)).toBeNull();
  });
});
