/**
 * A TCP proxy in front of PostgreSQL that a test can take down and bring back, to play a database
 * outage (restart, network cut) without touching the shared PostgreSQL server.
 */
import net from 'node:net';

export interface TcpProxy {
  /** The target URL with host and port replaced by the proxy's. */
  url(targetUrl: string): string;
  readonly port: number;
  /** Sockets piped right now (each is one database connection through the proxy). */
  readonly connections: number;
  /**
   * Resets every piped connection; until `restore()` new ones are reset at once ('refuse', a stopped
   * server) or accepted and never answered ('blackhole', a host gone from the network; those stay
   * stalled even after restore, as packets lost on a dead route do).
   */
  outage(mode?: 'refuse' | 'blackhole'): void;
  /** Connections accepted during a blackhole outage and left unanswered. */
  readonly stalled: number;
  /** Resets the stalled connections (what finally happens to them when the route comes back). */
  resetStalled(): void;
  restore(): void;
  close(): Promise<void>;
}

export interface TcpProxyOptions {
  /** Holds every chunk from the database back this long before passing it on (in order): a slow route. */
  downstreamDelayMs?: number;
}

export async function startTcpProxy(
  targetHost: string,
  targetPort: number,
  options: TcpProxyOptions = {},
): Promise<TcpProxy> {
  const pairs = new Set<[net.Socket, net.Socket]>();
  let down: 'refuse' | 'blackhole' | undefined;
  const stalled = new Set<net.Socket>();
  const server = net.createServer((client) => {
    if (down === 'refuse') {
      client.resetAndDestroy();
      return;
    }
    if (down === 'blackhole') {
      stalled.add(client);
      client.on('error', () => {}).on('close', () => stalled.delete(client));
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    const delay = options.downstreamDelayMs ?? 0;
    if (delay > 0) {
      // Timers of equal delay fire in the order they were set, so the bytes keep theirs.
      upstream.on('data', (chunk: Buffer) => setTimeout(() => client.writable && client.write(chunk), delay));
    } else upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  const proxy: TcpProxy = {
    port,
    url(targetUrl) {
      const u = new URL(targetUrl);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    get connections() {
      return pairs.size;
    },
    get stalled() {
      return stalled.size;
    },
    outage(mode = 'refuse') {
      down = mode;
      for (const [client, upstream] of pairs) {
        client.resetAndDestroy();
        upstream.destroy();
      }
      pairs.clear();
    },
    restore() {
      down = undefined;
    },
    resetStalled() {
      for (const socket of stalled) socket.resetAndDestroy();
    },
    async close() {
      proxy.outage();
      proxy.resetStalled();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
