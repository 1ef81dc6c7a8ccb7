/** The OpenAPI paths of webhook management (docs/api.md §8.1). */
import type { OpenApiBuilder, ParameterObject, SchemaObject } from 'openapi3-ts/oas31';
import { newSubscriptionBody, subscriptionPatchBody } from '../../runtime/model/wire/index.ts';
import { BASE, BODY, dataEnvelope, managementErrors } from './openapi-shared.ts';
import { wireComponents, wireSchema } from './openapi-wire.ts';

export function webhookPaths(builder: OpenApiBuilder, tables: readonly string[]): void {
  // The table must be one of the project's (runtime/webhooks checks it against the model).
  const withTables = (schema: SchemaObject): SchemaObject => ({
    ...schema,
    properties: { ...schema.properties, table: { type: 'string', enum: [...tables] } },
  });
  const wire = wireComponents();
  builder.addSchema('WebhookSubscription', withTables(wire.WebhookSubscription!));
  builder.addSchema('WebhookDelivery', wire.WebhookDelivery!);
  const subscription = { $ref: '#/components/schemas/WebhookSubscription' };
  const security = [{ managementToken: [], projectId: [] }];
  const headers: ParameterObject[] = [
    {
      name: 'environment',
      in: 'header',
      required: true,
      schema: { type: 'string' },
      description: 'required on every webhook request',
    },
  ];
  const id: ParameterObject = { name: 'id', in: 'path', required: true, schema: { type: 'string' } };
  const body = (schema: SchemaObject) => ({ required: true, content: { 'application/json': { schema } } });
  const json = (schema: SchemaObject | { $ref: string }) => ({ 'application/json': { schema } });
  builder.addPath(`${BASE}/_webhooks`, {
    parameters: headers,
    post: {
      tags: ['Webhooks'],
      operationId: 'createWebhook',
      summary: 'Subscribe a URL to INSERT, UPDATE and DELETE events of a table',
      security,
      requestBody: body(withTables(wireSchema(newSubscriptionBody))),
      responses: {
        '201': { description: 'The subscription (without its secret)', content: json(subscription) },
        ...managementErrors([...BODY, 'validation']),
      },
    },
    get: {
      tags: ['Webhooks'],
      operationId: 'listWebhooks',
      summary: 'List the subscriptions of the environment',
      security,
      responses: {
        '200': { description: 'Subscriptions', content: dataEnvelope({ type: 'array', items: subscription }) },
        ...managementErrors(),
      },
    },
  });
  builder.addPath(`${BASE}/_webhooks/{id}`, {
    parameters: [...headers, id],
    get: {
      tags: ['Webhooks'],
      operationId: 'getWebhook',
      summary: 'A subscription and its 100 newest deliveries, newest first',
      security,
      responses: {
        '200': {
          description: 'The subscription and its delivery history',
          content: json({
            type: 'object',
            required: ['webhook', 'deliveries'],
            properties: {
              webhook: subscription,
              deliveries: { type: 'array', items: { $ref: '#/components/schemas/WebhookDelivery' } },
            },
          }),
        },
        ...managementErrors(['not-found']),
      },
    },
    patch: {
      tags: ['Webhooks'],
      operationId: 'updateWebhook',
      summary: 'Change any subset of the fields; active false pauses, true resumes',
      security,
      requestBody: body(withTables(wireSchema(subscriptionPatchBody))),
      responses: {
        '200': { description: 'The updated subscription', content: json(subscription) },
        ...managementErrors([...BODY, 'validation', 'not-found']),
      },
    },
    delete: {
      tags: ['Webhooks'],
      operationId: 'deleteWebhook',
      summary: 'Remove a subscription and its delivery history',
      security,
      responses: { '204': { description: 'Removed' }, ...managementErrors(['not-found']) },
    },
  });
  builder.addPath(`${BASE}/_webhooks/{id}/deliveries/{deliveryId}/redeliver`, {
    parameters: [...headers, id, { name: 'deliveryId', in: 'path', required: true, schema: { type: 'string' } }],
    post: {
      tags: ['Webhooks'],
      operationId: 'redeliverWebhookDelivery',
      summary:
        'Send a dead-letter (or delivered) delivery again, with the same event id and a fresh schedule of attempts',
      security,
      responses: {
        '202': { description: 'Queued again', content: dataEnvelope({ $ref: '#/components/schemas/WebhookDelivery' }) },
        ...managementErrors(['not-found', 'conflict'], {
          conflict: 'the delivery is still pending, retrying or deferred',
        }),
      },
    },
  });
}
