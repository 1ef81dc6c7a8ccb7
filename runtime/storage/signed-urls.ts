/**
 * Signed download URLs (docs/storage.md "Signed URLs"): `…/content?token=<expires>.<environment>.<mac>`,
 * where mac is an HMAC-SHA256 with a server secret over the environment, bucket, file id and expiry.
 * Whoever holds the URL may download that one file until it expires, with no other credentials, as
 * an `<img src>` needs; deleting the file ends it too (the download then answers 404).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface SignedTarget {
  readonly environment: string;
  readonly bucket: string;
  readonly id: string;
}

export class UrlSigner {
  constructor(private readonly secret: string) {}

  private mac(target: SignedTarget, expires: number): Buffer {
    return createHmac('sha256', this.secret)
      .update(`${target.environment}\n${target.bucket}\n${target.id}\n${expires}`)
      .digest();
  }

  /** A token for `target` valid until `expires` (seconds since the epoch). */
  sign(target: SignedTarget, expires: number): string {
    return `${expires}.${target.environment}.${this.mac(target, expires).toString('base64url')}`;
  }

  /**
   * The environment a token was made for, when it is genuine for this bucket and id and not expired;
   * otherwise why not (a message for a 401/403 answer).
   */
  verify(
    token: string,
    bucket: string,
    id: string,
    now = Date.now(),
  ): { ok: true; environment: string } | { ok: false; reason: string } {
    const match = /^(\d{1,12})\.([a-z][a-z0-9_]{0,39})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (!match) return { ok: false, reason: 'the token is not a download token' };
    const expires = Number(match[1]);
    const environment = match[2]!;
    const given = Buffer.from(match[3]!, 'base64url');
    const expected = this.mac({ environment, bucket, id }, expires);
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      return { ok: false, reason: 'the token is not valid for this file' };
    if (expires * 1000 <= now) return { ok: false, reason: 'the download link has expired' };
    return { ok: true, environment };
  }
}
