/** The auth surface's error bodies (docs/api.md §6.3): `{ error, violations? }`. */
import { AuthError } from '../http/index.ts';
import { RateLimitExceeded } from '../rate-limit/index.ts';

export interface Violation {
  field: string;
  rule: string;
  message: string;
}

export function validationError(violations: Violation[]): AuthError {
  return new AuthError('VALIDATION_ERROR', { violations });
}

/** The neutral rate-limit error as the auth surface answers it: 429 RATE_LIMIT_EXCEEDED with Retry-After. */
export function asAuthError(error: unknown): unknown {
  if (error instanceof RateLimitExceeded) {
    return new AuthError('RATE_LIMIT_EXCEEDED', {}, { 'retry-after': String(error.retryAfterSeconds) });
  }
  return error;
}
