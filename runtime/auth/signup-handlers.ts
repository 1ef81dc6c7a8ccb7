/** Signing up and confirming the address with the mailed code (docs/api.md §3 "Sign up and confirm"). */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import { transactionDatabase } from '../db/index.ts';
import { confirmSignupBody, signupBody } from '../model/wire/index.ts';
import { authRules, readAuthBody, resolveAuthTenant } from './requests.ts';
import { CHECK_INBOX, type SignInContext } from './sign-in.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

export function signupHandlers(auth: UserAuth, { limit, limitCodes, tokenPair, sendCode }: SignInContext) {
  const { config, db } = auth;
  const signupSchema = signupBody(authRules(config));

  async function signup(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    await limit(`auth-signup:${tenant.projectId}:${auth.clientIp(req)}`, config.rateLimits.signupPerMinutePerIp);
    const body = await readAuthBody(req, signupSchema);
    // Before anything is created or hashed: a refusal leaves no trace (docs/own-code.md "Auth hooks").
    await auth.hooks.beforeSignUp(req, tenant, users.normalizeEmail(body.email));
    const role = body.roleId ?? config.auth.defaultRole;
    const verified = !config.auth.emailVerification;
    const passwordHash = await auth.passwords.hash(body.password);
    // The user, the project's afterSignUp and the code commit together; the mail goes after the commit.
    const { created, code } = await db.transaction(async (tx) => {
      const created = await users.insertUser(tx, tenant, {
        email: body.email,
        passwordHash,
        firstName: body.firstName,
        lastName: body.lastName,
        roles: role ? [role] : [],
        verified,
      });
      if (!created) throw new AuthError('AUTH_EMAIL_EXISTS');
      await auth.hooks.afterSignUp(req, tenant, db, tx, created);
      return { created, code: verified ? undefined : await auth.codes.issue(tx, created.id, 'confirm-signup') };
    });
    if (code !== undefined) sendCode(tenant, created, 'confirm-signup', code, req);
    return jsonReply(201, {
      userId: created.id,
      message: verified
        ? 'account created; you can log in now'
        : `account created; ${CHECK_INBOX} and confirm it with POST /auth/confirm-signup`,
    });
  }

  async function confirmSignup(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    await limitCodes(req, tenant);
    const body = await readAuthBody(req, confirmSignupBody);
    const user = await users.findUser(db, tenant, body.email);
    if (!user || user.verified_at) throw new AuthError('AUTH_INVALID_CODE');
    // The code, the verification and the project's afterConfirm commit together: a throw of
    // afterConfirm undoes them (the code stays valid). A wrong code is not a throw here, so the
    // failed attempt it counts is committed.
    const confirmed = await db.transaction(async (tx) => {
      if (!(await auth.codes.consume(transactionDatabase(db.pool, tx), user.id, 'confirm-signup', body.code)))
        return false;
      await users.markVerified(tx, user.id);
      await auth.hooks.afterConfirm(req, tenant, db, tx, user);
      return true;
    });
    if (!confirmed) throw new AuthError('AUTH_INVALID_CODE');
    return jsonReply(200, await tokenPair(tenant, user, req));
  }

  return { signup, confirmSignup };
}
