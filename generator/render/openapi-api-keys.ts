/** The OpenAPI paths of API key management (docs/api.md §4). */
import type { OpenApiBuilder } from 'openapi3-ts/oas31';
import { apiKey, createdApiKey, newKeyBody } from '../../runtime/model/wire/index.ts';
import { BASE, BODY, dataEnvelope, managementErrors } from './openapi-shared.ts';
import { wireAnswer, wireBody } from './openapi-wire.ts';

export function apiKeyPaths(builder: OpenApiBuilder): void {
  const security = [{ managementToken: [], projectId: [] }];
  builder.addPath(`${BASE}/_apikeys`, {
    parameters: [{ $ref: '#/components/parameters/environment' }],
    post: {
      tags: ['API keys'],
      operationId: 'createApiKey',
      summary: 'Create an API key (its value is shown only in this response)',
      security,
      requestBody: wireBody(newKeyBody),
      responses: {
        '201': {
          description: 'The new key',
          content: dataEnvelope(wireAnswer(createdApiKey)),
        },
        ...managementErrors([...BODY, 'validation']),
      },
    },
    get: {
      tags: ['API keys'],
      operationId: 'listApiKeys',
      summary: 'List the API keys of the environment (no key values)',
      security,
      responses: {
        '200': {
          description: 'Keys',
          content: dataEnvelope({ type: 'array', items: wireAnswer(apiKey) }),
        },
        ...managementErrors(),
      },
    },
  });
  builder.addPath(`${BASE}/_apikeys/{id}`, {
    parameters: [
      { $ref: '#/components/parameters/environment' },
      { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
    ],
    delete: {
      tags: ['API keys'],
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key',
      security,
      responses: {
        '204': { description: 'Revoked' },
        ...managementErrors(['not-found'], { 'not-found': 'no API key with this id, or it was already revoked' }),
      },
    },
  });
}
