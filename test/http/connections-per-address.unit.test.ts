/**
 * http.maxConnectionsPerAddress (runtime/http/connections-per-address.ts; docs/deployment.md
 * "Connections per client address"): the count and its decision, table-driven, then the takeover of
 * a bare node:http server's 'connection' event over real loopback sockets (127.0.0.1 and 127.0.0.2
 * are two addresses of the same machine). The whole server is test/http/connections-per-address.test.ts.
 */
import { createServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  capConnectionsPerAddress,
  connectionRefusal,
  ConnectionsPerAddress,
} from '../../runtime/http/connections-per-address.ts';
import { until } from '../support/until.ts';

describe('ConnectionsPerAddress', () => {
  const rows: [string, { cap: number | null; trustProxy: boolean | string[]; address: string; want: number }][] = [
    ['capped: the third of cap 2 is refused', { cap: 2, trustProxy: false, address: '10.0.0.1', want: 2 }],
    ['null: no cap', { cap: null, trustProxy: false, address: '10.0.0.1', want: 5 }],
    ['a listed proxy is not capped', { cap: 2, trustProxy: ['10.0.0.0/8'], address: '10.0.0.1', want: 5 }],
    ['an unlisted peer is capped', { cap: 2, trustProxy: ['10.0.0.0/8'], address: '192.0.2.1', want: 2 }],
    ['a named range (loopback) is a list too', { cap: 2, trustProxy: ['loopback'], address: '127.0.0.1', want: 5 }],
    ['IPv4-mapped IPv6 of a listed proxy', { cap: 2, trustProxy: ['10.0.0.1'], address: '::ffff:10.0.0.1', want: 5 }],
    ['trustProxy true: every peer may be a proxy', { cap: 2, trustProxy: true, address: '192.0.2.1', want: 5 }],
    ['an empty list trusts none', { cap: 2, trustProxy: [], address: '192.0.2.1', want: 2 }],
  ];
  it.each(rows)('%s', (_name, { cap, trustProxy, address, want }) => {
    const connections = new ConnectionsPerAddress(cap, trustProxy);
    let admitted = 0;
    for (let i = 0; i < 5; i++) if (connections.admit(address)) admitted++;
    expect(admitted).toBe(want);
  });

  it('per address; a release frees one slot, a second call of it nothing', () => {
    const connections = new ConnectionsPerAddress(2, false);
    const first = connections.admit('192.0.2.1')!;
    expect(connections.admit('192.0.2.1')).toBeDefined();
    expect(connections.admit('192.0.2.1')).toBeUndefined();
    expect(connections.admit('192.0.2.2')).toBeDefined();
    first();
    first();
    expect(connections.count('192.0.2.1')).toBe(1);
    expect(connections.admit('192.0.2.1')).toBeDefined();
    expect(connections.admit('192.0.2.1')).toBeUndefined();
    expect(connections.count('192.0.2.1')).toBe(2);
  });
});

/** A client socket from `localAddress`: what it received, whether the server closed it. */
class Raw {
  readonly socket: net.Socket;
  received = '';
  readonly opened: Promise<void>;
  readonly closed: Promise<string>;
  constructor(port: number, localAddress: string) {
    this.socket = net.connect({ port, host: '127.0.0.1', localAddress });
    this.socket.setEncoding('latin1').on('data', (d: string) => (this.received += d));
    this.socket.on('error', () => {});
    this.opened = new Promise((resolve) => this.socket.once('connect', () => resolve()));
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve(this.received)));
  }
}

describe('capConnectionsPerAddress on a node:http server', () => {
  let server: Server;
  const clients: Raw[] = [];
  afterEach(async () => {
    for (const c of clients) c.socket.destroy();
    clients.length = 0;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  async function start(cap: number): Promise<{ port: number; requests: string[]; refused: string[] }> {
    const requests: string[] = [];
    const refused: string[] = [];
    server = createServer((req, res) => {
      requests.push(`${req.method} ${req.socket.remoteAddress}`);
      res.end('ok');
    });
    capConnectionsPerAddress(server, new ConnectionsPerAddress(cap, false), (address) => refused.push(address));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as AddressInfo).port, requests, refused };
  }

  function open(port: number, localAddress = '127.0.0.1'): Raw {
    const raw = new Raw(port, localAddress);
    clients.push(raw);
    return raw;
  }

  it('the connection past the cap gets the 429 at once and is closed; its request never runs; another address and, once one closes, the same address are served', async () => {
    const { port, requests, refused } = await start(2);
    const held = [open(port), open(port)];
    await Promise.all(held.map((c) => c.opened));
    // Sent at once, before the answer: node:http must never see it (a POST would change data).
    const extra = open(port);
    extra.socket.write('POST /things HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}');
    expect(await extra.closed).toBe(connectionRefusal(2, '127.0.0.1'));
    // A second refusal of the same episode is not reported again.
    expect(await open(port).closed).toBe(connectionRefusal(2, '127.0.0.1'));
    expect(refused).toEqual(['127.0.0.1']);

    const other = open(port, '127.0.0.2');
    other.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(
      async () => other.received,
      (text) => text.endsWith('ok'),
      5000,
      'the other address answered',
    );
    expect(other.received.slice(0, 15)).toBe('HTTP/1.1 200 OK');

    // The held ones still work; once one closes the address has room again.
    held[0]!.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(
      async () => held[0]!.received,
      (text) => text.endsWith('ok'),
      5000,
      'the held connection answered',
    );
    held[1]!.socket.destroy();
    await until(
      async () => {
        const again = open(port);
        again.socket.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
        return (await again.closed).slice(0, 12);
      },
      (status) => status === 'HTTP/1.1 200',
      5000,
      'a new connection once one closed',
    );
    expect(requests.filter((r) => r.startsWith('POST'))).toEqual([]);
  });

  it('the refusal is a Problem with Retry-After: 1 and Connection: close', () => {
    const text = connectionRefusal(5, '192.0.2.1');
    const end = text.indexOf('\r\n\r\n');
    expect(text.slice(0, end).split('\r\n')).toEqual([
      'HTTP/1.1 429 Too Many Requests',
      'Content-Type: application/problem+json',
      `Content-Length: ${Buffer.byteLength(text.slice(end + 4))}`,
      'Retry-After: 1',
      'Connection: close',
    ]);
    expect(JSON.parse(text.slice(end + 4))).toEqual({
      type: '/errors/rate-limited',
      title: 'Too Many Requests',
      status: 429,
      detail:
        'each client address may have 5 connections open at once (http.maxConnectionsPerAddress), and 192.0.2.1 has 5; close idle connections or retry in 1 s',
      instance: '',
      errors: [],
    });
  });
});
