/**
 * Real-time test support (docs/realtime.md): a server of the shop example with two confirmed
 * customers (alice and bob, each with a Customer row of their own user id), REST helpers on it, a
 * register of the clients a test opens (disposed on close), and the subscription helpers the
 * WebSocket (graphql-ws) and Server-Sent Events (graphql-sse) tests share.
 *
 * Use:
 *   let live: RealtimeServer;
 *   beforeAll(async () => { live = await startRealtimeServer({ configPatch }); });
 *   afterAll(() => live?.close());
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { type AuthTestServer, startAuthServer } from './auth.ts';
import type { TestResponse, TestServerOptions } from './server.ts';

/** The REST base of the shop example's tables. */
export const REST = '/gw/api/rest';

/** A confirmed customer: its user id (also its Customer row's id) and an access token. */
export interface Customer {
  id: string;
  token: string;
}

export interface RealtimeServer {
  t: AuthTestServer;
  alice: Customer;
  bob: Customer;
  /** The GraphQL WebSocket URL of `t`. */
  wsUrl: string;
  /** A request to `${REST}/${path}` with the server's admin key. */
  rest(method: string, path: string, body?: unknown): Promise<TestResponse>;
  /** Creates an Order of `customerId` (total 10, note 'secret note' unless `fields` say otherwise); 201 expected. */
  createOrder(customerId: string, fields?: Record<string, unknown>): Promise<{ id: number }>;
  /** Remembers a client so that close() disposes it; returns it. */
  track<C extends Disposable>(client: C): C;
  /** Disposes every tracked client, then closes the server. */
  close(): Promise<void>;
}

interface Disposable {
  dispose(): unknown;
}

/** `tag-<uuid>`: a value no other test or run uses. */
export const unique = (tag: string): string => `${tag}-${randomUUID()}`;

/** The GraphQL WebSocket URL of a server at `baseUrl` (http → ws). */
export function graphqlWsUrl(baseUrl: string): string {
  return `${baseUrl.replace(/^http/, 'ws')}/gw/api/graphql`;
}

/** Starts an auth-enabled server (startAuthServer's options) and signs alice and bob up as customers. */
export async function startRealtimeServer(options: TestServerOptions = {}): Promise<RealtimeServer> {
  const t = await startAuthServer(options);
  const clients: Disposable[] = [];
  const rest = (method: string, path: string, body?: unknown) => t.request(method, `${REST}/${path}`, { body });
  const customers: Record<'alice' | 'bob', Customer> = {} as Record<'alice' | 'bob', Customer>;
  try {
    for (const who of ['alice', 'bob'] as const) {
      const email = `${unique(who)}@example.com`;
      const session = await t.signupConfirmed(email, { roleId: 'customer' });
      const user = { id: session.user.id, token: session.accessToken };
      expect((await rest('POST', 'Customer', { id: user.id, email, name: who })).status).toBe(201);
      customers[who] = user;
    }
  } catch (error) {
    await t.close();
    throw error;
  }
  return {
    t,
    alice: customers.alice,
    bob: customers.bob,
    wsUrl: graphqlWsUrl(t.url),
    rest,
    async createOrder(customerId, fields = {}) {
      const res = await rest('POST', 'Order', { customerId, total: 10, note: 'secret note', ...fields });
      expect(res.status, res.text).toBe(201);
      return res.body.data as { id: number };
    },
    track(client) {
      clients.push(client);
      return client;
    },
    async close() {
      for (const c of clients) await c.dispose();
      await t.close();
    },
  };
}

/** What a subscription has received so far; `closed` once it errored or completed. */
export interface Subscription {
  results: any[];
  errors: unknown[];
  closed: boolean;
  stop(): void;
}

/** The subscribe method graphql-ws's and graphql-sse's clients share. */
interface Subscribes {
  subscribe(
    payload: { query: string; variables?: Record<string, unknown> },
    sink: { next(value: any): void; error(error: unknown): void; complete(): void },
  ): () => void;
}

/** Subscribes with `c` and collects what comes into a Subscription. */
export function subscribe(c: Subscribes, query: string, variables?: Record<string, unknown>): Subscription {
  const sub: Subscription = { results: [], errors: [], closed: false, stop: () => {} };
  sub.stop = c.subscribe(
    { query, variables },
    {
      next: (value) => sub.results.push(value),
      error: (error) => {
        sub.errors.push(error);
        sub.closed = true;
      },
      complete: () => {
        sub.closed = true;
      },
    },
  );
  return sub;
}

/** Polls `probe` every 10 ms until it returns a value (not undefined); fails after `ms`. */
export async function waitFor<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  what: string,
  ms = 5000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * A subscription takes effect shortly after it is sent (its process declares its interest): write
 * `probe` until one change arrives, then forget everything received so far.
 */
export async function primed(sub: Subscription, probe: () => Promise<unknown>): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    await probe();
    const deadline = Date.now() + 200;
    while (Date.now() < deadline && sub.results.length === 0 && !sub.closed)
      await new Promise((r) => setTimeout(r, 10));
    if (sub.closed) throw new Error(`the subscription ended: ${JSON.stringify([sub.errors, sub.results])}`);
    if (sub.results.length) {
      sub.results.length = 0;
      return;
    }
  }
  throw new Error('the subscription never took effect');
}
