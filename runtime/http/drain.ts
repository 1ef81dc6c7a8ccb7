/**
 * Stopping a node:http server without resetting anyone: stop accepting, close idle keep-alive
 * connections at once, let in-flight requests finish with `Connection: close` (so keep-alive
 * clients move on instead of being served until the process dies), and close whatever is left
 * after a bound.
 *
 * Nothing is kept per request. A response learns of the drain where node fixes its headers
 * (writeHead, which an implicit header goes through too), and connections whose response was
 * already under way are closed once they go idle. Only responses a framework takes over (Express,
 * which replaces their prototype and with it that writeHead) are followed one by one. An earlier version kept the responses in flight
 * in a Set: that kept every request and response alive across two young-generation collections,
 * so all of them were promoted to the old generation, several KiB per request of garbage
 * collection work (docs/deployment.md "Stopping: SIGTERM and draining").
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
export const IDLE_SWEEP_MS = 10;

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
