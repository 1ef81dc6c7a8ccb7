/**
 * The project's own endpoints (docs/own-code.md "Endpoints"), served under the data API's prefix
 * through the data routes' admission (runtime/data/admission.ts: tenancy → credentials → rate
 * limits, with their exact 4xx), then the endpoint's access rule, its zod input, the handler in a
 * CodeContext acting as the caller, and its zod output. The HTTP front (./app.ts) gives them what
 * it gives every route: request id, request log, metrics, CORS, and errorReply's 500 and 503s.
 */
import type { z } from 'zod';
import {
  clientAddress,
  jsonReply,
  PROBLEM_KINDS,
  Problem,
  readJson,
  requestIdOf,
  type ApiRequest,
  type FieldError,
  type ProblemKind,
  type Reply,
} from '../http/index.ts';
import { admit, countRequest, dataLimits, refuseManagement } from '../data/index.ts';
import { databaseFault } from '../db/index.ts';
import { DATA_BASE_PATH } from '../model/index.ts';
import type { ApiKeyPrincipal, Principal } from '../principal/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import { codeContext, type CodeRegistry } from '../usercode/index.ts';
import type { Route } from './feature.ts';
import type { Services } from './services.ts';

type Endpoint = CodeRegistry['endpoints'][number];

/** What a management token is told at an endpoint: it manages keys and webhooks, and runs no code. */
export const MANAGEMENT_NO_ENDPOINTS = 'management tokens manage API keys and webhooks; they call no endpoints';

/** Query parameters of the tenancy, never part of a GET or DELETE endpoint's input. */
const TENANCY_PARAMETERS: ReadonlySet<string> = new Set(['project_id']);

export function endpointRoutes(services: Services): Route[] {
  return services.code.endpoints.map((endpoint) => ({
    method: endpoint.method.toLowerCase() as Route['method'],
    path: `${DATA_BASE_PATH}${endpoint.path}`,
    handler: endpointHandler(services, endpoint),
  }));
}

function endpointHandler(services: Services, endpoint: Endpoint) {
  const limits = dataLimits(services);
  const clientIp = clientAddress(services.config.trustProxy);
  return async (req: ApiRequest): Promise<Reply> => {
    // A public endpoint without credentials: tenancy, then the rate limits of one caller per client
    // address. Credentials, when sent, are verified as everywhere (a bad one is a 401, never anonymous).
    const anonymous = endpoint.access === 'public' && req.headers.authorization === undefined;
    let tenant: Tenant;
    let principal: Principal | undefined;
    let headers: Record<string, string>;
    if (anonymous) {
      tenant = resolveDataTenant(req, services.config);
      const counted = countRequest(limits, { tenant, principal: anonymousCaller(tenant, clientIp(req)) });
      headers = counted instanceof Promise ? await counted : counted;
    } else {
      const admitted = await admit(limits, services.config, req, () => endpoint);
      ({ tenant, principal, headers } = admitted);
    }
    if (principal) {
      try {
        checkAccess(endpoint, principal);
      } catch (error) {
        throw withHeaders(error, headers);
      }
    }
    const requestId = requestIdOf(req) ?? '';
    try {
      const raw =
        endpoint.method === 'GET' || endpoint.method === 'DELETE'
          ? queryInput(req)
          : bodyInput(req, await readJson(req));
      const output = await runEndpoint(services, endpoint, raw, { tenant, principal, anonymous, requestId });
      return jsonReply(endpoint.status ?? 200, output, headers);
    } catch (error) {
      throw withHeaders(error, headers);
    }
  };
}

/** Who calls an endpoint, once admitted: the tenant, the principal (none when anonymous) and the request id. */
export interface EndpointCaller {
  readonly tenant: Tenant;
  readonly principal: Principal | undefined;
  readonly anonymous: boolean;
  readonly requestId: string;
}

/**
 * An admitted call of an endpoint after its access rule (docs/own-code.md "Endpoints"): the input
 * parsed with its zod schema (422), the handler in a CodeContext acting as the caller, within
 * http.requestTimeoutMs, its answer parsed with the output schema; a failure as codeFault maps it.
 * The REST route and the GraphQL field (runtime/server/features/graphql.ts) both call it.
 */
export async function runEndpoint(
  services: Services,
  endpoint: Endpoint,
  raw: unknown,
  caller: EndpointCaller,
): Promise<unknown> {
  const origin = `endpoint ${endpoint.name}`;
  const { tenant, principal, anonymous, requestId } = caller;
  try {
    const input = parseInput(endpoint, raw);
    const ctx = codeContext(services.codeServices, {
      environment: tenant.environment,
      principal,
      anonymous,
      access: principal && principal.kind !== 'management' ? services.policy.access(principal) : undefined,
      db: services.db,
      requestId,
      origin,
    });
    const result = await withinDeadline(endpoint.handler(input, ctx), services.config.http.requestTimeoutMs);
    const output = (endpoint.output as z.ZodType).safeParse(result);
    if (!output.success) throw new OutputRefused(output.error.message);
    return output.data;
  } catch (error) {
    throw codeFault(services, origin, requestId, error);
  }
}

/** A Problem with the RateLimit-* headers every answer after the rate limit carries; anything else as it is. */
function withHeaders(error: unknown, headers: Record<string, string>): unknown {
  if (error instanceof Problem) Object.assign(error.headers, headers);
  return error;
}

class HandlerTimeout extends Error {}
class OutputRefused extends Error {}

