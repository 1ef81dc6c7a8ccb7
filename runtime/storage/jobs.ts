/**
 * Bytes leave after their metadata: a delete removes the row and queues a graphile-worker job in
 * the same transaction (retried with graphile-worker's backoff until the backend answers), and a
 * sweep removes what no row refers to (a crash between storing bytes and inserting the row, or mid
 * upload) once it is older than storage.orphanGraceSeconds.
 */
import { Logger, run } from 'graphile-worker';
import { superviseRunner, type SupervisedRunner } from '../db/supervised-runner.ts';
import { connectionConfig, newPool, QUEUE_SCHEMA, type Database, type Queryable } from '../db/index.ts';
import { parseObjectKey, type StorageBackend } from './backend.ts';

export const REMOVE_TASK = 'svcgen_storage_remove';
export const REMOVE_MAX_ATTEMPTS = 12;

/** Queues the removal of `key`'s bytes in the transaction `tx` (it runs only if that commits). */
export async function queueRemoval(tx: Queryable, key: string): Promise<void> {
  await tx.query(
    `SELECT ${QUEUE_SCHEMA}.add_job($1, json_build_object('key', $2::text), max_attempts => $3, job_key => $2::text)`,
    [REMOVE_TASK, key, REMOVE_MAX_ATTEMPTS],
  );
}

export interface RemovalWorker {
  stop(): Promise<void>;
}

/**
 * A small graphile-worker runner that knows only REMOVE_TASK (the queue's schema is installed by
 * the webhooks feature). graphile-worker gives up when the database goes away under it; like the
 * webhook worker's, this runner is started again with backoff until stopped, so the API never
 * goes down with it.
 */
export async function startRemovalWorker(
  directUrl: string,
  backend: StorageBackend,
  log: (message: string) => void,
): Promise<RemovalWorker> {
  // newPool's clients cannot crash the process, also while graphile-worker holds them.
  const pgPool = newPool({ ...connectionConfig(directUrl), max: 2, connectionTimeoutMillis: 5000, keepAlive: true });
  const start = () =>
    run({
      pgPool,
      schema: QUEUE_SCHEMA,
      concurrency: 1,
      pollInterval: 500,
      noHandleSignals: true,
      logger: quietLogger(log),
      // A completion that cannot be written (the database gone) stops the runner instead of rejecting unhandled.
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      taskList: {
        [REMOVE_TASK]: async (payload) => {
          const key = (payload as { key?: unknown } | null)?.key;
          if (typeof key === 'string' && parseObjectKey(key)) await backend.remove(key);
        },
      },
    });
  const failed = (error: unknown) =>
    log(`storage worker stopped: ${error instanceof Error ? error.message : String(error)}; starting it again`);
  let runner: SupervisedRunner;
  try {
    runner = await superviseRunner(start, { ended: failed });
  } catch (error) {
    await pgPool.end().catch(() => {});
    throw error;
  }
  return {
    async stop() {
      await runner.stop().catch(() => {});
      await pgPool.end().catch(() => {});
    },
  };
}

/** graphile-worker's errors and warnings only, marked as the storage worker's. */
function quietLogger(log: (message: string) => void): Logger {
  return new Logger(() => (level, message) => {
    if (level === 'error' || level === 'warning') log(`storage worker: ${message}`);
  });
}

/**
 * Removes stored objects older than `graceSeconds` that no metadata row refers to (and leftover
 * incoming files); the number removed. Young objects are left: their upload may be committing.
 */
export async function sweepOrphans(db: Database, backend: StorageBackend, graceSeconds: number): Promise<number> {
  const cutoff = Date.now() - graceSeconds * 1000;
  const old: string[] = [];
  for await (const object of backend.list()) if (object.modifiedAt.getTime() < cutoff) old.push(object.key);
  let removed = 0;
  for (let i = 0; i < old.length; i += 500) {
    const batch = old.slice(i, i + 500);
    const ids = batch.map((key) => parseObjectKey(key)?.id).filter((id): id is string => id !== undefined);
    const rows = await db.query<{ environment: string; bucket: string; id: string }>(
      `SELECT environment, bucket, id::text FROM svcgen.files WHERE id::text = ANY($1::text[])`,
      [ids],
    );
    const kept = new Set(rows.map((r) => `${r.environment}/${r.bucket}/${r.id}`));
    for (const key of batch) {
      if (kept.has(key)) continue;
      await backend.remove(key).then(
        () => removed++,
        () => {},
      );
    }
  }
  return removed;
}
