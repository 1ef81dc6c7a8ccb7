/**
 * Idempotency-Key on POST (docs/api.md §5.16): per caller, project, environment and key; kept
 * 24 h; the same key with another body → 422; while the first call runs → 409; a replay answers
 * with the first status, kept headers (Location) and body plus `Idempotency-Replayed: true`.
 *
 * A keyed request is one transaction on one connection:
 *   1. `pg_try_advisory_xact_lock(namespace, hash of caller/project/environment/key)`. Not taken →
 *      409: another request with the key holds it, and it holds it exactly as long as its
 *      transaction lives (a crashed server's connection takes the lock with it; no timer).
 *   2. Taken → a committed, unexpired record of the key answers: 422 for another request, the
 *      replay for the same one.
 *   3. None → the handler runs with that transaction as its database, and the record is written in
 *      the same transaction. Both commit together or not at all, so after a crash a retry either
 *      replays a committed write or runs an uncommitted one (once: the lock serialises retries).
 *      A handler error rolls everything back and stores nothing: the key can be used again.
 * Advisory transaction locks and the record live in the transaction, so this holds across server
 * processes and through a transaction-pooling PgBouncer.
 *
 * svcgen.idempotency keeps its shape: `state` is always 'done' now. A 'running' row can only be a
 * leftover of an older version (which wrote the claim apart from the data); it answers nothing and
 * is replaced by the next run of its key.
 */
import { createHash } from 'node:crypto';
import { againOnConflict, transactionDatabase, type Database } from '../db/index.ts';
import { header, Problem, type ApiRequest, type Reply } from '../http/index.ts';
import type { Tenant } from '../tenancy/index.ts';

const RETENTION = "interval '24 hours'";
/** The first key of svcgen's idempotency advisory locks ('svcg'); the second is the key's hash. */
export const IDEMPOTENCY_LOCK_NAMESPACE = 0x73766367;
const REPLAYED_HEADERS = ['location', 'content-type', 'preference-applied'];

interface StoredReply {
  request_hash: string;
  status: number;
  headers: Record<string, string>;
  body: string | null;
}

/** The second advisory-lock key of an idempotency key: 32 bits of a hash of who and where it is. */
export function idempotencyLockKey(caller: string, projectId: string, environment: string, key: string): number {
  return createHash('sha256')
    .update(JSON.stringify([caller, projectId, environment, key]))
    .digest()
    .readInt32BE(0);
}

/**
 * Runs `handle` once per key: without an Idempotency-Key header it runs on `db` as it is; with one,
 * in one transaction with the key's record (see above), its database bound to that transaction.
 */
export async function withIdempotency(
  db: Database,
  req: ApiRequest,
  caller: string,
  tenant: Tenant,
  handle: (db: Database) => Promise<Reply>,
): Promise<Reply> {
  const key = header(req, 'idempotency-key');
  if (key === undefined) return handle(db);
  if (key.length === 0 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new Problem('bad-request', 'Idempotency-Key must be 1 to 255 visible ASCII characters', [
      { field: 'Idempotency-Key', rule: 'format', message: '1 to 255 visible ASCII characters' },
    ]);
  }
  const body = await req.readBody();
  const requestHash = createHash('sha256')
    .update(`${req.method} ${req.path}\n`)
    .update(body ?? Buffer.alloc(0))
    .digest('hex');
  const ids = [caller, tenant.projectId, tenant.environment, key];
  // The handler's writes, its answer and the key are one transaction: rolled back for a concurrent
  // one, it changed nothing and runs again whole (docs/api.md §6.2 "Concurrent writes").
  return againOnConflict(db, () =>
    db.transaction(async (tx) => {
      const [lock] = await tx.query<{ taken: boolean }>('SELECT pg_try_advisory_xact_lock($1, $2) AS taken', [
        IDEMPOTENCY_LOCK_NAMESPACE,
        idempotencyLockKey(caller, tenant.projectId, tenant.environment, key),
      ]);
      if (!lock!.taken)
        throw new Problem('conflict', 'a request with this Idempotency-Key is still running; retry later');
      const [first] = await tx.query<StoredReply>(
        `SELECT request_hash, status, headers, body FROM svcgen.idempotency
       WHERE caller = $1 AND project_id = $2 AND environment = $3 AND key = $4 AND state = 'done' AND expires_at > now()`,
        ids,
      );
      if (first) {
        if (first.request_hash !== requestHash) {
          throw new Problem(
            'validation',
            'this Idempotency-Key was already used with a different request; use a new key',
            [{ field: 'Idempotency-Key', rule: 'reused', message: 'the key was used with a different request' }],
          );
        }
        return {
          status: first.status,
          headers: { ...first.headers, 'idempotency-replayed': 'true' },
          body: first.body ?? undefined,
        };
      }
      const reply = await handle(transactionDatabase(db.pool, tx));
      const kept = Object.fromEntries(
        Object.entries(reply.headers ?? {}).filter(([k]) => REPLAYED_HEADERS.includes(k.toLowerCase())),
      );
      // An expired record not pruned yet, or an older version's 'running' leftover, is replaced. A
      // live record cannot appear while we hold the lock; if one did, this write is refused, not doubled.
      const stored = await tx.query(
        `INSERT INTO svcgen.idempotency AS i (caller, project_id, environment, key, request_hash, state, status, headers, body, expires_at)
       VALUES ($1, $2, $3, $4, $5, 'done', $6, $7, $8, now() + ${RETENTION})
       ON CONFLICT (caller, project_id, environment, key) DO UPDATE
         SET request_hash = EXCLUDED.request_hash, state = 'done', status = EXCLUDED.status, headers = EXCLUDED.headers,
             body = EXCLUDED.body, created_at = now(), expires_at = EXCLUDED.expires_at
         WHERE i.expires_at <= now() OR i.state <> 'done'
       RETURNING 1`,
        [...ids, requestHash, reply.status, JSON.stringify(kept), reply.body ?? null],
      );
      if (stored.length === 0)
        throw new Problem('conflict', 'a request with this Idempotency-Key is still running; retry later');
      return reply;
    }),
  );
}

