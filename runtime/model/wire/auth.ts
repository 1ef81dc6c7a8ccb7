/**
 * The request bodies of /auth (docs/api.md §3): the runtime validates with these, the generator
 * derives their OpenAPI schemas from them. Objects are not strict: unknown fields are dropped.
 * The answers' shapes follow: the runtime types what it sends with them (it does not parse them).
 */
import { z } from 'zod';
import { dateTimeText, uuidText } from './formats.ts';
import { type FieldRule, ruled } from './rules.ts';

/** bcrypt reads no further (docs/api.md §3 "Sign up and confirm"). */
export const PASSWORD_MAX_BYTES = 72;

export const PASSWORD_RULE = `At least auth.password.minLength characters (default 8), with at least one letter and one digit, and at most ${PASSWORD_MAX_BYTES} bytes in UTF-8`;

/** The config's rules the runtime hands in; without them (the OpenAPI document) only the shape is checked. */
export interface AuthRules {
  readonly password?: FieldRule;
  /** roleId names a role open to signup. */
  readonly signupRole?: FieldRule;
}

/** A new address: trimmed, then an e-mail address of at most 254 characters (RFC 5321's path limit). */
const address = z.string().trim().check(z.email(), z.maxLength(254));
/** An address to look up: compared as stored, so no format rule (an unknown one just finds no account). */
const knownEmail = z.string().max(254);
const name = z.string().trim().min(1).max(100);
const code = z
  .string()
  .max(64)
  .meta({ description: 'The 6-digit code sent by e-mail', examples: ['483920'] });
const currentPassword = z.string().max(1024).meta({ description: 'The password the account has now' });
const newPassword = (field: string, rules: AuthRules) =>
  ruled(z.string(), field, rules.password).meta({ description: PASSWORD_RULE });

export function signupBody(rules: AuthRules = {}) {
  return z.object({
    email: address,
    password: newPassword('password', rules),
    firstName: name,
    lastName: name,
    roleId: ruled(z.string(), 'roleId', rules.signupRole)
      .meta({ description: 'A role open to signup; auth.defaultRole when left out' })
      .optional(),
  });
}

export const confirmSignupBody = z.object({ email: knownEmail, code });
export const loginBody = z.object({ email: knownEmail, password: z.string() });
export const recoverPasswordBody = z.object({ email: knownEmail });

export function resetPasswordBody(rules: AuthRules = {}) {
  return z.object({ email: knownEmail, newPassword: newPassword('newPassword', rules), code });
}

export const refreshTokenBody = z.object({ refreshToken: z.string().max(512) });

/** Bodies of a signed-in user's account changes (docs/api.md §3 "Your account"). */
export function changePasswordBody(rules: AuthRules = {}) {
  return z.object({
    currentPassword,
    newPassword: newPassword('newPassword', rules).meta({ description: `${PASSWORD_RULE}; not the current password` }),
  });
}
export const changeEmailBody = z.object({ newEmail: address, currentPassword });
export const confirmEmailChangeBody = z.object({ code });
export const deleteAccountBody = z.object({ currentPassword });

/** `user` in answers: the account without its password hash or state. */
export const publicUser = z.object({
  id: uuidText,
  email: z.string().meta({ format: 'email' }),
  firstName: z.string(),
  lastName: z.string(),
  roles: z.array(z.string()),
});

export const tokenPair = z.object({
  accessToken: z.string().meta({ description: 'A JWT for the bearerJwt scheme' }),
  refreshToken: z.string().meta({ description: 'Single use: POST /auth/refresh-token swaps it for a new pair' }),
});

/** The answer of a login, a confirmation and a confirmed e-mail change: tokens and their user. */
export const session = tokenPair.extend({ user: publicUser });

export const message = z.object({ message: z.string() });

/** One entry of GET /auth/sessions (docs/api.md §3 "Your account"): no token values. */
export const accountSession = z.object({
  id: uuidText.meta({ description: 'The sid claim of its access tokens' }),
  createdAt: dateTimeText.meta({ description: 'The login (or confirmation) that started it' }),
  lastUsedAt: dateTimeText.meta({ description: 'Its latest login or refresh (data requests do not count)' }),
  expiresAt: dateTimeText.nullable().meta({
    description: 'When its refresh token runs out; null when it has (only the current session is listed then)',
  }),
  current: z.boolean().meta({ description: 'The session of the access token that asked' }),
});
