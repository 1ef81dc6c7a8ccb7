/**
 * Who may subscribe (docs/realtime.md "Connecting" and "Lifecycle and limits"): a connection's
 * credentials are resolved as the data routes resolve them and counted against the per-caller cap,
 * its end is registered (revocation and the access token's expiry); each subscription is parsed
 * and validated against the caller's schema.
 */
import type { IncomingMessage } from 'node:http';
import {
  GraphQLError,
  getOperationAST,
  specifiedRules,
  validate,
  type ExecutionArgs,
  type ValidationRule,
} from 'graphql';
import { Problem, type ApiRequest } from '../http/index.ts';
import { CostRule, parseBounded } from '../graphql/rules.ts';
import { GRAPHQL_PATH } from '../model/index.ts';
import { readCredential } from '../principal/index.ts';
import { identify, refuseManagement } from '../data/index.ts';
import {
  CAP_RETRY_AFTER_SECONDS,
  CLOSE,
  type Caller,
  type LiveConnection,
  type RealtimeDeps,
  type RealtimeLimits,
} from './connection.ts';
import { withFileChanges } from './files.ts';
import { revocationIds, type Revocations } from './revocation.ts';

export const SUBSCRIPTION_MESSAGES = 'subscriptions only: send queries and mutations by HTTP to /gw/api/graphql';

/** Only subscription operations come over the socket. */
const SubscriptionsOnlyRule: ValidationRule = (context) => ({
  OperationDefinition(operation) {
    if (operation.operation !== 'subscription')
      context.reportError(
        new GraphQLError(SUBSCRIPTION_MESSAGES, {
          nodes: operation,
          extensions: { code: 'GRAPHQL_VALIDATION_FAILED', type: '/errors/invalid-parameter', status: 400 },
        }),
      );
  },
});
const RULES = [...specifiedRules, CostRule, SubscriptionsOnlyRule];

/** connection_init's payload as request headers: names lower-cased, string values only. */
export function headersOf(params: Readonly<Record<string, unknown>> | undefined): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(params ?? {}))
    if (typeof value === 'string') headers[name.toLowerCase()] = value;
  return headers;
}

export function socketRequest(request: IncomingMessage, headers: Record<string, string>): ApiRequest {
  return {
    method: 'GET',
    path: GRAPHQL_PATH,
    query: new URLSearchParams(),
    headers,
    params: {},
    ip: request.socket.remoteAddress ?? '',
    receivedAt: performance.now(),
    readBody: async () => undefined,
    onClientGone: () => () => {},
  };
}

/** The `exp` (seconds) of a JWT access token, read without checking it (authentication did). */
function tokenExpiry(token: string): number | undefined {
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
      exp?: unknown;
    };
    return typeof payload.exp === 'number' ? payload.exp : undefined;
  } catch {
    return undefined;
  }
}

function callerKey(caller: Caller): string {
  return caller.principal.kind === 'apiKey' ? caller.principal.keyId : `user:${caller.principal.userId}`;
}

/** Connections admitted, per caller (realtime.maxConnectionsPerCaller). */
export class Admission {
  private readonly perCaller = new Map<string, number>();

  constructor(
    private readonly deps: Pick<RealtimeDeps, 'config' | 'authenticate'>,
    private readonly limits: Pick<RealtimeLimits, 'maxConnectionsPerCaller'>,
    private readonly revocations: Revocations,
  ) {}

  /**
   * Who the request's credentials name (as the data routes resolve them), counted against the
   * per-caller cap and registered for revocation and expiry on `connection`: throws a Problem
   * (401/403 from authentication, 429 over the cap).
   */
  async admit(req: ApiRequest, connection: LiveConnection, what: string): Promise<Caller> {
    // runtime/data's admission up to the credentials; a connection counts against its own cap, not the data rate limit.
    const { tenant, principal: found } = await identify(this.deps, this.deps.config, req);
    const principal = refuseManagement(found, 'a management token reads no data; use an API key or an access token');
    if (this.revocations.staleRoles(principal))
      throw new Problem(
        'forbidden',
        'your roles changed after this access token was issued; refresh it (POST /auth/refresh-token) and connect again',
      );
    const credential = readCredential(req)?.token;
    const revokedBy = revocationIds(principal, credential);
    const caller: Caller = { tenant, principal, revokedBy };
    const key = callerKey(caller);
    const count = this.perCaller.get(key) ?? 0;
    if (count >= this.limits.maxConnectionsPerCaller)
      throw new Problem(
        'rate-limited',
        `at most ${this.limits.maxConnectionsPerCaller} ${what} per caller; close one first`,
        [],
        { 'retry-after': String(CAP_RETRY_AFTER_SECONDS) },
      );
    this.perCaller.set(key, count + 1);
    this.revocations.watch(connection, revokedBy);
    if (principal.kind === 'user') {
      const exp = tokenExpiry(credential ?? '');
      if (exp !== undefined) {
        caller.expiryTimer = setTimeout(
          () => connection.close(CLOSE.credentialEnded, 'the access token expired; connect again with a fresh one'),
          Math.max(0, exp * 1000 - Date.now()),
        );
        caller.expiryTimer.unref();
      }
    }
    return caller;
  }

  /** Undoes admit() when the connection ends. */
  release(caller: Caller, connection: LiveConnection): void {
    if (caller.expiryTimer) clearTimeout(caller.expiryTimer);
    this.revocations.unwatch(connection, caller.revokedBy);
    const key = callerKey(caller);
    const count = (this.perCaller.get(key) ?? 1) - 1;
    if (count <= 0) this.perCaller.delete(key);
    else this.perCaller.set(key, count);
  }
}

/** Parses and validates a subscription of `caller` on `connection` against the caller's schema. */
export function prepareSubscription(
  deps: Pick<RealtimeDeps, 'schemaFor' | 'buckets'>,
  caller: Caller,
  connection: LiveConnection,
  payload: { query: string; operationName?: string | null; variables?: Record<string, unknown> | null },
): ExecutionArgs | readonly GraphQLError[] {
  const schema = deps.buckets?.length
    ? withFileChanges(deps.schemaFor(caller.principal))
    : deps.schemaFor(caller.principal);
  let document: ReturnType<typeof parseBounded>;
  try {
    document = parseBounded(payload.query);
  } catch (error) {
    if (error instanceof GraphQLError) return [error];
    throw error;
  }
  const errors = validate(schema, document, RULES);
  if (errors.length) return errors;
  if (!getOperationAST(document, payload.operationName))
    return [new GraphQLError('name the operation to run (operationName)')];
  return {
    schema,
    document,
    operationName: payload.operationName,
    variableValues: payload.variables,
    contextValue: {
      caller,
      socket: connection,
      executionKey: `${payload.operationName ?? ''}\n${JSON.stringify(payload.variables ?? null)}\n${payload.query}`,
    },
  };
}
