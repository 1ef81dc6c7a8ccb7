export { withIdempotency, pruneIdempotency, idempotencyLockKey, IDEMPOTENCY_LOCK_NAMESPACE } from './idempotency.ts';
