/**
 * /gw/api/rest/_webhooks (docs/api.md §8.1): management
 * token only, `environment` header required on every request and equal to the body's.
 */
import type { Config } from '../config/index.ts';
import { againOnConflict, type Database } from '../db/index.ts';
import { jsonReply, Problem, readJson, type ApiRequest, type FieldError, type Reply } from '../http/index.ts';
import { newSubscriptionBody, SUBSCRIPTION_DEFAULTS, subscriptionPatchBody } from '../model/wire/index.ts';
import { authenticate, type CredentialResolver } from '../principal/index.ts';
import type { Catalog } from '../query/index.ts';
import type { SecretBox } from '../secrets/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import {
  checkSubscription,
  deleteSubscription,
  findSubscription,
  insertSubscription,
  listSubscriptions,
  deliveries,
  redeliver,
  schemaErrors,
  updateSubscription,
  type DeliveryRecord,
  type Subscription,
  type SubscriptionInput,
} from './subscriptions.ts';

/** Deliveries listed by GET /_webhooks/{id}, newest first. */
export const DELIVERY_HISTORY_LIMIT = 100;

export interface WebhookDeps {
  readonly config: Config;
  readonly catalog: Catalog;
  readonly db: Database;
  readonly resolvers: readonly CredentialResolver[];
  readonly box: SecretBox;
}

async function requireManagement(deps: WebhookDeps, req: ApiRequest): Promise<Tenant> {
  const tenant = resolveDataTenant(req, deps.config, { requireEnvironment: true });
  const principal = await authenticate(req, tenant, deps.resolvers);
  if (principal.kind !== 'management') {
    throw new Problem(
      'forbidden',
      'managing webhooks needs a management token (Authorization: Bearer <management token>)',
    );
  }
  return tenant;
}

function rejectInvalid(errors: FieldError[]): void {
  if (errors.length) throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
}

/** A body `environment` other than the header's is a 400, like a missing header (docs/api.md §8.1). */
function requireSameEnvironment(tenant: Tenant, body: unknown): void {
  const named = (body as { environment?: unknown } | null)?.environment;
  if (named !== undefined && named !== tenant.environment) {
    throw new Problem(
      'bad-request',
      `the environment header ("${tenant.environment}") and the body's environment (${JSON.stringify(named)}) must be equal`,
      [{ field: 'environment', rule: 'equals_header', message: 'environment must equal the environment header' }],
    );
  }
}

async function requireSubscription(
  deps: Pick<WebhookDeps, 'db'>,
  tenant: Tenant,
  id: string,
  forUpdate = false,
): Promise<Subscription> {
  const found = await findSubscription(deps.db, tenant.projectId, tenant.environment, id, forUpdate);
  if (!found) throw new Problem('not-found', `no webhook with id "${id}" in environment "${tenant.environment}"`);
  return found;
}

/**
 * Webhook management after the caller is known to hold a management token, in the tenant's
 * environment: the one implementation behind REST /_webhooks and the GraphQL management schema
 * (docs/graphql.md "Management"). Bodies are checked here, failures are Problems.
 */
