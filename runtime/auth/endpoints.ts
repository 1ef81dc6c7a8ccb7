/**
 * The /auth endpoints and the account and session states they move through (docs/api.md §3). Every
 * failure is an AuthError; the HTTP layer turns it into `{ error, ... }`.
 */
import { AuthError, jsonReply, type ApiRequest, type Handler, type Reply } from '../http/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import { authenticate } from './account-context.ts';
import { accountHandlers } from './account.ts';
import { asAuthError } from './auth-errors.ts';
import { checkLogin } from './login.ts';
import { endSession, rotateRefreshToken, startSession } from './refresh-tokens.ts';
import {
  confirmSignupBody,
  loginBody,
  recoverPasswordBody,
  refreshTokenBody,
  resetPasswordBody,
  signupBody,
} from '../model/wire/index.ts';
import { authRules, readAuthBody, resolveAuthTenant } from './requests.ts';
import { jwks, Revocations } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

const CHECK_INBOX = 'check your e-mail for the 6-digit code';

/** Wraps a handler so the neutral rate-limit error becomes RATE_LIMIT_EXCEEDED. */
function authRoute(handler: Handler): Handler {
  return (req) => handler(req).catch((error: unknown) => Promise.reject(asAuthError(error)));
}

export function authHandlers(auth: UserAuth) {
  const { config, db } = auth;
  const rules = authRules(config);
  const signupSchema = signupBody(rules);
  const resetSchema = resetPasswordBody(rules);

  const limit = (bucket: string, perMinute: number) => auth.rateLimiter.hit(bucket, perMinute);
  /** confirm-signup and reset-password share one budget per client address (codes are guessed there). */
  const limitCodes = (req: ApiRequest, tenant: Tenant) =>
    limit(`auth-code:${tenant.projectId}:${auth.clientIp(req)}`, config.rateLimits.codePerMinutePerIp);

  /** Signs the user in: a new session, an access token and its refresh token. */
  async function tokenPair(tenant: Tenant, user: users.UserRow) {
    const session = await startSession(db, user, config.auth.refreshTokenTtl);
    // The password or address changed, or the account was deleted, since the credentials were checked.
    if (!session) throw new AuthError('AUTH_INVALID_CREDENTIALS');
    const { sessionId, refreshToken } = session;
    const accessToken = await auth.issueAccessToken(tenant, user, sessionId);
    return { accessToken, refreshToken, user: users.publicUser(user) };
  }

  function sendCode(tenant: Tenant, user: users.UserRow, purpose: 'confirm-signup' | 'reset-password', code: string) {
    const signup = purpose === 'confirm-signup';
    auth.mailer.send({
      to: user.email,
      subject: signup ? 'Confirm your e-mail address' : 'Reset your password',
      text: `${signup ? 'Your confirmation code' : 'Your password reset code'} is ${code}. It is valid for ${Math.round(config.auth.codeTtl / 60)} minutes.`,
      meta: { kind: purpose, code, project: tenant.projectId, environment: tenant.environment },
    });
  }

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

  async function login(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    await limit(`auth-login:${tenant.projectId}:${auth.clientIp(req)}`, config.rateLimits.loginPerMinutePerIp);
    const body = await readAuthBody(req, loginBody);
    const user = await checkLogin(auth, tenant, body.email, body.password);
    return jsonReply(200, await tokenPair(tenant, user));
  }

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
      if (user) sendCode(tenant, user, 'reset-password', await auth.codes.issue(db, user.id, 'reset-password'));
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

  async function refreshToken(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    const body = await readAuthBody(req, refreshTokenBody);
    const rotation = await rotateRefreshToken(db, tenant, body.refreshToken, config.auth.refreshTokenTtl);
    if (!rotation.ok) {
      if (rotation.revokedSession) auth.revocations.remember({ sessionId: rotation.revokedSession });
      throw new AuthError('AUTH_TOKEN_INVALID');
    }
    const user = await users.findUserById(db, rotation.userId);
    if (!user) throw new AuthError('AUTH_TOKEN_INVALID');
    return jsonReply(200, {
      accessToken: await auth.issueAccessToken(tenant, user, rotation.sessionId),
      refreshToken: rotation.refreshToken,
    });
  }

  async function logout(req: ApiRequest): Promise<Reply> {
    const { claims } = await authenticate(auth, req);
    await endSession(db, claims.sessionId, claims.tokenId, claims.expiresAt);
    auth.revocations.remember({ sessionId: claims.sessionId, tokenId: claims.tokenId });
    return jsonReply(200, { message: 'logged out' });
  }

  async function jwksDocument(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    return jsonReply(200, jwks(auth.environmentKeys(tenant.environment)), { 'cache-control': 'public, max-age=300' });
  }

  const account = Object.fromEntries(
    Object.entries(accountHandlers(auth)).map(([name, handler]) => [name, authRoute(handler)]),
  ) as Record<keyof ReturnType<typeof accountHandlers>, Handler>;

  return {
    signup: authRoute(signup),
    confirmSignup: authRoute(confirmSignup),
    login: authRoute(login),
    recoverPassword: authRoute(recoverPassword),
    resetPassword: authRoute(resetPassword),
    refreshToken: authRoute(refreshToken),
    logout: authRoute(logout),
    jwks: authRoute(jwksDocument),
    ...account,
  };
}

/** Every /auth route (docs/api.md §3), for the server to serve. */
export function authRoutes(h: ReturnType<typeof authHandlers>) {
  return [
    { method: 'post', path: '/auth/signup', handler: h.signup },
    { method: 'post', path: '/auth/confirm-signup', handler: h.confirmSignup },
    { method: 'post', path: '/auth/login', handler: h.login },
    { method: 'post', path: '/auth/recover-password', handler: h.recoverPassword },
    { method: 'post', path: '/auth/reset-password', handler: h.resetPassword },
    { method: 'post', path: '/auth/refresh-token', handler: h.refreshToken },
    { method: 'post', path: '/auth/logout', handler: h.logout },
    { method: 'get', path: '/auth/.well-known/jwks.json', handler: h.jwks },
    // a signed-in user's own account ("Your account")
    { method: 'get', path: '/auth/me', handler: h.me },
    { method: 'post', path: '/auth/change-password', handler: h.changePassword },
    { method: 'post', path: '/auth/change-email', handler: h.changeEmail },
    { method: 'post', path: '/auth/confirm-email-change', handler: h.confirmEmailChange },
    { method: 'get', path: '/auth/sessions', handler: h.sessions },
    { method: 'delete', path: '/auth/sessions', handler: h.endOtherSessions },
    { method: 'delete', path: '/auth/sessions/:id', handler: h.endSession },
    { method: 'post', path: '/auth/delete-account', handler: h.deleteAccount },
  ] as const satisfies readonly { method: 'get' | 'post' | 'delete'; path: string; handler: Handler }[];
}
