/** Webhooks: subscriptions and their endpoints, delivery workers. Event capture is runtime/events. */
export { eventBody, signature, DeliveryAgent } from './delivery.ts';
export { webhookHandlers, webhookOperations, DELIVERY_HISTORY_LIMIT, type WebhookDeps } from './endpoints.ts';
export { DELIVER_TASK } from './queue.ts';
export type { DeliveryRecord, Subscription } from './subscriptions.ts';
export { refusedAddress, urlProblems, type TargetPolicy } from './targets.ts';
export {
  installDeliveryQueue,
  pruneDeliveryHistory,
  startDeliveryWorker,
  sweepStalledDeliveries,
  webhookQueueDepth,
  type DeliveryWorker,
} from './worker.ts';
