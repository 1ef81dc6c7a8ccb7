/**
 * A TCP fault proxy in front of PostgreSQL that a test can take down, cut and slow down, to play
 * database outages (restart, network cut, PgBouncer restart, failover, NAT timeout) without
 * touching the shared PostgreSQL server.
 *
 *   proxy.cut()                        every connection ends at once without a word (a FIN, no RST):
 *                                      pg sees "Connection terminated unexpectedly"; new ones work
 *   proxy.refuseFor(2000)              resets every connection and refuses new ones for 2 s
 *   proxy.outage() / proxy.restore()   the same until restore(); outage('blackhole') answers nothing
 *   proxy.setLatency(20)               holds every chunk from the database back 20 ms (in order)
 *   proxy.cutNextAnswer({ after: 'COMMIT', bytes: 5 })
 *                                      the connection that next sends a chunk containing COMMIT gets
 *                                      the first 5 bytes of the database's answer, then is cut
 */
import net from 'node:net';

export interface CutNextAnswer {
  /** Arms on the next chunk to the database that contains this text (default: the next chunk of any connection). */
  after?: string;
  /** Bytes of the database's answer passed on before the cut (default 0: none). */
  bytes?: number;
}

export interface TcpProxy {
  /** The target URL with host and port replaced by the proxy's. */
  url(targetUrl: string): string;
  readonly port: number;
  /** Sockets piped right now (each is one database connection through the proxy). */
  readonly connections: number;
  /** Connections accepted and piped since the start (reconnects show here). */
  readonly accepted: number;
  /**
   * Resets every piped connection; until `restore()` new ones are reset at once ('refuse', a stopped
   * server) or accepted and never answered ('blackhole', a host gone from the network; those stay
   * stalled even after restore, as packets lost on a dead route do).
   */
  outage(mode?: 'refuse' | 'blackhole'): void;
  /** outage('refuse') for `ms`, then restore() by itself (unless restore() or another outage came first). */
  refuseFor(ms: number): void;
  /**
   * Ends every piped connection silently: a FIN to both sides, mid-stream, no RST and no error
   * message (a network cut noticed, a PgBouncer restart, a failover, a NAT timeout). New
   * connections are piped as before. Answers how many were cut.
   */
  cut(): number;
  /** Resolves once one connection was cut as asked (see CutNextAnswer). */
  cutNextAnswer(options?: CutNextAnswer): Promise<void>;
  /** Holds every chunk from the database back `ms` from now on (0: none), keeping their order. */
  setLatency(ms: number): void;
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

/** One database connection through the proxy: the application's socket and the database's. */
interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** Chunks from the database waiting for their time (latency); `null` is a cut, in its place in the stream. */
  queue: { at: number; chunk: Buffer | null }[];
  timer: NodeJS.Timeout | undefined;
  /** Armed by cutNextAnswer: the next answer passes this many bytes, then the connection is cut. */
  cutAfterBytes: number | undefined;
  onCut: (() => void) | undefined;
}

export async function startTcpProxy(
  targetHost: string,
  targetPort: number,
  options: TcpProxyOptions = {},
): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let down: 'refuse' | 'blackhole' | undefined;
  let refuseTimer: NodeJS.Timeout | undefined;
  let latencyMs = options.downstreamDelayMs ?? 0;
  let accepted = 0;
  const stalled = new Set<net.Socket>();
  /** Armed cuts waiting for a connection to send what they are after. */
  const armed: { after: string | undefined; bytes: number; done: () => void }[] = [];

  /** FIN to both sides; bytes already handed to the kernel still arrive, nothing after them. */
  const cutSilently = (pair: Pair) => {
    pairs.delete(pair);
    if (pair.timer) clearTimeout(pair.timer);
    pair.queue.length = 0;
    pair.upstream.destroySoon();
    pair.client.destroySoon();
  };

  const deliver = (pair: Pair) => {
    pair.timer = undefined;
    const now = performance.now();
    while (pair.queue.length > 0 && pair.queue[0]!.at <= now) {
      const { chunk } = pair.queue.shift()!;
      if (chunk === null) return cutSilently(pair);
      if (pair.client.writable) pair.client.write(chunk);
    }
    if (pair.queue.length > 0)
      pair.timer = setTimeout(() => deliver(pair), Math.max(0, pair.queue[0]!.at - performance.now()));
  };

  /** Passes a chunk from the database on, after the latency, or cuts as armed. */
  const downstream = (pair: Pair, data: Buffer) => {
    let chunk: Buffer | null = data;
    let cutHere = false;
    if (pair.cutAfterBytes !== undefined) {
      chunk = data.subarray(0, pair.cutAfterBytes);
      cutHere = true;
      pair.cutAfterBytes = undefined;
      // Nothing more from the database reaches the application on this connection.
      pair.upstream.pause();
    }
    if (latencyMs === 0 && pair.queue.length === 0) {
      if (chunk.length > 0 && pair.client.writable) pair.client.write(chunk);
      if (cutHere) {
        cutSilently(pair);
        pair.onCut?.();
      }
      return;
    }
    const at = performance.now() + latencyMs;
    if (chunk.length > 0) pair.queue.push({ at, chunk });
    if (cutHere) {
      pair.queue.push({ at, chunk: null });
      const onCut = pair.onCut;
      pair.upstream.once('close', () => onCut?.());
    }
    if (!pair.timer) pair.timer = setTimeout(() => deliver(pair), Math.max(0, pair.queue[0]!.at - performance.now()));
  };

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
    accepted++;
    const upstream = net.connect(targetPort, targetHost);
    const pair: Pair = { client, upstream, queue: [], timer: undefined, cutAfterBytes: undefined, onCut: undefined };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      if (pair.timer) clearTimeout(pair.timer);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.on('data', (chunk: Buffer) => {
      if (!pairs.has(pair)) return;
      const text = chunk.toString('latin1');
      const i = armed.findIndex((a) => a.after === undefined || text.includes(a.after));
      if (i !== -1 && pair.cutAfterBytes === undefined) {
        const [cut] = armed.splice(i, 1);
        pair.cutAfterBytes = cut!.bytes;
        pair.onCut = cut!.done;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (pairs.has(pair)) downstream(pair, chunk);
    });
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
    get accepted() {
      return accepted;
    },
    get stalled() {
      return stalled.size;
    },
    outage(mode = 'refuse') {
      if (refuseTimer) clearTimeout(refuseTimer);
      refuseTimer = undefined;
      down = mode;
      for (const pair of pairs) {
        if (pair.timer) clearTimeout(pair.timer);
        pair.client.resetAndDestroy();
        pair.upstream.destroy();
      }
      pairs.clear();
    },
    refuseFor(ms) {
      proxy.outage('refuse');
      refuseTimer = setTimeout(() => {
        refuseTimer = undefined;
        down = undefined;
      }, ms);
    },
    cut() {
      const n = pairs.size;
      for (const pair of [...pairs]) cutSilently(pair);
      return n;
    },
    cutNextAnswer(cut = {}) {
      return new Promise<void>((done) => armed.push({ after: cut.after, bytes: cut.bytes ?? 0, done }));
    },
    setLatency(ms) {
      latencyMs = ms;
    },
    restore() {
      if (refuseTimer) clearTimeout(refuseTimer);
      refuseTimer = undefined;
      down = undefined;
    },
    resetStalled() {
      for (const socket of stalled) socket.resetAndDestroy();
    },
    async close() {
      armed.length = 0;
      proxy.outage();
      proxy.resetStalled();
      if (refuseTimer) clearTimeout(refuseTimer);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