/** Drops expired entries (called now and then, off the request path). */
export async function pruneIdempotency(db: Database): Promise<void> {
  await db.query('DELETE FROM svcgen.idempotency WHERE expires_at < now()').catch(() => {});
}

/** A key's validity, as withIdempotency checks it: the key, or undefined when the request sends none. */
export function idempotencyKeyOf(req: ApiRequest): string | undefined {
  const key = header(req, 'idempotency-key');
  if (key === undefined) return undefined;
  if (key.length === 0 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new Problem('bad-request', 'Idempotency-Key must be 1 to 255 visible ASCII characters', [
      { field: 'Idempotency-Key', rule: 'format', message: '1 to 255 visible ASCII characters' },
    ]);
  }
  return key;
}

/**
 * A keyed request whose body is a stream too large to hold (a file upload, docs/storage.md
 * "Idempotency-Key"). Its request hash is known only once the body has streamed, and holding a
 * transaction (a pool connection) for as long as an upload lasts would let a few slow clients take
 * the pool, so the key is claimed in a short transaction of its own before the body is read, as a
 * 'running' record that expires after `claimSeconds` (the longest an upload may run):
 * - 'first': nobody used the key; finish() stores the answer in the transaction of the upload's
 *   row, release() gives the key back when the upload fails;
 * - 'seen': a finished request used it; compare the request hash, then replay or refuse (422);
 * - another request still holds it → 409. A crashed server's claim holds the key until it expires.
 */
export type StreamedClaim =
  | {
      readonly kind: 'first';
      finish(tx: Database, requestHash: string, reply: Reply): Promise<void>;
      release(): Promise<void>;
    }
  | { readonly kind: 'seen'; answer(requestHash: string): Reply };

export async function claimStreamedKey(
  db: Database,
  key: string,
  caller: string,
  tenant: Tenant,
  claimSeconds: number,
): Promise<StreamedClaim> {
  const ids = [caller, tenant.projectId, tenant.environment, key];
  const found = await db.transaction(async (tx) => {
    const [lock] = await tx.query<{ taken: boolean }>('SELECT pg_try_advisory_xact_lock($1, $2) AS taken', [
      IDEMPOTENCY_LOCK_NAMESPACE,
      idempotencyLockKey(caller, tenant.projectId, tenant.environment, key),
    ]);
    if (!lock!.taken) throw stillRunning();
    const [row] = await tx.query<StoredReply & { state: string }>(
      `SELECT state, request_hash, status, headers, body FROM svcgen.idempotency
       WHERE caller = $1 AND project_id = $2 AND environment = $3 AND key = $4 AND expires_at > now()`,
      ids,
    );
    if (row?.state === 'running') throw stillRunning();
    if (row) return row;
    await tx.query(
      `INSERT INTO svcgen.idempotency AS i (caller, project_id, environment, key, request_hash, state, expires_at)
       VALUES ($1, $2, $3, $4, '', 'running', now() + make_interval(secs => $5))
       ON CONFLICT (caller, project_id, environment, key) DO UPDATE
         SET request_hash = '', state = 'running', status = NULL, headers = NULL, body = NULL, created_at = now(),
             expires_at = EXCLUDED.expires_at`,
      [...ids, claimSeconds],
    );
    return undefined;
  });
  if (found) {
    return {
      kind: 'seen',
      answer(requestHash) {
        if (found.request_hash !== requestHash) throw reused();
        return {
          status: found.status,
          headers: { ...found.headers, 'idempotency-replayed': 'true' },
          body: found.body ?? undefined,
        };
      },
    };
  }
  return {
    kind: 'first',
    async finish(tx, requestHash, reply) {
      const kept = Object.fromEntries(
        Object.entries(reply.headers ?? {}).filter(([k]) => REPLAYED_HEADERS.includes(k.toLowerCase())),
      );
      const stored = await tx.query(
        `UPDATE svcgen.idempotency SET request_hash = $5, state = 'done', status = $6, headers = $7, body = $8,
           expires_at = now() + ${RETENTION}
         WHERE caller = $1 AND project_id = $2 AND environment = $3 AND key = $4 AND state = 'running'
         RETURNING 1`,
        [...ids, requestHash, reply.status, JSON.stringify(kept), reply.body ?? null],
      );
      // The claim expired and another request took the key meanwhile: this one is not stored twice.
      if (stored.length === 0) throw stillRunning();
    },
    async release() {
      await db
        .query(
          `DELETE FROM svcgen.idempotency
           WHERE caller = $1 AND project_id = $2 AND environment = $3 AND key = $4 AND state = 'running'`,
          ids,
        )
        .catch(() => {});
    },
  };
}

function stillRunning(): Problem {
  return new Problem('conflict', 'a request with this Idempotency-Key is still running; retry later');
}

function reused(): Problem {
  return new Problem('validation', 'this Idempotency-Key was already used with a different request; use a new key', [
    { field: 'Idempotency-Key', rule: 'reused', message: 'the key was used with a different request' },
  ]);
}
