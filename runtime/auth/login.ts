/**
 * The checks of POST /auth/login (docs/api.md §3 "Log in"). Every answer costs exactly one password
 * comparison, against the account's hash or, for an e-mail without an account, the hasher's dummy
 * hash of the same cost: success, wrong password, unknown e-mail, locked (right or wrong password)
 * and unverified all take the same time. E-mails without an account are locked out like accounts
 * (lockout.ts), and the owner of an account that locks is told by mail.
 */
import { AuthError } from '../http/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

const locked = (lockedUntil: Date) => new AuthError('AUTH_ACCOUNT_LOCKED', { lockedUntil: lockedUntil.toISOString() });

/** The account the credentials log in to; otherwise throws the answer (401, 423 or 403). */
export async function checkLogin(
  auth: UserAuth,
  tenant: Tenant,
  email: string,
  password: string,
): Promise<users.UserRow> {
  const { db, lockout, passwords } = auth;
  const user = await users.findUser(db, tenant, email);
  if (!user) {
    await passwords.verifyDummy(password);
    const { lockedUntil } = await lockout.unknownFailed(db, tenant, email);
    throw lockedUntil ? locked(lockedUntil) : new AuthError('AUTH_INVALID_CREDENTIALS');
  }
  await passwordOrThrow(auth, tenant, user, password);
  if (!user.verified_at) throw new AuthError('AUTH_EMAIL_NOT_VERIFIED');
  await users.clearFailedLogins(db, user.id);
  return user;
}

/** The account's password, or the failed login's answer (counted; 401 or 423), or 423 while locked. */
async function passwordOrThrow(auth: UserAuth, tenant: Tenant, user: users.UserRow, password: string): Promise<void> {
  // Compared before the lock is looked at: a locked answer costs as much as any other.
  if (!(await auth.passwords.verify(password, user.password_hash))) {
    const { lockedUntil, lockedNow } = await auth.lockout.accountFailed(auth.db, user.id);
    if (lockedUntil && lockedNow) sendLockMail(auth, tenant, user, lockedUntil);
    throw lockedUntil ? locked(lockedUntil) : new AuthError('AUTH_INVALID_CREDENTIALS');
  }
  if (user.locked_until && user.locked_until > new Date()) throw locked(user.locked_until);
}

/**
 * The current password of a signed-in user (docs/api.md §3 "Your account"), checked as login
 * checks it: a wrong one is a failed login (401, then 423 at the threshold, the owner mailed), a
 * locked account answers 423 even to the right one, and the right one clears the count. So a
 * stolen access token gives no more guesses at the password than the login form does.
 */
export async function checkCurrentPassword(
  auth: UserAuth,
  tenant: Tenant,
  user: users.UserRow,
  password: string,
): Promise<void> {
  await passwordOrThrow(auth, tenant, user, password);
  await users.clearFailedLogins(auth.db, user.id);
}

/** Queued, not awaited: the 423 does not wait on SMTP (the mailer retries and logs its own failures). */
function sendLockMail(auth: UserAuth, tenant: Tenant, user: users.UserRow, lockedUntil: Date): void {
  const until = lockedUntil.toISOString();
  const subject = 'Your account is locked';
  const text =
    `After ${auth.config.auth.lockout.maxFailedAttempts} failed logins in a row, your account is locked until ${until} (UTC). ` +
    'If that was not you, someone may be guessing your password. ' +
    'Resetting your password unlocks the account at once: ask for a reset code (POST /auth/recover-password), ' +
    'then set a new password with it (POST /auth/reset-password).';
  try {
    auth.hooks.send(
      { kind: 'account-locked', to: user.email, environment: tenant.environment, subject, text, lockedUntil: until },
      {
        to: user.email,
        subject,
        text,
        meta: {
          kind: 'account-locked',
          lockedUntil: until,
          project: tenant.projectId,
          environment: tenant.environment,
        },
      },
    );
  } catch (error) {
    auth.log(`the lock notice to ${user.email} failed: ${(error as Error).message}`);
  }
}
