/**
 * The rate limits of data requests (docs/api.md §5.18), which admission.ts applies: failed
 * credentials count per client address; then each request counts against its caller's share, and
 * only when that has room against the project's budget.
 */
import { callerDataLimit, type Config } from '../config/index.ts';
import { clientAddress, Problem, type ApiRequest } from '../http/index.ts';
import { authenticate, callerId, type CredentialResolver, type Principal } from '../principal/index.ts';
import { RateLimitExceeded, type RateDecision, type SharedRateLimiter } from '../rate-limit/index.ts';
import type { Tenant } from '../tenancy/index.ts';

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
