/**
 * GraphQL subscriptions over Server-Sent Events (docs/realtime.md "Server-Sent Events"): graphql-sse
 * in its distinct connections mode at `POST /gw/api/graphql/stream`, one subscription a stream.
 * The request's headers carry the credentials, tenancy and environment exactly as on the data
 * routes; the stream is then a subscriber like a WebSocket's (the same hub, matcher, caps and
 * revocations: server.ts wires admission.ts, matching.ts and revocation.ts). Refusals before the
 * stream starts are Problems (401, 403, 429, 400); what ends a running stream is a last `next`
 * event whose error carries the close code, then `complete`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { GraphQLError, type ExecutionResult } from 'graphql';
import { createHandler } from 'graphql-sse';
import { jsonBodyProblem, parseJsonBody, Problem, type ApiRequest } from '../http/index.ts';
import { SUBSCRIPTION_MESSAGES } from './admission.ts';
import { CAP_RETRY_AFTER_SECONDS, CLOSE, type Caller, type LiveConnection } from './connection.ts';
import type { RealtimeServer } from './server.ts';

/** The error code a stream's last event names for each close code (docs/realtime.md). */
const CLOSE_NAMES: Record<number, string> = {
  [CLOSE.credentialEnded]: 'CREDENTIAL_ENDED',
  [CLOSE.rolesChanged]: 'ROLES_CHANGED',
  [CLOSE.tooSlow]: 'TOO_SLOW',
  [CLOSE.goingAway]: 'GOING_AWAY',
  [CLOSE.interrupted]: 'INTERRUPTED',
};

/** How long a stream that was sent its last event may take to flush it before it is cut. */
const FLUSH_GRACE_MS = 1000;

/** One SSE stream as a subscriber connection. */
export class SseStream implements LiveConnection {
  private ended = false;
  /** A close that came before the stream started (a caller is admitted before graphql-sse answers). */
  private pending: { code: number; reason: string } | undefined;
  /** Changes graphql-sse took from the subscription, and those it wrote to the response. */
  pulled = 0;
  private written = 0;

  constructor(private readonly res: ServerResponse) {
    // graphql-sse pulls changes as they come into a queue of its own, unbounded, and writes them
    // one at a time as the client reads: counting both bounds that queue (docs/realtime.md).
    const write = res.write.bind(res) as (...args: unknown[]) => boolean;
    res.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (typeof chunk === 'string' && chunk.startsWith('event: next')) this.written++;
      return write(chunk, ...rest);
    }) as typeof res.write;
  }

  /** Changes waiting in graphql-sse's queue. */
  get queued(): number {
    return this.pulled - this.written;
  }

  get bufferedAmount(): number {
    return this.res.writableLength;
  }

  close(code: number, reason: string): void {
    if (this.ended) return;
    const res = this.res;
    if (!res.headersSent && !res.writableEnded && !res.destroyed) {
      // Not started yet: the client gets the same last event once it does (started()).
      this.pending ??= { code, reason };
      return;
    }
    this.ended = true;
    if (res.writableEnded || res.destroyed) {
      res.destroy();
      return;
    }
    const error = { message: reason, extensions: { code: CLOSE_NAMES[code] ?? 'CLOSED', closeCode: code } };
    res.end(`event: next\ndata: ${JSON.stringify({ errors: [error] })}\n\nevent: complete\ndata:\n\n`);
    // A client that stopped reading would hold the response (and its buffer) open: cut it, unless
    // the end reached the socket (the client then reads it at its own pace).
    setTimeout(() => {
      if (!res.writableFinished) res.destroy();
    }, FLUSH_GRACE_MS).unref();
  }

  /** Called once the stream's headers are written: ends it at once if a close came before; true then. */
  started(): boolean {
    const pending = this.pending;
    if (!pending) return false;
    this.pending = undefined;
    this.close(pending.code, pending.reason);
    return true;
  }
}

/**
 * The request's parameters for graphql-sse: a JSON body is read as every route reads one
 * (runtime/http/json-body.ts: UTF-8, at most MAX_JSON_DEPTH levels, checked before it is parsed,
 * so nothing recursive ever walks a deeper `variables`), a bad one answered with the same 400
 * `invalid-json` Problem (docs/realtime.md "Server-Sent Events"). Any other body is left to
 * graphql-sse, which refuses it (415, or 400 when it is missing).
 */
