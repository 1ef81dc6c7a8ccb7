/**
 * Keyset cursors: opaque, encrypted and authenticated (AES-256-GCM with a key derived from a secret
 * kept in the database, so every server process accepts every other's cursors), bound to the query
 * they came from and to the caller they were given to. Encrypted, not only signed: a cursor carries
 * the sort values and the key of the last row of a page, which the caller may not be allowed to
 * read (docs/permissions.md "Reading"). Bound to its caller (the owner is the authenticated data of
 * the encryption): another caller's cursor, leaked or guessed, fails authentication exactly as an
 * altered or foreign one, so it neither positions a page by values hidden from the sender nor
 * tells that it belongs to someone else (docs/api.md §5.8).
 */
import { createCipheriv, createDecipheriv, createHash, hash } from 'node:crypto';
import { pooledRandomBytes } from '../secrets/index.ts';

export class CursorError extends Error {}

export interface CursorCodec {
  /** A cursor that only `owner` (cursorOwner) may send back, for the query `fingerprint`. */
  encode(owner: string, fingerprint: string, values: readonly (string | null)[]): string;
  /** The key values, or CursorError when the cursor is foreign, altered, another caller's or from another query. */
  decode(owner: string, fingerprint: string, cursor: string): (string | null)[];
}

/** What a cursor is bound to: the table, the order and the filter, in a stable text form. */
export function queryFingerprint(parts: unknown): string {
  return hash('sha256', JSON.stringify(parts), 'base64url').slice(0, 16);
}

/**
 * The caller a cursor is bound to (docs/api.md §5.8): its API key (`callerId`: the key's id) or
 * user (`user:<id>`, so a refreshed token keeps its cursors), in one environment. Every list is
 * answered to an identified caller; the only requests without credentials (public buckets' files,
 * signed URLs) read by id and list nothing, so no cursor is ever anonymous.
 */
export function cursorOwner(callerId: string, environment: string): string {
  return `${environment}\n${callerId}`;
}

const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** The owner's bytes (the authenticated data), kept for the last owner: a caller's pages come in runs. */
let lastOwner = '';
let lastOwnerBytes = Buffer.alloc(0);
function ownerBytes(owner: string): Buffer {
  if (owner !== lastOwner) {
    lastOwnerBytes = Buffer.from(owner, 'utf8');
    lastOwner = owner;
  }
  return lastOwnerBytes;
}

/** A cursor is one base64url string (no separators): nonce, authentication tag, then the encrypted JSON payload. */
export function cursorCodec(secret: string): CursorCodec {
  const key = createHash('sha256').update(`svcgen cursor key\n${secret}`).digest();
  return {
    encode(owner, fingerprint, values) {
      const nonce = pooledRandomBytes(NONCE_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      cipher.setAAD(ownerBytes(owner));
      // GCM is a stream mode: update gives the whole ciphertext and final() nothing more. The
      // cursor's bytes are written into one buffer (no concatenations).
      const sealed = cipher.update(JSON.stringify({ q: fingerprint, v: values }), 'utf8');
      cipher.final();
      const out = Buffer.allocUnsafe(NONCE_BYTES + TAG_BYTES + sealed.length);
      nonce.copy(out, 0);
      cipher.getAuthTag().copy(out, NONCE_BYTES);
      sealed.copy(out, NONCE_BYTES + TAG_BYTES);
      return out.toString('base64url');
    },
    decode(owner, fingerprint, cursor) {
      if (cursor.length > 4096 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new CursorError('not a cursor from this API');
      const bytes = Buffer.from(cursor, 'base64url');
      if (bytes.length <= NONCE_BYTES + TAG_BYTES) throw new CursorError('not a cursor from this API');
      let parsed: { q?: unknown; v?: unknown };
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, NONCE_BYTES));
        decipher.setAuthTag(bytes.subarray(NONCE_BYTES, NONCE_BYTES + TAG_BYTES));
        decipher.setAAD(ownerBytes(owner));
        const payload = Buffer.concat([decipher.update(bytes.subarray(NONCE_BYTES + TAG_BYTES)), decipher.final()]);
        parsed = JSON.parse(payload.toString('utf8'));
      } catch {
        throw new CursorError('the cursor was altered or comes from elsewhere');
      }
      if (parsed.q !== fingerprint)
        throw new CursorError('the cursor belongs to a different sort or filter; start again without after');
      if (!Array.isArray(parsed.v) || !parsed.v.every((x) => x === null || typeof x === 'string'))
        throw new CursorError('not a cursor from this API');
      return parsed.v as (string | null)[];
    },
  };
}
