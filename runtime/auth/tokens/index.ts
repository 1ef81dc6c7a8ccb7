export { issueAccessToken, looksLikeJwt, audience, TokenRejected, type AccessClaims } from './access-tokens.ts';
export { AccessTokenVerifier } from './token-verifier.ts';
export { Revocations } from './revocations.ts';
export { loadEnvironmentKeys, jwks, type EnvironmentKeys } from './signing-keys.ts';
