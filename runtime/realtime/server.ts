/**
 * GraphQL subscriptions over WebSocket (docs/realtime.md): the graphql-transport-ws protocol
 * (graphql-ws on ws) at the GraphQL endpoint. The connection_init payload carries what the data
 * routes read from headers (X-Project-Id, Authorization, environment; names in any case), resolved
 * as they resolve them. Each `<table>Changed` subscription is a LiveListener of the hub: it matches
 * every change in memory against the caller's read filter, removes the fields the caller may not
 * read, then applies the subscriber's `where` and `events`.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  GraphQLError,
  createSourceEventStream,
  execute,
  getOperationAST,
  specifiedRules,
  validate,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';
import { CloseCode, type Context } from 'graphql-ws';
import { useServer as serveGraphqlWs } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import { digestSecret } from '../keys/secrets.ts';
import { Problem, type ApiRequest } from '../http/index.ts';
import { problemError, toProblem } from '../graphql/execute.ts';
import { CostRule, parseBounded } from '../graphql/rules.ts';
import type { SubscriptionFieldMeta } from '../graphql/schema.ts';
import { whereCondition } from '../graphql/translate.ts';
import { GRAPHQL_PATH } from '../model/index.ts';
import { metrics } from '../observability/index.ts';
import { readCredential, type RolePrincipal } from '../principal/index.ts';
import {
  containmentsOf,
  HIDDEN,
  holds,
  unsupportedIn,
  type Access,
  type Catalog,
  type CatalogTable,
  type Condition,
  type Containment,
  type FileAccess,
  type Grant,
} from '../query/index.ts';
import { FILES_TABLE } from '../model/index.ts';
import { withFileChanges, type FileFieldMeta } from './files.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import type { LiveEvent, LiveHub, LiveListener } from './hub.ts';
import { LiveQueue } from './queue.ts';
import { boundMessages } from './socket-input.ts';

/** Close codes of docs/realtime.md beyond graphql-ws's own (4400, 4401, 4403, 4408, 4409, 4429). */
export const CLOSE = {
  /** The API key was revoked, or the session or token ended (logout, expiry). */
  credentialEnded: 4401,
  /** The client reads changes slower than they come: its buffer is full. */
  tooSlow: 1013,
  /** The server is stopping. */
  goingAway: 1001,
  /** The server lost its channel to the database: changes may have been missed. */
  interrupted: 1011,
  /** The user's roles changed: what they may see changed (docs/realtime.md). */
  rolesChanged: 4403,
} as const;

/**
 * A subscriber's connection: a WebSocket, or a Server-Sent Events stream (sse.ts). `close` ends it
 * with one of the codes above (an SSE stream sends the code in a last event, docs/realtime.md).
 */
export interface LiveConnection {
  close(code: number, reason: string): void;
  /** Bytes written but not yet sent to the client. */
  readonly bufferedAmount: number;
  /** Changes taken from the subscription's queue but not yet written (an SSE stream's library queue). */
  readonly queued?: number;
  /** Drops the connection without a closing handshake (a WebSocket's terminate()). */
  terminate?(): void;
}

/**
 * The Retry-After of a connection cap's 429 (per process at the upgrade or an SSE request, per
 * caller for an SSE request; docs/realtime.md "Lifecycle and limits"): a connection frees when a
 * client leaves, which no clock tells, so a client is asked to wait a few seconds, not hammer.
 */
export const CAP_RETRY_AFTER_SECONDS = 5;

/** How long a client closed for reading too slowly may take to read the close before it is cut. */
const SLOW_CLOSE_GRACE_MS = 1000;

/** config.realtime (docs/config.md). */
export interface RealtimeLimits {
  readonly maxConnections: number;
  readonly maxConnectionsPerCaller: number;
  readonly maxSubscriptionsPerConnection: number;
  readonly maxQueuedChanges: number;
  readonly maxBufferedBytes: number;
}

/** What the realtime server needs of the running server. */
export interface RealtimeDeps {
  readonly config: Parameters<typeof resolveDataTenant>[1];
  readonly catalog: Catalog;
  access(principal: RolePrincipal): Access;
  schemaFor(principal: RolePrincipal): GraphQLSchema;
  authenticate(req: ApiRequest, tenant: Tenant): { kind: string } | Promise<{ kind: string }>;
  readonly hub: LiveHub;
  /** The caller's access to each bucket's files (undefined when no bucket is configured). */
  files?(principal: RolePrincipal): FileAccess | undefined;
  /** The configured bucket names. */
  readonly buckets?: readonly string[];
  log(message: string, error?: unknown): void;
  /** What a client did wrong that the server has nothing to fix for (a frame over the size limit). */
  debug?(message: string, error?: unknown): void;
}

