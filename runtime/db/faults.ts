/**
 * Which errors mean "the database cannot answer right now" rather than "this request is wrong" or
 * "the server has a bug". Requests that hit one get a retryable 503 (runtime/http/reply.ts), and
 * /readyz reports it; nothing else in the runtime needs to know pg's or Node's error shapes.
 */

import { insideTransaction } from './announcements.ts';
import { raisedAtConnectionStart } from './client.ts';
import type { Queryable } from './pool.ts';

export type DatabaseFaultKind =
  /** Unreachable, refusing, restarting, shutting down, or the connection dropped mid-request. */
  | 'unavailable'
  /** PostgreSQL cancelled the statement at `statement_timeout`. */
  | 'statement-timeout'
  /** Every pool connection stayed busy past the pool wait timeout. */
  | 'pool-timeout'
  /** The statement lost a lock conflict with a concurrent transaction and its transaction was rolled back. */
  | 'lock-conflict';

export interface DatabaseFault {
  kind: DatabaseFaultKind;
  /** Says what happened without SQL text, table contents or addresses. */
  detail: string;
}

/** Socket-level failures: the database host is gone, refusing, or the connection broke. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * SQLSTATEs of a server that is going away or cannot take us: admin/crash shutdown (57P01, 57P02),
 * starting up or in recovery (57P03), database dropped under us (57P04), too many connections and
 * other resource shortages (53xxx), and the whole connection-exception class (08xxx).
 */
function unavailableSqlState(code: string): boolean {
  return (
    code.startsWith('08') ||
    code.startsWith('53') ||
    code === '57P01' ||
    code === '57P02' ||
    code === '57P03' ||
    code === '57P04' ||
    code === '57P05'
  );
}

// pg and pg-pool raise these as plain Errors, without a code.
const POOL_WAIT_MESSAGE = 'timeout exceeded when trying to connect';
const UNAVAILABLE_MESSAGES = [
  'Connection terminated',
  'Client has encountered a connection error and is not queryable',
  'timeout expired',
  'Cannot use a pool after calling end on the pool',
];

/**
 * Whether PostgreSQL rolled the statement's transaction back because it lost to a concurrent one
 * (deadlock victim, 40P01; serialization failure, 40001): the same statement run again normally
 * goes through. (A lock_timeout, 55P03, is not: it would wait as long again.)
 */
function lostToConcurrentWrite(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '40P01' || code === '40001';
}

/** Runs of a write that PostgreSQL rolls back for a concurrent one, before its error (a 503). */
const CONFLICT_TRIES = 3;

/**
 * Runs `attempt` on `db`, and again (CONFLICT_TRIES runs in all) while PostgreSQL rolls it back for
 * a concurrent transaction, after `forget` drops what a rolled-back run recorded outside the
 * database: rolled back, it changed nothing, and running it again is what a client sending the
 * request again would do. When `db` is inside a transaction, the rollback took that whole
 * transaction, so `attempt` runs once and its owner (with its own againOnConflict) runs it all again.
 */
export async function againOnConflict<T>(db: Queryable, attempt: () => Promise<T>, forget?: () => void): Promise<T> {
  const tries = insideTransaction(db) ? 1 : CONFLICT_TRIES;
  for (let run = 1; ; run++) {
    try {
      return await attempt();
    } catch (error) {
      if (run >= tries || !lostToConcurrentWrite(error)) throw error;
      forget?.();
    }
  }
}

export function databaseFault(error: unknown): DatabaseFault | undefined {
  // A fault may be wrapped (pg-pool puts the socket error in `cause`, AggregateError lists attempts).
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const fault = directFault(e as { code?: unknown; message?: unknown; errors?: unknown });
    if (fault) return fault;
    const nested = (e as { errors?: unknown[] }).errors;
    if (Array.isArray(nested))
      for (const inner of nested) {
        const f = databaseFault(inner);
        if (f) return f;
      }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function directFault(e: { code?: unknown; message?: unknown; severity?: unknown }): DatabaseFault | undefined {
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : '';
  if (code === '57014') {
    // 57014 is also a cancel by pg_cancel_backend(); only statement_timeout's names the timeout.
    return /statement timeout/.test(message)
      ? {
          kind: 'statement-timeout',
          detail: 'the database statement took longer than the statement timeout and was cancelled',
        }
      : { kind: 'unavailable', detail: 'the database cancelled the statement' };
  }
  // Concurrent writes, not a fault of this request or of the server: PostgreSQL rolled back the
  // transaction, and the same request sent again normally goes through.
  if (code === '40P01') {
    return { kind: 'lock-conflict', detail: 'the write deadlocked with a concurrent one and was rolled back' };
  }
  if (code === '40001') {
    return {
      kind: 'lock-conflict',
      detail: 'the write could not be serialized with a concurrent one and was rolled back',
    };
  }
  if (code === '55P03') {
    return {
      kind: 'lock-conflict',
      detail: "a lock the write needed was not granted within the database's lock_timeout",
    };
  }
  if (/^[0-9A-Z]{5}$/.test(code) && unavailableSqlState(code)) {
    return {
      kind: 'unavailable',
      detail: 'the database is not accepting connections (restarting, shutting down or overloaded)',
    };
  }
  if (code === '55000' && (raisedAtConnectionStart(e) || e.severity === 'FATAL')) {
    // object_not_in_prerequisite_state is also an ordinary statement's error (currval before
    // nextval, a table with pending trigger events): only refusing or ending the session (the
    // database set to ALLOW_CONNECTIONS false) makes it the database's unavailability
    // (docs/deployment.md "What survives what").
    return { kind: 'unavailable', detail: 'the database is not accepting connections' };
  }
  if (code === '25006') {
    // read_only_sql_transaction on svcgen's own writes: the server is a standby (a failover under
    // way, or an address still naming the old primary), docs/deployment.md "What survives what".
    return { kind: 'unavailable', detail: 'the database accepts no writes now (a standby, or a failover under way)' };
  }
  if (NETWORK_CODES.has(code)) return { kind: 'unavailable', detail: 'the database cannot be reached' };
  // Refused at connection start: the database was dropped or renamed (3D000), or the role or its
  // password is no longer accepted (28xxx). Nothing the caller can fix; the log says which.
  if (code === '3D000' || code === '28000' || code === '28P01') {
    return { kind: 'unavailable', detail: "the database refused this server's connection" };
  }
  if (message === POOL_WAIT_MESSAGE) {
    return { kind: 'pool-timeout', detail: 'every database connection stayed busy past the pool wait timeout' };
  }
  if (UNAVAILABLE_MESSAGES.some((m) => message.startsWith(m)))
    return { kind: 'unavailable', detail: 'the connection to the database was lost' };
  return undefined;
}