function jsonParams(req: IncomingMessage, raw: Buffer | undefined): string | Record<PropertyKey, unknown> {
  // graphql-sse's own test for a JSON body: whatever it would parse is parsed here first.
  if (raw === undefined || !req.headers['content-type']?.includes('application/json'))
    return raw?.toString('utf8') ?? '';
  let value: unknown;
  try {
    value = parseJsonBody(raw);
  } catch (error) {
    throw jsonBodyProblem(error);
  }
  // graphql-sse would parse a JSON string again, unbounded: only an object goes on.
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new Problem(
      'bad-request',
      'the body must be a JSON object: {"query": "subscription { … }", "variables": {…}}',
    );
  return value as Record<PropertyKey, unknown>;
}

interface StreamContext {
  readonly caller: Caller;
  readonly stream: SseStream;
}

/**
 * The route handler of `POST /gw/api/graphql/stream`: admits the caller (or throws the Problem to
 * answer), then hands the request to graphql-sse.
 */
export function sseHandler(
  server: RealtimeServer,
): (req: IncomingMessage, res: ServerResponse, apiReq: ApiRequest) => Promise<void> {
  const streams = new WeakMap<IncomingMessage, StreamContext>();
  // graphql-sse's raw handler, not its Node adapter: the adapter reads the request body without a
  // limit; here the body is read as every route reads it (http.limits.bodyBytes → 413).
  const handle = createHandler<IncomingMessage, { res: ServerResponse }>({
    // Distinct connections mode only: no stream reservations (PUT) and no token.
    authenticate: () => '',
    onSubscribe: (req, params) => {
      const context = streams.get(req.raw);
      if (!context) return { data: null, errors: [new GraphQLError('no stream')] } as never;
      const prepared = server.prepare(context.caller, context.stream, {
        query: params.query,
        operationName: params.operationName,
        variables: params.variables,
      });
      // Validation errors are sent as the stream's one event, then `complete` (graphql-sse's way).
      if (Array.isArray(prepared)) return { data: null, errors: prepared } as ExecutionResult as never;
      return prepared as never;
    },
    subscribe: async (args) => {
      const result = await server.run(args);
      const stream = (args.contextValue as unknown as { socket: SseStream }).socket;
      if (!(Symbol.asyncIterator in result)) return result as never;
      const next = result.next.bind(result);
      result.next = async (...a) => {
        const step = await next(...a);
        if (!step.done) stream.pulled++;
        return step;
      };
      return result as never;
    },
    // prepare() validated the document with the socket's rules; graphql-sse's own graphql import
    // may be another copy of the module (CJS beside our ESM) that cannot read our schema.
    validate: () => [],
    execute: () => ({ errors: [new GraphQLError(SUBSCRIPTION_MESSAGES)] }) as never,
  });
  return async (req, res, apiReq) => {
    if (req.headers.accept !== 'text/event-stream')
      throw new Problem(
        'bad-request',
        'this endpoint streams subscriptions as Server-Sent Events: send the header Accept: text/event-stream (queries and mutations go to /gw/api/graphql)',
      );
    if (server.stopping)
      throw new Problem('rate-limited', 'the server is stopping; connect again', [], { 'retry-after': '1' });
    if (server.connections >= server.maxConnections)
      throw new Problem(
        'rate-limited',
        `this server holds its maximum of ${server.maxConnections} connections; try again later`,
        [],
        { 'retry-after': String(CAP_RETRY_AFTER_SECONDS) },
      );
    const raw = await apiReq.readBody();
    const stream = new SseStream(res);
    const caller = await server.admit(apiReq, stream, 'connections');
    server.streams.add(stream);
    res.once('close', () => {
      server.streams.delete(stream);
      server.release(caller, stream);
    });
    const params = jsonParams(req, raw);
    streams.set(req, { caller, stream });
    const [body, init] = await handle({
      method: req.method ?? 'POST',
      url: req.url ?? '',
      headers: {
        get: (name: string) => {
          const value = req.headers[name];
          return Array.isArray(value) ? value.join('\n') : value;
        },
      },
      body: params,
      raw: req,
      context: { res },
    });
    res.writeHead(init.status, init.statusText, init.headers as Record<string, string>);
    if (!body || typeof body === 'string') {
      res.end(body);
      return;
    }
    if (stream.started()) {
      void body.return(undefined);
      return;
    }
    const stop = () => void body.return(undefined);
    res.once('close', stop);
    try {
      for await (const message of body) {
        if (!res.writable) break;
        await new Promise<void>((resolve, reject) =>
          res.write(message, (error) => (error ? reject(error) : resolve())),
        );
      }
    } finally {
      res.off('close', stop);
      if (!res.writableEnded) res.end();
    }
  };
}
