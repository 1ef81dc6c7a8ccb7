/**
 * A webhook receiver on loopback for delivery tests: it records every request (headers and the
 * exact body bytes) and answers as told: 2xx, any status, hang past the sender's timeout, or
 * reset the connection. Answers are planned per path, so one receiver serves many subscriptions.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';

export type Answer = number | 'hang' | 'reset';

export interface ReceivedDelivery {
  path: string;
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
  at: number;
}

export interface Receiver {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  received: ReceivedDelivery[];
  /** Answers for the next requests to `path`, in order; after them the default (200) applies. */
  plan(path: string, answers: Answer[]): void;
  /** The default answer for `path` once its plan is used up. */
  always(path: string, answer: Answer): void;
  /** Requests received at `path`. */
  at(path: string): ReceivedDelivery[];
  /** Waits until `count` requests reached `path` (default timeout 15 s). */
  waitFor(path: string, count: number, timeoutMs?: number): Promise<ReceivedDelivery[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const received: ReceivedDelivery[] = [];
  const plans = new Map<string, Answer[]>();
  const defaults = new Map<string, Answer>();
  const waiters = new Set<() => void>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, raw, body, at: Date.now() });
      for (const wake of waiters) wake();
      const answer = plans.get(path)?.shift() ?? defaults.get(path) ?? 200;
      if (answer === 'hang') return;
      if (answer === 'reset') {
        req.socket.destroy();
        return;
      }
      res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer < 300 ? 'ok' : 'no');
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const at = (path: string) => received.filter((r) => r.path === path);
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    plan: (path, answers) => plans.set(path, [...answers]),
    always: (path, answer) => defaults.set(path, answer),
    at,
    async waitFor(path, count, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const got = at(path);
        if (got.length >= count) return got;
        const left = deadline - Date.now();
        if (left <= 0)
          throw new Error(`receiver: ${got.length} of ${count} requests at ${path} within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const wake = () => {
            waiters.delete(wake);
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(wake, left);
          waiters.add(wake);
        });
      }
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
