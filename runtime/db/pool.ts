import pg from 'pg';
import { createHash } from 'node:crypto';
import { newPool, withConnection } from './client.ts';
import { connectionConfig } from './connection.ts';
import {
  announcementSettled,
  commitMark,
  dropCommitCallbacks,
  enclosingTransaction,
  openTransactions,
  transactionAnnounced,
  transactionEnded,
} from './announcements.ts';

/** Quotes an SQL identifier; every table, column and schema name goes through here. */
export function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** The PostgreSQL schema that holds one environment's tables (environments are isolated: docs/config.md "Project and environments"). */
export function environmentSchema(environment: string): string {
  return `env_${environment}`;
}

/** svcgen's own tables (keys, tokens, and later users, sessions, webhooks) live in this schema. */
export const SYSTEM_SCHEMA = 'svcgen';

export type Row = Record<string, unknown>;

export interface Queryable {
  query<R = Row>(text: string, values?: readonly unknown[]): Promise<R[]>;
  /** Rows as arrays of column values: no per-row object is built (the hot read path). */
  queryArrays(text: string, values?: readonly unknown[]): Promise<unknown[][]>;
}

// Statement names are derived from the SQL text so every connection prepares each statement once.
const statementNames = new Map<string, string>();
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (!name) {
    name = `s${createHash('sha1').update(text).digest('base64url').slice(0, 16)}`;
    if (statementNames.size < 10_000) statementNames.set(text, name);
  }
  return name;
}

/**
 * pg copies every query config it is given (its own properties, one property descriptor each,
 * keeping the prototype), which cost a few µs per statement. So the fixed part of a statement's
 * config (text, name, row mode) is built once per statement and kind and is the prototype of the
 * per-call config, whose one own property is `values`: the copy pg makes is then that one property.
 */
type ConfigKind = 'named' | 'namedArrays' | 'unnamed' | 'unnamedArrays';
const statementConfigs = new Map<string, Partial<Record<ConfigKind, object>>>();
function queryConfig(text: string, values: readonly unknown[], named: boolean, arrays: boolean): pg.QueryConfig {
  let configs = statementConfigs.get(text);
  if (!configs) {
    configs = {};
    if (statementConfigs.size < 10_000) statementConfigs.set(text, configs);
  }
  const kind: ConfigKind = named ? (arrays ? 'namedArrays' : 'named') : arrays ? 'unnamedArrays' : 'unnamed';
  let fixed = configs[kind];
  if (!fixed) {
    fixed = { text };
    if (named) (fixed as { name?: string }).name = statementName(text);
    if (arrays) (fixed as { rowMode?: string }).rowMode = 'array';
    configs[kind] = fixed;
  }
  const config = Object.create(fixed) as pg.QueryConfig;
  config.values = values as unknown[];
  return config;
}

class ClientQueries implements Queryable {
  constructor(
    private readonly client: pg.Pool | pg.PoolClient,
    private readonly onQuery?: (text: string) => void,
    /** false behind a transaction pooler: the next statement may reach a connection that never prepared it. */
    private readonly named = true,
  ) {}

  async query<R = Row>(text: string, values: readonly unknown[] = []): Promise<R[]> {
    this.onQuery?.(text);
    const result = await this.client.query<R & pg.QueryResultRow>(queryConfig(text, values, this.named, false));
    return result.rows;
  }

  async queryArrays(text: string, values: readonly unknown[] = []): Promise<unknown[][]> {
    this.onQuery?.(text);
    const result = await this.client.query<unknown[]>(
      queryConfig(text, values, this.named, true) as pg.QueryArrayConfig,
    );
    return result.rows as unknown[][];
  }
}

