/**
 * The admission of data requests, for every front end (REST, GraphQL, subscriptions, files), in
 * the order of docs/api.md "Order of checks" (docs/architecture.md "Request phases" draws them):
 * tenancy → credentials → the front end's resource (table, bucket) → rate limit → the
 * route-level grant; the expensive-read budget is taken later, by the read that needs it
 * (runtime/data/context.ts budgeted).
 * Rate limits (docs/api.md §5.18): failed credentials count per client address; then each request
 * counts against its caller's share, and only when that has room against the project's budget.
 */
import { callerDataLimit, type Config } from '../config/index.ts';
import { clientAddress, Problem, type ApiRequest } from '../http/index.ts';
import {
  authenticate,
  callerId,
  type CredentialResolver,
  type Principal,
  type RolePrincipal,
} from '../principal/index.ts';
import type { Access, Action, Grant } from '../query/index.ts';
import { RateLimitExceeded, type RateDecision, type SharedRateLimiter } from '../rate-limit/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';

/** A request admitted past credentials and rate limits, with the front end's resource. */
export interface Admitted<R> {
  readonly tenant: Tenant;
  readonly principal: Principal;
  /** What the front end's `resource` step found (its table, its bucket). */
  readonly resource: R;
  /** The RateLimit-* headers every answer after the rate limit carries, errors included. */
  readonly headers: Record<string, string>;
}

/** A request whose tenant and caller are known (identify), before its rate limit. */
export interface Identified {
  readonly tenant: Tenant;
  readonly principal: Principal;
}

/**
 * Tenancy (400/404) → credentials (401, counted per client address). At once when the credential
 * is known at once (the usual case: no promise per request), else a promise.
 */
export function identify(
  limits: Pick<DataLimits, 'authenticate'>,
  config: Parameters<typeof resolveDataTenant>[1],
  req: ApiRequest,
): Identified | Promise<Identified> {
  const tenant = resolveDataTenant(req, config);
  const authenticated = limits.authenticate(req, tenant);
  return authenticated instanceof Promise
    ? authenticated.then((principal) => ({ tenant, principal }))
    : { tenant, principal: authenticated };
}

/** The caller's and project's rate limits (429): the RateLimit-* headers of the decision. */
export function countRequest(
  limits: Pick<DataLimits, 'data'>,
  { tenant, principal }: Identified,
): Record<string, string> | Promise<Record<string, string>> {
  const decided = limits.data(tenant, principal);
  return decided instanceof Promise ? decided.then(rateLimitHeaders) : rateLimitHeaders(decided);
}

/**
 * The whole chain before the grant: identify → `resource`, the front end's own 404 (an unknown
 * table or bucket) → countRequest. GraphQL runs identify and countRequest itself, for a management
 * token is answered by the management schema before any rate limit (docs/graphql.md "Management").
 */
export function admit<R>(
  limits: Pick<DataLimits, 'authenticate' | 'data'>,
  config: Parameters<typeof resolveDataTenant>[1],
  req: ApiRequest,
  resource: (tenant: Tenant, principal: Principal) => R,
): Admitted<R> | Promise<Admitted<R>> {
  const limited = (who: Identified): Admitted<R> | Promise<Admitted<R>> => {
    const found = resource(who.tenant, who.principal);
    const headers = countRequest(limits, who);
    return headers instanceof Promise
      ? headers.then((h) => ({ ...who, resource: found, headers: h }))
      : { tenant: who.tenant, principal: who.principal, resource: found, headers };
  };
  const identified = identify(limits, config, req);
  return identified instanceof Promise ? identified.then(limited) : limited(identified);
}

/** What a management token is told where it asks for data: it manages API keys and webhooks only. */
export const MANAGEMENT_NO_DATA = 'management tokens manage API keys and webhooks; they read and write no data';

/** A management token is refused (403 `detail`); any other principal has roles and passes. */
export function refuseManagement(principal: Principal, detail = MANAGEMENT_NO_DATA): RolePrincipal {
  if (principal.kind === 'management') throw new Problem('forbidden', detail);
  return principal;
}

/**
 * The route-level grant (docs/api.md §5.17: every data operation is checked): the caller's grant
 * to `action` on `table`, or 403 naming what it may not do (`what`: `<table> records` by default).
 * The one check of it; REST, GraphQL, subscriptions and files all ask here.
 */
export function requireGrant(
  access: Pick<Access, 'grant'>,
  table: string,
  action: Action,
  what = `${table} records`,
): Grant {
  const grant = access.grant(table, action);
  if (!grant) throw new Problem('forbidden', `your role may not ${action} ${what}`);
  return grant;
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

/** What the admission of data requests needs of the running server (runtime/server's Services has it). */
export interface AdmissionServices {
  readonly config: Config;
  readonly rateLimiter: SharedRateLimiter;
  /** The authentication stage asks these in turn: user access tokens, API keys and management tokens. */
  readonly resolvers: readonly CredentialResolver[];
}

const limitsOf = new WeakMap<AdmissionServices, DataLimits>();

/** The rate limits of data requests (one per server: the client-address rule is compiled once). */
export function dataLimits(services: AdmissionServices): DataLimits {
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
export function limitReached(error: unknown, detail: (resetSeconds: number) => string): never {
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
