/** Signing up and confirming the address with the mailed code (docs/api.md §3 "Sign up and confirm"). */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
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
    const role = body.roleId ?? config.auth.defaultRole;
    const verified = !config.auth.emailVerification;
    const created = await users.insertUser(db, tenant, {
      email: body.email,
      passwordHash: await auth.passwords.hash(body.password),
      firstName: body.firstName,
      lastName: body.lastName,
      roles: role ? [role] : [],
      verified,
    });
    if (!created) throw new AuthError('AUTH_EMAIL_EXISTS');
    if (!verified)
      sendCode(tenant, created, 'confirm-signup', await auth.codes.issue(db, created.id, 'confirm-signup'));
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
    if (!user || user.verified_at || !(await auth.codes.consume(db, user.id, 'confirm-signup', body.code))) {
      throw new AuthError('AUTH_INVALID_CODE');
    }
    await users.markVerified(db, user.id);
    return jsonReply(200, await tokenPair(tenant, user));
  }

  return { signup, confirmSignup };
}
