/**
 * One-time 6-digit codes (confirm-signup, reset-password): drawn from a CSPRNG, stored as a keyed
 * hash, valid `auth.codeTtl`, dead after `auth.codeMaxAttempts` wrong tries (then the right code
 * fails too). One live code per user and purpose: a new one replaces the old.
 */
import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import type { Database, Queryable } from '../db/index.ts';

export type CodePurpose = 'confirm-signup' | 'reset-password';

export class Codes {
  constructor(
    private readonly hashKey: string,
    private readonly ttlSeconds: number,
    private readonly maxAttempts: number,
  ) {}

  private hash(userId: string, purpose: CodePurpose, code: string): Buffer {
    return createHmac('sha256', this.hashKey).update(`${userId}:${purpose}:${code}`).digest();
  }

  /** Makes a new code for the user, replacing a live one; returns the code to send. */
  async issue(db: Queryable, userId: string, purpose: CodePurpose): Promise<string> {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    await db.query(
      `INSERT INTO svcgen.auth_codes (user_id, purpose, code_hash, expires_at) VALUES ($1, $2, $3, now() + make_interval(secs => $4))
       ON CONFLICT (user_id, purpose) DO UPDATE
         SET code_hash = EXCLUDED.code_hash, attempts = 0, expires_at = EXCLUDED.expires_at, created_at = now()`,
      [userId, purpose, this.hash(userId, purpose, code).toString('hex'), this.ttlSeconds],
    );
    return code;
  }

  /**
   * Spends one attempt of the user's live code. True (and the code is gone) when it matches;
   * false when it does not, or there is no live code, or its attempts are used up.
   */
  async consume(db: Database, userId: string, purpose: CodePurpose, code: string): Promise<boolean> {
    return db.transaction(async (tx) => {
      const rows = await tx.query<{ code_hash: string }>(
        `UPDATE svcgen.auth_codes SET attempts = attempts + 1
         WHERE user_id = $1 AND purpose = $2 AND expires_at > now() AND attempts < $3
         RETURNING code_hash`,
        [userId, purpose, this.maxAttempts],
      );
      if (rows.length === 0) return false;
      const matches = timingSafeEqual(Buffer.from(rows[0]!.code_hash, 'hex'), this.hash(userId, purpose, code));
      if (matches) await tx.query('DELETE FROM svcgen.auth_codes WHERE user_id = $1 AND purpose = $2', [userId, purpose]);
      return matches;
    });
  }
}
