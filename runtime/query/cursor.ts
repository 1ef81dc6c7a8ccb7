/**
 * Keyset cursors: opaque, signed (HMAC-SHA256 with a secret kept in the database, so every server
 * process accepts every other's cursors) and bound to the query they came from.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export class CursorError extends Error {}

export interface CursorCodec {
  encode(fingerprint: string, values: readonly (string | null)[]): string;
  /** The key values, or CursorError when the cursor is foreign, altered or from another query. */
  decode(fingerprint: string, cursor: string): (string | null)[];
}

/** What a cursor is bound to: the table, the order and the filter, in a stable text form. */
export function queryFingerprint(parts: unknown): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 16);
}

export function cursorCodec(secret: string): CursorCodec {
  const sign = (payload: string) => createHmac('sha256', secret).update(payload).digest().subarray(0, 16);
  return {
    encode(fingerprint, values) {
      const payload = Buffer.from(JSON.stringify({ q: fingerprint, v: values })).toString('base64url');
      return `${payload}.${sign(payload).toString('base64url')}`;
    },
    decode(fingerprint, cursor) {
      const [payload, signature, extra] = cursor.split('.');
      if (!payload || !signature || extra !== undefined || cursor.length > 4096) throw new CursorError('not a cursor from this API');
      const given = Buffer.from(signature, 'base64url');
      const expected = sign(payload);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new CursorError('the cursor was altered or comes from elsewhere');
      let parsed: { q?: unknown; v?: unknown };
      try {
        parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      } catch {
        throw new CursorError('not a cursor from this API');
      }
      if (parsed.q !== fingerprint) throw new CursorError('the cursor belongs to a different sort or filter; start again without after');
      if (!Array.isArray(parsed.v) || !parsed.v.every((x) => x === null || typeof x === 'string')) throw new CursorError('not a cursor from this API');
      return parsed.v as (string | null)[];
    },
  };
}
