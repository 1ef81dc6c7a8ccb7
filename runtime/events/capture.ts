/**
 * The one place where a data statement records its events (docs/api.md §8.2: an event commits
 * exactly when its mutation does), for webhooks and live subscribers alike. Given the CTE holding
 * the rows a mutation changed, it adds one CTE that builds each row's record once, in row order,
 * and hands them to svcgen.capture_events (runtime/db/system-schema.ts): that function writes one
 * event per row for which at least one active subscription matches (table, operation and filter,
 * as committed when it runs) or which some process's live subscribers want, notifies those
 * subscribers (runtime/realtime/hub.ts), and answers the (event, subscription) pairs in row order,
 * which this CTE writes as the statement's one outbox row. The delivery workers drain the outbox
 * (./outbox.ts): each pair becomes a delivery and its job (runtime/webhooks/queue.ts), off the
 * request's path. (Queueing the job here would NOTIFY from every write, and PostgreSQL commits
 * notifying transactions one at a time.) The statement runs this CTE only on tables that
 * WatchedTables says someone watches; with no subscription for its operation and no live
 * subscriber wanting its rows it pays an index probe or two per row: no record is built, nothing
 * is called or written.
 */
import type { EventOperation } from './event.ts';

/**
 * Capture for live subscribers (docs/realtime.md "From a write to a subscriber"): the capture writes
 * an event for every changed row while any process holds a live subscriber for the table (an
 * unexpired row in svcgen.live_interest), whether or not a webhook wants it, and sends the
 * statement's event ids on the shared channel by NOTIFY (svcgen.live_notify:
 * `<topic>:<environment>\t<table>\t<id>,<id>,...`, 150 ids a message), which PostgreSQL delivers on
 * commit, in commit order, and never for a rolled-back write. Events for live subscribers alone get
 * no delivery. This is the topic of a statement's event ids on the channel.
 */
export const LIVE_TOPIC = 'live';

/** Column of the changed-rows CTE that lists changed field names (UPDATE only). */
export const CHANGED_COLUMN = 'svcgen:changed';
/** Column the capture adds to each changed row: whether a live subscriber's process wants it. */
const LIVE_COLUMN = 'svcgen:live';

/**
 * Where a statement captures: what the query layer's write compiler (runtime/query/compile-write.ts)
 * knows of the statement, given as plain values so that this folder needs nothing from the query layer.
 */
export interface CaptureSite {
  /** The statement's parameters: each value added becomes `$n`, never SQL text. */
  readonly params: { add(value: unknown): string };
  readonly environment: string;
  /** The table's name in the model, as events carry it. */
  readonly table: string;
  readonly operation: EventOperation;
  /** A table alias unused elsewhere in the statement, for the rows of `rows`. */
  readonly alias: string;
  /** SQL: the full record (every field, as JSON) of the row `alias`. */
  readonly record: string;
  /** Name of the CTE whose rows are the after-image (INSERT, UPDATE) or the before-image (DELETE). */
  readonly rows: string;
  /** Whether `rows` carries the CHANGED_COLUMN. */
  readonly changed: boolean;
  /** Name of the capture CTE (default `capture`): a statement that captures for two tables needs two. */
  readonly name?: string;
}

export interface Capture {
  /** CTE definitions to append after the mutation's CTE (all data-modifying: they run unreferenced). */
  readonly ctes: string[];
}

export function captureEvents(site: CaptureSite): Capture {
  const env = site.params.add(site.environment);
  const name = site.params.add(site.table);
  const op = site.params.add(site.operation);
  const x = site.alias;
  // The aggregates read the rows in the statement's order: a multi-row insert returns its rows in
  // the order of its VALUES, so a bulk write's events, and with them the queue, are in item order.
  const changes = site.changed ? `array_agg(to_json(${x}."${CHANGED_COLUMN}"))` : 'NULL::json[]';
  // The table is watched (WatchedTables), but perhaps for other operations only, by live interest
  // that has expired, or by live subscribers who want other rows (their processes' filters, each
  // an object the row must contain, by column: runtime/realtime/hub.ts): a row's record is built
  // only when someone can want it, and a statement none of whose rows is wanted calls nothing.
  const hooked = `EXISTS (SELECT 1 FROM svcgen.webhooks s
      WHERE s.environment = ${env} AND s.table_name = ${name} AND s.active AND ${op} = ANY (s.events))`;
  const live = `EXISTS (SELECT 1 FROM svcgen.live_interest l
      WHERE l.environment = ${env} AND l.table_name = ${name} AND l.expires_at > now()
        AND (l.filters IS NULL OR EXISTS (SELECT 1 FROM jsonb_array_elements(l.filters) f WHERE to_jsonb(${x}) @> f.value)))`;
  return {
    ctes: [
      `${site.name ?? 'capture'} AS (INSERT INTO svcgen.webhook_event_outbox (event_ids, webhook_ids)
         SELECT c.event_ids, c.webhook_ids
         FROM (SELECT array_agg(${site.record}) AS records, ${changes} AS changes, array_agg(${x}."${LIVE_COLUMN}") AS live
           FROM (SELECT ${x}.*, ${live} AS "${LIVE_COLUMN}" FROM ${site.rows} ${x}) ${x}
           WHERE ${x}."${LIVE_COLUMN}" OR ${hooked}) r,
           LATERAL svcgen.capture_events(${env}, ${name}, ${op}, r.records, r.changes, r.live) c
         WHERE r.records IS NOT NULL)`,
    ],
  };
}
