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

const SIGNATURE_BYTES = 16;

/** A cursor is one base64url string (no separators): the 16-byte signature, then the JSON payload. */
export function cursorCodec(secret: string): CursorCodec {
  const sign = (payload: Buffer) => createHmac('sha256', secret).update(payload).digest().subarray(0, SIGNATURE_BYTES);
  return {
    encode(fingerprint, values) {
      const payload = Buffer.from(JSON.stringify({ q: fingerprint, v: values }));
      return Buffer.concat([sign(payload), payload]).toString('base64url');
    },
    decode(fingerprint, cursor) {
      if (cursor.length > 4096 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new CursorError('not a cursor from this API');
      const bytes = Buffer.from(cursor, 'base64url');
      if (bytes.length <= SIGNATURE_BYTES) throw new CursorError('not a cursor from this API');
      const given = bytes.subarray(0, SIGNATURE_BYTES);
      const payload = bytes.subarray(SIGNATURE_BYTES);
      if (!timingSafeEqual(given, sign(payload))) throw new CursorError('the cursor was altered or comes from elsewhere');
      let parsed: { q?: unknown; v?: unknown };
      try {
        parsed = JSON.parse(payload.toString('utf8'));
      } catch {
        throw new CursorError('not a cursor from this API');
      }
      if (parsed.q !== fingerprint) throw new CursorError('the cursor belongs to a different sort or filter; start again without after');
      if (!Array.isArray(parsed.v) || !parsed.v.every((x) => x === null || typeof x === 'string')) throw new CursorError('not a cursor from this API');
      return parsed.v as (string | null)[];
    },
  };
}
