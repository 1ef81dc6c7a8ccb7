// Temporary shadow databases on a real PostgreSQL server, for the schema
// engine to replay a migrations folder into (what `prisma migrate dev` does).
//
// adapter-pg's own connectToShadowDb is not used: given a connection string it
// replays into the main database and leaves shadow databases behind. Here
// every database created is remembered and dropped by close(), after its pool
// is closed, even when the engine failed or panicked.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type {
  SqlDriverAdapter,
  SqlMigrationAwareDriverAdapterFactory,
  SqlQueryable,
} from '@prisma/driver-adapter-utils';
import { loadAdapterPg, loadDriverAdapterUtils } from './prisma-packages.ts';
import { probeOnlyAdapterFactory, type PostgresServerInfo } from './probe-adapter.ts';

const PG_CHAR_OID = 18;
const PG_TEXT_OID = 25;

type QueryResultLike = { fields?: { dataTypeID: number }[]; rows?: unknown };

/** Result rows (the array adapter-pg passes on as SqlResultSet.rows) -> indexes of their `"char"` columns. */
const charColumnsByRows = new WeakMap<object, number[]>();

function charColumnsAsText<R>(result: R): R {
  const { fields, rows } = (result ?? {}) as QueryResultLike;
  if (!Array.isArray(fields)) return result;
  const charColumns: number[] = [];
  fields.forEach((field, index) => {
    if (field.dataTypeID !== PG_CHAR_OID) return;
    field.dataTypeID = PG_TEXT_OID;
    charColumns.push(index);
  });
  if (charColumns.length > 0 && Array.isArray(rows)) charColumnsByRows.set(rows, charColumns);
  return result;
}

/**
 * The engine's catalog queries return PostgreSQL's internal one-byte `"char"`
 * type (oid 18, e.g. pg_constraint.contype), which adapter-pg 7.10 refuses
 * ("Column type 'char' could not be deserialized"). Its values arrive as text
 * already, so the pg client below relabels the column as text to get past
 * adapter-pg, and this puts the right type back on adapter-pg's result:
 * Character, which the engine turns into the Char value its native driver
 * gives for `"char"`. Reported as Text, the engine's
 * `get_expect_char("constraint_type")` fails and the wasm engine panics
 * (`RuntimeError: unreachable`) on the first pg_constraint row it reads:
 * any CHECK constraint in a migration, and on PostgreSQL 18 every table,
 * since PG 18 stores NOT NULL constraints in pg_constraint (contype 'n').
 */
function reportCharColumns<Q extends Pick<SqlQueryable, 'queryRaw'>>(queryable: Q): Q {
  const { ColumnTypeEnum } = loadDriverAdapterUtils();
  const queryRaw = queryable.queryRaw.bind(queryable);
  queryable.queryRaw = async (query) => {
    const result = await queryRaw(query);
    for (const index of charColumnsByRows.get(result.rows) ?? []) result.columnTypes[index] = ColumnTypeEnum.Character;
    return result;
  };
  return queryable;
}

/**
 * Relabels `"char"` columns as text (see reportCharColumns). Covers both the
 * promise form (adapter-pg, transactions) and the callback form (pg-pool).
 */
class CharAsTextClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // A connection still open at teardown is terminated by DROP DATABASE ...
    // WITH (FORCE) and emits 'error' (57P01); unhandled, that would crash the
    // process. Errors of running queries still reject their own promises.
    this.on('error', () => {});
  }

  // biome-ignore lint/suspicious/noExplicitAny: overrides every overload of pg's Client.query
  override query(...args: any[]): any {
    const callbackIndex = args.findIndex((arg) => typeof arg === 'function');
    if (callbackIndex >= 0) {
      const callback = args[callbackIndex] as (error: Error | null, result: unknown) => void;
      args[callbackIndex] = (error: Error | null, result: unknown) =>
        callback(error, error ? result : charColumnsAsText(result));
      return (super.query as (...a: unknown[]) => unknown)(...args);
    }
    const result = (super.query as (...a: unknown[]) => unknown)(...args);
    // Submittables (cursors, Query objects) are returned as they are.
    return isPromiseLike(result) ? result.then(charColumnsAsText) : result;
  }
}

function isPromiseLike(value: unknown): value is Promise<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

function databaseUrl(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  return url.href;
}

