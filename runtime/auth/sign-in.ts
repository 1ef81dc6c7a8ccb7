/**
 * What the anonymous /auth routes share (docs/api.md §3): the rate limiter, the code budget per
 * client address, mailing a code, and signing a user in with a new session.
 */
import { AuthError, type ApiRequest } from '../http/index.ts';
import type { z } from 'zod';
import type { session } from '../model/wire/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import { startSession } from './refresh-tokens.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

export const CHECK_INBOX = 'check your e-mail for the 6-digit code';

export function signInContext(auth: UserAuth) {
  const { config, db } = auth;

  const limit = (bucket: string, perMinute: number) => auth.rateLimiter.hit(bucket, perMinute);
  /** confirm-signup and reset-password share one budget per client address (codes are guessed there). */
  const limitCodes = (req: ApiRequest, tenant: Tenant) =>
    limit(`auth-code:${tenant.projectId}:${auth.clientIp(req)}`, config.rateLimits.codePerMinutePerIp);

  /**
   * Signs the user in: a new session, an access token and its refresh token. The project's extra
   * claims are asked first, so that a failing auth.claims leaves no session behind.
   */
  async function tokenPair(tenant: Tenant, user: users.UserRow, req?: ApiRequest): Promise<z.output<typeof session>> {
    const extra = await auth.hooks.claims(req, tenant, user);
    const started = await startSession(db, user, config.auth.refreshTokenTtl);
    // The password or address changed, or the account was deleted, since the credentials were checked.
    if (!started) throw new AuthError('AUTH_INVALID_CREDENTIALS');
    const { sessionId, refreshToken } = started;
    const accessToken = await auth.issueAccessToken(tenant, user, sessionId, extra, req);
    return { accessToken, refreshToken, user: users.publicUser(user) };
  }

  /** Mails the code (or has the project's auth.mail hook render or send it: docs/own-code.md "Auth hooks"). */
  function sendCode(
    tenant: Tenant,
    user: users.UserRow,
    purpose: 'confirm-signup' | 'reset-password',
    code: string,
    req?: ApiRequest,
  ) {
    const signup = purpose === 'confirm-signup';
    const validMinutes = Math.round(config.auth.codeTtl / 60);
    const subject = signup ? 'Confirm your e-mail address' : 'Reset your password';
    const text = `${signup ? 'Your confirmation code' : 'Your password reset code'} is ${code}. It is valid for ${validMinutes} minutes.`;
    auth.hooks.send(
      { kind: purpose, to: user.email, environment: tenant.environment, subject, text, code, validMinutes },
      {
        to: user.email,
        subject,
        text,
        meta: { kind: purpose, code, project: tenant.projectId, environment: tenant.environment },
      },
      req,
    );
  }

  return { limit, limitCodes, tokenPair, sendCode };
}

export type SignInContext = ReturnType<typeof signInContext>;
