/**
 * One-time 6-digit codes (confirm-signup, reset-password, change-email): drawn from a CSPRNG, stored as a keyed
 * hash, valid `auth.codeTtl`, dead after `auth.codeMaxAttempts` wrong tries (then the right code
 * fails too). One live code per user and purpose: a new one replaces the old.
 *
 * Guessing is also bounded per account (docs/api.md §3 "Password recovery"): an account may send
 * `auth.codeMaxFailuresPerAccount` wrong codes per purpose in a window of `auth.codeTtl` that starts
 * with its first wrong code, across every code it is sent (a new code brings no fresh tries). Once
 * they are used up every code fails, the right one too, until the window has passed. The count
 * lives in svcgen.auth_code_failures, which outlives the codes.
 *
 * A code may carry a payload that the right code hands back (change-email: the new address), so
 * what is confirmed is what was asked for, whatever the request that confirms it says.
 */
import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import type { Database, Queryable } from '../db/index.ts';

export type CodePurpose = 'confirm-signup' | 'reset-password' | 'change-email';

export class Codes {
  constructor(
    private readonly hashKey: string,
    private readonly ttlSeconds: number,
    private readonly maxAttempts: number,
    private readonly maxFailuresPerAccount: number,
  ) {}

  private hash(userId: string, purpose: CodePurpose, code: string): Buffer {
    return createHmac('sha256', this.hashKey).update(`${userId}:${purpose}:${code}`).digest();
  }

  /** Makes a new code for the user, replacing a live one (and its payload); returns the code to send. */
  async issue(db: Queryable, userId: string, purpose: CodePurpose, payload: string | null = null): Promise<string> {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    await db.query(
      `INSERT INTO svcgen.auth_codes (user_id, purpose, code_hash, expires_at, payload) VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5)
       ON CONFLICT (user_id, purpose) DO UPDATE
         SET code_hash = EXCLUDED.code_hash, attempts = 0, expires_at = EXCLUDED.expires_at, created_at = now(), payload = EXCLUDED.payload`,
      [userId, purpose, this.hash(userId, purpose, code).toString('hex'), this.ttlSeconds, payload],
    );
    return code;
  }

  /**
   * Spends one attempt of the user's live code. True (and the code is gone) when it matches;
   * false when it does not, or there is no live code, or its attempts or the account's are used up.
   */
  async consume(db: Database, userId: string, purpose: CodePurpose, code: string): Promise<boolean> {
    return (await this.take(db, userId, purpose, code)) !== undefined;
  }

  /** As consume; the right code answers its payload (null when it has none), any other undefined. */
  async take(
    db: Database,
    userId: string,
    purpose: CodePurpose,
    code: string,
  ): Promise<{ payload: string | null } | undefined> {
    return db.transaction(async (tx) => {
      // The account's wrong codes in the current window (0 once it has passed). The upsert keeps the
      // row locked to the end of the transaction: guesses racing on other processes count one by one.
      const [window] = await tx.query<{ failures: number }>(
        `INSERT INTO svcgen.auth_code_failures AS f (user_id, purpose) VALUES ($1, $2)
         ON CONFLICT (user_id, purpose) DO UPDATE
           SET failures = CASE WHEN f.window_start > now() - make_interval(secs => $3) THEN f.failures ELSE 0 END
         RETURNING failures`,
        [userId, purpose, this.ttlSeconds],
      );
      if (window!.failures >= this.maxFailuresPerAccount) return undefined;
      const rows = await tx.query<{ code_hash: string; payload: string | null }>(
        `UPDATE svcgen.auth_codes SET attempts = attempts + 1
         WHERE user_id = $1 AND purpose = $2 AND expires_at > now() AND attempts < $3
         RETURNING code_hash, payload`,
        [userId, purpose, this.maxAttempts],
      );
      if (rows.length === 0) return undefined;
      const matches = timingSafeEqual(Buffer.from(rows[0]!.code_hash, 'hex'), this.hash(userId, purpose, code));
      if (matches) {
        await tx.query(
          `WITH spent AS (DELETE FROM svcgen.auth_codes WHERE user_id = $1 AND purpose = $2)
           DELETE FROM svcgen.auth_code_failures WHERE user_id = $1 AND purpose = $2`,
          [userId, purpose],
        );
      } else {
        // The first wrong code of a window starts it.
        await tx.query(
          `UPDATE svcgen.auth_code_failures SET failures = failures + 1,
             window_start = CASE WHEN failures = 0 THEN now() ELSE window_start END
           WHERE user_id = $1 AND purpose = $2`,
          [userId, purpose],
        );
      }
      return matches ? { payload: rows[0]!.payload } : undefined;
    });
  }

  /** Drops windows that have passed: the next wrong code starts a new window, as without a row. */
  async prune(db: Queryable): Promise<void> {
    await db.query('DELETE FROM svcgen.auth_code_failures WHERE window_start <= now() - make_interval(secs => $1)', [
      this.ttlSeconds,
    ]);
  }
}