const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * adapter-pg's executeScript splits the script on every ";" (breaking
 * semicolons inside literals, comments and function bodies of hand-edited
 * migrations). The native engine sends a migration as one multi-statement
 * simple query, which PostgreSQL also runs as a single implicit transaction;
 * this does the same.
 */
function wholeScriptExecutor(pool: pg.Pool): (script: string) => Promise<void> {
  const { DriverAdapterError } = loadDriverAdapterUtils();
  return async (script) => {
    try {
      await pool.query(script);
    } catch (error) {
      if (error instanceof pg.DatabaseError) {
        throw new DriverAdapterError({
          kind: 'postgres',
          code: error.code ?? 'N/A',
          severity: error.severity ?? 'N/A',
          message: error.message,
          detail: error.detail,
          column: error.column,
          hint: error.hint,
        });
      }
      throw error;
    }
  };
}

const POOL_END_TIMEOUT_MS = 2_000;

/**
 * pg-pool's end() resolves as soon as its clients are detached, before their
 * sockets are closed; waiting for every 'remove' lets the connections end
 * cleanly before the database is dropped. It also waits for checked-out
 * clients, which an engine that failed mid-transaction may never release, so
 * it is bounded: DROP ... WITH (FORCE) ends whatever is left.
 */
async function endPool(pool: pg.Pool): Promise<void> {
  let remaining = pool.totalCount;
  const socketsClosed = new Promise<void>((resolve) => {
    if (remaining === 0) resolve();
    pool.on('remove', () => {
      remaining -= 1;
      if (remaining <= 0) resolve();
    });
  });
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, POOL_END_TIMEOUT_MS);
    timer.unref();
  });
  try {
    await Promise.race([Promise.all([pool.end(), socketsClosed]), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export interface ShadowDatabaseSession {
  /** Main connection = probe only (nothing is ever run on the caller's database); shadow = fresh temporary database. */
  factory: SqlMigrationAwareDriverAdapterFactory;
  /** Names of the temporary databases created so far. */
  readonly createdDatabases: readonly string[];
  /** Closes all pools, then drops every temporary database (WITH (FORCE)). Idempotent. */
  close(): Promise<void>;
}

/** `serverUrl`: any database on a server where CREATE/DROP DATABASE is allowed. */
export async function openShadowDatabaseSession(serverUrl: string): Promise<ShadowDatabaseSession> {
  const admin = new pg.Pool({ connectionString: serverUrl, max: 1 });
  const created: string[] = [];
  const pools: pg.Pool[] = [];
  let closed = false;

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    const failures: unknown[] = [];
    for (const pool of pools) await endPool(pool).catch((error: unknown) => failures.push(error));
    for (const name of created) {
      await admin
        .query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`)
        .catch((e: unknown) => failures.push(e));
    }
    await admin.end().catch((error: unknown) => failures.push(error));
    if (failures.length > 0) throw new AggregateError(failures, 'svcgen: cleaning up the shadow database failed');
  };

  try {
    // The probe answer carries the real server version so the engine sees the same server as the shadow database.
    const { rows } = await admin.query<{ version: string; num: number }>(
      "SELECT version() AS version, current_setting('server_version_num')::integer AS num",
    );
    const server: PostgresServerInfo = { version: rows[0].version, versionNum: rows[0].num };
    const { PrismaPg } = loadAdapterPg();

    const connectToShadowDb = async (): Promise<SqlDriverAdapter> => {
      if (closed) throw new Error('svcgen: shadow database session already closed');
      const name = `svcgen_shadow_${randomUUID().replace(/-/g, '')}`;
      await admin.query(`CREATE DATABASE ${quoteIdent(name)}`);
      created.push(name);
      const pool = new pg.Pool({ connectionString: databaseUrl(serverUrl, name), Client: CharAsTextClient });
      // Idle-client errors are re-emitted on the pool; adapter-pg removes its
      // own listener when the engine disposes the adapter, and an 'error'
      // event without listener would crash the process.
      pool.on('error', () => {});
      pools.push(pool);
      const adapter = reportCharColumns(await new PrismaPg(pool).connect());
      const startTransaction = adapter.startTransaction.bind(adapter);
      adapter.startTransaction = async (isolationLevel) => reportCharColumns(await startTransaction(isolationLevel));
      adapter.executeScript = wholeScriptExecutor(pool);
      return adapter;
    };

    return { factory: probeOnlyAdapterFactory(server, connectToShadowDb), createdDatabases: created, close };
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}
