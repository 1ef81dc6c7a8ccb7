/**
 * The OpenAPI paths of user authentication (docs/api.md §3): /auth at the server root, not under
 * the data base path. Their errors are `{ error, ... }` bodies (AuthError), not Problem Details.
 */
import type { OpenApiBuilder, ParameterObject, ResponseObject, SchemaObject } from 'openapi3-ts/oas31';
import { AUTH_ERRORS, type AuthErrorCode } from '../../runtime/model/index.ts';
import {
  changeEmailBody,
  changePasswordBody,
  confirmEmailChangeBody,
  confirmSignupBody,
  deleteAccountBody,
  loginBody,
  recoverPasswordBody,
  refreshTokenBody,
  resetPasswordBody,
  signupBody,
} from '../../runtime/model/wire/index.ts';
import { ref } from './openapi-shared.ts';
import { wireBody, wireComponents } from './openapi-wire.ts';

const AUTH = '/auth';
const TAGS = ['auth'];

const AUTH_ERROR_CODES = Object.keys(AUTH_ERRORS) as AuthErrorCode[];

/** An error response of the auth surface; `codes` are the `error` values it can carry. */
function authError(description: string, codes: AuthErrorCode[], headers?: ResponseObject['headers']): ResponseObject {
  return {
    description: `${description} (${codes.join(' or ')})`,
    ...(headers ? { headers } : {}),
    content: { 'application/json': { schema: ref('AuthError') } },
  };
}

const json = (schema: SchemaObject | { $ref: string }) => ({ 'application/json': { schema } });
const ok = (description: string, schema: SchemaObject | { $ref: string }): ResponseObject => ({
  description,
  content: json(schema),
});

const NOT_CONFIGURED = authError(
  'Auth is not enabled for this project and environment, or the project or environment is unknown',
  ['AUTH_NOT_CONFIGURED'],
);
const INVALID_REQUEST = authError(
  'X-Project-Id missing, or the body is not valid JSON of this shape; violations name the fields',
  ['VALIDATION_ERROR'],
);
/** docs/own-code.md "Auth hooks": the project's own code refused with refuse(...). */
const HOOK_REFUSED = authError("The project's auth hook refused; violations say why", ['AUTH_REFUSED']);
const RATE_LIMITED = authError('Too many requests', ['RATE_LIMIT_EXCEEDED'], {
  'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 0 } },
});

