/**
 * The benchmark database: a fresh database on a PostgreSQL server, the shop's migrations, seeded
 * rows, an admin API key. Server: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL when set, else the
 * local system server, else an embedded one in a temp dir.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { applyMigrations, ensureSystemSchema, openDatabase } from '../runtime/db/index.ts';
import { startEmbeddedPostgres } from '../runtime/db/embedded-postgres/index.ts';
import { createApiKey } from '../runtime/keys/index.ts';
import type { Fixture } from './cases.ts';
import { REPO } from './children.ts';
import { BackendCpu } from './cpu.ts';

export const SYSTEM_SERVER_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const PROJECT_ID = 'shop';

export interface DatabaseServer {
  /** maintenance database URL (usually .../postgres) */
  url: string;
  /** where it came from, for the report */
  origin: string;
  stop(): Promise<void>;
}

export interface BenchDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

export function redact(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = '***';
  return u.toString();
}

export async function findDatabaseServer(log: (m: string) => void): Promise<DatabaseServer> {
  const configured = process.env.SVCGEN_BENCH_DATABASE_URL || process.env.DATABASE_URL;
  if (configured) {
    const origin = process.env.SVCGEN_BENCH_DATABASE_URL ? 'SVCGEN_BENCH_DATABASE_URL' : 'DATABASE_URL';
    return { url: configured, origin: `${origin} (${redact(configured)})`, stop: async () => {} };
  }
  try {
    await withClient(SYSTEM_SERVER_URL, (c) => c.query('SELECT 1'));
    return { url: SYSTEM_SERVER_URL, origin: `system server (${SYSTEM_SERVER_URL})`, stop: async () => {} };
  } catch (error) {
    log(`no PostgreSQL at ${SYSTEM_SERVER_URL} (${(error as Error).message}); starting an embedded one`);
  }
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-bench-pg-'));
  fs.chmodSync(stateDir, 0o711); // as root, PostgreSQL runs as `postgres`, which must traverse it
  try {
    const server = await startEmbeddedPostgres(stateDir);
    return {
      url: server.url,
      origin: 'embedded PostgreSQL (runtime/db/embedded-postgres/, temp dir)',
      async stop() {
        try {
          await server.stop();
        } finally {
          fs.rmSync(stateDir, { recursive: true, force: true });
        }
      },
    };
  } catch (error) {
    fs.rmSync(stateDir, { recursive: true, force: true });
    throw error;
  }
}

export async function createBenchDatabase(serverUrl: string): Promise<BenchDatabase> {
  const name = `svcgen_bench_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await withClient(serverUrl, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  let dropping: Promise<void> | undefined;
  return {
    url: url.toString(),
    name,
    drop: () =>
      (dropping ??= withClient(serverUrl, async (c) => {
        await c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`);
      })),
  };
}

