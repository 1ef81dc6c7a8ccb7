/**
 * A signed-in user's own account (docs/api.md §3 "Your account"): read it, change the password or
 * the e-mail address, list and end sessions, delete the account. Every route takes the user's
 * access token; the ones that change the password, the address or delete the account also take the
 * current password, checked and counted like a login, so a stolen access token alone changes none
 * of them. Revocations are written in the change's transaction and announced on commit (see
 * tokens/revocations.ts), so no server process keeps accepting what was ended.
 */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import { readCredential } from '../principal/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import { validationError } from './auth-errors.ts';
import { checkCurrentPassword } from './login.ts';
import { listSessions, startSession } from './refresh-tokens.ts';
import { changeEmailBody, changePasswordBody, confirmEmailChangeBody, deleteAccountBody } from '../model/wire/index.ts';
import { authRules, readAuthBody, resolveAuthTenant } from './requests.ts';
import { Revocations, TokenRejected, type AccessClaims } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface Caller {
  readonly tenant: Tenant;
  readonly claims: AccessClaims;
}

/**
 * The caller of a route that takes `Authorization: Bearer <access token>`: 401 AUTH_TOKEN_EXPIRED
 * for an expired token, 401 AUTH_TOKEN_INVALID for a missing, malformed, tampered, revoked or
 * foreign one (another project or environment).
 */
export async function authenticate(auth: UserAuth, req: ApiRequest): Promise<Caller> {
  const tenant = resolveAuthTenant(req, auth.config);
  let credential;
  try {
    credential = readCredential(req);
  } catch {
    credential = undefined;
  }
  if (!credential?.bearer) throw new AuthError('AUTH_TOKEN_INVALID');
  try {
    const { claims } = await auth.verifier.verify(credential.token, tenant.environment);
    return { tenant, claims };
  } catch (error) {
    if (error instanceof TokenRejected)
      throw new AuthError(error.reason === 'expired' ? 'AUTH_TOKEN_EXPIRED' : 'AUTH_TOKEN_INVALID');
    throw error;
  }
}