/** Who is on a socket (set by connection_init) or an SSE stream (from its headers). */
export interface Caller {
  readonly tenant: Tenant;
  readonly principal: RolePrincipal;
  /** What ends the credential: the API key's digest, or the user's session and token ids. */
  readonly revokedBy: readonly string[];
  expiryTimer?: NodeJS.Timeout;
}

type Extra = { socket: WebSocket; request: IncomingMessage; caller?: Caller };

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
function headersOf(params: Readonly<Record<string, unknown>> | undefined): Record<string, string> {
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

/** The revocation id of every connection of a user (`user:<id>`): ended when the user's roles change. */
export const USER_REVOCATION = 'user:';

/**
 * The channel topic of a role change (docs/realtime.md "Lifecycle and limits"): a trigger on svcgen.users
 * (svcgen.users_roles_changed) sends `<user id>\t<new roles as a JSON array>` on commit of any
 * UPDATE that changes a user's roles, whatever made it (an endpoint, SQL).
 */
export const ROLES_TOPIC = 'roles-changed';

const sameRoles = (a: readonly string[], b: readonly string[]) =>
  JSON.stringify([...new Set(a)].sort()) === JSON.stringify([...new Set(b)].sort());

export class RealtimeServer {
  private readonly wss: WebSocketServer;
  private readonly disposer: { dispose(): void | Promise<void> };
  /** Sockets by what ends their credential (key digest, session id, token id). */
  private readonly byRevocation = new Map<string, Set<LiveConnection>>();
  private readonly perCaller = new Map<string, number>();
  /**
   * Users whose roles changed while this process ran: their roles now, and until when an access
   * token issued before the change may still be presented (it carries the old roles).
   */
  private readonly changedRoles = new Map<string, { roles: readonly string[]; until: number }>();
  private closing = false;
  /** SSE streams open now (sse.ts). */
  readonly streams = new Set<LiveConnection>();
  /** Subscriptions live now (for metrics). */
  subscriptions = 0;

  constructor(
    private readonly deps: RealtimeDeps,
    private readonly limits: RealtimeLimits,
  ) {
    this.wss = new WebSocketServer({ noServer: true, maxPayload: 256 * 1024 });
    this.disposer = serveGraphqlWs<Record<string, unknown>, Extra>(
      {
        onConnect: (ctx) => this.connect(ctx),
        onSubscribe: (ctx, _id, payload) => this.prepareSocket(ctx, payload),
        subscribe: (args) => this.run(args),
        onClose: (ctx) => this.disconnected(ctx),
      },
      this.wss,
    );
  }

  /** Sockets and SSE streams open now (for metrics and tests). */
  get connections(): number {
    return this.wss.clients.size + this.streams.size;
  }

  /** realtime.maxConnections: sockets and streams a process holds at most. */
  get maxConnections(): number {
    return this.limits.maxConnections;
  }

  /** True once SIGTERM began: no new socket or stream is taken. */
  get stopping(): boolean {
    return this.closing;
  }

  /** The HTTP server's 'upgrade' listener: true when the request was ours. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const path = (req.url ?? '').split('?')[0];
    if (path !== GRAPHQL_PATH) return false;
    const refuse = (status: number, reason: string, retryAfter: number) => {
      socket.end(
        `HTTP/1.1 ${status} ${reason}\r\nContent-Type: text/plain\r\nRetry-After: ${retryAfter}\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(reason)}\r\n\r\n${reason}`,
      );
    };
    if (this.closing) refuse(503, 'Service Unavailable', 1);
    else if (this.connections >= this.limits.maxConnections) refuse(429, 'Too Many Requests', CAP_RETRY_AFTER_SECONDS);
    else
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        boundMessages(ws);
        this.wss.emit('connection', ws, req);
        // graphql-ws writes a socket's 'error' (a frame over maxPayload, invalid UTF-8: ws has
        // already closed the socket with 1009 or 1007) to console.error: a client's mistake, not
        // ours, so it goes to the debug log instead of flooding stderr (docs/realtime.md).
        ws.removeAllListeners('error');
        ws.on('error', (error) => this.deps.debug?.('realtime socket error (the client sent a bad frame)', error));
      });
    return true;
  }

  /** SIGTERM: every socket is closed with 1001 and no new one is taken. */
  async close(): Promise<void> {
    this.closing = true;
    for (const ws of this.wss.clients) ws.close(CLOSE.goingAway, 'the server is stopping');
    for (const stream of this.streams) stream.close(CLOSE.goingAway, 'the server is stopping');
    await Promise.resolve(this.disposer.dispose()).catch(() => {});
  }

  /**
   * A user's roles changed (heard on ROLES_TOPIC from any process): their sockets and streams end
   * with 4403, and until `tokenTtlSeconds` have passed an access token carrying other roles is
   * refused here (a refreshed token carries the new ones).
   */
  rolesChanged(message: string, tokenTtlSeconds: number): void {
    const tab = message.indexOf('\t');
    const userId = tab < 0 ? message : message.slice(0, tab);
    let roles: unknown;
    try {
      roles = JSON.parse(message.slice(tab + 1));
    } catch {
      roles = undefined;
    }
    const now = Date.now();
    for (const [id, entry] of this.changedRoles) if (entry.until < now) this.changedRoles.delete(id);
    if (Array.isArray(roles) && roles.every((r) => typeof r === 'string'))
      this.changedRoles.set(userId, { roles, until: now + tokenTtlSeconds * 1000 });
    for (const connection of this.byRevocation.get(`${USER_REVOCATION}${userId}`) ?? [])
      connection.close(CLOSE.rolesChanged, 'your roles changed; refresh the access token and connect again');
  }

  /** Closes the sockets whose credential `id` names (a revoked key's digest, an ended session or token). */
  revoked(id: string, reason: string): void {
    for (const ws of this.byRevocation.get(id) ?? []) ws.close(CLOSE.credentialEnded, reason);
  }

  private async connect(ctx: Context<Record<string, unknown>, Extra>): Promise<boolean> {
    const { socket, request } = ctx.extra;
    try {
      ctx.extra.caller = await this.admit(socketRequest(request, headersOf(ctx.connectionParams)), socket, 'sockets');
      return true;
    } catch (error) {
      const problem =
        error instanceof Problem
          ? error
          : toProblem(error, { log: (e) => this.deps.log('realtime connect failed', e) });
      socket.close(CloseCode.Forbidden, problem.detail.slice(0, 120));
      return false;
    }
  }

  /**
   * Who the request's credentials name (as the data routes resolve them), counted against the
   * per-caller cap and registered for revocation and expiry on `connection`: throws a Problem
   * (401/403 from authentication, 429 over the cap).
   */
  async admit(req: ApiRequest, connection: LiveConnection, what: string): Promise<Caller> {
    const tenant = resolveDataTenant(req, this.deps.config);
    const found = await this.deps.authenticate(req, tenant);
    if (found.kind === 'management')
      throw new Problem('forbidden', 'a management token reads no data; use an API key or an access token');
    const principal = found as RolePrincipal;
    if (principal.kind === 'user') {
      const changed = this.changedRoles.get(principal.userId);
      if (changed && changed.until >= Date.now() && !sameRoles(changed.roles, principal.roles))
        throw new Problem(
          'forbidden',
          'your roles changed after this access token was issued; refresh it (POST /auth/refresh-token) and connect again',
        );
    }
    const credential = readCredential(req)?.token;
    const revokedBy =
      principal.kind === 'apiKey'
        ? [digestSecret(credential ?? '')]
        : [principal.sessionId, principal.tokenId, `${USER_REVOCATION}${principal.userId}`];
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
    for (const id of revokedBy) {
      let set = this.byRevocation.get(id);
      if (!set) this.byRevocation.set(id, (set = new Set()));
      set.add(connection);
    }
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

  private disconnected(ctx: Context<Record<string, unknown>, Extra>): void {
    const caller = ctx.extra.caller;
    if (caller) this.release(caller, ctx.extra.socket);
  }

  /** Undoes admit() when the connection ends. */
  release(caller: Caller, connection: LiveConnection): void {
    if (caller.expiryTimer) clearTimeout(caller.expiryTimer);
    for (const id of caller.revokedBy) {
      const set = this.byRevocation.get(id);
      set?.delete(connection);
      if (set?.size === 0) this.byRevocation.delete(id);
    }
    const key = callerKey(caller);
    const count = (this.perCaller.get(key) ?? 1) - 1;
    if (count <= 0) this.perCaller.delete(key);
    else this.perCaller.set(key, count);
  }

  /** Parses and validates a subscribe message against the caller's schema (onSubscribe). */
  private prepareSocket(
    ctx: Context<Record<string, unknown>, Extra>,
    payload: { query: string; operationName?: string | null; variables?: Record<string, unknown> | null },
  ): ExecutionArgs | readonly GraphQLError[] {
    if (Object.keys(ctx.subscriptions).length > this.limits.maxSubscriptionsPerConnection)
      return [
        new GraphQLError(
          `at most ${this.limits.maxSubscriptionsPerConnection} subscriptions per socket; complete one first`,
          { extensions: { code: 'TOO_MANY_REQUESTS', type: '/errors/rate-limited', status: 429 } },
        ),
      ];
    return this.prepare(ctx.extra.caller!, ctx.extra.socket, payload);
  }

  /** Parses and validates a subscription of `caller` on `connection` against the caller's schema. */
  prepare(
    caller: Caller,
    connection: LiveConnection,
    payload: { query: string; operationName?: string | null; variables?: Record<string, unknown> | null },
  ): ExecutionArgs | readonly GraphQLError[] {
    const schema = this.deps.buckets?.length
      ? withFileChanges(this.deps.schemaFor(caller.principal))
      : this.deps.schemaFor(caller.principal);
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

  /**
   * graphql-js's subscribe(), but each change is executed once for every subscription with the
   * same schema, document and variables that was handed the same payload (sharedPayload: the same
   * principal, table and `where`), not once per subscription: the change types resolve from the
   * payload alone.
   */
  async run(args: ExecutionArgs): Promise<AsyncGenerator<ExecutionResult> | ExecutionResult> {
    const source = await createSourceEventStream({
      ...args,
      subscribeFieldResolver: this.subscribeField as GraphQLFieldResolver<unknown, unknown>,
    });
    if (!(Symbol.asyncIterator in source)) return source;
    const key = (args.contextValue as { executionKey: string }).executionKey;
    return mapped(source, (payload) => sharedExecution(args, key, payload));
  }

  /** The source stream of one `<table>Changed` field. */
  private readonly subscribeField = async (
    _source: unknown,
    args: { where?: unknown; events?: string[] | null },
    context: { caller: Caller; socket: LiveConnection },
    info: { fieldName: string; parentType: { getFields(): Record<string, { extensions: Record<string, unknown> }> } },
  ): Promise<AsyncIterable<unknown> | GraphQLError> => {
    const meta = info.parentType.getFields()[info.fieldName]?.extensions.svcgen as
      | SubscriptionFieldMeta
      | FileFieldMeta
      | undefined;
    if (!meta) return new GraphQLError(`${info.fieldName} is not a subscription of this API`);
    if ('files' in meta)
      return this.subscribeFiles(args as { bucket: string; events?: string[] | null }, context, info.fieldName);
    const { caller } = context;
    const table = this.deps.catalog.require(meta.table);
    const access = this.deps.access(caller.principal);
    const grant = access.grant(meta.table, 'read');
    if (!grant) return new GraphQLError(`your role may not read ${meta.table} records`);
    let where: Condition;
    try {
      where = whereCondition({ catalog: this.deps.catalog, access }, table, args.where);
    } catch (error) {
      return problemError(toProblem(error, { log: (e) => this.deps.log('realtime where failed', e) }));
    }
    const reason =
      unsupportedIn(table, where) ??
      unsupportedIn(table, grant.rows) ??
      [...grant.fieldRows.values()].map((c) => unsupportedIn(table, c)).find((r) => r !== undefined);
    if (reason)
      return new GraphQLError(`this subscription cannot be matched in memory: ${reason}`, {
        extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
      });
    const whereKey = JSON.stringify(args.where ?? null);
    return this.listen(
      context,
      info.fieldName,
      meta.table,
      args.events,
      () => access.grant(meta.table, 'read'),
      whereKey,
      (event) => visibleChange(table, access, event, where),
      // Captured at all only if the role filter and `where` can hold (docs/realtime.md "What a write costs").
      containmentsOf(table, { kind: 'and', items: [grant.rows, where] }),
    );
  };

  /**
   * `fileChanged(bucket:, events:)` (docs/realtime.md "File changes"): the `_files` changes of one
   * bucket, each checked in memory against the caller's read rule of that bucket exactly as a
   * table row against a role's read filter.
   */
  private async subscribeFiles(
    args: { bucket: string; events?: string[] | null },
    context: { caller: Caller; socket: LiveConnection },
    fieldName: string,
  ): Promise<AsyncIterable<unknown> | GraphQLError> {
    const { caller } = context;
    const buckets = this.deps.buckets ?? [];
    if (!buckets.includes(args.bucket))
      return new GraphQLError(`there is no bucket named "${args.bucket}"; buckets: ${buckets.join(', ')}`, {
        extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
      });
    const files = this.deps.files?.(caller.principal);
    const access = files?.access(args.bucket, caller.tenant.environment);
    const grant = access?.grant(FILES_TABLE, 'read');
    if (!files || !access || !grant)
      return new GraphQLError(`your role may not read the files of bucket "${args.bucket}"`, {
        extensions: { code: 'FORBIDDEN', type: '/errors/forbidden', status: 403 },
      });
    const table = files.catalog.require(FILES_TABLE);
    const reason =
      unsupportedIn(table, grant.rows) ??
      [...grant.fieldRows.values()].map((c) => unsupportedIn(table, c)).find((r) => r !== undefined);
    if (reason)
      return new GraphQLError(`this subscription cannot be matched in memory: ${reason}`, {
        extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
      });
    const always: Condition = { kind: 'true' };
    return this.listen(
      context,
      fieldName,
      FILES_TABLE,
      args.events,
      () => access.grant(FILES_TABLE, 'read'),
      '',
      (event) => visibleChange(table, access, event, always),
      // The rule pins the bucket and environment (and the owner, for `ownerId: $user.id`).
      containmentsOf(table, grant.rows),
    );
  }

  /** A subscription's source stream: the hub's changes of `table` the caller may see, bounded. */
  private async listen(
    context: { caller: Caller; socket: LiveConnection },
    fieldName: string,
    tableName: string,
    wanted: readonly string[] | null | undefined,
    currentGrant: () => Grant | null,
    whereKey: string,
    visible: (event: LiveEvent) => VisibleChange | undefined,
    interest?: readonly Containment[],
  ): Promise<AsyncIterable<unknown>> {
    const { caller, socket } = context;
    const info = { fieldName };
    const meta = { table: tableName };
    const events = new Set(wanted ?? ['INSERT', 'UPDATE', 'DELETE']);
    const queue = new LiveQueue<unknown>();
    let dropped = false;
    const listener: LiveListener = {
      environment: caller.tenant.environment,
      table: meta.table,
      interest,
      deliver: (event) => {
        if (dropped || !events.has(event.operation)) return;
        const now = currentGrant();
        if (!now) return;
        const change = sharedVisibleChange(now, whereKey, event, () => visible(event));
        if (!change) return;
        if (
          queue.length + (socket.queued ?? 0) >= this.limits.maxQueuedChanges ||
          socket.bufferedAmount > this.limits.maxBufferedBytes
        ) {
          dropped = true;
          metrics.realtimeEvents('dropped');
          socket.close(CLOSE.tooSlow, 'changes come faster than this client reads them; subscribe again');
          // A client that stopped reading never reads the close frame either: without this its
          // socket (and what is buffered for it) would stay until ws's 30 s close timeout.
          if (socket.terminate) setTimeout(() => socket.terminate?.(), SLOW_CLOSE_GRACE_MS).unref();
          return;
        }
        metrics.realtimeEvents('out');
        queue.push(sharedPayload(change, info.fieldName));
      },
      interrupted: () =>
        socket.close(CLOSE.interrupted, 'the server lost its channel to the database; changes may have been missed'),
    };
    const remove = await this.deps.hub.add(listener);
    this.subscriptions++;
    queue.onEnd(() => {
      this.subscriptions--;
      remove();
    });
    return queue;
  }
}

/**
 * What one change shows to the subscribers holding the same grant and the same `where` (a grant
 * belongs to one principal and table: same grant, same role filter, fields and values of
 * `$user`/`$context`), worked out once per change: a thousand alike subscribers cost one check.
 * Kept while the hub hands the change out (the event object is then dropped).
 */
const outcomes = new WeakMap<LiveEvent, WeakMap<Grant, Map<string, VisibleChange | undefined>>>();

function sharedVisibleChange(
  grant: Grant,
  whereKey: string,
  event: LiveEvent,
  work: () => VisibleChange | undefined,
): VisibleChange | undefined {
  let byGrant = outcomes.get(event);
  if (!byGrant) outcomes.set(event, (byGrant = new WeakMap()));
  let byWhere = byGrant.get(grant);
  if (!byWhere) byGrant.set(grant, (byWhere = new Map()));
  if (byWhere.has(whereKey)) return byWhere.get(whereKey);
  const change = work();
  byWhere.set(whereKey, change);
  return change;
}

/** The root value of a change's execution, one object per change and field (sharedExecution keys on it). */
const payloads = new WeakMap<VisibleChange, Map<string, Record<string, VisibleChange>>>();

function sharedPayload(change: VisibleChange, fieldName: string): Record<string, VisibleChange> {
  let byField = payloads.get(change);
  if (!byField) payloads.set(change, (byField = new Map()));
  let payload = byField.get(fieldName);
  if (!payload) byField.set(fieldName, (payload = { [fieldName]: change }));
  return payload;
}

const executions = new WeakMap<object, WeakMap<GraphQLSchema, Map<string, ReturnType<typeof execute>>>>();

/** execute() of one payload, once per schema and execution key (operation, variables, document text). */
function sharedExecution(args: ExecutionArgs, key: string, payload: unknown): ReturnType<typeof execute> {
  if (typeof payload !== 'object' || payload === null) return execute({ ...args, rootValue: payload });
  let bySchema = executions.get(payload);
  if (!bySchema) executions.set(payload, (bySchema = new WeakMap()));
  let byKey = bySchema.get(args.schema);
  if (!byKey) bySchema.set(args.schema, (byKey = new Map()));
  let result = byKey.get(key);
  if (!result) byKey.set(key, (result = execute({ ...args, rootValue: payload })));
  return result;
}

/** `source` with `map` applied to each value; return() and throw() reach the source (graphql-js's mapAsyncIterator). */
function mapped<T, U>(
  source: AsyncGenerator<T> | AsyncIterable<T>,
  map: (value: T) => U | Promise<U>,
): AsyncGenerator<Awaited<U>> {
  const iterator = source[Symbol.asyncIterator]() as AsyncIterator<T>;
  const step = async (result: IteratorResult<T>): Promise<IteratorResult<Awaited<U>>> =>
    result.done ? { value: undefined, done: true } : { value: await map(result.value), done: false };
  const out: AsyncGenerator<Awaited<U>> = {
    next: () => iterator.next().then(step),
    return: async () => (iterator.return ? step(await iterator.return()) : { value: undefined as never, done: true }),
    throw: async (error?: unknown) => {
      if (iterator.throw) return step(await iterator.throw(error));
      throw error;
    },
    [Symbol.asyncIterator]: () => out,
  };
  return out;
}

/**
 * What the caller sees of an event, or undefined when nothing: the record must be one the caller's
 * role filter lets it read (for an UPDATE, as it is after the change: a record that leaves the
 * filter is not shown, new values never), fields it may not read are removed (null where a field
 * is hidden on this row), and then the subscriber's `where` must hold.
 */
export interface VisibleChange {
  readonly id: string;
  readonly event: LiveEvent['operation'];
  readonly record: Record<string, unknown>;
  readonly changedFields: readonly string[];
  readonly timestamp: string;
}

export function visibleChange(
  table: CatalogTable,
  access: Access,
  event: LiveEvent,
  where: Condition,
): VisibleChange | undefined {
  const grant = access.grant(table.spec.name, 'read');
  if (!grant || !holds(table, grant.rows, event.record)) return undefined;
  const seen: Record<string, unknown> = {};
  for (const field of table.spec.fields) {
    if (grant.fields !== null && !grant.fields.has(field.name)) continue;
    const rows = grant.fieldRows.get(field.name);
    seen[field.name] = rows && !holds(table, rows, event.record) ? HIDDEN : (event.record[field.name] ?? null);
  }
  if (!holds(table, where, seen)) return undefined;
  const record: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(seen)) record[name] = value === HIDDEN ? null : value;
  return {
    id: event.id,
    event: event.operation,
    record,
    changedFields: event.changedFields.filter((f) => Object.hasOwn(seen, f) && seen[f] !== HIDDEN),
    timestamp: event.timestamp,
  };
}