export function authPaths(builder: OpenApiBuilder): void {
  builder.addSchema('AuthError', {
    type: 'object',
    description: 'The error body of the /auth endpoints (not Problem Details)',
    required: ['error'],
    properties: {
      error: { type: 'string', enum: [...AUTH_ERROR_CODES] },
      violations: {
        type: 'array',
        description: 'With VALIDATION_ERROR: what is wrong, field by field',
        items: {
          type: 'object',
          required: ['field', 'rule', 'message'],
          properties: { field: { type: 'string' }, rule: { type: 'string' }, message: { type: 'string' } },
        },
      },
      lockedUntil: {
        type: 'string',
        format: 'date-time',
        description: 'With AUTH_ACCOUNT_LOCKED: when login is possible again',
      },
    },
  });
  const wire = wireComponents();
  for (const name of ['User', 'TokenPair', 'Session', 'Message', 'AccountSession'])
    builder.addSchema(name, wire[name]!);
  builder.addSchema('Jwks', {
    type: 'object',
    description: 'JSON Web Key Set (RFC 7517): the signing key, plus the encryption key when auth.jwe is on',
    required: ['keys'],
    properties: {
      keys: {
        type: 'array',
        items: {
          type: 'object',
          required: ['kty', 'kid', 'use', 'alg', 'n', 'e'],
          properties: {
            kty: { type: 'string' },
            kid: { type: 'string' },
            use: { type: 'string', enum: ['sig', 'enc'] },
            alg: { type: 'string' },
            n: { type: 'string' },
            e: { type: 'string' },
          },
        },
      },
    },
  });

  const parameters = [{ $ref: '#/components/parameters/environment' }];
  // No credential, only the project (the projectId scheme carries X-Project-Id).
  const anonymous: Record<string, string[]>[] = [{ projectId: [] }];

  builder.addPath(`${AUTH}/signup`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authSignup',
      summary: 'Create a user account (a confirmation code is e-mailed when auth.emailVerification is on)',
      security: anonymous,
      requestBody: wireBody(signupBody()),
      responses: {
        '201': ok('Account created', {
          type: 'object',
          required: ['userId', 'message'],
          properties: { userId: { type: 'string', format: 'uuid' }, message: { type: 'string' } },
        }),
        '400': authError(
          'Invalid body, a password that breaks the rule, a role not open to signup, or X-Project-Id missing',
          ['VALIDATION_ERROR'],
        ),
        '404': NOT_CONFIGURED,
        '409': authError('An account with this e-mail already exists', ['AUTH_EMAIL_EXISTS']),
        '422': HOOK_REFUSED,
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/confirm-signup`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authConfirmSignup',
      summary: 'Confirm the e-mail address with the code from signup, and log in',
      security: anonymous,
      requestBody: wireBody(confirmSignupBody),
      responses: {
        '200': ok('Confirmed and logged in', ref('Session')),
        '400': authError('Wrong, expired or used-up code, or an invalid request', [
          'AUTH_INVALID_CODE',
          'VALIDATION_ERROR',
        ]),
        '404': NOT_CONFIGURED,
        '422': HOOK_REFUSED,
      },
    },
  });
  builder.addPath(`${AUTH}/login`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authLogin',
      summary: 'Log in with e-mail and password',
      security: anonymous,
      requestBody: wireBody(loginBody),
      responses: {
        '200': ok('Logged in', ref('Session')),
        '400': INVALID_REQUEST,
        '401': authError('Unknown e-mail or wrong password', ['AUTH_INVALID_CREDENTIALS']),
        '403': authError('The e-mail address is not confirmed yet', ['AUTH_EMAIL_NOT_VERIFIED']),
        '404': NOT_CONFIGURED,
        '423': authError('Too many failed logins; lockedUntil tells when to try again', ['AUTH_ACCOUNT_LOCKED']),
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/recover-password`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authRecoverPassword',
      summary: 'E-mail a password reset code (the answer is the same whether or not the e-mail has an account)',
      security: anonymous,
      requestBody: wireBody(recoverPasswordBody),
      responses: {
        '200': ok('Accepted; a code is sent if the e-mail has an account', ref('Message')),
        '400': INVALID_REQUEST,
        '404': NOT_CONFIGURED,
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/reset-password`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authResetPassword',
      summary: 'Set a new password with the reset code (ends every session of the user)',
      security: anonymous,
      requestBody: wireBody(resetPasswordBody()),
      responses: {
        '200': ok('Password replaced', ref('Message')),
        '400': authError('Wrong, expired or used-up code, a password that breaks the rule, or an invalid request', [
          'AUTH_INVALID_CODE',
          'VALIDATION_ERROR',
        ]),
        '404': NOT_CONFIGURED,
      },
    },
  });
  builder.addPath(`${AUTH}/refresh-token`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authRefreshToken',
      summary:
        'Swap a refresh token for a new token pair (a used refresh token presented again revokes the whole session)',
      security: anonymous,
      requestBody: wireBody(refreshTokenBody),
      responses: {
        '200': ok('A new token pair; the old refresh token is spent', ref('TokenPair')),
        '400': INVALID_REQUEST,
        '401': authError('Unknown, expired, revoked or reused refresh token', ['AUTH_TOKEN_INVALID']),
        '404': NOT_CONFIGURED,
      },
    },
  });
  builder.addPath(`${AUTH}/logout`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authLogout',
      summary: 'End the session of the access token (it and its refresh token stop working)',
      security: [{ bearerJwt: [], projectId: [] }],
      responses: {
        '200': ok('Logged out', ref('Message')),
        '400': INVALID_REQUEST,
        '401': authError('Missing, invalid, revoked or expired access token', [
          'AUTH_TOKEN_INVALID',
          'AUTH_TOKEN_EXPIRED',
        ]),
        '404': NOT_CONFIGURED,
      },
    },
  });
  accountPaths(builder, parameters);
  // X-Project-Id is optional here: JWKS clients that fetch by URL give project_id (and environment) as query parameters.
  const jwksProjectId: ParameterObject = {
    name: 'X-Project-Id',
    in: 'header',
    required: false,
    description: 'The project; required unless the project_id query parameter gives it',
    schema: { type: 'string' },
  };
  builder.addPath(`${AUTH}/.well-known/jwks.json`, {
    parameters: [
      jwksProjectId,
      { $ref: '#/components/parameters/environment' },
      {
        name: 'project_id',
        in: 'query',
        required: false,
        description: 'The project, instead of X-Project-Id',
        schema: { type: 'string' },
      },
      {
        name: 'environment',
        in: 'query',
        required: false,
        description: 'The environment, instead of the environment header',
        schema: { type: 'string', default: 'master' },
      },
    ],
    get: {
      tags: TAGS,
      operationId: 'authJwks',
      summary: 'The public keys of the environment: verify access tokens (sig) or encrypt to the server (enc)',
      security: [],
      responses: {
        '200': {
          description: 'The key set',
          headers: { 'Cache-Control': { description: 'public, max-age=300', schema: { type: 'string' } } },
          content: json(ref('Jwks')),
        },
        '400': authError('Neither X-Project-Id nor project_id given', ['VALIDATION_ERROR']),
        '404': NOT_CONFIGURED,
      },
    },
  });
}

const SIGNED_IN = [{ bearerJwt: [], projectId: [] }];
const TOKEN_REJECTED = authError('Missing, invalid, revoked or expired access token', [
  'AUTH_TOKEN_INVALID',
  'AUTH_TOKEN_EXPIRED',
]);
const WRONG_PASSWORD = authError(
  'currentPassword is wrong (counted as a failed login), or the access token is missing, invalid, revoked or expired',
  ['AUTH_INVALID_CREDENTIALS', 'AUTH_TOKEN_INVALID', 'AUTH_TOKEN_EXPIRED'],
);
const LOCKED = authError('Too many failed logins or wrong current passwords; lockedUntil tells when to try again', [
  'AUTH_ACCOUNT_LOCKED',
]);

/** A signed-in user's own account (docs/api.md §3 "Your account"): every route takes the user's access token. */
function accountPaths(builder: OpenApiBuilder, parameters: { $ref: string }[]): void {
  builder.addPath(`${AUTH}/me`, {
    parameters,
    get: {
      tags: TAGS,
      operationId: 'authMe',
      summary: 'The signed-in user',
      security: SIGNED_IN,
      responses: {
        '200': ok('The user of the access token', ref('User')),
        '400': INVALID_REQUEST,
        '401': TOKEN_REJECTED,
        '404': NOT_CONFIGURED,
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/change-password`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authChangePassword',
      summary: 'Change the password (needs the current one); every other session of the user ends, this one stays',
      security: SIGNED_IN,
      requestBody: wireBody(changePasswordBody()),
      responses: {
        '200': ok('Password changed', ref('Message')),
        '400': authError('Invalid body, or a new password that breaks the rule or equals the current one', [
          'VALIDATION_ERROR',
        ]),
        '401': WRONG_PASSWORD,
        '404': NOT_CONFIGURED,
        '423': LOCKED,
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/change-email`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authChangeEmail',
      summary:
        'Ask to change the e-mail address (needs the current password): a 6-digit code is mailed to the new address',
      security: SIGNED_IN,
      requestBody: wireBody(changeEmailBody),
      responses: {
        '200': ok('Code sent to the new address', ref('Message')),
        '400': authError('Invalid body, or newEmail is already the address of this account', ['VALIDATION_ERROR']),
        '401': WRONG_PASSWORD,
        '404': NOT_CONFIGURED,
        '409': authError('Another account has this address', ['AUTH_EMAIL_EXISTS']),
        '423': LOCKED,
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/confirm-email-change`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authConfirmEmailChange',
      summary:
        'Confirm the new address with the code mailed to it: every session ends and a new one starts (its tokens carry the new address)',
      security: SIGNED_IN,
      requestBody: wireBody(confirmEmailChangeBody),
      responses: {
        '200': ok('Address changed; a new session', ref('Session')),
        '400': authError('Wrong, expired or used-up code, or an invalid request', [
          'AUTH_INVALID_CODE',
          'VALIDATION_ERROR',
        ]),
        '401': TOKEN_REJECTED,
        '404': NOT_CONFIGURED,
        '409': authError('Another account took the address since the code was sent', ['AUTH_EMAIL_EXISTS']),
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/sessions`, {
    parameters,
    get: {
      tags: TAGS,
      operationId: 'authListSessions',
      summary: 'The live sessions of the signed-in user, most recently used first (at most 100; no token values)',
      security: SIGNED_IN,
      responses: {
        '200': ok('The sessions', {
          type: 'object',
          required: ['sessions'],
          properties: { sessions: { type: 'array', items: ref('AccountSession') } },
        }),
        '400': INVALID_REQUEST,
        '401': TOKEN_REJECTED,
        '404': NOT_CONFIGURED,
        '429': RATE_LIMITED,
      },
    },
    delete: {
      tags: TAGS,
      operationId: 'authEndOtherSessions',
      summary: 'End every session of the signed-in user but the current one',
      security: SIGNED_IN,
      responses: {
        '200': ok('Sessions ended', {
          type: 'object',
          required: ['message', 'ended'],
          properties: {
            message: { type: 'string' },
            ended: { type: 'integer', minimum: 0, description: 'How many sessions ended' },
          },
        }),
        '400': INVALID_REQUEST,
        '401': TOKEN_REJECTED,
        '404': NOT_CONFIGURED,
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/sessions/{id}`, {
    parameters,
    delete: {
      tags: TAGS,
      operationId: 'authEndSession',
      parameters: [
        {
          name: 'id',
          in: 'path',
          required: true,
          description: 'A session id from GET /auth/sessions',
          schema: { type: 'string' },
        },
      ],
      summary: 'End one session of the signed-in user (the current one too: that is a logout)',
      security: SIGNED_IN,
      responses: {
        '200': ok('Session ended', ref('Message')),
        '400': INVALID_REQUEST,
        '401': TOKEN_REJECTED,
        '404': authError(
          "No live session of this user has this id (unknown, already ended, or another user's), or auth is not enabled here",
          ['AUTH_SESSION_NOT_FOUND', 'AUTH_NOT_CONFIGURED'],
        ),
        '429': RATE_LIMITED,
      },
    },
  });
  builder.addPath(`${AUTH}/delete-account`, {
    parameters,
    post: {
      tags: TAGS,
      operationId: 'authDeleteAccount',
      summary:
        "Delete the account (needs the current password): every session ends; rows of the project's tables are not touched",
      security: SIGNED_IN,
      requestBody: wireBody(deleteAccountBody),
      responses: {
        '200': ok('Account deleted', ref('Message')),
        '400': INVALID_REQUEST,
        '401': WRONG_PASSWORD,
        '404': NOT_CONFIGURED,
        '423': LOCKED,
        '429': RATE_LIMITED,
      },
    },
  });
}
