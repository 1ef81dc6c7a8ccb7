/**
 * The drain of runtime/http/drain.ts over real sockets: what each kind of connection gets once
 * close() is called (docs/deployment.md "Stopping: SIGTERM and draining"). The whole server path,
 * SIGTERM included, is test/server/http-server.test.ts.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { ServerResponse } from 'node:http';
import express from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { drainableServer } from '../../runtime/http/drain.ts';

/** A raw keep-alive client: what it received, and when the server closed it. */
class Raw {
  readonly socket: net.Socket;
  received = '';
  readonly closed: Promise<number>;
  readonly opened: Promise<void>;

  constructor(port: number) {
    this.socket = net.connect(port, '127.0.0.1');
    this.socket.setEncoding('utf8').on('data', (d: string) => (this.received += d));
    this.opened = new Promise((resolve) => this.socket.once('connect', () => resolve()));
    this.closed = new Promise((resolve) => this.socket.once('close', () => resolve(performance.now())));
  }

  get(path: string): void {
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
  }

  /** Resolves once `count` complete responses (Content-Length framed) arrived; their heads. */
  async responses(count: number): Promise<string[]> {
    for (;;) {
      const heads = [...this.received.matchAll(/HTTP\/1\.1 [\s\S]*?\r\n\r\n/g)].map((m) => m[0]);
      if (heads.length >= count && this.received.endsWith('done')) return heads;
      await new Promise((resolve) => this.socket.once('data', resolve));
    }
  }
}

// Long, so that "closed long before the bound" tells the sweep from the bound even on a busy machine.
const DRAIN_BOUND_MS = 10_000;
let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** A server whose `/hold` requests wait for release(); `/implicit` answers without writeHead. */
async function start() {
  const { server, drain } = drainableServer({ keepAliveTimeout: 60_000 });
  const held: ServerResponse[] = [];
  let onHold: (() => void) | undefined;
  server.on('request', (req, res) => {
    if (req.url === '/hold') {
      held.push(res);
      onHold?.();
    } else if (req.url === '/started') {
      // Headers out (keep-alive) before the drain, the body after it.
      res.writeHead(200, { 'content-length': 4 });
      res.flushHeaders();
      held.push(res);
      onHold?.();
    } else if (req.url === '/implicit') {
      res.setHeader('content-length', 4);
      res.end('done');
    } else {
      res.writeHead(200, { 'content-length': 4 }).end('done');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  stop = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  const heldCount = async (n: number) => {
    while (held.length < n) await new Promise<void>((resolve) => (onHold = resolve));
  };
  return { server, drain, held, heldCount, port: (server.address() as AddressInfo).port };
}

describe('drainableServer', () => {
  it('serves keep-alive as usual until the drain', async () => {
    const { port } = await start();
    const client = new Raw(port);
    client.get('/');
    client.get('/implicit');
    const heads = await client.responses(2);
    expect(heads).toHaveLength(2);
    for (const head of heads) expect(head).toMatch(/\r\nConnection: keep-alive\r\n/i);
    client.socket.destroy();
  });

  it('closes idle connections at once; a response not started yet goes out with Connection: close, whether its head is written or implicit', async () => {
    const { drain, held, heldCount, port } = await start();
    const idle = new Raw(port);
    idle.get('/');
    await idle.responses(1);
    const waiting = new Raw(port);
    waiting.get('/hold');
    await heldCount(1);
    const implicit = new Raw(port);
    await implicit.opened;

    const began = performance.now();
    const closed = drain.close(DRAIN_BOUND_MS);
    expect((await idle.closed) - began).toBeLessThan(DRAIN_BOUND_MS / 2);

    held[0]!.writeHead(200, { 'content-length': 4 }).end('done');
    expect((await waiting.responses(1))[0]).toMatch(/\r\nConnection: close\r\n/i);
    await waiting.closed;

    implicit.get('/implicit');
    expect((await implicit.responses(1))[0]).toMatch(/\r\nConnection: close\r\n/i);
    await implicit.closed;

    await closed;
    expect(performance.now() - began).toBeLessThan(DRAIN_BOUND_MS);
  });

  it('a response whose keep-alive head left before the drain: its connection is closed once the response ends, not at the bound', async () => {
    const { drain, held, heldCount, port } = await start();
    const streaming = new Raw(port);
    streaming.get('/started');
    await heldCount(1);
    await new Promise<void>((resolve) => {
      const check = () => (streaming.received.includes('\r\n\r\n') ? resolve() : streaming.socket.once('data', check));
      check();
    });
    expect(streaming.received).toMatch(/\r\nConnection: keep-alive\r\n/i);

    const began = performance.now();
    const closed = drain.close(DRAIN_BOUND_MS);
    held[0]!.end('done');
    await streaming.responses(1);
    const end = performance.now();
    expect((await streaming.closed) - end).toBeLessThan(DRAIN_BOUND_MS / 2);
    await closed;
    expect(performance.now() - began).toBeLessThan(DRAIN_BOUND_MS);
  });

  it('a response Express took over (its own prototype) is followed: Connection: close once the drain began', async () => {
    const { server, drain, port } = await start();
    const app = express();
    let release!: () => void;
    const holding = new Promise<void>((resolve) => {
      app.get('/express-hold', (_req, res) => {
        release = () => res.send('done');
        resolve();
      });
    });
    app.get('/express', (_req, res) => {
      res.send('done');
    });
    server.removeAllListeners('request');
    server.on('request', (req, res) => {
      drain.follow(res);
      app(req, res);
    });
    const inFlight = new Raw(port);
    inFlight.get('/express-hold');
    await holding;
    const later = new Raw(port);
    later.get('/express');
    expect((await later.responses(1))[0]).toMatch(/\r\nConnection: keep-alive\r\n/i);

    const closed = drain.close(DRAIN_BOUND_MS);
    release();
    expect((await inFlight.responses(1))[0]).toMatch(/\r\nConnection: close\r\n/i);
    await inFlight.closed;
    await closed;
  });

  it('closes what is still open at the bound', async () => {
    const { drain, heldCount, port } = await start();
    const stuck = new Raw(port);
    stuck.get('/hold');
    await heldCount(1);
    const began = performance.now();
    await drain.close(300);
    const waited = performance.now() - began;
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(DRAIN_BOUND_MS);
    await stuck.closed;
    expect(stuck.received).toBe('');
  });
});
