export { withIdempotency, pruneIdempotency } from './idempotency.ts';
