/**
 * The admission of data requests, for every front end (REST, GraphQL, subscriptions, files), in
 * the order of docs/api.md "Order of checks" (docs/architecture.md "Request phases" draws them):
 * tenancy → credentials → the front end's resource (table, bucket) → rate limit → the
 * route-level grant; the expensive-read budget is taken later, by the read that needs it
 * (runtime/data/context.ts budgeted). The limits themselves: ./rate-limits.ts.
 */
import { Problem, type ApiRequest } from '../http/index.ts';
import type { Principal, RolePrincipal } from '../principal/index.ts';
import type { Access, Action, Grant } from '../query/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import { rateLimitHeaders, type DataLimits } from './rate-limits.ts';

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
