/**
 * http.maxConnectionsPerAddress (docs/deployment.md "Connections per client address"): one client
 * address may hold at most this many of a process's http.maxConnections, so that it cannot take
 * them all with idle keep-alive connections or slow requests. Counted from the server's
 * 'connection' event to the socket's 'close', WebSocket upgrades included (they arrive on these
 * connections). The address is the TCP peer's; a peer listed in trustProxy (a load balancer or
 * reverse proxy, through which every client comes) is not capped.
 *
 * A refused connection never reaches node:http: this takes over the server's 'connection' event
 * (node:http handles a connection in its own listener of that event, which Node documents as the
 * way to hand it one), so no request on it is parsed or run. It is answered at once with a 429
 * Problem on the raw socket and closed.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import proxyAddr from 'proxy-addr';
import { PROBLEM_KINDS } from '../model/problem-kinds.ts';

/** Retry-After of the refusal: a connection frees as soon as one of the address's others closes. */
export const CONNECTION_RETRY_SECONDS = 1;

/**
 * How long a refused connection is kept open after its answer, reading and dropping what the
 * client sends: closing a socket with unread bytes resets it, and the client could lose the answer
 * with it (the "lingering close" of web servers). Closed earlier when the client closes.
 */
export const REFUSED_LINGER_MS = 1000;

/** Open connections per client address, and the decision for a new one. */
export class ConnectionsPerAddress {
  private readonly counts = new Map<string, number>();
  private readonly uncapped: (address: string) => boolean;

  constructor(
    /** At most this many per address; null: no cap. */
    readonly cap: number | null,
    /** The config's trustProxy: those peers are proxies, not clients (true: every peer is). */
    trustProxy: boolean | string[],
  ) {
    if (trustProxy === true) this.uncapped = () => true;
    else if (trustProxy === false || trustProxy.length === 0) this.uncapped = () => false;
    else {
      const trusted = proxyAddr.compile(trustProxy);
      this.uncapped = (address) => trusted(address, 0);
    }
  }

  /** Open now from `address`. */
  count(address: string): number {
    return this.counts.get(address) ?? 0;
  }

  /**
   * Counts a new connection from `address` and returns the function that uncounts it (calling it
   * again does nothing), or undefined when the address holds its cap already (nothing counted).
   */
  admit(address: string): (() => void) | undefined {
    if (this.cap === null || this.uncapped(address)) return () => {};
    const held = this.count(address);
    if (held >= this.cap) return undefined;
    this.counts.set(address, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.count(address) - 1;
      if (left > 0) this.counts.set(address, left);
      else this.counts.delete(address);
    };
  }
}

/** The raw HTTP/1.1 answer to a refused connection: a 429 Problem that says which key to raise. */
export function connectionRefusal(cap: number, address: string): string {
  const { status, title } = PROBLEM_KINDS['rate-limited'];
  const body = JSON.stringify({
    type: '/errors/rate-limited',
    title,
    status,
    detail: `each client address may have ${cap} connections open at once (http.maxConnectionsPerAddress), and ${address} has ${cap}; close idle connections or retry in ${CONNECTION_RETRY_SECONDS} s`,
    instance: '',
    errors: [],
  });
  return (
    `HTTP/1.1 ${status} ${title}\r\nContent-Type: application/problem+json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nRetry-After: ${CONNECTION_RETRY_SECONDS}\r\nConnection: close\r\n\r\n${body}`
  );
}

/**
 * Caps `server`'s connections per client address. Call it right after creating the server, before
 * anything else listens to 'connection'. `onRefused` hears of an address the first time it is
 * refused since it was last under its cap (one line per episode, not one per connection).
 */
export function capConnectionsPerAddress(
  server: Server,
  connections: ConnectionsPerAddress,
  onRefused: (address: string, cap: number) => void,
): void {
  const cap = connections.cap;
  if (cap === null) return;
  const handlers = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  const refusing = new Set<string>();
  server.on('connection', (socket: Socket) => {
    // undefined: the peer is gone already; node:http then sees a closed socket.
    const address = socket.remoteAddress;
    const release = address === undefined ? () => {} : connections.admit(address);
    if (release === undefined) {
      if (!refusing.has(address!)) {
        refusing.add(address!);
        onRefused(address!, cap);
      }
      refuse(socket, connectionRefusal(cap, address!));
      return;
    }
    socket.once('close', () => {
      release();
      if (address !== undefined && connections.count(address) < cap) refusing.delete(address);
    });
    for (const handler of handlers) handler.call(server, socket);
  });
}

/** Answers and closes a connection node:http never sees: its own error listener, since none other has one. */
function refuse(socket: Socket, answer: string): void {
  socket.on('error', () => socket.destroy());
  socket.end(answer);
  socket.resume(); // read and drop the request, if any: see REFUSED_LINGER_MS
  socket.once('end', () => socket.destroy());
  const linger = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
}