export function webhookOperations(deps: Omit<WebhookDeps, 'resolvers'>) {
  const check = (input: SubscriptionInput, tenant: Tenant) =>
    checkSubscription(input, {
      catalog: deps.catalog,
      config: deps.config,
      projectId: tenant.projectId,
      environment: tenant.environment,
    });
  return {
    async create(tenant: Tenant, body: unknown): Promise<Subscription> {
      requireSameEnvironment(tenant, body);
      const parsed = newSubscriptionBody.safeParse(body);
      if (!parsed.success) rejectInvalid(schemaErrors(parsed.error));
      const input: SubscriptionInput = { ...SUBSCRIPTION_DEFAULTS, ...parsed.data! };
      rejectInvalid(await check(input, tenant));
      return deps.db.transaction((tx) => insertSubscription(tx, deps.box, input));
    },

    list(tenant: Tenant): Promise<Subscription[]> {
      return listSubscriptions(deps.db, tenant.projectId, tenant.environment);
    },

    /** The subscription and its newest deliveries (DELIVERY_HISTORY_LIMIT). */
    async get(tenant: Tenant, id: string): Promise<{ webhook: Subscription; deliveries: DeliveryRecord[] }> {
      const webhook = await requireSubscription(deps, tenant, id);
      return { webhook, deliveries: await deliveries(deps.db, webhook.id, { limit: DELIVERY_HISTORY_LIMIT }) };
    },

    async update(tenant: Tenant, id: string, body: unknown): Promise<Subscription> {
      requireSameEnvironment(tenant, body);
      const parsed = subscriptionPatchBody.safeParse(body);
      if (!parsed.success) rejectInvalid(schemaErrors(parsed.error));
      const patch = parsed.data!;
      return deps.db.transaction(async (tx) => {
        const before = await findSubscription(tx, tenant.projectId, tenant.environment, id, true);
        if (!before)
          throw new Problem('not-found', `no webhook with id "${id}" in environment "${tenant.environment}"`);
        const merged: SubscriptionInput = {
          projectId: before.projectId,
          environment: before.environment,
          table: before.table,
          events: before.events,
          url: before.url,
          secret: '',
          active: before.active,
          filter: before.filter,
          select: before.select,
          ...patch,
        };
        rejectInvalid(await check(merged, tenant));
        return updateSubscription(tx, deps.box, before, merged, patch.secret !== undefined);
      });
    },

    async remove(tenant: Tenant, id: string): Promise<void> {
      // Removing the deliveries can deadlock with a worker recording a batch of them (each locks
      // the rows in its own order), and PostgreSQL may pick this transaction to roll back: it
      // changed nothing then, and runs again.
      const removed = await againOnConflict(deps.db, () =>
        deps.db.transaction((tx) => deleteSubscription(tx, tenant.projectId, tenant.environment, id)),
      );
      if (!removed) throw new Problem('not-found', `no webhook with id "${id}" in environment "${tenant.environment}"`);
    },

    /** Queues a delivered or dead-letter delivery again (same event id); its record as queued. */
    async redeliver(tenant: Tenant, id: string, deliveryId: string): Promise<DeliveryRecord> {
      const webhook = await requireSubscription(deps, tenant, id);
      return deps.db.transaction(async (tx) => {
        const result = await redeliver(tx, webhook.id, deliveryId);
        if (result === 'missing')
          throw new Problem('not-found', `webhook ${webhook.id} has no delivery "${deliveryId}"`);
        if (result === 'busy')
          throw new Problem(
            'conflict',
            `delivery ${deliveryId} is still being delivered; only delivered and dead_letter deliveries can be sent again`,
          );
        return (await deliveries(tx, webhook.id, { id: deliveryId }))[0]!;
      });
    },
  };
}

export function webhookHandlers(deps: WebhookDeps) {
  const webhooks = webhookOperations(deps);
  return {
    async create(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      const created = await webhooks.create(tenant, await readJson(req));
      return jsonReply(201, created, { location: `${req.path.replace(/\/+$/, '')}/${created.id}` });
    },

    async list(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      return jsonReply(200, { data: await webhooks.list(tenant) });
    },

    async get(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      return jsonReply(200, await webhooks.get(tenant, req.params.id ?? ''));
    },

    async update(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      const body = await readJson(req, ['application/json', 'application/merge-patch+json']);
      return jsonReply(200, await webhooks.update(tenant, req.params.id ?? '', body));
    },

    async remove(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      await webhooks.remove(tenant, req.params.id ?? '');
      return { status: 204 };
    },

    async redeliver(req: ApiRequest): Promise<Reply> {
      const tenant = await requireManagement(deps, req);
      const delivery = await webhooks.redeliver(tenant, req.params.id ?? '', req.params.deliveryId ?? '');
      return jsonReply(202, { data: delivery });
    },
  };
}
