// The management schema's shape (docs/graphql.md "Management"): the root fields mirroring
// /_apikeys and /_webhooks, and no secret anywhere an answer could carry it.
import { isObjectType, printSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { managementSchema } from '../../runtime/graphql/management.ts';
import {
  newKeyBody as newKeySchema,
  newSubscriptionBody as newSubscription,
  subscriptionPatchBody as subscriptionPatch,
} from '../../runtime/model/wire/index.ts';

const fieldsOf = (name: string) => Object.keys((managementSchema.getType(name) as any).getFields());

describe('management schema', () => {
  it('has the REST management operations as root fields, and no data', () => {
    expect(fieldsOf('Query')).toEqual(['apiKeys', 'webhooks', 'webhook']);
    expect(fieldsOf('Mutation')).toEqual([
      'createApiKey',
      'deleteApiKey',
      'createWebhook',
      'updateWebhook',
      'deleteWebhook',
      'redeliverWebhookDelivery',
    ]);
    expect(managementSchema.getSubscriptionType()).toBeUndefined();
    const sdl = printSchema(managementSchema);
    expect(sdl).toContain('createApiKey(input: CreateApiKeyInput!): CreatedApiKey');
    expect(sdl).toContain('redeliverWebhookDelivery(id: ID!, deliveryId: ID!): WebhookDelivery');
  });

  it('answers a key value only from createApiKey, and a webhook secret never', () => {
    const outputs = Object.values(managementSchema.getTypeMap()).filter(
      (type) => isObjectType(type) && !type.name.startsWith('__'),
    );
    const carrying = (field: string) => outputs.filter((type) => field in (type as any).getFields()).map((t) => t.name);
    expect(carrying('key')).toEqual(['CreatedApiKey']);
    expect(carrying('secret')).toEqual([]);
    expect(fieldsOf('CreateWebhookInput')).toContain('secret');
  });

  it('takes the bodies of POST /_apikeys, POST and PATCH /_webhooks: the same fields', () => {
    expect(fieldsOf('CreateApiKeyInput')).toEqual(Object.keys(newKeySchema.shape));
    expect(fieldsOf('CreateWebhookInput')).toEqual(Object.keys(newSubscription.shape));
    expect(fieldsOf('UpdateWebhookInput')).toEqual(Object.keys(subscriptionPatch.shape));
    expect(fieldsOf('CreateWebhookInput')).toEqual([
      'projectId',
      'environment',
      'table',
      'events',
      'url',
      'secret',
      'active',
      'filter',
      'select',
    ]);
  });
});
