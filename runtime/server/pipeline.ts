/**
 * The request pipeline of data routes, in the order of CONTRACT §7:
 * tenancy → authentication → table → rate limit → permission → handler (validation, existence).
 * Every response after the rate limit carries the RateLimit-* headers, errors included.
 */
import { authenticate, type Principal } from '../auth/index.ts';
import { Problem, type ApiRequest, type Reply } from '../http/index.ts';
import type { CatalogTable } from '../query/index.ts';
import { OPERATIONS, type DataContext, type OperationHandler } from '../rest/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import type { Operation } from '../model/index.ts';
import { withIdempotency } from './idempotency.ts';
import type { Services } from './services.ts';

/** POSTs that create records honour Idempotency-Key; `_query` is read-only and does not. */
const IDEMPOTENT = new Set<Operation>(['create', 'bulkCreate']);

export function dataHandler(services: Services, operation: Operation | undefined, tableName: string | undefined) {
  const op = operation ? OPERATIONS[operation] : undefined;
  return async (req: ApiRequest): Promise<Reply> => {
    const tenant = resolveDataTenant(req, services.config);
    const principal = await authenticate(req, tenant, services.credentials);
    const name = tableName ?? req.params.table ?? '';
    const table = services.catalog.get(name);
    if (!table) throw new Problem('unknown-table', `there is no table named "${name}"`);
    if (!op) {
      throw new Problem(
        'not-found',
        table.idField
          ? `${req.method} is not available on this path`
          : `${name} has a composite primary key, so it has no /<id> routes; filter the list by its key fields (${table.spec.primaryKey.join(', ')})`,
      );
    }
    const limit = await services.rateLimiter.hit(`data:${tenant.projectId}:${tenant.environment}`);
    try {
      const reply = await authorizeAndRun(services, req, tenant, principal, table, op, operation!);
      reply.headers = { ...reply.headers, ...limit.headers };
      return reply;
    } catch (error) {
      if (error instanceof Problem) Object.assign(error.headers, limit.headers);
      throw error;
    }
  };
}

async function authorizeAndRun(
  services: Services,
  req: ApiRequest,
  tenant: Tenant,
  principal: Principal,
  table: CatalogTable,
  op: OperationHandler,
  operation: Operation,
): Promise<Reply> {
  const name = table.spec.name;
  if (principal.kind === 'management') {
    throw new Problem('forbidden', 'management tokens manage API keys and webhooks; they read and write no data');
  }
  const grant = services.policy.grant(principal, name, op.action);
  if (!grant) throw new Problem('forbidden', `your role may not ${op.action} ${name} records`);
  const ctx: DataContext = {
    req,
    tenant,
    principal,
    table,
    grant,
    catalog: services.catalog,
    policy: services.policy,
    db: services.db,
    cursors: services.cursors,
    basePath: services.basePath,
  };
  return IDEMPOTENT.has(operation) ? withIdempotency(services.db, req, principal.keyId, tenant, () => op.handle(ctx)) : op.handle(ctx);
}
