/**
 * The fault proxy of the database tests (test/support/tcp-proxy.ts) against a small TCP server:
 * a cut is a FIN without RST, a refusal ends by itself, a mid-answer cut passes exactly the bytes
 * asked for, and latency keeps the order of the bytes.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { until } from '../support/until.ts';

let target: net.Server;
let proxy: TcpProxy;
/** Everything the target received, in order. */
let targetReceived = '';

beforeAll(async () => {
  // Answers every chunk with `answer:<chunk>`.
  target = net.createServer((socket) => {
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      targetReceived += chunk;
      socket.write(`answer:${chunk}`);
    });
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  proxy = await startTcpProxy('127.0.0.1', (target.address() as net.AddressInfo).port);
});

afterAll(async () => {
  await proxy.close();
  await new Promise<void>((resolve) => target.close(() => resolve()));
});

interface Connection {
  socket: net.Socket;
  received: () => string;
  events: string[];
}

async function connect(): Promise<Connection> {
  const socket = net.connect(proxy.port, '127.0.0.1');
  let text = '';
  const events: string[] = [];
  socket.on('data', (d) => (text += d));
  socket.on('end', () => events.push('end'));
  socket.on('error', (e: NodeJS.ErrnoException) => events.push(`error ${e.code}`));
  socket.on('close', () => events.push('close'));
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, received: () => text, events };
}

async function roundTrip(c: Connection, message: string): Promise<void> {
  const before = c.received().length;
  c.socket.write(message);
  await until(
    async () => c.received().length - before,
    (n) => n >= `answer:${message}`.length,
    5000,
    `the answer to ${message}`,
  );
}

describe('the fault proxy', () => {
  it('cut() ends every connection with a FIN, no RST: the application sees end, then close, and no error', async () => {
    const a = await connect();
    const b = await connect();
    await roundTrip(a, 'one');
    await roundTrip(b, 'two');
    expect(proxy.cut()).toBe(2);
    for (const c of [a, b]) {
      await until(
        async () => [...c.events],
        (e) => e.includes('close'),
        5000,
        'the cut seen',
      );
      expect(c.events).toEqual(['end', 'close']);
    }
    const after = await connect();
    await roundTrip(after, 'three');
    expect(after.received()).toBe('answer:three');
    after.socket.destroy();
  });

  it('refuseFor() resets new connections, then accepts them again by itself', async () => {
    /** A new connection's fate: answered, or reset before any answer. */
    const attempt = () =>
      new Promise<'answered' | 'reset'>((resolve) => {
        const socket = net.connect(proxy.port, '127.0.0.1');
        socket.on('error', () => resolve('reset'));
        socket.on('close', () => resolve('reset'));
        socket.on('data', () => {
          resolve('answered');
          socket.destroy();
        });
        socket.write('ping');
      });
    proxy.refuseFor(300);
    expect(await attempt()).toBe('reset');
    expect(await until(attempt, (fate) => fate === 'answered', 5000, 'accepted again')).toBe('answered');
  });

  it('cutNextAnswer() passes the first bytes of the answer to the chunk that names its text, then cuts that connection only', async () => {
    const other = await connect();
    const c = await connect();
    const cut = proxy.cutNextAnswer({ after: 'MARK', bytes: 4 });
    await roundTrip(other, 'plain');
    c.socket.write('MARK');
    await cut;
    await until(
      async () => [...c.events],
      (e) => e.includes('close'),
      5000,
      'the cut seen',
    );
    expect(c.received()).toBe('answ');
    expect(c.events).toEqual(['end', 'close']);
    await roundTrip(other, 'still');
    other.socket.destroy();
  });

  it('setLatency() holds answers back and keeps their order, also when it is lowered meanwhile', async () => {
    const c = await connect();
    proxy.setLatency(200);
    c.socket.write('a');
    // The target has answered 'a' (the answer now waits in the proxy) before 'b' is sent with no latency.
    await until(
      async () => targetReceived,
      (text) => text.endsWith('a'),
      5000,
      'a at the target',
    );
    proxy.setLatency(0);
    c.socket.write('b');
    await until(
      async () => c.received(),
      (text) => text.length >= 'answer:a'.length * 2,
      5000,
      'two answers',
    );
    expect(c.received()).toBe('answer:aanswer:b');
    c.socket.destroy();
  });
});
