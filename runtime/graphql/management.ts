/**
 * The GraphQL management schema (docs/graphql.md "Management"): what a management token sees at
 * /gw/api/graphql instead of the data schema. Its fields mirror REST /_apikeys and /_webhooks one
 * to one and call the same operations (keyOperations, webhookOperations), so every rule, check and
 * error is theirs; a refused field answers the REST Problem as its error's extensions. The schema
 * is fixed (nothing in it comes from the model) and holds no data.
 */
import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  type GraphQLFieldConfig,
  type GraphQLInputType,
  type GraphQLNullableType,
  type GraphQLOutputType,
} from 'graphql';
import type { Config } from '../config/index.ts';
import type { ApiRequest } from '../http/index.ts';
import type { keyOperations } from '../keys/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import { EVENT_NAMES } from '../events/index.ts';
import type { webhookOperations } from '../webhooks/index.ts';
import { problemError, toProblem } from './execute.ts';
import { DateTimeScalar, JsonScalar } from './schema.ts';

/** What the management fields of one request share. */
export type ManagementContext = {
  readonly req: ApiRequest;
  readonly config: Config;
  /** The request's project and environment (the environment header, or the default one). */
  readonly tenant: Tenant;
  readonly keys: ReturnType<typeof keyOperations>;
  readonly webhooks: ReturnType<typeof webhookOperations>;
  /** Logs a fault that is answered as an internal error. */
  readonly log: (error: unknown) => void;
  /** A field met a fault that passes by itself: the answer says when to retry. */
  readonly retryAfter: (seconds: string) => void;
};

/** As /_webhooks: the environment header is required on every webhook operation (docs/api.md §8.1). */
function webhookTenant(context: ManagementContext): Tenant {
  return resolveDataTenant(context.req, context.config, { requireEnvironment: true });
}

const nonNull = <T extends GraphQLNullableType>(type: T) => new GraphQLNonNull(type);
const listOf = <T extends GraphQLNullableType>(type: T) =>
  new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(type)));
/** Root fields are nullable: a refused one answers null and its error, and the others their answers. */
const rootListOf = <T extends GraphQLNullableType>(type: T) => new GraphQLList(new GraphQLNonNull(type));

const ApiKey = new GraphQLObjectType({
  name: 'ApiKey',
  description: 'An API key as GET /_apikeys lists it: never its value',
  fields: {
    id: { type: nonNull(GraphQLID) },
    name: { type: nonNull(GraphQLString) },
    prefix: { type: nonNull(GraphQLString), description: 'The scheme word of `Authorization: <prefix> <key>`' },
    environment: { type: nonNull(GraphQLString) },
    roles: { type: listOf(GraphQLString) },
    context: { type: nonNull(JsonScalar), description: 'Key-value pairs (strings) the roles’ filters may name' },
    createdAt: { type: nonNull(DateTimeScalar) },
    lastUsedAt: { type: DateTimeScalar },
  },
});

const CreatedApiKey = new GraphQLObjectType({
  name: 'CreatedApiKey',
  description: 'A new API key as POST /_apikeys answers it: `key` is its value, shown this once and never again',
  fields: {
    id: { type: nonNull(GraphQLID) },
    name: { type: nonNull(GraphQLString) },
    prefix: { type: nonNull(GraphQLString) },
    roles: { type: listOf(GraphQLString) },
    environment: { type: nonNull(GraphQLString) },
    createdAt: { type: nonNull(DateTimeScalar) },
    key: { type: nonNull(GraphQLString) },
  },
});

const CreateApiKeyInput = new GraphQLInputObjectType({
  name: 'CreateApiKeyInput',
  description: 'The body of POST /_apikeys',
  fields: {
    name: { type: nonNull(GraphQLString) },
    prefix: { type: nonNull(GraphQLString) },
    roles: { type: listOf(GraphQLString) },
    context: { type: JsonScalar, description: 'An object of string values; none when left out' },
    environment: { type: nonNull(GraphQLString) },
  },
});

const WebhookEvent = new GraphQLEnumType({
  name: 'WebhookEvent',
  values: Object.fromEntries(EVENT_NAMES.map((name) => [name, { value: name }])),
});

const Webhook = new GraphQLObjectType({
  name: 'Webhook',
  description: 'A webhook subscription as /_webhooks answers it: never its secret',
  fields: {
    id: { type: nonNull(GraphQLID) },
    projectId: { type: nonNull(GraphQLString) },
    environment: { type: nonNull(GraphQLString) },
    table: { type: nonNull(GraphQLString) },
    events: { type: listOf(WebhookEvent) },
    url: { type: nonNull(GraphQLString) },
    active: { type: nonNull(GraphQLBoolean) },
    filter: { type: JsonScalar, description: 'Field values an event’s record must have; null for every record' },
    select: { type: new GraphQLList(new GraphQLNonNull(GraphQLString)), description: 'null for every field' },
    createdAt: { type: nonNull(DateTimeScalar) },
    updatedAt: { type: nonNull(DateTimeScalar) },
  },
});

