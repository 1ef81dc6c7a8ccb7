/**
 * One access-log line per request: method, path (without the query, which may carry values),
 * status, time, and who called (an API key id, `user:<id>` or `management:<id>`) once known.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApiRequest } from './request.ts';

// Keyed by the request's headers object, which the ApiRequest shares with the IncomingMessage.
const callers = new WeakMap<object, string>();

/** Records who made the request, for its log line. */
export function noteCaller(req: ApiRequest, caller: string): void {
  callers.set(req.headers, caller);
}

export type RequestLogger = (req: IncomingMessage, res: ServerResponse) => void;

export function requestLogger(log: (line: string) => void): RequestLogger {
  return (req, res) => {
    const started = performance.now();
    res.once('finish', () => {
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      const caller = callers.get(req.headers);
      log(`${req.method} ${q === -1 ? url : url.slice(0, q)} ${res.statusCode} ${(performance.now() - started).toFixed(1)} ms${caller ? ` ${caller}` : ''}`);
    });
  };
}
