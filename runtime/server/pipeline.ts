/**
 * The request pipeline of data routes, in the order of docs/api.md "Order of checks":
 * tenancy → authentication → table → rate limit → permission → handler (validation, existence).
 * The admission is runtime/data's (admission.ts), shared with every front end; this file adds the
 * REST route's own steps: its table and operation, and Idempotency-Key on creates.
 * Every response after the rate limit carries the RateLimit-* headers, errors included.
 */
import { Problem, type ApiRequest, type Reply } from '../http/index.ts';
import { withIdempotency } from '../idempotency/index.ts';
import { callerId, type Principal } from '../principal/index.ts';
import type { CatalogTable } from '../query/index.ts';
import { admit, callerContext, dataLimits, onDatabase, refuseManagement, tableContext } from '../data/index.ts';
import { OPERATIONS, type OperationHandler } from '../rest/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import type { Operation } from '../model/index.ts';
import type { Services } from './services.ts';
import { fileAccess } from './file-access.ts';

/** POSTs that create records honour Idempotency-Key; `_query` is read-only and does not. */
const IDEMPOTENT = new Set<Operation>(['create', 'bulkCreate']);

export function dataHandler(services: Services, operation: Operation | undefined, tableName: string | undefined) {
  const op = operation ? OPERATIONS[operation] : undefined;
  const limits = dataLimits(services);
  // The route's resource: its table (404 unknown-table) and an operation the table has (404).
  const routeTable = (req: ApiRequest): CatalogTable => {
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
    return table;
  };
  return async (req: ApiRequest): Promise<Reply> => {
    const admitted = admit(limits, services.config, req, () => routeTable(req));
    const { tenant, principal, resource: table, headers } = admitted instanceof Promise ? await admitted : admitted;
    try {
      const reply = await authorizeAndRun(services, req, tenant, principal, table, op!, operation!);
      reply.headers = reply.headers ? Object.assign(reply.headers, headers) : headers;
      return reply;
    } catch (error) {
      // A 429 of another limit met while handling (the caller's share of the expensive-read budget,
      // runtime/data/context.ts) keeps its own RateLimit-*, which say that limit.
      if (error instanceof Problem) Object.assign(error.headers, headers, ownRateLimit(error));
      throw error;
    }
  };
}

function ownRateLimit(problem: Problem): Record<string, string> | undefined {
  return problem.headers['ratelimit-limit'] === undefined
    ? undefined
    : Object.fromEntries(Object.entries(problem.headers).filter(([name]) => name.startsWith('ratelimit-')));
}

/** Throws its 403s at once (the caller awaits it inside its try): no async layer of its own. */
function authorizeAndRun(
  services: Services,
  req: ApiRequest,
  tenant: Tenant,
  principal: Principal,
  table: CatalogTable,
  op: OperationHandler,
  operation: Operation,
): Promise<Reply> {
  const caller = refuseManagement(principal);
  const ctx = tableContext(
    callerContext(services, req, tenant, caller, services.policy.access(caller), fileAccess(services.config, caller)),
    table,
    op.action,
  );
  // A keyed create runs in the transaction that also stores its answer (runtime/idempotency).
  return IDEMPOTENT.has(operation)
    ? withIdempotency(services.db, req, callerId(principal), tenant, (db) => op.handle(onDatabase(ctx, db)))
    : op.handle(ctx);
}
