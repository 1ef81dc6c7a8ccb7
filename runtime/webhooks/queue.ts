/**
 * Where webhook deliveries wait: graphile-worker, installed in its own schema so that a project
 * using graphile-worker for its own jobs keeps its queue to itself.
 */
export const QUEUE_SCHEMA = 'svcgen_worker';

/** The graphile-worker task that makes one delivery attempt; its payload is `{ id: <delivery id> }`. */
export const DELIVER_TASK = 'svcgen_webhook_delivery';

/**
 * graphile-worker's own retries cover only failures of the task itself (the database going away):
 * the delivery schedule (`webhooks.retryDelaysMs`) is kept by the task, one job per attempt.
 */
export const TASK_MAX_ATTEMPTS = 25;

/**
 * SQL: queue one job per delivery id in `ids` (an expression of type text[]), to run at `runAt`.
 * Jobs are keyed by the delivery, so queueing one again replaces a waiting job instead of adding
 * a second. An empty list calls nothing (and wakes no worker).
 */
export function enqueueSql(ids: string, runAt = 'now()'): string {
  return `SELECT count(*) FROM (SELECT ${ids} AS ids) queue_ids,
    LATERAL ${QUEUE_SCHEMA}.add_jobs(ARRAY(
      SELECT ROW('${DELIVER_TASK}', json_build_object('id', d), NULL, ${runAt}, ${TASK_MAX_ATTEMPTS}, d, NULL, NULL)::${QUEUE_SCHEMA}.job_spec
      FROM unnest(queue_ids.ids) AS d))
    WHERE cardinality(queue_ids.ids) > 0`;
}
