/**
 * The /auth endpoints and the account and session states they move through (docs/api.md §3). Every
 * failure is an AuthError; the HTTP layer turns it into `{ error, ... }`.
 */
import type { Handler } from '../http/index.ts';
import { accountHandlers } from './account.ts';
import { asAuthError } from './auth-errors.ts';
import { recoveryHandlers } from './recovery-handlers.ts';
import { signInContext } from './sign-in.ts';
import { signupHandlers } from './signup-handlers.ts';
import { tokenHandlers } from './token-handlers.ts';
import type { UserAuth } from './user-auth.ts';

/** Wraps a handler so the neutral rate-limit error becomes RATE_LIMIT_EXCEEDED. */
function authRoute(handler: Handler): Handler {
  return (req) => handler(req).catch((error: unknown) => Promise.reject(asAuthError(error)));
}

/** Every /auth handler by name, each group in its own file (signup, recovery, tokens, the account's). */
export function authHandlers(auth: UserAuth) {
  const signIn = signInContext(auth);
  const handlers = {
    ...signupHandlers(auth, signIn),
    ...tokenHandlers(auth, signIn),
    ...recoveryHandlers(auth, signIn),
    ...accountHandlers(auth),
  };
  return Object.fromEntries(Object.entries(handlers).map(([name, handler]) => [name, authRoute(handler)])) as Record<
    keyof typeof handlers,
    Handler
  >;
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
