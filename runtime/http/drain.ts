/**
 * Stopping a node:http server without resetting anyone: stop accepting, close idle keep-alive
 * connections at once, let in-flight requests finish with `Connection: close` (so keep-alive
 * clients move on instead of being served until the process dies), and close whatever is left
 * after a bound (docs/deployment.md "Stopping: SIGTERM and draining").
 *
 * The data routes leave nothing behind per request: a response learns of the drain where node
 * fixes its headers (writeHead, which an implicit header goes through too), and a connection whose
 * response had already started is closed once it goes idle. Only responses Express takes over
 * (it replaces their prototype, and that writeHead with it) are followed one by one. An earlier
 * version kept every response in flight in a Set: measured under load, that had every request
 * and response promoted to the old generation, several KiB of garbage-collection work per request
 * (bench/RESULTS.md "CPU per request", the bytes that outlived a young-generation GC).
 */
import { createServer, ServerResponse, type Server, type ServerOptions } from 'node:http';

export interface Drain {
  /** Stops the server; resolves once every connection is gone (at the latest `timeoutMs` after the call). */
  close(timeoutMs: number): Promise<void>;
  /**
   * Keeps track of a response a framework takes over (Express gives it a prototype of its own, so
   * writeHead is no longer the drain's), until it closes. Only for those: the data routes never
   * come here.
   */
  follow(res: ServerResponse): void;
}

/**
 * How often a draining server closes the keep-alive connections that went idle since: those
 * whose response had started before the drain and ended without `Connection: close`.
 */
const IDLE_SWEEP_MS = 10;

/** A node:http server (created with `options`) that can drain. */
export function drainableServer(options: ServerOptions): { server: Server; drain: Drain } {
  let draining = false;
  class DrainingResponse extends ServerResponse {}
  const writeHead = ServerResponse.prototype.writeHead as (
    this: ServerResponse,
    status: unknown,
    message: unknown,
    headers: unknown,
  ) => ServerResponse;
  DrainingResponse.prototype.writeHead = function (
    this: ServerResponse,
    status: unknown,
    message: unknown,
    headers: unknown,
  ) {
    if (draining) this.shouldKeepAlive = false;
    return writeHead.call(this, status, message, headers);
  } as ServerResponse['writeHead'];
  const server: Server = createServer({ ...options, ServerResponse: DrainingResponse });
  const followed = new Set<ServerResponse>();
  return {
    server,
    drain: {
      follow(res) {
        if (draining) {
          res.shouldKeepAlive = false;
          return;
        }
        followed.add(res);
        res.once('close', () => followed.delete(res));
      },
      close(timeoutMs) {
        draining = true;
        for (const res of followed) if (!res.headersSent) res.shouldKeepAlive = false;
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const sweep = setInterval(() => server.closeIdleConnections(), IDLE_SWEEP_MS);
        const force = setTimeout(() => server.closeAllConnections(), timeoutMs);
        return closed.finally(() => {
          clearInterval(sweep);
          clearTimeout(force);
        });
      },
    },
  };
}
