/**
 * Stopping a node:http server without resetting anyone: stop accepting, close idle keep-alive
 * connections at once, let in-flight requests finish with `Connection: close` (so keep-alive
 * clients move on instead of being served until the process dies), and close whatever is left
 * after a bound.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export interface Drain {
  /** Stops the server; resolves once every connection is gone (at the latest `timeoutMs` after the call). */
  close(timeoutMs: number): Promise<void>;
}

/** Call before the request listener is added, so every request is seen first. */
export function drainable(server: Server): Drain {
  let draining = false;
  const inFlight = new Set<ServerResponse>();
  // A response whose headers left before the drain said keep-alive: once it ends, its connection
  // is idle and must not wait for the keep-alive timeout.
  const closeWhenDone = (res: ServerResponse) =>
    res.once('finish', () => setImmediate(() => server.closeIdleConnections()));

  server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
    if (draining) {
      res.shouldKeepAlive = false;
      return;
    }
    inFlight.add(res);
    res.once('close', () => inFlight.delete(res));
  });

  return {
    close(timeoutMs) {
      draining = true;
      for (const res of inFlight) {
        if (res.headersSent) closeWhenDone(res);
        else res.shouldKeepAlive = false;
      }
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), timeoutMs);
      return closed.finally(() => clearTimeout(force));
    },
  };
}
