/**
 * http.maxConnectionsPerAddress through the whole server (docs/deployment.md "Connections per client
 * address"): one client address held every one of http.maxConnections with idle connections and
 * every other client was refused. Now its connections past the cap are answered a 429 Problem at
 * once and closed, while another address is served, and a proxy listed in trustProxy (through
 * which every client comes) is not capped. 127.0.0.3, .4 and .5 are loopback addresses of this
 * machine (Linux): each is another client address. Raw sockets against a real server and
 * PostgreSQL; order and counts, no clock.
 */
import { parseRawResponse as parse } from '../support/raw-response.ts';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const CAP = 5;
const PROXY = '127.0.0.3';
const ABUSER = '127.0.0.4';
const OTHER = '127.0.0.5';

let t: TestServer;
let port: number;
const logged: string[] = [];
const sockets: Socket[] = [];

beforeAll(async () => {
  t = await startTestServer({
    log: (line) => logged.push(line),
    configPatch: (raw) => {
      raw.http = { ...raw.http, maxConnectionsPerAddress: CAP };
      raw.trustProxy = [PROXY];
    },
  });
  port = Number(new URL(t.url).port);
}, 60_000);
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await t?.close();
});

interface Raw {
  socket: Socket;
  text(): string;
  /** Everything received, once the server closed the connection. */
  closed: Promise<string>;
}

/** A connection from `localAddress`, open once this resolves. */
function open(localAddress: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress });
    sockets.push(socket);
    let text = '';
    socket.setEncoding('latin1').on('data', (chunk: string) => (text += chunk));
    socket.on('error', () => {});
    const closed = new Promise<string>((done) => socket.once('close', () => done(text)));
    socket.once('connect', () => resolve({ socket, text: () => text, closed }));
    socket.once('error', reject);
  });
}

/** GET /healthz on `raw` (keep-alive); resolves with the status line once the answer arrived. */
async function healthz(raw: Raw): Promise<string> {
  const before = raw.text().length;
  raw.socket.write('GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n');
  const text = await until(
    async () => raw.text().slice(before),
    (received) => /\r\n\r\n[\s\S]*\}$/.test(received),
    10_000,
    'the healthz answer',
  );
  return text.slice(0, text.indexOf('\r\n'));
}

describe('connections per client address', { timeout: 60_000 }, () => {
  it(`one address's idle connections took them all: now its ${CAP + 1}th is refused with a 429 Problem and closed, another address is served, and once one closes the address has room again`, async () => {
    const idle: Raw[] = [];
    for (let i = 0; i < CAP; i++) idle.push(await open(ABUSER));
    // Refused at once, whether it sends a request (which is never run) or nothing.
    const refused = [await open(ABUSER), await open(ABUSER)];
    refused[0]!.socket.write(
      'POST /gw/api/rest/City HTTP/1.1\r\nHost: test\r\nX-Project-Id: shop\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    );
    for (const r of refused) {
      const answer = parse(await r.closed);
      expect(answer.status).toBe(429);
      expect(answer.headers['content-type']).toBe('application/problem+json');
      expect(answer.headers['retry-after']).toBe('1');
      expect(answer.headers.connection).toBe('close');
      expect(answer.body).toEqual({
        type: '/errors/rate-limited',
        title: 'Too Many Requests',
        status: 429,
        detail: `each client address may have ${CAP} connections open at once (http.maxConnectionsPerAddress), and ${ABUSER} has ${CAP}; close idle connections or retry in 1 s`,
        instance: '',
        errors: [],
      });
    }
    // One line for the episode, not one per refused connection.
    expect(logged.filter((l) => l.startsWith('connections from'))).toEqual([
      `connections from ${ABUSER} refused: it holds ${CAP} already (http.maxConnectionsPerAddress)`,
    ]);

    // Another address is served meanwhile, and so are the abuser's connections inside the cap.
    expect(await healthz(await open(OTHER))).toBe('HTTP/1.1 200 OK');
    expect(await healthz(idle[0]!)).toBe('HTTP/1.1 200 OK');

    idle[1]!.socket.destroy();
    await until(
      async () => {
        const again = await open(ABUSER);
        again.socket.write('GET /healthz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n');
        return (await again.closed).slice(0, 15);
      },
      (status) => status === 'HTTP/1.1 200 OK',
      10_000,
      'a connection once one of the address closed',
    );
    for (const r of idle) r.socket.destroy();
  });

  it(`a proxy listed in trustProxy is not capped: ${CAP * 2} connections from it are all served`, async () => {
    const through: Raw[] = [];
    for (let i = 0; i < CAP * 2; i++) through.push(await open(PROXY));
    const statuses: string[] = [];
    for (const r of through) statuses.push(await healthz(r));
    expect(statuses).toEqual(Array(CAP * 2).fill('HTTP/1.1 200 OK'));
    for (const r of through) r.socket.destroy();
  });
});
