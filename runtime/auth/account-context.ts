/**
 * What every route of a signed-in user's own account shares (docs/api.md §3 "Your account"): the
 * caller from the access token, the user's rate-limit budgets, announcing revocations and the
 * notices mailed about a change.
 */
import { AuthError, type ApiRequest } from '../http/index.ts';
import { readCredential } from '../principal/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import type { AuthMail } from '../usercode/index.ts';
import { resolveAuthTenant } from './requests.ts';
import { TokenRejected, type AccessClaims } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

export interface Caller {
  readonly tenant: Tenant;
  readonly claims: AccessClaims;
}

export type SignedIn = Caller & { readonly user: users.UserRow };

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

/** Told to the owner in every notice of a change they may not have made. */
export const NOT_YOU =
  'If that was not you, reset your password at once (POST /auth/recover-password, then POST /auth/reset-password).';

export function accountContext(auth: UserAuth) {
  const { config, db } = auth;

  /** The caller and their account; reads and session ends count in one budget, changes in another. */
  async function signedIn(req: ApiRequest, budget: 'read' | 'change'): Promise<SignedIn> {
    const caller = await authenticate(auth, req);
    const { tenant, claims } = caller;
    const perMinute =
      budget === 'read' ? config.rateLimits.accountPerMinutePerUser : config.rateLimits.accountChangesPerMinutePerUser;
    await auth.rateLimiter.hit(
      `auth-account-${budget}:${tenant.projectId}:${tenant.environment}:${claims.userId}`,
      perMinute,
    );
    const user = await users.findUserById(db, claims.userId);
    // Deleting an account ends its sessions, so a live token has a user; a gap here is a race with the delete.
    if (!user) throw new AuthError('AUTH_TOKEN_INVALID');
    return { ...caller, user };
  }

  /** Every process hears of revocations on commit; this one knows at once. */
  function remember(sessionIds: readonly string[], tokenId?: string): void {
    for (const sessionId of sessionIds) auth.revocations.remember({ sessionId });
    if (tokenId) auth.revocations.remember({ tokenId });
  }

  /** Queued, not awaited; the mailer retries and logs its own failures (the project's auth.mail hook may render it). */
  function notice(
    tenant: Tenant,
    to: string,
    kind: AuthMail['kind'],
    subject: string,
    text: string,
    meta: Record<string, string> = {},
    details: Pick<AuthMail, 'code' | 'validMinutes' | 'newEmail'> = {},
  ): void {
    try {
      auth.hooks.send(
        { kind, to, environment: tenant.environment, subject, text, ...details },
        {
          to,
          subject,
          text,
          meta: { kind, project: tenant.projectId, environment: tenant.environment, ...meta },
        },
      );
    } catch (error) {
      auth.log(`the ${kind} mail to ${to} failed: ${(error as Error).message}`);
    }
  }

  return { signedIn, remember, notice };
}

export type AccountContext = ReturnType<typeof accountContext>;
