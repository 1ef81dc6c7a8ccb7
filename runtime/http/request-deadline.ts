/**
 * http.requestTimeoutMs (docs/deployment.md "HTTP timeouts"), kept by svcgen instead of node:http so
 * that a route may replace it: node:http's requestTimeout cuts every request still arriving after
 * it, an upload of a large file on a slow link included. Node keeps headersTimeout; this bounds
 * the rest of each request from its headers on, and answers like node:http would (the 408 of the
 * server's clientError listener). Uploads (runtime/storage/upload-deadline.ts) release it and are
 * bounded by their progress instead.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

const deadlines = new WeakMap<IncomingMessage, NodeJS.Timeout>();

/**
 * Starts `req`'s deadline: if its body has not all arrived within `ms`, `onExpire` gets the error
 * node:http would have raised (code ERR_HTTP_REQUEST_TIMEOUT) and the socket.
 */
export function startRequestDeadline(
  req: IncomingMessage,
  res: ServerResponse,
  ms: number,
  onExpire: (error: NodeJS.ErrnoException, socket: Duplex) => void,
): void {
  // A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3): all of it
  // has arrived with its headers, so there is nothing left to bound (and no timer per GET).
  if (req.complete || !hasBody(req)) return;
  const timer = setTimeout(() => {
    deadlines.delete(req);
    if (req.complete || req.socket.destroyed) return;
    const error: NodeJS.ErrnoException = new Error('request timeout');
    error.code = 'ERR_HTTP_REQUEST_TIMEOUT';
    onExpire(error, req.socket);
  }, ms);
  timer.unref();
  deadlines.set(req, timer);
  const release = () => releaseRequestDeadline(req);
  req.once('end', release);
  res.once('close', release);
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Ends `req`'s deadline: its route bounds the request otherwise (a long upload). */
export function releaseRequestDeadline(req: IncomingMessage): void {
  const timer = deadlines.get(req);
  if (timer === undefined) return;
  clearTimeout(timer);
  deadlines.delete(req);
}
