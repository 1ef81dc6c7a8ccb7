/**
 * The one place where a data statement records its webhook events (docs/api.md §8.2: an event commits
 * exactly when its mutation does). Given the CTE holding the rows a mutation changed, it adds the
 * CTEs that write one event per row for which at least one active subscription matches (table,
 * operation and filter, as committed when the statement runs), one delivery per matching
 * subscription, and one outbox entry listing the statement's deliveries, which the delivery
 * workers drain into the job queue in batches. (Queueing the job here would NOTIFY from every write,
 * and PostgreSQL commits notifying transactions one at a time.) With no matching subscription the
 * statement pays one index probe: no event JSON is built.
 */
import { fullRecord } from '../query/compile-read.ts';
import { newAlias, type Scope } from '../query/compile-condition.ts';
import type { CatalogTable } from '../query/catalog.ts';

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

/**
 * A new id: the prefix, then 32 hex digits laid out as a UUIDv7 (RFC 9562: the time in ms, then
 * random bits). Ids that grow with time append to the primary key and delivery indexes where
 * random ones would touch a different index page per row, and after each checkpoint write that
 * whole page to the WAL again: about ten times the WAL of a bulk write's events and deliveries.
 */
const id = (prefix: string) =>
  `'${prefix}' || encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
     placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')`;

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
      `event AS (SELECT ${id('evt_')} AS id, ${record} AS record, ${changed} AS changed, row_number() OVER () AS n
         FROM ${site.rows} ${x} WHERE EXISTS (SELECT 1 FROM hook))`,
      `fanout AS (SELECT ${id('del_')} AS delivery_id, event.id AS event_id, hook.id AS webhook_id, event.n FROM event
         JOIN hook ON hook.filter IS NULL OR event.record::jsonb @> hook.filter)`,
      `event_row AS (INSERT INTO svcgen.webhook_events (id, environment, table_name, operation, record, changed_fields)
         SELECT event.id, ${env}, ${name}, ${op}, event.record, event.changed FROM event
         WHERE event.id IN (SELECT event_id FROM fanout))`,
      `delivery AS (INSERT INTO svcgen.webhook_deliveries (id, webhook_id, event_id)
         SELECT delivery_id, webhook_id, event_id FROM fanout)`,
      // One outbox row for the whole statement, its deliveries in item order (none: no row).
      `outbox AS (INSERT INTO svcgen.webhook_outbox (delivery_ids)
         SELECT array_agg(delivery_id ORDER BY n, webhook_id) FROM fanout HAVING count(*) > 0)`,
    ],
  };
}
