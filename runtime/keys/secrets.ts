import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * API keys and management tokens are 256-bit random values, so a plain SHA-256 digest is a safe
 * stored form (no salt or slow hash needed) and lets the database find a key by its digest.
 */
export function digestSecret(secret: string): string {
  // One-shot hash(): no Hash object per request (each API-key request digests its key).
  return hash('sha256', secret, 'hex');
}

export function newSecret(kind: 'svk' | 'svm'): string {
  return `${kind}_${randomBytes(32).toString('base64url')}`;
}

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('base64url')}`;
}

export function constantTimeEqual(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
}

/** The key formats: `svk_` API keys, `svm_` management tokens, 43 base64url characters each. */
export const API_KEY_PATTERN = /^svk_[A-Za-z0-9_-]{43}$/;
export const MANAGEMENT_TOKEN_PATTERN = /^svm_[A-Za-z0-9_-]{43}$/;