/**
 * What a failure of the endpoint answers (docs/own-code.md "Endpoints"), as a hook's failure does
 * (runtime/data/hooks.ts): a Problem below 500 (svcgen's, refuse(), a data API ServiceError's) as
 * it is; a database fault or a 5xx Problem as it is, logged; anything else, a time-out and an
 * output the schema refuses 500 `internal` naming the request id, the detail only in the log.
 */
function codeFault(services: Services, origin: string, requestId: string, error: unknown): unknown {
  const problem = asProblem(error);
  if (problem && problem.status < 500) return problem;
  const log = services.codeServices.logger.child({ requestId, code: origin });
  if (problem || databaseFault(error)) {
    log.warn({ err: error }, `${origin} met a fault of the server`);
    return problem ?? error;
  }
  const what =
    error instanceof HandlerTimeout
      ? `did not answer within http.requestTimeoutMs (${services.config.http.requestTimeoutMs} ms)`
      : error instanceof OutputRefused
        ? 'returned a value its output schema refuses'
        : 'threw';
  log.error({ err: error }, `${origin} ${what}`);
  return new Problem(
    'internal',
    `${origin} ${error instanceof HandlerTimeout ? what : 'failed'}; the server's log has the detail under request id ${requestId}`,
    [],
    {},
    { requestId },
  );
}

/**
 * The caller an anonymous request counts as for the data rate limits: one per client address and
 * environment, sharing the project's budget (docs/own-code.md "Endpoints"). It never reaches code.
 */
function anonymousCaller(tenant: Tenant, address: string): ApiKeyPrincipal {
  return { kind: 'apiKey', keyId: `anonymous:${address}`, environment: tenant.environment, roles: [], context: {} };
}

/** The endpoint's access rule for a caller with credentials (docs/own-code.md "Endpoints"). */
export function checkAccess(endpoint: Endpoint, principal: Principal): void {
  const caller = refuseManagement(principal, MANAGEMENT_NO_ENDPOINTS);
  const access = endpoint.access;
  if (access === 'public') return;
  if (access === 'signed-in') {
    if (caller.kind !== 'user')
      throw new Problem('forbidden', `${endpoint.name} is for signed-in users; an API key may not call it`);
    return;
  }
  if (!caller.roles.some((role) => access.roles.includes(role)))
    throw new Problem('forbidden', `your role may not call ${endpoint.name}`);
}

/**
 * A GET or DELETE endpoint's input: its query parameters (a repeated one as a list of its values)
 * and its `:name` path parameters, which win over a query parameter of the same name.
 */
function queryInput(req: ApiRequest): Record<string, unknown> {
  const input: Record<string, unknown> = Object.create(null);
  for (const key of new Set(req.query.keys())) {
    if (TENANCY_PARAMETERS.has(key)) continue;
    const values = req.query.getAll(key);
    input[key] = values.length === 1 ? values[0] : values;
  }
  for (const [key, value] of Object.entries(req.params)) input[key] = value;
  return { ...input };
}

/**
 * A body's input with the path's `:name` parameters in it (docs/own-code.md "Endpoints"): the body
 * must then be an object (or absent), and may repeat a parameter only with the path's value.
 */
function bodyInput(req: ApiRequest, body: unknown): unknown {
  const params = Object.entries(req.params);
  if (params.length === 0) return body;
  if (body === undefined) body = {};
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new Problem('validation', 'the body must be a JSON object: this endpoint adds its path parameters to it', [
      { field: '', rule: 'type', message: 'the body must be a JSON object' },
    ]);
  const input: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const [key, value] of params) {
    if (Object.hasOwn(input, key) && input[key] !== value)
      throw new Problem(
        'validation',
        `${key}: it is given by the path (${JSON.stringify(value)}); leave it out of the body`,
        [
          {
            field: key,
            rule: 'path',
            message: `${key}: it is given by the path (${JSON.stringify(value)}); leave it out of the body`,
          },
        ],
      );
    input[key] = value;
  }
  return input;
}

/** The input as the endpoint's zod schema parses it, or 422 `validation` naming every field. */
function parseInput(endpoint: Endpoint, raw: unknown): unknown {
  const parsed = (endpoint.input as z.ZodType).safeParse(raw);
  if (parsed.success) return parsed.data;
  const errors: FieldError[] = parsed.error.issues.map((issue) => {
    const field = issue.path.map(String).join('.');
    return { field, rule: issue.code, message: field ? `${field}: ${issue.message}` : issue.message };
  });
  throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
}

/** The handler's answer, or a HandlerTimeout once `ms` have passed (the handler is not stopped). */
function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HandlerTimeout()), ms);
    timer.unref();
  });
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

/**
 * A thrown value as a Problem when it is one: a Problem (svcgen's, refuse()) as it is; a generated
 * client's ServiceError (ctx.data) as the Problem it carries. Undefined for anything else.
 */
function asProblem(error: unknown): Problem | undefined {
  if (error instanceof Problem) return error;
  const carried = (error as { name?: unknown; problem?: unknown } | null)?.problem as
    | { type?: unknown; detail?: unknown; errors?: unknown }
    | undefined;
  if ((error as { name?: unknown } | null)?.name !== 'ServiceError' || typeof carried?.type !== 'string')
    return undefined;
  const kind = carried.type.slice('/errors/'.length);
  if (!carried.type.startsWith('/errors/') || !(kind in PROBLEM_KINDS)) return undefined;
  return new Problem(
    kind as ProblemKind,
    typeof carried.detail === 'string' ? carried.detail : '',
    Array.isArray(carried.errors) ? (carried.errors as FieldError[]) : [],
  );
}
