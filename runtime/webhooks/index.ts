/** Webhooks: subscriptions and their endpoints, event capture in data statements, delivery workers. */
export { captureEvents, CHANGED_COLUMN, type Capture, type CaptureSite, type EventOperation } from './capture.ts';
export { eventBody, signature, DeliveryAgent } from './delivery.ts';
export { webhookHandlers, webhookOperations, DELIVERY_HISTORY_LIMIT, type WebhookDeps } from './endpoints.ts';
export { QUEUE_SCHEMA, DELIVER_TASK } from './queue.ts';
export type { DeliveryRecord, Subscription } from './subscriptions.ts';
export { EVENT_NAMES } from '../model/wire/index.ts';
export { refusedAddress, urlProblems, type TargetPolicy } from './targets.ts';
export {
  installDeliveryQueue,
  pruneDeliveryHistory,
  startDeliveryWorker,
  sweepStalledDeliveries,
  webhookQueueDepth,
  type DeliveryWorker,
} from './worker.ts';
export { announceSubscriptionChange, WatchedTables } from './watched-tables.ts';
