/**
 * The bodies (and query values) the server's own endpoints read, as zod schemas: /auth, /_apikeys,
 * /_webhooks and /_files. The runtime validates with them and the generator derives their OpenAPI
 * schemas from them (generator/render/openapi-wire.ts), so each rule is written once. zod only, no I/O.
 */
export {
  changeEmailBody,
  changePasswordBody,
  confirmEmailChangeBody,
  confirmSignupBody,
  deleteAccountBody,
  loginBody,
  PASSWORD_MAX_BYTES,
  PASSWORD_RULE,
  recoverPasswordBody,
  refreshTokenBody,
  resetPasswordBody,
  signupBody,
  type AuthRules,
} from './auth.ts';
export { fileName, MAX_FILE_NAME_CHARS, signedUrlBody } from './files.ts';
export { newKeyBody } from './keys.ts';
export { type FieldRule, ruled } from './rules.ts';
export {
  EVENT_NAMES,
  newSubscriptionBody,
  SUBSCRIPTION_DEFAULTS,
  subscriptionFields,
  subscriptionPatchBody,
} from './webhooks.ts';