const WebhookDelivery = new GraphQLObjectType({
  name: 'WebhookDelivery',
  fields: {
    id: { type: nonNull(GraphQLID) },
    eventId: { type: nonNull(GraphQLString) },
    event: { type: nonNull(WebhookEvent) },
    status: { type: nonNull(GraphQLString), description: 'pending, delivered, retrying, deferred or dead_letter' },
    httpStatus: { type: GraphQLInt },
    attempts: { type: nonNull(GraphQLInt) },
    lastError: { type: GraphQLString },
    nextAttemptAt: { type: DateTimeScalar },
    createdAt: { type: nonNull(DateTimeScalar) },
    updatedAt: { type: nonNull(DateTimeScalar) },
  },
});

const WebhookDetails = new GraphQLObjectType({
  name: 'WebhookDetails',
  description: 'As GET /_webhooks/{id}: the subscription and its newest deliveries, newest first',
  fields: {
    webhook: { type: nonNull(Webhook) },
    deliveries: { type: listOf(WebhookDelivery) },
  },
});

/** The subscription fields of a webhook body; create requires what POST /_webhooks requires. */
function webhookInputFields(required: boolean) {
  const need = <T extends GraphQLInputType>(type: T) => (required ? new GraphQLNonNull(type) : type);
  return {
    projectId: { type: need(GraphQLString) },
    environment: { type: need(GraphQLString), description: 'Must equal the environment header' },
    table: { type: need(GraphQLString) },
    events: { type: need(new GraphQLList(new GraphQLNonNull(WebhookEvent))) },
    url: { type: need(GraphQLString) },
    secret: { type: need(GraphQLString), description: 'Signs every delivery; never answered' },
    active: { type: GraphQLBoolean },
    filter: { type: JsonScalar },
    select: { type: new GraphQLList(new GraphQLNonNull(GraphQLString)) },
  };
}

const CreateWebhookInput = new GraphQLInputObjectType({
  name: 'CreateWebhookInput',
  description: 'The body of POST /_webhooks',
  fields: webhookInputFields(true),
});

const UpdateWebhookInput = new GraphQLInputObjectType({
  name: 'UpdateWebhookInput',
  description: 'The body of PATCH /_webhooks/{id}: the fields given replace the stored ones',
  fields: webhookInputFields(false),
});

type Resolve = (args: Record<string, unknown>, context: ManagementContext) => Promise<unknown>;

/** A root field whose failures answer the REST Problem as the error's extensions. */
function field(
  type: GraphQLOutputType,
  args: GraphQLFieldConfig<unknown, ManagementContext>['args'],
  description: string,
  resolve: Resolve,
): GraphQLFieldConfig<unknown, ManagementContext> {
  return {
    type,
    args,
    description,
    resolve: async (_source, values: Record<string, unknown>, context, info) => {
      try {
        return await resolve(values, context);
      } catch (error) {
        const problem = toProblem(error, context);
        const retry = problem.headers['retry-after'];
        if (retry !== undefined) context.retryAfter(retry);
        throw problemError(problem, info);
      }
    },
  };
}

const id = { id: { type: nonNull(GraphQLID) } };

/** Built once: the same for every management token and project. */
export const managementSchema = new GraphQLSchema({
  description: 'Management of API keys and webhook subscriptions, for management tokens; it holds no data',
  query: new GraphQLObjectType({
    name: 'Query',
    fields: {
      apiKeys: field(rootListOf(ApiKey), {}, 'GET /_apikeys: the environment’s active keys', (_, c) =>
        c.keys.list(c.tenant),
      ),
      webhooks: field(rootListOf(Webhook), {}, 'GET /_webhooks: the environment’s subscriptions', (_, c) =>
        c.webhooks.list(webhookTenant(c)),
      ),
      webhook: field(WebhookDetails, id, 'GET /_webhooks/{id}', (a, c) =>
        c.webhooks.get(webhookTenant(c), a.id as string),
      ),
    },
  }),
  mutation: new GraphQLObjectType({
    name: 'Mutation',
    fields: {
      createApiKey: field(
        CreatedApiKey,
        { input: { type: nonNull(CreateApiKeyInput) } },
        'POST /_apikeys: the answer carries the key’s value, this once',
        (a, c) => c.keys.create(c.tenant, a.input),
      ),
      deleteApiKey: field(GraphQLBoolean, id, 'DELETE /_apikeys/{id}: the key stops working at once', async (a, c) => {
        await c.keys.revoke(c.tenant, a.id as string);
        return true;
      }),
      createWebhook: field(Webhook, { input: { type: nonNull(CreateWebhookInput) } }, 'POST /_webhooks', (a, c) =>
        c.webhooks.create(webhookTenant(c), a.input),
      ),
      updateWebhook: field(
        Webhook,
        { ...id, input: { type: nonNull(UpdateWebhookInput) } },
        'PATCH /_webhooks/{id}',
        (a, c) => c.webhooks.update(webhookTenant(c), a.id as string, a.input),
      ),
      deleteWebhook: field(GraphQLBoolean, id, 'DELETE /_webhooks/{id}', async (a, c) => {
        await c.webhooks.remove(webhookTenant(c), a.id as string);
        return true;
      }),
      redeliverWebhookDelivery: field(
        WebhookDelivery,
        { ...id, deliveryId: { type: nonNull(GraphQLID) } },
        'POST /_webhooks/{id}/deliveries/{deliveryId}/redeliver: queues a delivered or dead_letter delivery again',
        (a, c) => c.webhooks.redeliver(webhookTenant(c), a.id as string, a.deliveryId as string),
      ),
    },
  }),
});
