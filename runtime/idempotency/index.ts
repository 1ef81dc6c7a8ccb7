export {
  claimStreamedKey,
  idempotencyKeyOf,
  idempotencyLockKey,
  IDEMPOTENCY_LOCK_NAMESPACE,
  pruneIdempotency,
  withIdempotency,
  type StreamedClaim,
} from './idempotency.ts';