export function accountHandlers(auth: UserAuth) {
  const { config, db } = auth;
  const passwordSchema = changePasswordBody(authRules(config));
  const limit = (bucket: string, perMinute: number) => auth.rateLimiter.hit(bucket, perMinute);

  /** The caller and their account; reads and session ends count in one budget, changes in another. */
  async function signedIn(req: ApiRequest, budget: 'read' | 'change'): Promise<Caller & { user: users.UserRow }> {
    const caller = await authenticate(auth, req);
    const { tenant, claims } = caller;
    const perMinute =
      budget === 'read' ? config.rateLimits.accountPerMinutePerUser : config.rateLimits.accountChangesPerMinutePerUser;
    await limit(`auth-account-${budget}:${tenant.projectId}:${tenant.environment}:${claims.userId}`, perMinute);
    const user = await users.findUserById(db, claims.userId);
    // Deleting an account ends its sessions, so a live token has a user; a gap here is a race with the delete.
    if (!user) throw new AuthError('AUTH_TOKEN_INVALID');
    return { ...caller, user };
  }

  /** Every process hears of revocations on commit; this one knows at once. */
  function remember(sessionIds: string[], tokenId?: string) {
    for (const sessionId of sessionIds) auth.revocations.remember({ sessionId });
    if (tokenId) auth.revocations.remember({ tokenId });
  }

  /** Queued, not awaited; the mailer retries and logs its own failures. */
  function notice(
    tenant: Tenant,
    to: string,
    kind: string,
    subject: string,
    text: string,
    meta: Record<string, string> = {},
  ) {
    try {
      auth.mailer.send({
        to,
        subject,
        text,
        meta: { kind, project: tenant.projectId, environment: tenant.environment, ...meta },
      });
    } catch (error) {
      auth.log(`the ${kind} mail to ${to} failed: ${(error as Error).message}`);
    }
  }
  const NOT_YOU =
    'If that was not you, reset your password at once (POST /auth/recover-password, then POST /auth/reset-password).';

  async function me(req: ApiRequest): Promise<Reply> {
    const { user } = await signedIn(req, 'read');
    return jsonReply(200, users.publicUser(user));
  }

  async function changePassword(req: ApiRequest): Promise<Reply> {
    const { tenant, claims, user } = await signedIn(req, 'change');
    const body = await readAuthBody(req, passwordSchema);
    await checkCurrentPassword(auth, tenant, user, body.currentPassword);
    if (body.newPassword === body.currentPassword) {
      throw validationError([
        { field: 'newPassword', rule: 'same_password', message: 'newPassword must differ from currentPassword' },
      ]);
    }
    const hash = await auth.passwords.hash(body.newPassword);
    const ended = await db.transaction(async (tx) => {
      // Only over the hash that was checked: of two changes racing with one current password, one wins.
      if (!(await users.setPassword(tx, user.id, user.password_hash, hash)))
        throw new AuthError('AUTH_INVALID_CREDENTIALS');
      return Revocations.revokeSessions(tx, { userId: user.id, exceptSessionId: claims.sessionId });
    });
    remember(ended);
    notice(
      tenant,
      user.email,
      'password-changed',
      'Your password was changed',
      `The password of your account was changed and your other sessions were ended. ${NOT_YOU}`,
    );
    return jsonReply(200, { message: 'password changed; your other sessions have ended' });
  }

  async function changeEmail(req: ApiRequest): Promise<Reply> {
    const { tenant, user } = await signedIn(req, 'change');
    const body = await readAuthBody(req, changeEmailBody);
    await checkCurrentPassword(auth, tenant, user, body.currentPassword);
    const newEmail = users.normalizeEmail(body.newEmail);
    if (newEmail === user.email)
      throw validationError([
        { field: 'newEmail', rule: 'same_email', message: 'newEmail is already the address of this account' },
      ]);
    if (await users.emailTaken(db, tenant, newEmail, user.id)) throw new AuthError('AUTH_EMAIL_EXISTS');
    const code = await auth.codes.issue(db, user.id, 'change-email', newEmail);
    notice(
      tenant,
      newEmail,
      'change-email',
      'Confirm your new e-mail address',
      `Your code to confirm this address for your account is ${code}. It is valid for ${Math.round(config.auth.codeTtl / 60)} minutes. If you did not ask for it, ignore this mail.`,
      { code },
    );
    return jsonReply(200, {
      message: `check ${newEmail} for the 6-digit code and confirm it with POST /auth/confirm-email-change`,
    });
  }

  async function confirmEmailChange(req: ApiRequest): Promise<Reply> {
    const { tenant, claims, user } = await signedIn(req, 'change');
    const body = await readAuthBody(req, confirmEmailChangeBody);
    const taken = await auth.codes.take(db, user.id, 'change-email', body.code);
    if (!taken?.payload) throw new AuthError('AUTH_INVALID_CODE');
    const newEmail = taken.payload;
    // Access tokens carry the address ($user.email in role filters): every session ends, this
    // one too, and the answer starts a new one whose tokens carry the new address.
    const ended = await db.transaction(async (tx) => {
      if (!(await users.setEmail(tx, user.id, newEmail))) throw new AuthError('AUTH_EMAIL_EXISTS');
      const revoked = await Revocations.revokeSessions(tx, { userId: user.id });
      await Revocations.denyToken(tx, claims.tokenId, claims.expiresAt);
      return revoked;
    });
    remember(ended, claims.tokenId);
    notice(
      tenant,
      user.email,
      'email-changed',
      'Your e-mail address was changed',
      `The e-mail address of your account was changed from ${user.email} to ${newEmail}; this address no longer signs in. ${NOT_YOU}`,
      { newEmail },
    );
    const changed = await users.findUserById(db, user.id);
    const session = changed && (await startSession(db, changed, config.auth.refreshTokenTtl));
    // Only a change or delete racing with this one leaves no account or session to sign in to.
    if (!changed || !session) throw new AuthError('AUTH_TOKEN_INVALID');
    const accessToken = await auth.issueAccessToken(tenant, changed, session.sessionId);
    return jsonReply(200, { accessToken, refreshToken: session.refreshToken, user: users.publicUser(changed) });
  }

  async function sessions(req: ApiRequest): Promise<Reply> {
    const { claims, user } = await signedIn(req, 'read');
    const rows = await listSessions(db, user.id, claims.sessionId);
    return jsonReply(200, {
      sessions: rows.map((s) => ({
        id: s.id,
        createdAt: s.created_at.toISOString(),
        lastUsedAt: s.last_used_at.toISOString(),
        expiresAt: s.expires_at?.toISOString() ?? null,
        current: s.id === claims.sessionId,
      })),
    });
  }

  async function endSession(req: ApiRequest): Promise<Reply> {
    const { claims, user } = await signedIn(req, 'read');
    const id = req.params.id ?? '';
    // Unknown, ended and other users' sessions get one answer: nothing tells them apart.
    const sessionId = UUID.test(id) ? id.toLowerCase() : undefined;
    const current = sessionId === claims.sessionId;
    const ended = sessionId
      ? await db.transaction(async (tx) => {
          const revoked = await Revocations.revokeSessions(tx, { sessionId, userId: user.id });
          if (current && revoked.length > 0) await Revocations.denyToken(tx, claims.tokenId, claims.expiresAt);
          return revoked;
        })
      : [];
    if (ended.length === 0) throw new AuthError('AUTH_SESSION_NOT_FOUND');
    remember(ended, current ? claims.tokenId : undefined);
    return jsonReply(200, {
      message: current ? 'session ended; this was the current session: you are logged out' : 'session ended',
    });
  }

  async function endOtherSessions(req: ApiRequest): Promise<Reply> {
    const { claims, user } = await signedIn(req, 'read');
    const ended = await db.transaction((tx) =>
      Revocations.revokeSessions(tx, { userId: user.id, exceptSessionId: claims.sessionId }),
    );
    remember(ended);
    return jsonReply(200, { message: 'every other session ended', ended: ended.length });
  }

  async function deleteAccount(req: ApiRequest): Promise<Reply> {
    const { tenant, claims, user } = await signedIn(req, 'change');
    const body = await readAuthBody(req, deleteAccountBody);
    await checkCurrentPassword(auth, tenant, user, body.currentPassword);
    const ended = await db.transaction(async (tx) => {
      const revoked = await Revocations.revokeSessions(tx, { userId: user.id });
      await Revocations.denyToken(tx, claims.tokenId, claims.expiresAt);
      // Its codes, sessions and refresh tokens go with it; the project's data rows stay (docs/api.md §3).
      if (!(await users.deleteUser(tx, user.id))) throw new AuthError('AUTH_TOKEN_INVALID');
      return revoked;
    });
    remember(ended, claims.tokenId);
    notice(
      tenant,
      user.email,
      'account-deleted',
      'Your account was deleted',
      'Your account was deleted and all its sessions were ended.',
    );
    return jsonReply(200, { message: 'account deleted' });
  }

  return { me, changePassword, changeEmail, confirmEmailChange, sessions, endSession, endOtherSessions, deleteAccount };
}
