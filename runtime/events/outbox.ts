/**
 * The outbox (docs/api.md §8.2): the rows a data statement's capture writes in its own
 * transaction (./capture.ts), one per statement, naming its (event, subscription) pairs, and the
 * statements that read them back: the delivery workers' drain into the job queue, its depth and
 * the events it still names. Live subscribers read the events themselves by id (eventsById).
 */
import { QUEUE_SCHEMA, type Queryable } from '../db/index.ts';
import type { ChangeEvent } from './event.ts';

/** The graphile-worker task a drained delivery is queued for, and that job's own retry limit. */
export interface DeliveryJob {
  readonly task: string;
  readonly maxAttempts: number;
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
 * more waited. The jobs are `job`'s (runtime/webhooks/queue.ts names the delivery task).
 */
export function drainOutboxSql(job: DeliveryJob): string {
  return `
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
      SELECT ROW('${job.task}', json_build_object('ids', array_agg(delivery_id ORDER BY source, seq, nth)), NULL, now(), ${job.maxAttempts}, NULL, NULL, NULL)::${QUEUE_SCHEMA}.job_spec
      FROM chunks GROUP BY chunk ORDER BY chunk) AS list)
  SELECT (SELECT count(*) FROM chunks)::int AS drained,
    (SELECT count(*) FROM candidates) > (SELECT count(*) FROM chosen) OR (SELECT count(*) FROM candidates) = $1::int
      OR (SELECT count(*) FROM earlier) = $1::int AS more,
    (SELECT count(*) FROM specs, LATERAL ${QUEUE_SCHEMA}.add_jobs(specs.list) WHERE cardinality(specs.list) > 0)::int AS jobs,
    EXISTS (SELECT 1 FROM svcgen.webhooks WHERE active) AS watched`;
}

/** SQL: the deliveries in the outbox (not yet recorded, or not yet jobs). */
export const OUTBOX_DEPTH = `SELECT ((SELECT coalesce(sum(cardinality(event_ids)), 0) FROM svcgen.webhook_event_outbox)
  + (SELECT coalesce(sum(cardinality(coalesce(delivery_ids, ARRAY[delivery_id]))), 0) FROM svcgen.webhook_outbox))::int`;

/** SQL: the events that outbox rows still name (pruning must keep them). */
export const OUTBOX_EVENTS = 'SELECT unnest(event_ids) AS id FROM svcgen.webhook_event_outbox';

/** The events with `ids` that still exist (pruning may have removed some), by id. */
export async function eventsById(db: Queryable, ids: readonly string[]): Promise<Map<string, ChangeEvent>> {
  const rows = await db.query<{
    id: string;
    operation: ChangeEvent['operation'];
    record: Record<string, unknown>;
    changed_fields: string[];
    created_at: Date;
  }>('SELECT id, operation, record, changed_fields, created_at FROM svcgen.webhook_events WHERE id = ANY($1::text[])', [
    ids,
  ]);
  return new Map(
    rows.map((r) => [
      r.id,
      {
        id: r.id,
        operation: r.operation,
        record: r.record,
        changedFields: r.changed_fields,
        timestamp: r.created_at.toISOString(),
      },
    ]),
  );
}
