/**
 * The request pipeline of data routes, in the order of docs/api.md "Order of checks":
 * tenancy → authentication → table → rate limit → permission → handler (validation, existence).
 * Every response after the rate limit carries the RateLimit-* headers, errors included.
 * Rate limits (docs/api.md §5.18): failed credentials count per client address; then each request
 * counts against its caller's share, and only when that has room against the project's budget.
 */
import { callerDataLimit } from '../config/index.ts';
import { clientAddress, Problem, type ApiRequest, type Reply } from '../http/index.ts';
import { withIdempotency } from '../idempotency/index.ts';
import { authenticate, callerId, type Principal } from '../principal/index.ts';
import { RateLimitExceeded, type RateDecision } from '../rate-limit/index.ts';
import type { CatalogTable } from '../query/index.ts';
import { OPERATIONS, type DataContext, type OperationHandler } from '../rest/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import type { Operation } from '../model/index.ts';
import type { Services } from './services.ts';
import { fileAccess } from './file-access.ts';

/** POSTs that create records honour Idempotency-Key; `_query` is read-only and does not. */
const IDEMPOTENT = new Set<Operation>(['create', 'bulkCreate']);

export function dataHandler(services: Services, operation: Operation | undefined, tableName: string | undefined) {
  const op = operation ? OPERATIONS[operation] : undefined;
  const limits = dataLimits(services);
  return async (req: ApiRequest): Promise<Reply> => {
    const tenant = resolveDataTenant(req, services.config);
    const authenticated = limits.authenticate(req, tenant);
    const principal = authenticated instanceof Promise ? await authenticated : authenticated;
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
    const decided = limits.data(tenant, principal);
    const headers = rateLimitHeaders(decided instanceof Promise ? await decided : decided);
    try {
      const reply = await authorizeAndRun(services, req, tenant, principal, table, op, operation!);
      reply.headers = reply.headers ? Object.assign(reply.headers, headers) : headers;
      return reply;
    } catch (error) {
      // A 429 of another limit met while handling (the caller's share of the expensive-read budget,
      // runtime/rest/context.ts) keeps its own RateLimit-*, which say that limit.
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

export interface DataLimits {
  /**
   * `authenticate`, with its 401s counted per client address: once
   * rateLimits.unauthenticatedPerMinutePerIp are used up in a minute, a request whose credentials
   * fail is answered 429 instead. Valid credentials are never counted nor refused here. The
   * principal comes at once when `authenticate` has it at once; a refusal is always a rejection.
   */
  authenticate(req: ApiRequest, tenant: Tenant): Principal | Promise<Principal>;
  /**
   * Counts a data request against its caller's share, then the project's budget; over either → 429.
   * The decision itself when this process can make it alone (the usual case, far from the limits:
   * no promise per request), else a promise of it.
   */
  data(tenant: Tenant, principal: Principal): RateDecision | Promise<RateDecision>;
}

const limitsOf = new WeakMap<Services, DataLimits>();

/** The rate limits of data requests (one per server: the client-address rule is compiled once). */
export function dataLimits(services: Services): DataLimits {
  let limits = limitsOf.get(services);
  if (limits) return limits;
  const { config, rateLimiter } = services;
  const clientIp = clientAddress(config.trustProxy);
  const projectLimit = config.rateLimits.dataPerMinutePerProject;
  const callerLimit = callerDataLimit(config);
  const unauthenticatedLimit = config.rateLimits.unauthenticatedPerMinutePerIp;
  // The 429 details, built only when a limit is reached (no closure per request).
  const unauthenticatedDetail = (reset: number) =>
    `${unauthenticatedLimit} requests a minute with missing or invalid credentials are answered from this address, and they are used up; ` +
    `send a valid API key or access token, or retry in ${reset} s`;
  const callerDetail = (reset: number) =>
    `each caller (API key or user) may make ${callerLimit} data requests a minute in this project and environment, and yours are used up; retry in ${reset} s`;
  const projectDetail = (reset: number) =>
    `this project and environment may make ${projectLimit} data requests a minute across all its callers, and they are used up; retry in ${reset} s`;
  limits = {
    authenticate(req, tenant) {
      try {
        const found = authenticate(req, tenant, services.resolvers);
        return found instanceof Promise ? found.catch((error: unknown) => countRefusal(req, error)) : found;
      } catch (error) {
        return countRefusal(req, error);
      }
    },
    data(tenant, principal) {
      const { caller: callerBucket, project: projectBucket } = bucketNames(tenant, principal);
      // The caller's bucket first: a request over the caller's share is not counted in the project's.
      const caller = rateLimiter.hitNow(callerBucket, callerLimit);
      const project = caller && rateLimiter.hitNow(projectBucket, projectLimit);
      if (project) return tighter(caller!, project);
      return sharedData(callerBucket, projectBucket, caller);
    },
  };
  /** Counts a 401 against the client address (a 429 once those are used up), then rethrows it. */
  const countRefusal = async (req: ApiRequest, error: unknown): Promise<never> => {
    if (error instanceof Problem && error.kind === 'unauthorized') {
      await rateLimiter
        .hit(`data-unauthenticated:${clientIp(req)}`, unauthenticatedLimit)
        .catch((refused: unknown) => limitReached(refused, unauthenticatedDetail));
    }
    throw error;
  };
  /** data() when a bucket's hit must go to the shared row; `caller` when the caller's is counted already. */
  const sharedData = async (callerBucket: string, projectBucket: string, counted: RateDecision | undefined) => {
    let caller = counted;
    if (!caller) {
      try {
        caller = await rateLimiter.hit(callerBucket, callerLimit);
      } catch (error) {
        limitReached(error, callerDetail);
      }
    }
    let project: RateDecision;
    try {
      project = await rateLimiter.hit(projectBucket, projectLimit);
    } catch (error) {
      limitReached(error, projectDetail);
    }
    return tighter(caller, project);
  };
  limitsOf.set(services, limits);
  return limits;
}

/** The headers report the tighter of the two decisions: the one with fewer requests left. */
function tighter(caller: RateDecision, project: RateDecision): RateDecision {
  return caller.remaining <= project.remaining ? caller : project;
}

interface BucketNames {
  /** The tenant the names are for. */
  projectId: string;
  environment: string;
  caller: string;
  project: string;
}

// The data buckets' names, per principal (principals live as long as their cached credential,
// runtime/keys/store.ts) and its last tenant: not built again for every request.
const bucketsOf = new WeakMap<Principal, BucketNames>();

function bucketNames(tenant: Tenant, principal: Principal): BucketNames {
  const known = bucketsOf.get(principal);
  if (known && known.projectId === tenant.projectId && known.environment === tenant.environment) return known;
  const scope = `${tenant.projectId}:${tenant.environment}`;
  const names = {
    projectId: tenant.projectId,
    environment: tenant.environment,
    caller: `data-caller:${scope}:${callerId(principal)}`,
    project: `data:${scope}`,
  };
  bucketsOf.set(principal, names);
  return names;
}

/** Rethrows a rate limiter's refusal as the 429 Problem (Retry-After, RateLimit-*) saying which limit it reached. */
function limitReached(error: unknown, detail: (resetSeconds: number) => string): never {
  if (!(error instanceof RateLimitExceeded)) throw error;
  const reset = String(error.retryAfterSeconds);
  throw new Problem('rate-limited', detail(error.retryAfterSeconds), [], {
    'retry-after': reset,
    ...rateLimitHeaders({ limit: error.limit, remaining: 0, resetSeconds: error.retryAfterSeconds }),
  });
}

export function rateLimitHeaders(decision: RateDecision): Record<string, string> {
  return {
    'ratelimit-limit': String(decision.limit),
    'ratelimit-remaining': String(decision.remaining),
    'ratelimit-reset': String(decision.resetSeconds),
  };
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
    files: fileAccess(services.config, principal),
  };
  // A keyed create runs in the transaction that also stores its answer (runtime/idempotency).
  return IDEMPOTENT.has(operation)
    ? withIdempotency(services.db, req, callerId(principal), tenant, (db) => op.handle({ ...ctx, db }))
    : op.handle(ctx);
}
