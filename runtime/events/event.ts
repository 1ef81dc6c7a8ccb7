/**
 * A captured event as its row in svcgen.webhook_events holds it (docs/api.md §8.2): the
 * operation, the changed row's full record and the fields an update changed. Webhook deliveries
 * and live subscribers read the same rows.
 */

import { EVENT_NAMES } from '../model/wire/index.ts';

/** The operations that publish events (a subscription's `events`, docs/api.md §8.1): one list with the wire schema's. */
export { EVENT_NAMES };

export type EventOperation = (typeof EVENT_NAMES)[number];

export interface ChangeEvent {
  readonly id: string;
  readonly operation: EventOperation;
  /** The full record as captured (every field: each reader removes what its caller may not read). */
  readonly record: Readonly<Record<string, unknown>>;
  readonly changedFields: readonly string[];
  readonly timestamp: string;
}
