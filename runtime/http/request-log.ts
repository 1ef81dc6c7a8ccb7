/**
 * Per-request observation: the request id (X-Request-Id in and out), one structured log entry per
 * request (reqId, method, path without the query, status, durationMs, caller) and the request
 * metrics. Never logged: headers (Authorization), the query string (it may carry tokens or
 * values), bodies.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiRequest } from './request.ts';

// Keyed by the request's headers object, which the ApiRequest shares with the IncomingMessage.
const callers = new WeakMap<object, string>();
const routes = new WeakMap<ServerResponse, string>();

/** Records who made the request, for its log entry. */
export function noteCaller(req: ApiRequest, caller: string): void {
  callers.set(req.headers, caller);
}

/** Records the route pattern a request matched, for its metrics (Express routes are read from `req.route`). */
export function noteRoute(res: ServerResponse, pattern: string): void {
  routes.set(res, pattern);
}

const SANE_REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * The request's id: the caller's X-Request-Id when it is sane (≤ 128 of `[A-Za-z0-9._-]`: safe in
 * a log line and a header), else a new UUID. It replaces the incoming header, so everything
 * downstream reads one value. The response must carry it too: assignRequestId sets it there at
 * once; a request answered only by send() (node-adapter.ts) may leave that to send.
 */
export function requestId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
  req.headers['x-request-id'] = id;
  return id;
}

/** requestId, also set on the response before any handler can answer. */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const id = requestId(req);
  res.setHeader('x-request-id', id);
  return id;
}

/** The request id assignRequestId gave the request (for error log entries). */
export function requestIdOf(req: { headers: IncomingMessage['headers'] }): string | undefined {
  const id = req.headers['x-request-id'];
  return typeof id === 'string' ? id : undefined;
}

/** The subset of a pino logger this module uses. */
export interface EntryLogger {
  isLevelEnabled(level: string): boolean;
  info(entry: object, msg: string): void;
  error(entry: object, msg: string): void;
}

export interface RequestObservers {
  /** Receives an entry per request at info (5xx at error, so `--log-level warn` still shows them). */
  logger?: EntryLogger;
  /** Receives route, method, status and seconds per request. */
  record?: (route: string, method: string, status: number, seconds: number) => void;
  /**
   * Writes the info entry as `logger.info(entry, 'request')` would, without the entry object and
   * pino's generic serializer (runtime/observability/logger.ts requestLineWriter).
   */
  infoLine?: RequestLineWriter;
}

/**
 * Writes a request's info line as `logger.info(entry, 'request')` would, byte for byte; undefined
 * fields are left out.
 */
export type RequestLineWriter = (
  reqId: string | undefined,
  method: string | undefined,
  path: string,
  status: number,
  durationMs: number,
  caller: string | undefined,
  aborted: true | undefined,
) => void;

/** Called once per request at its start; undefined when nothing observes requests. */
export type RequestObserver = (req: IncomingMessage, res: ServerResponse) => void;

export function requestObserver({ logger, record, infoLine }: RequestObservers): RequestObserver | undefined {
  const logInfo = logger?.isLevelEnabled('info') ?? false;
  if (!logger && !record) return undefined;
  return (req, res) => {
    const started = performance.now();
    res.once('close', () => {
      const ms = performance.now() - started;
      const status = res.statusCode;
      if (record) record(routes.get(res) ?? expressRoute(req), req.method ?? '', status, ms / 1000);
      if (logger && (logInfo || status >= 500)) {
        // Express rewrites req.url inside mounted routers; originalUrl is what the client sent.
        const url = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/';
        const q = url.indexOf('?');
        const reqId = req.headers['x-request-id'];
        if (infoLine && status < 500 && typeof reqId !== 'object') {
          infoLine(
            reqId,
            req.method,
            q === -1 ? url : url.slice(0, q),
            status,
            Math.round(ms * 10) / 10,
            callers.get(req.headers),
            res.writableFinished ? undefined : true,
          );
          return;
        }
        const entry = {
          reqId: req.headers['x-request-id'],
          method: req.method,
          path: q === -1 ? url : url.slice(0, q),
          status,
          durationMs: Math.round(ms * 10) / 10,
          caller: callers.get(req.headers),
          // A response cut off before its end (the client went away, a forced close).
          aborted: res.writableFinished ? undefined : true,
        };
        if (status >= 500) logger.error(entry, 'request');
        else logger.info(entry, 'request');
      }
    });
  };
}

/** Express's matched route path (app routes are registered with their full path), else `unmatched`. */
function expressRoute(req: IncomingMessage): string {
  const route = (req as { route?: { path?: unknown } }).route;
  return typeof route?.path === 'string' ? route.path : 'unmatched';
}
