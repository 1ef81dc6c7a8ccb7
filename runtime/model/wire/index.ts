/**
 * The bodies (and query values) the server's own endpoints read, as zod schemas: /auth, /_apikeys,
 * /_webhooks and /_files, and the shapes of some of their answers. The runtime validates with them
 * (and types those answers), the generator derives their OpenAPI schemas from them
 * (generator/render/openapi-wire.ts), so each rule is written once. zod only, no I/O.
 */
import { z } from 'zod';
import { accountSession, message, publicUser, session, tokenPair } from './auth.ts';
import { webhookDelivery, webhookSubscription } from './webhooks.ts';

export {
  changeEmailBody,
  changePasswordBody,
  confirmEmailChangeBody,
  confirmSignupBody,
  deleteAccountBody,
  loginBody,
  accountSession,
  message,
  PASSWORD_MAX_BYTES,
  publicUser,
  PASSWORD_RULE,
  recoverPasswordBody,
  refreshTokenBody,
  resetPasswordBody,
  session,
  signupBody,
  tokenPair,
  type AuthRules,
} from './auth.ts';
export { fileName, MAX_FILE_NAME_CHARS, signedUrlBody } from './files.ts';
export { apiKey, createdApiKey, newKeyBody } from './keys.ts';
export { type FieldRule, ruled } from './rules.ts';
export {
  DELIVERY_STATUSES,
  EVENT_NAMES,
  newSubscriptionBody,
  SUBSCRIPTION_DEFAULTS,
  subscriptionFields,
  subscriptionPatchBody,
  webhookDelivery,
  webhookSubscription,
} from './webhooks.ts';

/**
 * The answers named as components of the OpenAPI document, by component name: a schema that
 * contains another refers to it by that name.
 */
export const WIRE_COMPONENTS = z.registry<{ id: string }>();
for (const [id, schema] of Object.entries({
  User: publicUser,
  TokenPair: tokenPair,
  Session: session,
  Message: message,
  AccountSession: accountSession,
  WebhookSubscription: webhookSubscription,
  WebhookDelivery: webhookDelivery,
}))
  WIRE_COMPONENTS.add(schema, { id });
