/**
 * Changing a signed-in user's e-mail address (docs/api.md §3 "Your account"): a code mailed to the
 * new address carries it, and confirming it ends every session and starts a new one, since access
 * tokens carry the address.
 */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import { changeEmailBody, confirmEmailChangeBody } from '../model/wire/index.ts';
import { NOT_YOU, type AccountContext } from './account-context.ts';
import { validationError } from './auth-errors.ts';
import { checkCurrentPassword } from './login.ts';
import { startSession } from './refresh-tokens.ts';
import { readAuthBody } from './requests.ts';
import { Revocations } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

export function emailChangeHandlers(auth: UserAuth, { signedIn, remember, notice }: AccountContext) {
  const { config, db } = auth;

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
      { code, validMinutes: Math.round(config.auth.codeTtl / 60), newEmail },
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
      { newEmail },
    );
    const changed = await users.findUserById(db, user.id);
    const session = changed && (await startSession(db, changed, config.auth.refreshTokenTtl));
    // Only a change or delete racing with this one leaves no account or session to sign in to.
    if (!changed || !session) throw new AuthError('AUTH_TOKEN_INVALID');
    const accessToken = await auth.issueAccessToken(tenant, changed, session.sessionId);
    return jsonReply(200, { accessToken, refreshToken: session.refreshToken, user: users.publicUser(changed) });
  }

  return { changeEmail, confirmEmailChange };
}
