/**
 * Where webhook deliveries wait: graphile-worker's queue (runtime/db/job-queue.ts), one job per
 * attempt; first attempts come from the outbox (runtime/events/outbox.ts).
 */
import { QUEUE_SCHEMA, type Queryable } from '../db/index.ts';
import { drainOutboxSql } from '../events/index.ts';

/**
 * The graphile-worker task that makes delivery attempts: its payload is `{ id }` (one delivery,
 * its next attempt) or `{ ids }` (first attempts of a batch drained from the outbox).
 */
export const DELIVER_TASK = 'svcgen_webhook_delivery';

/**
 * graphile-worker's own retries cover only failures of the task itself (the database going away):
 * the delivery schedule (`webhooks.retryDelaysMs`) is kept by the task, one job per attempt.
 */
export const TASK_MAX_ATTEMPTS = 25;

/**
 * SQL: queue one job per delivery id in `ids` (an expression of type text[]), to run at `runAt`
 * (an expression that may name the id as `d`). Jobs are keyed by the delivery, so queueing one
 * again replaces a waiting job instead of adding a second. An empty list calls nothing (and wakes
 * no worker), and answers no row.
 *
 * Answers `missed`: the ids that got no job. graphile-worker's add_jobs queues nothing for a key
 * whose waiting job a worker locks between its two statements (graphile/worker#580). Run such
 * statements with `queueDeliveries`, which queues those again.
 */
export function enqueueSql(ids: string, runAt = 'now()'): string {
  return `SELECT ARRAY(SELECT unnest(queue_ids.ids) EXCEPT SELECT job.key FROM ${QUEUE_SCHEMA}.add_jobs(ARRAY(
      SELECT ROW('${DELIVER_TASK}', json_build_object('id', d), NULL, ${runAt}, ${TASK_MAX_ATTEMPTS}, d, NULL, NULL)::${QUEUE_SCHEMA}.job_spec
      FROM unnest(queue_ids.ids) AS d)) job) AS missed
    FROM (SELECT ${ids} AS ids) queue_ids
    WHERE cardinality(queue_ids.ids) > 0`;
}

/** The row of a statement that ends with `enqueueSql` (none when it had no id to queue). */
interface Queued {
  missed: string[] | null;
}

/** Queues the ids again, each at its delivery's next attempt; answers those missed once more. */
const QUEUE_AGAIN = enqueueSql('$1::text[]', '(SELECT next_attempt_at FROM svcgen.webhook_deliveries WHERE id = d)');

/**
 * Runs `sql`, a statement whose result has the `missed` column of `enqueueSql`, and answers its
 * row; then queues the missed deliveries again. A later statement sees the locked job that hid the
 * key from add_jobs, so it frees the key and queues a new job; a job too many is harmless (the
 * lease lets one attempt through). What still misses after a few tries waits for the worker's
 * sweep of deliveries without a job.
 */
export async function queueDeliveries<Row extends object = object>(
  db: Queryable,
  sql: string,
  values: unknown[] = [],
): Promise<(Row & Queued) | undefined> {
  const [row] = await db.query<Row & Queued>(sql, values);
  let left = row?.missed;
  for (let tries = 0; left?.length && tries < 3; tries++) {
    const [again] = await db.query<Queued>(QUEUE_AGAIN, [left]);
    left = again?.missed;
  }
  return row;
}

/** The outbox drain of runtime/events/outbox.ts, queueing DELIVER_TASK jobs. */
export const DRAIN_OUTBOX = drainOutboxSql({ task: DELIVER_TASK, maxAttempts: TASK_MAX_ATTEMPTS });