export interface Database extends Queryable {
  readonly pool: pg.Pool;
  /** Runs `work` in one transaction; it commits when `work` resolves and rolls back when it throws. */
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs plain SQL (several statements allowed, no parameters). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * A Database whose statements all run in the open transaction `tx`, on its one connection: code
 * written for a Database takes part in the caller's transaction unchanged. Its
 * `transaction()` nests as a SAVEPOINT, so a handler's own transaction (the bulk writes') commits
 * or rolls back with the enclosing one, and a failure inside it rolls back to the savepoint only.
 * `exec` runs one statement on the transaction; `pool` is the whole pool, which is not bound to the
 * transaction (readiness and metrics read it; statements must go through query/queryArrays);
 * `close` is refused, since the transaction's owner releases the connection.
 * Nested transactions run one at a time, as they do on one connection.
 */
export function transactionDatabase(pool: pg.Pool, tx: Queryable): Database {
  let depth = 0;
  const bound: Database = {
    pool,
    query: (text, values) => tx.query(text, values),
    queryArrays: (text, values) => tx.queryArrays(text, values),
    async transaction(work) {
      const savepoint = `svcgen_nested_${++depth}`;
      const mark = commitMark(bound);
      try {
        await tx.query(`SAVEPOINT ${savepoint}`);
        try {
          const result = await work(bound);
          await tx.query(`RELEASE SAVEPOINT ${savepoint}`);
          return result;
        } catch (error) {
          // When even this fails the connection is gone; the enclosing transaction fails with it.
          await tx.query(`ROLLBACK TO SAVEPOINT ${savepoint}`).catch(() => {});
          await tx.query(`RELEASE SAVEPOINT ${savepoint}`).catch(() => {});
          dropCommitCallbacks(bound, mark);
          throw error;
        }
      } finally {
        depth--;
      }
    },
    async exec(sql) {
      await tx.query(sql);
    },
    close: () => Promise.reject(new Error('a transaction-bound database is closed by the owner of its transaction')),
  };
  enclosingTransaction.set(bound, tx);
  return bound;
}

/**
 * transactionDatabase over `tx` that runs statements only while `open()` holds, and rejects with
 * `closed()` after: what user code's context runs on (runtime/data/hooks.ts), so that a hook
 * abandoned at its timeout, or code it left running, cannot send statements into a transaction
 * that has ended, or into the next request's on the same connection. It is part of `tx`'s
 * transaction for insideTransaction and onCommit.
 */
export function gatedTransaction(pool: pg.Pool, tx: Queryable, open: () => boolean, closed: () => Error): Database {
  const gate: Queryable = {
    query: (text, values) => (open() ? tx.query(text, values) : Promise.reject(closed())),
    queryArrays: (text, values) => (open() ? tx.queryArrays(text, values) : Promise.reject(closed())),
  };
  enclosingTransaction.set(gate, tx);
  return transactionDatabase(pool, gate);
}

