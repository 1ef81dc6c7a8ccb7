/**
 * The request pipeline of data routes, in the order of CONTRACT §7:
 * tenancy → authentication → table → rate limit → permission → handler (validation, existence).
 * Every response after the rate limit carries the RateLimit-* headers, errors included.
 */
import { Problem, type ApiRequest, type Reply } from '../http/index.ts';
import { withIdempotency } from '../idempotency/index.ts';
import { authenticate, callerId, type Principal } from '../principal/index.ts';
import { RateLimitExceeded, type RateDecision } from '../rate-limit/index.ts';
import type { CatalogTable } from '../query/index.ts';
import { OPERATIONS, type DataContext, type OperationHandler } from '../rest/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import type { Operation } from '../model/index.ts';
import type { Services } from './services.ts';

/** POSTs that create records honour Idempotency-Key; `_query` is read-only and does not. */
const IDEMPOTENT = new Set<Operation>(['create', 'bulkCreate']);

export function dataHandler(services: Services, operation: Operation | undefined, tableName: string | undefined) {
  const op = operation ? OPERATIONS[operation] : undefined;
  return async (req: ApiRequest): Promise<Reply> => {
    const tenant = resolveDataTenant(req, services.config);
    const principal = await authenticate(req, tenant, services.resolvers);
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
    const headers = rateLimitHeaders(await dataRateLimit(services, tenant));
    try {
      const reply = await authorizeAndRun(services, req, tenant, principal, table, op, operation!);
      reply.headers = reply.headers ? Object.assign(reply.headers, headers) : headers;
      return reply;
    } catch (error) {
      if (error instanceof Problem) Object.assign(error.headers, headers);
      throw error;
    }
  };
}

/** The data rate limit per project and environment; over it → 429 Problem (CONTRACT §6). */
async function dataRateLimit(services: Services, tenant: Tenant): Promise<RateDecision> {
  const limit = services.config.rateLimits.dataPerMinutePerProject;
  try {
    return await services.rateLimiter.hit(`data:${tenant.projectId}:${tenant.environment}`, limit);
  } catch (error) {
    if (!(error instanceof RateLimitExceeded)) throw error;
    const reset = String(error.retryAfterSeconds);
    throw new Problem('rate-limited', `this project and environment may make ${limit} data requests a minute; retry in ${reset} s`, [], {
      'retry-after': reset,
      ...rateLimitHeaders({ limit, remaining: 0, resetSeconds: error.retryAfterSeconds }),
    });
  }
}

function rateLimitHeaders(decision: RateDecision): Record<string, string> {
  return {
    'ratelimit-limit': String(decision.limit),
    'ratelimit-remaining': String(decision.remaining),
    'ratelimit-reset': String(decision.resetSeconds),
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
    access: services.policy.access(principal),
    db: services.db,
    expensiveReads: services.expensiveReads,
    cursors: services.cursors,
    watchedTables: services.watchedTables,
    basePath: services.basePath,
  };
  return IDEMPOTENT.has(operation) ? withIdempotency(services.db, req, callerId(principal), tenant, () => op.handle(ctx)) : op.handle(ctx);
}
