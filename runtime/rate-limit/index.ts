export { SharedRateLimiter, RateLimitExceeded, type RateDecision } from './shared-limiter.ts';
