/**
 * Where webhook deliveries wait: graphile-worker, installed in its own schema so that a project
 * using graphile-worker for its own jobs keeps its queue to itself.
 */
export const QUEUE_SCHEMA = 'svcgen_worker';

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

/** First attempts travel in jobs of this many deliveries, so the queue's own work is shared among them. */
export const DRAIN_JOB_SIZE = 10;

/**
 * SQL: move up to `$1` deliveries from the outbox into jobs of DRAIN_JOB_SIZE, in one statement
 * (an outbox entry leaves exactly when its job exists). Concurrent drainers take disjoint rows.
 */
export const DRAIN_OUTBOX = `
  WITH taken AS (
    DELETE FROM svcgen.webhook_outbox o
    WHERE o.seq IN (SELECT seq FROM svcgen.webhook_outbox ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING o.seq, o.delivery_id),
  chunks AS (
    SELECT (row_number() OVER (ORDER BY seq) - 1) / ${DRAIN_JOB_SIZE} AS chunk, delivery_id FROM taken),
  specs AS (
    SELECT ARRAY(
      SELECT ROW('${DELIVER_TASK}', json_build_object('ids', array_agg(delivery_id)), NULL, now(), ${TASK_MAX_ATTEMPTS}, NULL, NULL, NULL)::${QUEUE_SCHEMA}.job_spec
      FROM chunks GROUP BY chunk) AS list)
  SELECT (SELECT count(*) FROM taken)::int AS drained,
    (SELECT count(*) FROM specs, LATERAL ${QUEUE_SCHEMA}.add_jobs(specs.list) WHERE cardinality(specs.list) > 0)::int AS jobs`;
