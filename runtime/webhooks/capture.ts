/**
 * The one place where a data statement records its webhook events (docs/api.md §8.2: an event commits
 * exactly when its mutation does). Given the CTE holding the rows a mutation changed, it adds the
 * CTEs that write one event per row for which at least one active subscription matches (table,
 * operation and filter, as committed when the statement runs), and one outbox row listing every
 * (event, subscription) pair in item order. The delivery workers drain the outbox: each pair
 * becomes a delivery and its job there (runtime/webhooks/queue.ts), off the request's path. (Queueing
 * the job here would NOTIFY from every write, and PostgreSQL commits notifying transactions one at
 * a time.) With no matching subscription the statement pays one index probe: no event JSON is built.
 */
import { fullRecord } from '../query/compile-read.ts';
import { newAlias, type Scope } from '../query/compile-condition.ts';
import type { CatalogTable } from '../query/catalog.ts';
import { newIdSql } from './queue.ts';

export type EventOperation = 'INSERT' | 'UPDATE' | 'DELETE';

/** Column of the changed-rows CTE that lists changed field names (UPDATE only). */
export const CHANGED_COLUMN = 'svcgen:changed';

export interface CaptureSite {
  readonly scope: Scope;
  readonly table: CatalogTable;
  readonly operation: EventOperation;
  /** Name of the CTE whose rows are the after-image (INSERT, UPDATE) or the before-image (DELETE). */
  readonly rows: string;
  /** Whether `rows` carries the CHANGED_COLUMN. */
  readonly changed: boolean;
}

export interface Capture {
  /** CTE definitions to append after the mutation's CTE (all data-modifying: they run unreferenced). */
  readonly ctes: string[];
}

export function captureEvents(site: CaptureSite): Capture {
  const { scope, table } = site;
  const env = scope.params.add(scope.environment);
  const name = scope.params.add(table.spec.name);
  const op = scope.params.add(site.operation);
  const x = newAlias(scope);
  const record = fullRecord(table, x);
  const changed = site.changed ? `${x}."${CHANGED_COLUMN}"` : `'{}'::text[]`;
  return {
    ctes: [
      `hook AS (SELECT s.id, s.filter FROM svcgen.webhooks s
         WHERE s.environment = ${env} AND s.table_name = ${name} AND s.active AND ${op} = ANY (s.events))`,
      // n: the row's place in the statement (a multi-row insert returns its rows in the order of its
      // VALUES), so the outbox, and with it the queue, takes a bulk write's events in item order.
      `event AS (SELECT ${newIdSql('evt_')} AS id, ${record} AS record, ${changed} AS changed, row_number() OVER () AS n
         FROM ${site.rows} ${x} WHERE EXISTS (SELECT 1 FROM hook))`,
      `fanout AS (SELECT event.id AS event_id, hook.id AS webhook_id, event.n FROM event
         JOIN hook ON hook.filter IS NULL OR event.record::jsonb @> hook.filter)`,
      `event_row AS (INSERT INTO svcgen.webhook_events (id, environment, table_name, operation, record, changed_fields)
         SELECT event.id, ${env}, ${name}, ${op}, event.record, event.changed FROM event
         WHERE event.id IN (SELECT event_id FROM fanout))`,
      // One outbox row for the whole statement (none when nothing matched).
      `outbox AS (INSERT INTO svcgen.webhook_event_outbox (event_ids, webhook_ids)
         SELECT array_agg(event_id ORDER BY n, webhook_id), array_agg(webhook_id ORDER BY n, webhook_id) FROM fanout
         HAVING count(*) > 0)`,
    ],
  };
}
