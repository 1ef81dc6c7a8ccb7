/**
 * The changes that need a signed-in user's current password besides the e-mail address (docs/api.md
 * §3 "Your account"): a new password (every other session ends) and deleting the account (every
 * session ends; the project's rows stay).
 */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import { changePasswordBody, deleteAccountBody } from '../model/wire/index.ts';
import { NOT_YOU, type AccountContext } from './account-context.ts';
import { validationError } from './auth-errors.ts';
import { checkCurrentPassword } from './login.ts';
import { authRules, readAuthBody } from './requests.ts';
import { Revocations } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

export function passwordChangeHandlers(auth: UserAuth, { signedIn, remember, notice }: AccountContext) {
  const { db } = auth;
  const passwordSchema = changePasswordBody(authRules(auth.config));

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

  return { changePassword, deleteAccount };
}