export async function serverVersion(url: string): Promise<string> {
  return withClient(
    url,
    async (c) => (await c.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version,
  );
}

export interface SeedSize {
  cities: number;
  customers: number;
  orders: number;
}

/** Migrations, seed rows (one INSERT … SELECT generate_series per table), VACUUM ANALYZE, an admin key. */
export async function prepareDatabase(url: string, size: SeedSize): Promise<Fixture> {
  const db = openDatabase(url, { max: 2 });
  try {
    await ensureSystemSchema(db);
    await applyMigrations(db, path.join(REPO, 'examples/shop/migrations'), ['master']);
    await db.exec(`
      INSERT INTO env_master."City" (name, country, "updatedAt")
      SELECT 'City ' || i, (ARRAY['DE', 'FR', 'US', 'JP', 'BR'])[1 + i % 5], now()
      FROM generate_series(1, ${size.cities}) AS i;

      -- every 20th customer has no city (the embed answers null for it)
      INSERT INTO env_master."Customer" (id, email, name, vip, "cityId", "updatedAt")
      SELECT gen_random_uuid(), 'customer' || i || '@example.com', 'Customer ' || i, i % 10 = 0,
             CASE WHEN i % 20 <> 0 THEN c.id END, now()
      FROM generate_series(1, ${size.customers}) AS i
      JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM env_master."City") AS c
        ON c.n = i % ${size.cities};

      INSERT INTO env_master."Order" (status, total, note, "placedAt", "customerId", "createdAt", "updatedAt")
      SELECT (ARRAY['open', 'paid', 'shipped', 'cancelled']::env_master."OrderStatus"[])[1 + i % 4],
             round((random() * 500)::numeric, 2)::float8,
             CASE WHEN i % 3 = 0 THEN 'gift wrap, order ' || i END,
             CASE WHEN i % 4 <> 0 THEN now() - i * interval '1 minute' END,
             c.id,
             now() - i * interval '1 minute',
             now() - i * interval '30 seconds'
      FROM generate_series(1, ${size.orders}) AS i
      JOIN (SELECT id, row_number() OVER (ORDER BY email) - 1 AS n FROM env_master."Customer") AS c
        ON c.n = i % ${size.customers};
    `);
    // VACUUM as well as ANALYZE: sets hint bits and the visibility map now, so the first server
    // measured does not pay for them.
    await db.exec('VACUUM ANALYZE');
    const [range] = await db.query<{ min: number; max: number; count: string }>(
      'SELECT min(id) AS min, max(id) AS max, count(*) AS count FROM env_master."Order"',
    );
    if (Number(range!.count) !== size.orders) throw new Error(`seeded ${range!.count} orders, expected ${size.orders}`);
    const customers = await db.query<{ id: string }>('SELECT id FROM env_master."Customer" ORDER BY email');
    const key = await createApiKey(db, {
      projectId: PROJECT_ID,
      environment: 'master',
      name: 'bench',
      prefix: 'ApiKey',
      roles: ['admin'],
      context: {},
    });
    return {
      projectId: PROJECT_ID,
      apiKey: key.key,
      orderIds: { min: range!.min, max: range!.max },
      orderCount: size.orders,
      customerIds: customers.map((c) => c.id),
    };
  } finally {
    await db.close();
  }
}

export interface SeededBenchDatabase {
  server: DatabaseServer;
  database: BenchDatabase;
  fixture: Fixture;
  /** The CPU meter of the database's PostgreSQL backends (read over a client of the server's maintenance database). */
  backends: BackendCpu;
}

/**
 * The setup every bench of one seeded database shares: finds the server, creates a fresh database,
 * migrates and seeds it (prepareDatabase) and starts the backends' CPU meter. Each step's undoing
 * (stopping the server, dropping the database, ending the meter's client) goes to `addCleanup`.
 */
export async function seededBenchDatabase(
  addCleanup: (step: () => Promise<void>) => void,
  log: (message: string) => void,
  seed: SeedSize,
): Promise<SeededBenchDatabase> {
  const server = await findDatabaseServer(log);
  addCleanup(() => server.stop());
  const database = await createBenchDatabase(server.url);
  addCleanup(() => database.drop());
  log(`database ${database.name}: migrating and seeding ${seed.orders.toLocaleString('en-US')} orders`);
  const fixture = await prepareDatabase(database.url, seed);
  const admin = new pg.Client({ connectionString: server.url });
  admin.on('error', () => {});
  await admin.connect();
  addCleanup(() => admin.end());
  return { server, database, fixture, backends: new BackendCpu(admin, database.name) };
}

/**
 * Brings the Order table back to the seed after a case that creates orders: deletes the rows
 * beyond the seeded ids and vacuums, so every case and server measures the same 100,000 orders.
 * Returns the number of rows deleted.
 */
export async function restoreSeed(url: string, fixture: Fixture): Promise<number> {
  return withClient(url, async (c) => {
    const { rowCount } = await c.query('DELETE FROM env_master."Order" WHERE id > $1', [fixture.orderIds.max]);
    if (rowCount) await c.query('VACUUM ANALYZE env_master."Order"');
    return rowCount ?? 0;
  });
}
