/**
 * GraphQL subscriptions over WebSocket (docs/realtime.md): the graphql-transport-ws protocol
 * (graphql-ws on ws) at the GraphQL endpoint, and the server SSE streams (sse.ts) share. The
 * connection_init payload carries what the data routes read from headers (X-Project-Id,
 * Authorization, environment; names in any case). The class is the transport and wires the
 * concerns: who may connect and subscribe (admission.ts), which changes go to which subscription
 * (matching.ts), and ending subscriptions whose credential or roles ended (revocation.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { GraphQLError, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { CloseCode, type Context } from 'graphql-ws';
import { useServer as serveGraphqlWs } from 'graphql-ws/use/ws';
import { WebSocketServer, type WebSocket } from 'ws';
import { toProblem } from '../graphql/execute.ts';
import { Problem, type ApiRequest } from '../http/index.ts';
import { GRAPHQL_PATH } from '../model/index.ts';
import { Admission, headersOf, prepareSubscription, socketRequest } from './admission.ts';
import {
  CAP_RETRY_AFTER_SECONDS,
  CLOSE,
  type Caller,
  type LiveConnection,
  type RealtimeDeps,
  type RealtimeLimits,
} from './connection.ts';
import { boundMessages } from './socket-input.ts';
import { Matching } from './matching.ts';
import { Revocations } from './revocation.ts';

type Extra = { socket: WebSocket; request: IncomingMessage; caller?: Caller };

export class RealtimeServer {
  private readonly wss: WebSocketServer;
  private readonly disposer: { dispose(): void | Promise<void> };
  private readonly revocations = new Revocations();
  private readonly admission: Admission;
  private readonly matching: Matching;
  private closing = false;
  /** SSE streams open now (sse.ts). */
  readonly streams = new Set<LiveConnection>();

  constructor(
    private readonly deps: RealtimeDeps,
    private readonly limits: RealtimeLimits,
  ) {
    this.admission = new Admission(deps, limits, this.revocations);
    this.matching = new Matching(deps, limits);
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

  /** Subscriptions live now (for metrics). */
  get subscriptions(): number {
    return this.matching.subscriptions;
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

  /** A user's roles changed (heard on ROLES_TOPIC): revocation.ts. */
  rolesChanged(message: string, tokenTtlSeconds: number): void {
    this.revocations.rolesChanged(message, tokenTtlSeconds);
  }

  /** Closes the connections whose credential `id` names (a revoked key's digest, an ended session or token). */
  revoked(id: string, reason: string): void {
    this.revocations.revoked(id, reason);
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

  /** Admits a connection (SSE streams call it too): admission.ts. */
  admit(req: ApiRequest, connection: LiveConnection, what: string): Promise<Caller> {
    return this.admission.admit(req, connection, what);
  }

  private disconnected(ctx: Context<Record<string, unknown>, Extra>): void {
    const caller = ctx.extra.caller;
    if (caller) this.release(caller, ctx.extra.socket);
  }

  /** Undoes admit() when the connection ends. */
  release(caller: Caller, connection: LiveConnection): void {
    this.admission.release(caller, connection);
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
    return prepareSubscription(this.deps, caller, connection, payload);
  }

  /** A subscription's stream of results: matching.ts. */
  run(args: ExecutionArgs): Promise<AsyncGenerator<ExecutionResult> | ExecutionResult> {
    return this.matching.run(args);
  }
}
