/**
 * Login lockout (docs/api.md §3 "Log in"). Failed logins are counted per account in svcgen.users,
 * and per e-mail without an account in svcgen.login_failures by the same rules, so the answers do
 * not tell which e-mails have an account: 401 below `auth.lockout.maxFailedAttempts`, 423 with
 * `lockedUntil` from the failure that reaches it until the lock runs out, then the count starts
 * again. An e-mail without an account is stored as an HMAC of the lower-cased address under a
 * server secret, never as the address.
 */
import { createHmac } from 'node:crypto';
import type { Queryable } from '../db/index.ts';
import { normalizeEmail, type Scope } from './users.ts';

export interface FailedLogin {
  /** The lock's end when the account (or e-mail) is locked after this failure; null when it is not. */
  lockedUntil: Date | null;
  /** This failure reached the threshold and set the lock (false when a lock was on already). */
  lockedNow: boolean;
}

// Both counts follow one rule. A live lock is left alone (no row comes back; the caller reads it);
// otherwise the failure is counted, starting again at 1 after a lock that ran out, and the failure
// that reaches $2 sets a lock of $3 seconds.
const COUNTED = (t: string) => `CASE WHEN ${t}.locked_until IS NOT NULL THEN 1 ELSE ${t}.failed_logins + 1 END`;
const LOCK = (t: string) => `CASE WHEN ${COUNTED(t)} >= $2 THEN now() + make_interval(secs => $3) END`;
const NOT_LOCKED = (t: string) => `(${t}.locked_until IS NULL OR ${t}.locked_until <= now())`;

const ACCOUNT_FAILED = `UPDATE svcgen.users u SET failed_logins = ${COUNTED('u')}, locked_until = ${LOCK('u')}, updated_at = now()
  WHERE u.id = $1 AND ${NOT_LOCKED('u')} RETURNING u.locked_until`;

const UNKNOWN_FAILED = `INSERT INTO svcgen.login_failures AS f (project_id, environment, email_hash, failed_logins, locked_until)
  VALUES ($4, $5, $1, 1, CASE WHEN 1 >= $2 THEN now() + make_interval(secs => $3) END)
  ON CONFLICT (project_id, environment, email_hash) DO UPDATE SET failed_logins = ${COUNTED('f')}, locked_until = ${LOCK('f')}
  WHERE ${NOT_LOCKED('f')} RETURNING f.locked_until`;

export class Lockout {
  constructor(
    private readonly hashKey: string,
    private readonly maxFailures: number,
    private readonly lockSeconds: number,
  ) {}

  /** Counts a failed login of an account; `lockedNow` when this failure locked it (its owner gets a mail). */
  async accountFailed(db: Queryable, userId: string): Promise<FailedLogin> {
    const rows = await db.query<{ locked_until: Date | null }>(ACCOUNT_FAILED, [
      userId,
      this.maxFailures,
      this.lockSeconds,
    ]);
    if (rows.length > 0) return { lockedUntil: rows[0]!.locked_until, lockedNow: rows[0]!.locked_until !== null };
    const live = await db.query<{ locked_until: Date | null }>(
      'SELECT locked_until FROM svcgen.users WHERE id = $1 AND locked_until > now()',
      [userId],
    );
    return { lockedUntil: live[0]?.locked_until ?? null, lockedNow: false };
  }

  /** Counts a failed login of an e-mail that has no account, exactly as accountFailed counts an account's. */
  async unknownFailed(db: Queryable, scope: Scope, email: string): Promise<FailedLogin> {
    const emailHash = this.emailHash(email);
    const rows = await db.query<{ locked_until: Date | null }>(UNKNOWN_FAILED, [
      emailHash,
      this.maxFailures,
      this.lockSeconds,
      scope.projectId,
      scope.environment,
    ]);
    if (rows.length > 0) return { lockedUntil: rows[0]!.locked_until, lockedNow: rows[0]!.locked_until !== null };
    const live = await db.query<{ locked_until: Date | null }>(
      `SELECT locked_until FROM svcgen.login_failures
       WHERE project_id = $1 AND environment = $2 AND email_hash = $3 AND locked_until > now()`,
      [scope.projectId, scope.environment, emailHash],
    );
    return { lockedUntil: live[0]?.locked_until ?? null, lockedNow: false };
  }

  /**
   * Drops the rows of e-mails without an account whose lock ran out: the next failure counts from
   * 1, as without a row. Counts below the threshold stay, as an account's do (dropping them would tell).
   */
  async prune(db: Queryable): Promise<void> {
    await db.query('DELETE FROM svcgen.login_failures WHERE locked_until <= now()');
  }

  private emailHash(email: string): string {
    return createHmac('sha256', this.hashKey).update(normalizeEmail(email)).digest('base64url');
  }
}
