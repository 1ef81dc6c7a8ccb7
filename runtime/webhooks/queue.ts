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

/** An outbox row's deliveries, in order: a statement's list, or the one delivery of a row of the earlier form. */
const OUTBOX_IDS = 'coalesce(o.delivery_ids, ARRAY[o.delivery_id])';

/**
 * SQL: move the outbox's oldest rows, about `$1` deliveries (at least one row, whole rows only),
 * into jobs of DRAIN_JOB_SIZE in outbox order, in one statement (an outbox row leaves exactly when
 * its jobs exist). Concurrent drainers take disjoint rows. Answers the deliveries moved, and
 * whether more rows were waiting.
 */
export const DRAIN_OUTBOX = `
  WITH candidates AS (
    SELECT o.seq, cardinality(${OUTBOX_IDS}) AS size FROM svcgen.webhook_outbox o
    ORDER BY o.seq LIMIT $1::int FOR UPDATE SKIP LOCKED),
  chosen AS (
    SELECT seq FROM (SELECT seq, sum(size) OVER (ORDER BY seq) - size AS before FROM candidates) c WHERE before < $1::int),
  taken AS (
    DELETE FROM svcgen.webhook_outbox o WHERE o.seq IN (SELECT seq FROM chosen)
    RETURNING o.seq, ${OUTBOX_IDS} AS ids),
  chunks AS (
    SELECT (row_number() OVER (ORDER BY taken.seq, d.nth) - 1) / ${DRAIN_JOB_SIZE} AS chunk, d.nth, taken.seq, d.delivery_id
    FROM taken, unnest(taken.ids) WITH ORDINALITY AS d(delivery_id, nth)),
  specs AS (
    SELECT ARRAY(
      SELECT ROW('${DELIVER_TASK}', json_build_object('ids', array_agg(delivery_id ORDER BY seq, nth)), NULL, now(), ${TASK_MAX_ATTEMPTS}, NULL, NULL, NULL)::${QUEUE_SCHEMA}.job_spec
      FROM chunks GROUP BY chunk ORDER BY chunk) AS list)
  SELECT (SELECT count(*) FROM chunks)::int AS drained,
    (SELECT count(*) FROM candidates) > (SELECT count(*) FROM chosen) OR (SELECT count(*) FROM candidates) = $1::int AS more,
    (SELECT count(*) FROM specs, LATERAL ${QUEUE_SCHEMA}.add_jobs(specs.list) WHERE cardinality(specs.list) > 0)::int AS jobs`;

/** SQL: the deliveries in the outbox (not yet jobs). */
export const OUTBOX_DEPTH = `SELECT coalesce(sum(cardinality(${OUTBOX_IDS})), 0)::int FROM svcgen.webhook_outbox o`;
