/**
 * Change events: the capture a data statement runs in its own transaction, which tables anyone
 * watches, the outbox and the events read back from it. The data layer writes events through
 * here; webhooks, live subscribers (runtime/realtime) and storage consume them.
 */
export { captureEvents, CHANGED_COLUMN, LIVE_TOPIC, type Capture, type CaptureSite } from './capture.ts';
export { EVENT_NAMES, type ChangeEvent, type EventOperation } from './event.ts';
export {
  DRAIN_JOB_SIZE,
  drainOutboxSql,
  eventsById,
  newIdSql,
  OUTBOX_DEPTH,
  OUTBOX_EVENTS,
  type DeliveryJob,
} from './outbox.ts';
export { announceSubscriptionChange, WatchedTables } from './watched-tables.ts';
