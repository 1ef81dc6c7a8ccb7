/**
 * Idempotency-Key on POST (CONTRACT §6): per caller, project, environment and key; kept 24 h; the
 * same key with another body → 422; while the first call runs → 409; a replay answers with the
 * first status, Location and body plus `Idempotency-Replayed: true`. Stored in PostgreSQL, so it
 * holds across server processes; the primary key makes two concurrent first calls one.
 */
import { createHash } from 'node:crypto';
import type { Database } from '../db/index.ts';
import { header, Problem, type ApiRequest, type Reply } from '../http/index.ts';
import type { Tenant } from '../tenancy/index.ts';

const RETENTION = "interval '24 hours'";
/** A 'running' entry older than this belongs to a process that died mid-request: it may be taken over. */
const ABANDONED = "interval '5 minutes'";
const REPLAYED_HEADERS = ['location', 'content-type', 'preference-applied'];

export async function withIdempotency(
  db: Database,
  req: ApiRequest,
  caller: string,
  tenant: Tenant,
  handle: () => Promise<Reply>,
): Promise<Reply> {
  const key = header(req, 'idempotency-key');
  if (key === undefined) return handle();
  if (key.length === 0 || key.length > 255 || !/^[\x21-\x7e]+$/.test(key)) {
    throw new Problem('bad-request', 'Idempotency-Key must be 1 to 255 visible ASCII characters', [
      { field: 'Idempotency-Key', rule: 'format', message: '1 to 255 visible ASCII characters' },
    ]);
  }
  const body = await req.readBody();
  const requestHash = createHash('sha256').update(`${req.method} ${req.path}\n`).update(body ?? Buffer.alloc(0)).digest('hex');
  const ids = [caller, tenant.projectId, tenant.environment, key];
  const claimed = await db.query(
    `INSERT INTO svcgen.idempotency AS i (caller, project_id, environment, key, request_hash, state, expires_at)
     VALUES ($1, $2, $3, $4, $5, 'running', now() + ${RETENTION})
     ON CONFLICT (caller, project_id, environment, key) DO UPDATE
       SET request_hash = EXCLUDED.request_hash, state = 'running', status = NULL, headers = NULL, body = NULL,
           created_at = now(), expires_at = EXCLUDED.expires_at
       WHERE i.expires_at < now() OR (i.state = 'running' AND i.created_at < now() - ${ABANDONED})
     RETURNING 1`,
    [...ids, requestHash],
  );
  if (claimed.length === 0) {
    const rows = await db.query<{ request_hash: string; state: string; status: number; headers: Record<string, string>; body: string | null }>(
      `SELECT request_hash, state, status, headers, body FROM svcgen.idempotency
       WHERE caller = $1 AND project_id = $2 AND environment = $3 AND key = $4`,
      ids,
    );
    const first = rows[0];
    if (!first) return withIdempotency(db, req, caller, tenant, handle); // expired and removed meanwhile
    if (first.request_hash !== requestHash) {
      throw new Problem('validation', 'this Idempotency-Key was already used with a different request; use a new key', [
        { field: 'Idempotency-Key', rule: 'reused', message: 'the key was used with a different request' },
      ]);
    }
    if (first.state === 'running') throw new Problem('conflict', 'a request with this Idempotency-Key is still running; retry later');
    return { status: first.status, headers: { ...first.headers, 'idempotency-replayed': 'true' }, body: first.body ?? undefined };
  }
  let reply: Reply;
  try {
    reply = await handle();
  } catch (error) {
    // Nothing was committed: free the key so the client may retry with it.
    await db.query('DELETE FROM svcgen.idempotency WHERE caller = $1 AND project_id = $2 AND environment = $3 AND key = $4', ids).catch(() => {});
    throw error;
  }
  const kept = Object.fromEntries(Object.entries(reply.headers ?? {}).filter(([k]) => REPLAYED_HEADERS.includes(k.toLowerCase())));
  await db.query(
    `UPDATE svcgen.idempotency SET state = 'done', status = $5, headers = $6, body = $7
     WHERE caller = $1 AND project_id = $2 AND environment = $3 AND key = $4`,
    [...ids, reply.status, JSON.stringify(kept), reply.body ?? null],
  );
  return reply;
}

/** Drops expired entries (called now and then, off the request path). */
export async function pruneIdempotency(db: Database): Promise<void> {
  await db.query('DELETE FROM svcgen.idempotency WHERE expires_at < now()').catch(() => {});
}
