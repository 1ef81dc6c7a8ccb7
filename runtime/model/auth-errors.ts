/**
 * Codes of the authentication endpoints and their statuses (docs/api.md §6.3),
 * in one place: the runtime answers them and the generator writes them into the OpenAPI document.
 */
export const AUTH_ERRORS = {
  AUTH_EMAIL_EXISTS: 409,
  AUTH_INVALID_CREDENTIALS: 401,
  AUTH_EMAIL_NOT_VERIFIED: 403,
  AUTH_ACCOUNT_LOCKED: 423,
  AUTH_INVALID_CODE: 400,
  AUTH_TOKEN_EXPIRED: 401,
  AUTH_TOKEN_INVALID: 401,
  AUTH_NOT_CONFIGURED: 404,
  /** Not a live session of the caller's (docs/api.md §3 "Your account"): unknown, ended, or another user's. */
  AUTH_SESSION_NOT_FOUND: 404,
  /** The project's auth hook refused (docs/own-code.md "Auth hooks"); `violations` say why. */
  AUTH_REFUSED: 422,
  RATE_LIMIT_EXCEEDED: 429,
  VALIDATION_ERROR: 400,
} as const;

export type AuthErrorCode = keyof typeof AUTH_ERRORS;
