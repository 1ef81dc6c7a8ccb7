/**
 * Getting and ending tokens (docs/api.md §3 "Tokens and sessions"): log in, swap a refresh token,
 * log out, and the public keys that verify access tokens.
 */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import { loginBody, refreshTokenBody } from '../model/wire/index.ts';
import { authenticate } from './account-context.ts';
import { checkLogin } from './login.ts';
import { endSession, rotateRefreshToken } from './refresh-tokens.ts';
import { readAuthBody, resolveAuthTenant } from './requests.ts';
import type { SignInContext } from './sign-in.ts';
import { jwks } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

export function tokenHandlers(auth: UserAuth, { limit, tokenPair }: SignInContext) {
  const { config, db } = auth;

  async function login(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    await limit(`auth-login:${tenant.projectId}:${auth.clientIp(req)}`, config.rateLimits.loginPerMinutePerIp);
    const body = await readAuthBody(req, loginBody);
    const user = await checkLogin(auth, tenant, body.email, body.password);
    return jsonReply(200, await tokenPair(tenant, user, req));
  }

  async function refreshToken(req: ApiRequest): Promise<Reply> {
    const tenant = resolveAuthTenant(req, config);
    const body = await readAuthBody(req, refreshTokenBody);
    // The access token is made before the rotation commits: a failing auth.claims hook leaves the
    // refresh token unspent (spending it and failing would make its next use look like a reuse).
    const rotation = await rotateRefreshToken(
      db,
      tenant,
      body.refreshToken,
      config.auth.refreshTokenTtl,
      async (tx, userId, sessionId) => {
        const user = await users.findUserById(tx, userId);
        return user && (await auth.issueAccessToken(tenant, user, sessionId, undefined, req));
      },
    );
    if (!rotation.ok) {
      if (rotation.revokedSession) auth.revocations.remember({ sessionId: rotation.revokedSession });
      throw new AuthError('AUTH_TOKEN_INVALID');
    }
    if (!rotation.issued) throw new AuthError('AUTH_TOKEN_INVALID');
    return jsonReply(200, { accessToken: rotation.issued, refreshToken: rotation.refreshToken });
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

  return { login, refreshToken, logout, jwks: jwksDocument };
}
