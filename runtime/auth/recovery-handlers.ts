/** Password recovery: a reset code by mail, then a new password with it (docs/api.md §3 "Password recovery"). */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import { recoverPasswordBody, resetPasswordBody } from '../model/wire/index.ts';
import { authRules, readAuthBody, resolveAuthTenant } from './requests.ts';
import { CHECK_INBOX, type SignInContext } from './sign-in.ts';
import { Revocations } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

export function recoveryHandlers(auth: UserAuth, { limit, limitCodes, sendCode }: SignInContext) {
  const { config, db } = auth;
  const resetSchema = resetPasswordBody(authRules(config));

  async function recoverPassword(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    const body = await readAuthBody(req, recoverPasswordBody);
    const email = users.normalizeEmail(body.email);
    await limit(
      `auth-recovery:${tenant.projectId}:${tenant.environment}:${email}`,
      config.rateLimits.recoveryPerMinutePerEmail,
    );
    // The answer does not wait for the lookup: known and unknown e-mails take the same time.
    void (async () => {
      const user = await users.findUser(db, tenant, email);
      if (user) sendCode(tenant, user, 'reset-password', await auth.codes.issue(db, user.id, 'reset-password'), req);
    })().catch((error: unknown) => auth.log(`password recovery for ${email} failed: ${(error as Error).message}`));
    return jsonReply(200, { message: `if ${email} has an account, a reset code is on its way; ${CHECK_INBOX}` });
  }

  async function resetPassword(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    await limitCodes(req, tenant);
    const body = await readAuthBody(req, resetSchema);
    const user = await users.findUser(db, tenant, body.email);
    if (!user || !(await auth.codes.consume(db, user.id, 'reset-password', body.code)))
      throw new AuthError('AUTH_INVALID_CODE');
    const hash = await auth.passwords.hash(body.newPassword);
    // A new password ends every session the old one opened.
    const ended = await db.transaction(async (tx) => {
      await users.resetPassword(tx, user.id, hash);
      return Revocations.revokeSessions(tx, { userId: user.id });
    });
    for (const sessionId of ended) auth.revocations.remember({ sessionId });
    return jsonReply(200, { message: 'password replaced; log in with the new password' });
  }

  return { recoverPassword, resetPassword };
}
