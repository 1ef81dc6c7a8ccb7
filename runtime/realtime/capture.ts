/**
 * Capture for live subscribers (docs/realtime.md "From a write to a subscriber"). Appended after
 * the webhook capture CTEs (runtime/webhooks/capture.ts) of a data statement: while any process
 * holds a live subscriber for the table (an unexpired row in svcgen.live_interest), every changed
 * row gets an event, whether or not a webhook wants it, and the statement's event ids go out on
 * the shared channel by NOTIFY, which PostgreSQL delivers on commit, in commit order, and never for
 * a rolled-back write. Events for live subscribers alone get no delivery. With no live subscriber
 * the statement pays one index probe more.
 */
import { fullRecord } from '../query/compile-read.ts';
import { newAlias } from '../query/compile-condition.ts';
import { CHANGED_COLUMN, type CaptureSite } from '../webhooks/capture.ts';
import { newIdSql } from '../webhooks/queue.ts';

/** The topic of a statement's event ids on the channel: `<environment>\t<table>\t<id>,<id>,...`. */
export const LIVE_TOPIC = 'live';

/** CTEs to append after captureEvents' (they read its `hook`, `event` and `fanout`). */
export function captureLive(site: CaptureSite): string[] {
  const { scope, table } = site;
  const env = scope.params.add(scope.environment);
  const name = scope.params.add(table.spec.name);
  const op = scope.params.add(site.operation);
  const x = newAlias(scope);
  const changed = site.changed ? `${x}."${CHANGED_COLUMN}"` : `'{}'::text[]`;
  return [
    `live AS (SELECT 1 FROM svcgen.live_interest
       WHERE environment = ${env} AND table_name = ${name} AND expires_at > now() LIMIT 1)`,
    // Rows with a webhook: `event` has them all and the webhook capture wrote those a webhook matched.
    // Rows without: built here. n keeps the statement's row order.
    `live_event AS (
       SELECT event.id, event.record, event.changed, event.n, event.id IN (SELECT event_id FROM fanout) AS written
         FROM event WHERE EXISTS (SELECT 1 FROM live)
       UNION ALL
       SELECT ${newIdSql('evt_')}, ${fullRecord(table, x)}, ${changed}, row_number() OVER (), false
         FROM ${site.rows} ${x} WHERE EXISTS (SELECT 1 FROM live) AND NOT EXISTS (SELECT 1 FROM hook))`,
    `live_row AS (INSERT INTO svcgen.webhook_events (id, environment, table_name, operation, record, changed_fields)
       SELECT id, ${env}, ${name}, ${op}, record, changed FROM live_event WHERE NOT written)`,
    // live_notify answers true: this inserts nothing, and is here only to run it (an unreferenced
    // CTE runs only when it modifies data). No live subscriber: no row, no NOTIFY.
    `live_notice AS (INSERT INTO svcgen.live_interest (environment, table_name, instance, expires_at)
       SELECT NULL, NULL, NULL, NULL FROM (
         SELECT svcgen.live_notify(${env}, ${name}, array_agg(id ORDER BY n)) AS sent FROM live_event HAVING count(*) > 0
       ) notice WHERE NOT notice.sent)`,
  ];
}
