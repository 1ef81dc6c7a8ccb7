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

  /** Signs the user in: a new session, an access token and its refresh token. */
  async function tokenPair(tenant: Tenant, user: users.UserRow): Promise<z.output<typeof session>> {
    const started = await startSession(db, user, config.auth.refreshTokenTtl);
    // The password or address changed, or the account was deleted, since the credentials were checked.
    if (!started) throw new AuthError('AUTH_INVALID_CREDENTIALS');
    const { sessionId, refreshToken } = started;
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

  return { limit, limitCodes, tokenPair, sendCode };
}

export type SignInContext = ReturnType<typeof signInContext>;
