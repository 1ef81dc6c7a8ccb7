/**
 * The job queue: graphile-worker, installed in its own schema so that a project using
 * graphile-worker for its own jobs keeps its queue to itself. Webhook deliveries
 * (runtime/webhooks/queue.ts) and file removals (runtime/storage/jobs.ts) wait in it.
 */
export const QUEUE_SCHEMA = 'svcgen_worker';