// timestamp without time zone (Prisma's DateTime) holds UTC; read it back as UTC, not local time.
const TIMESTAMP_OID = 1114;
const types = {
  getTypeParser(oid: number, format?: string) {
    if (oid === TIMESTAMP_OID) return (value: string) => new Date(`${value.replace(' ', 'T')}Z`);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

export interface DatabaseOptions {
  /** Pool size (database.poolSize). */
  max?: number;
  /** statement_timeout of every statement, in ms (database.statementTimeoutMs); 0 or absent: none. */
  statementTimeoutMs?: number;
  /**
   * Where the timeout is set. 'startup' (default): as a connection option, so it costs nothing per
   * statement and holds for every statement on a direct or session-pooled connection.
   * 'transaction': `SET LOCAL` at each BEGIN, for a transaction-pooling PgBouncer, which refuses
   * (or with ignore_startup_parameters silently drops) startup options it does not track; there,
   * single statements outside a transaction are bounded by the role's own statement_timeout
   * (`ALTER ROLE ... SET statement_timeout`) or PgBouncer's query_timeout.
   */
  statementTimeoutVia?: 'startup' | 'transaction';
  /**
   * The URL is a transaction-pooling PgBouncer's (1.18 as Debian 12 ships it): no startup options
   * (so no TimeZone either: the database's default must be UTC, which startServer checks), the
   * statement timeout set per transaction, and unnamed statements only, since a named statement
   * prepared on one server connection is unknown on the next (PgBouncer < 1.21 does not track them).
   */
  transactionPooler?: boolean;
  /** How long pool.connect() may wait for a free connection or a new one (database.poolWaitTimeoutMs). */
  poolWaitTimeoutMs?: number;
  onQuery?: (text: string) => void;
}

export function openDatabase(url: string, options: DatabaseOptions = {}): Database {
  const timeoutMs = options.statementTimeoutMs ?? 0;
  const pooler = options.transactionPooler ?? false;
  const via = pooler ? 'transaction' : (options.statementTimeoutVia ?? 'startup');
  // DateTime columns are `timestamp(3)` holding UTC (as Prisma writes them): pin the session time
  // zone so now() and CURRENT_TIMESTAMP defaults are stored as UTC too.
  const pool = newPool({
    ...connectionConfig(url),
    max: options.max ?? 10,
    types: types as pg.CustomTypesConfig,
    options: pooler
      ? undefined
      : `-c TimeZone=UTC${timeoutMs > 0 && via === 'startup' ? ` -c statement_timeout=${timeoutMs}` : ''}`,
    // Without a bound, a request waits for a connection for as long as the database is away.
    connectionTimeoutMillis: options.poolWaitTimeoutMs ?? 0,
    // A peer that vanished without closing (host down, network cut) is noticed instead of hanging.
    keepAlive: true,
  });
  const begin = timeoutMs > 0 && via === 'transaction' ? `BEGIN; SET LOCAL statement_timeout = ${timeoutMs}` : 'BEGIN';
  const queries = new ClientQueries(pool, options.onQuery, !pooler);
  return {
    pool,
    query: (text, values) => queries.query(text, values),
    queryArrays: (text, values) => queries.queryArrays(text, values),
    async transaction(work) {
      let tx: ClientQueries | undefined;
      // A connection that broke, or cannot even roll back, is closed rather than given to the next request.
      const result = await withConnection(pool, async (client, discard) => {
        tx = new ClientQueries(client, options.onQuery, !pooler);
        openTransactions.add(tx);
        let committed = false;
        try {
          await client.query(begin);
          const result = await work(tx);
          await client.query('COMMIT');
          committed = true;
          return result;
        } catch (error) {
          await client.query('ROLLBACK').catch(discard);
          throw error;
        } finally {
          openTransactions.delete(tx);
          transactionEnded(tx, committed);
        }
      });
      // A change announced to the other processes is known to all of them before the caller hears it is done.
      if (transactionAnnounced(tx!)) await announcementSettled();
      return result;
    },
    async exec(sql) {
      await pool.query(sql);
    },
    close: () => pool.end(),
  };
}

/**
 * Behind a transaction pooler no connection option sets TimeZone, so sessions keep the database's
 * default; `timestamp` columns hold UTC (now() defaults included), so anything else is refused.
 */
export async function requireUtcSessions(db: Queryable): Promise<void> {
  // Offsets in winter and summer: a zone with a UTC offset of 0 all year is as good as UTC.
  const [row] = await db.query<{ zone: string; utc: boolean; database: string; role: string }>(
    `SELECT current_setting('TimeZone') AS zone, current_database() AS database, current_user AS role,
       EXTRACT(timezone FROM '2000-01-01 00:00+00'::timestamptz) = 0 AND EXTRACT(timezone FROM '2000-07-01 00:00+00'::timestamptz) = 0 AS utc`,
  );
  if (row!.utc) return;
  throw new Error(
    `the pooled database connection's TimeZone is ${row!.zone}, not UTC, and through a transaction pooler svcgen cannot set it per connection: ` +
      `run ALTER DATABASE ${ident(row!.database)} SET TimeZone TO 'UTC' (or ALTER ROLE ${ident(row!.role)} SET TimeZone TO 'UTC'), then RECONNECT in PgBouncer's admin console`,
  );
}
