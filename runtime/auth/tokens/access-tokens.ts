/**
 * Access tokens: an RS256 JWS with kid, sub, sid, jti, exp and the user's roles; with `auth.jwe`
 * that JWS travels inside a JWE (RSA-OAEP-256, A256GCM) for the environment's encryption key.
 * Inbound, both forms are accepted. The audience names project and environment, so a token of
 * another project or environment is refused even where keys were shared.
 */
import { randomUUID } from 'node:crypto';
import { CompactEncrypt, SignJWT, compactDecrypt, decodeProtectedHeader, errors, jwtVerify } from 'jose';
import type { EnvironmentKeys } from './signing-keys.ts';

export const ISSUER = 'svcgen';

export interface AccessClaims {
  readonly userId: string;
  readonly email: string;
  readonly roles: readonly string[];
  readonly sessionId: string;
  readonly tokenId: string;
  /** Expiry, epoch seconds. */
  readonly expiresAt: number;
}

/** Why a token was refused: AUTH_TOKEN_EXPIRED or AUTH_TOKEN_INVALID (docs/api.md §6.3). */
export class TokenRejected extends Error {
  constructor(readonly reason: 'expired' | 'invalid') {
    super(reason === 'expired' ? 'the access token has expired' : 'the access token is not valid');
    this.name = 'TokenRejected';
  }
}

export function audience(projectId: string, environment: string): string {
  return `${projectId}/${environment}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const JWT_SHAPE = /^eyJ[\w-]*\.[\w-]*\.[\w-]*(\.[\w-]*\.[\w-]*)?$/;

/** A JWS (3 parts) or JWE (5 parts) in compact form: what the user-token resolver takes. */
export function looksLikeJwt(token: string): boolean {
  return JWT_SHAPE.test(token);
}

export async function issueAccessToken(
  keys: EnvironmentKeys,
  aud: string,
  ttlSeconds: number,
  user: { id: string; email: string; roles: readonly string[] },
  sessionId: string,
  /** The project's extra claims (auth.claims, checked: no reserved name, JSON, size-bounded). */
  extra: Record<string, unknown> = {},
): Promise<{ token: string; claims: AccessClaims }> {
  const now = Math.floor(Date.now() / 1000);
  const claims: AccessClaims = {
    userId: user.id,
    email: user.email,
    roles: [...user.roles],
    sessionId,
    tokenId: randomUUID(),
    expiresAt: now + ttlSeconds,
  };
  const jws = await new SignJWT({ ...extra, sid: sessionId, email: user.email, roles: claims.roles })
    .setProtectedHeader({ alg: 'RS256', kid: keys.sig.kid, typ: 'JWT' })
    .setIssuer(ISSUER)
    .setAudience(aud)
    .setSubject(user.id)
    .setJti(claims.tokenId)
    .setIssuedAt(now)
    .setExpirationTime(claims.expiresAt)
    .sign(keys.sig.privateKey);
  if (!keys.enc) return { token: jws, claims };
  const jwe = await new CompactEncrypt(new TextEncoder().encode(jws))
    .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM', kid: keys.enc.kid, cty: 'JWT' })
    .encrypt(keys.enc.publicKey);
  return { token: jwe, claims };
}

/** Verifies signature, issuer, audience and expiry; throws TokenRejected. */
export async function verifyAccessToken(keys: EnvironmentKeys, aud: string, token: string): Promise<AccessClaims> {
  try {
    let jws = token;
    if (token.split('.').length === 5) {
      if (!keys.enc || decodeProtectedHeader(token).kid !== keys.enc.kid) throw new TokenRejected('invalid');
      const { plaintext } = await compactDecrypt(token, keys.enc.privateKey, {
        keyManagementAlgorithms: ['RSA-OAEP-256'],
        contentEncryptionAlgorithms: ['A256GCM'],
      });
      jws = new TextDecoder().decode(plaintext);
    }
    if (decodeProtectedHeader(jws).kid !== keys.sig.kid) throw new TokenRejected('invalid');
    const { payload } = await jwtVerify(jws, keys.sig.publicKey, {
      issuer: ISSUER,
      audience: aud,
      algorithms: ['RS256'],
    });
    const { sub, sid, jti, exp, email, roles } = payload as Record<string, unknown>;
    if (
      typeof sub !== 'string' ||
      typeof sid !== 'string' ||
      !UUID.test(sid) ||
      typeof jti !== 'string' ||
      typeof exp !== 'number' ||
      typeof email !== 'string' ||
      !Array.isArray(roles) ||
      !roles.every((r) => typeof r === 'string')
    ) {
      throw new TokenRejected('invalid');
    }
    return { userId: sub, email, roles, sessionId: sid, tokenId: jti, expiresAt: exp };
  } catch (error) {
    if (error instanceof TokenRejected) throw error;
    if (error instanceof errors.JWTExpired) throw new TokenRejected('expired');
    throw new TokenRejected('invalid');
  }
}
