/**
 * Where webhook deliveries wait: graphile-worker, installed in its own schema so that a project
 * using graphile-worker for its own jobs keeps its queue to itself.
 */
import type { Queryable } from '../db/index.ts';

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

/** First attempts travel in jobs of this many deliveries, so the queue's own work is shared among them. */
export const DRAIN_JOB_SIZE = 10;

/**
 * SQL: a new id, the prefix then 32 hex digits laid out as a UUIDv7 (RFC 9562: the time in ms, then
 * random bits). Ids that grow with time append to the primary key and delivery indexes, where
 * random ones would touch a different index page per row (and, after each checkpoint, write that
 * whole page to the WAL again).
 */
export function newIdSql(prefix: string): string {
  return `'${prefix}' || encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
    placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')`;
}

/**
 * SQL: move the oldest rows of the outbox, about `$1` deliveries (at least one row, whole rows
 * only), into the job queue in one statement: each (event, subscription) pair of a data
 * statement's row becomes a delivery, created as of its event (none for a subscription deleted
 * since the write), and the deliveries go into jobs of DRAIN_JOB_SIZE in outbox order. Rows that
 * workers of earlier releases also drain (svcgen.webhook_outbox: deliveries already recorded, as
 * delivery_ids or one delivery_id) go first. An outbox row leaves exactly when its deliveries and
 * jobs exist; concurrent drainers take disjoint rows. Answers the deliveries queued, and whether
 * more waited.
 */
export const DRAIN_OUTBOX = `
  WITH candidates AS (
    SELECT o.seq, cardinality(o.event_ids) AS size FROM svcgen.webhook_event_outbox o
    ORDER BY o.seq LIMIT $1::int FOR UPDATE SKIP LOCKED),
  chosen AS (
    SELECT seq FROM (SELECT seq, sum(size) OVER (ORDER BY seq) - size AS before FROM candidates) c WHERE before < $1::int),
  taken AS (
    DELETE FROM svcgen.webhook_event_outbox o WHERE o.seq IN (SELECT seq FROM chosen)
    RETURNING o.seq, o.event_ids, o.webhook_ids, o.created_at),
  fresh AS (
    SELECT ${newIdSql('del_')} AS delivery_id, p.event_id, p.webhook_id, taken.created_at, taken.seq, p.nth
    FROM taken, unnest(taken.event_ids, taken.webhook_ids) WITH ORDINALITY AS p(event_id, webhook_id, nth)
    WHERE EXISTS (SELECT 1 FROM svcgen.webhooks w WHERE w.id = p.webhook_id)),
  created AS (
    INSERT INTO svcgen.webhook_deliveries (id, webhook_id, event_id, created_at)
    SELECT delivery_id, webhook_id, event_id, created_at FROM fresh),
  earlier AS (
    DELETE FROM svcgen.webhook_outbox o
    WHERE o.seq IN (SELECT seq FROM svcgen.webhook_outbox ORDER BY seq LIMIT $1::int FOR UPDATE SKIP LOCKED)
    RETURNING o.seq, coalesce(o.delivery_ids, ARRAY[o.delivery_id]) AS delivery_ids),
  queued AS (
    SELECT 0 AS source, earlier.seq, d.nth, d.delivery_id
    FROM earlier, unnest(earlier.delivery_ids) WITH ORDINALITY AS d(delivery_id, nth)
    UNION ALL
    SELECT 1, seq, nth, delivery_id FROM fresh),
  chunks AS (
    SELECT (row_number() OVER (ORDER BY source, seq, nth) - 1) / ${DRAIN_JOB_SIZE} AS chunk, source, seq, nth, delivery_id
    FROM queued),
  specs AS (
    SELECT ARRAY(
      SELECT ROW('${DELIVER_TASK}', json_build_object('ids', array_agg(delivery_id ORDER BY source, seq, nth)), NULL, now(), ${TASK_MAX_ATTEMPTS}, NULL, NULL, NULL)::${QUEUE_SCHEMA}.job_spec
      FROM chunks GROUP BY chunk ORDER BY chunk) AS list)
  SELECT (SELECT count(*) FROM chunks)::int AS drained,
    (SELECT count(*) FROM candidates) > (SELECT count(*) FROM chosen) OR (SELECT count(*) FROM candidates) = $1::int
      OR (SELECT count(*) FROM earlier) = $1::int AS more,
    (SELECT count(*) FROM specs, LATERAL ${QUEUE_SCHEMA}.add_jobs(specs.list) WHERE cardinality(specs.list) > 0)::int AS jobs,
    EXISTS (SELECT 1 FROM svcgen.webhooks WHERE active) AS watched`;

/** SQL: the deliveries in the outbox (not yet recorded, or not yet jobs). */
export const OUTBOX_DEPTH = `SELECT ((SELECT coalesce(sum(cardinality(event_ids)), 0) FROM svcgen.webhook_event_outbox)
  + (SELECT coalesce(sum(cardinality(coalesce(delivery_ids, ARRAY[delivery_id]))), 0) FROM svcgen.webhook_outbox))::int`;

/** SQL: the events that outbox rows still name (pruning must keep them). */
export const OUTBOX_EVENTS = 'SELECT unnest(event_ids) AS id FROM svcgen.webhook_event_outbox';
