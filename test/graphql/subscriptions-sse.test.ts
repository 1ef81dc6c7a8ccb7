// GraphQL subscriptions over Server-Sent Events (docs/realtime.md "Server-Sent Events") with the real
// graphql-sse client in distinct connections mode: INSERT/UPDATE/DELETE arrive, a customer never
// sees another's orders or hidden fields, credentials come from the headers as on REST (bad ones →
// 401 Problem before any stream), the caps answer 429 Problems, revoking the key ends the stream with
// a last event naming the close code, and a query is refused.
import { createClient, type Client } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthTestServer } from '../support/auth.ts';
import {
  type Customer,
  primed,
  REST,
  type RealtimeServer,
  startRealtimeServer,
  subscribe,
  unique,
  waitFor,
} from '../support/realtime.ts';
import { MANAGEMENT_TOKEN, startTestServer } from '../support/server.ts';

const STREAM = '/gw/api/graphql/stream';

let live: RealtimeServer;
let t: AuthTestServer;
let alice: Customer;
let bob: Customer;
let rest: RealtimeServer['rest'];
let createOrder: RealtimeServer['createOrder'];

beforeAll(async () => {
  live = await startRealtimeServer();
  ({ t, alice, bob, rest, createOrder } = live);
});
afterAll(() => live?.close());

function client(authorization: string, base = t.url): Client {
  return live.track(
    createClient({
      url: `${base}${STREAM}`,
      // Header names in any case, as on REST.
      headers: { 'x-project-id': 'shop', AUTHORIZATION: authorization, Environment: 'master' },
      fetchFn: fetch,
      retryAttempts: 0,
    }),
  );
}

function post(headers: Record<string, string>, query = 'subscription { cityChanged { id } }', base = t.url) {
  return fetch(`${base}${STREAM}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-project-id': 'shop', ...headers },
    body: JSON.stringify({ query }),
  });
}

const ORDER_CHANGES = `subscription($where: OrderWhere, $events: [ChangeEvent!]) {
  orderChanged(where: $where, events: $events) { id event record { id total status customerId } changedFields }
}`;

describe('subscriptions over Server-Sent Events', () => {
  it('INSERT, UPDATE and DELETE arrive in order', async () => {
    const customer = (await rest('POST', 'Customer', { email: `${unique('sse')}@example.com`, name: 'S' })).body.data
      .id;
    const sub = subscribe(client(`Bearer ${t.adminKey}`), ORDER_CHANGES, {
      where: { customerId: { equals: customer } },
    });
    await primed(sub, () => createOrder(customer));
    const order = await createOrder(customer, { total: 5 });
    expect((await rest('PATCH', `Order/${order.id}`, { total: 6 })).status).toBe(200);
    const deleted = await rest('DELETE', `Order/${order.id}`);
    expect(deleted.status, deleted.text).toBe(204);
    await waitFor(() => (sub.results.length >= 3 ? true : undefined), 'three changes');
    expect(sub.results.map((r) => r.data.orderChanged)).toEqual([
      expect.objectContaining({ event: 'INSERT', record: expect.objectContaining({ id: order.id, total: 5 }) }),
      expect.objectContaining({
        event: 'UPDATE',
        record: expect.objectContaining({ total: 6 }),
        changedFields: ['total'],
      }),
      expect.objectContaining({ event: 'DELETE', record: expect.objectContaining({ id: order.id }) }),
    ]);
    sub.stop();
  });

  it("a customer gets its own orders' changes, never another's, and cannot select a hidden field", async () => {
    const sub = subscribe(client(`Bearer ${alice.token}`), ORDER_CHANGES);
    await primed(sub, () => createOrder(alice.id));
    const others = await createOrder(bob.id, { total: 66 });
    const mine = await createOrder(alice.id, { total: 42 });
    const got = await waitFor(() => sub.results[0], 'the INSERT of alice’s order');
    expect(got.data.orderChanged).toMatchObject({ event: 'INSERT', record: { id: mine.id, customerId: alice.id } });
    expect(sub.results.map((r) => r.data.orderChanged.record.id)).not.toContain(others.id);
    sub.stop();

    const hidden = subscribe(client(`Bearer ${alice.token}`), 'subscription { orderChanged { record { id note } } }');
    await waitFor(() => (hidden.closed ? true : undefined), 'the refusal');
    expect(hidden.results).toEqual([
      {
        data: null,
        errors: [expect.objectContaining({ message: 'Cannot query field "note" on type "OrderRecord".' })],
      },
    ]);
  });

  it('a query is refused: queries and mutations go to /gw/api/graphql', async () => {
    const sub = subscribe(client(`Bearer ${t.adminKey}`), '{ __typename }');
    await waitFor(() => (sub.closed ? true : undefined), 'the refusal');
    expect(sub.results).toEqual([
      {
        data: null,
        errors: [
          expect.objectContaining({
            message: 'subscriptions only: send queries and mutations by HTTP to /gw/api/graphql',
          }),
        ],
      },
    ]);
  });

  it('bad credentials → 401 Problem, a management token → 403, no Accept: text/event-stream → 400, before any stream', async () => {
    const bad = await post({ authorization: 'Bearer nope' });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('content-type')).toMatch(/^application\/(problem\+)?json/);
    expect(await bad.json()).toMatchObject({ status: 401 });
    const management = await post({ authorization: `Bearer ${MANAGEMENT_TOKEN}` });
    expect(management.status).toBe(403);
    expect(await management.json()).toMatchObject({
      status: 403,
      detail: 'a management token reads no data; use an API key or an access token',
    });
    const json = await fetch(`${t.url}${STREAM}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-project-id': 'shop', authorization: `Bearer ${t.adminKey}` },
      body: '{"query":"subscription { cityChanged { id } }"}',
    });
    expect(json.status).toBe(400);
    expect(await json.json()).toMatchObject({
      status: 400,
      detail:
        'this endpoint streams subscriptions as Server-Sent Events: send the header Accept: text/event-stream (queries and mutations go to /gw/api/graphql)',
    });
  });

  it('a body over the request body limit → 413 Problem (the body is read as every route reads it)', async () => {
    const res = await post(
      { authorization: `Bearer ${t.adminKey}` },
      `subscription { cityChanged { id } } #${'x'.repeat(1_100_000)}`,
    );
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({
      status: 413,
      detail: expect.stringMatching(/^the request body is \d+ bytes; the limit is 1048576 bytes$/),
    });
  });

  it('revoking the API key ends its stream at once: a last event with code CREDENTIAL_ENDED (4401), then complete', async () => {
    const { id, key } = await t.createKey(['admin']);
    const sub = subscribe(client(`Bearer ${key}`), ORDER_CHANGES);
    await primed(sub, () => createOrder(alice.id));
    const res = await t.request('DELETE', `${REST}/_apikeys/${id}`, { key: MANAGEMENT_TOKEN });
    expect(res.status, res.text).toBe(204);
    await waitFor(() => (sub.closed ? true : undefined), 'the end of the stream');
    expect(sub.errors).toEqual([]);
    expect(sub.results).toEqual([
      {
        errors: [{ message: 'the API key was revoked', extensions: { code: 'CREDENTIAL_ENDED', closeCode: 4401 } }],
      },
    ]);
  });

  it('stopping the server (SIGTERM drain) ends its streams with GOING_AWAY (1001), then complete', async () => {
    const other = await startTestServer({ databaseUrl: t.database.url });
    let closed = false;
    try {
      const sub = subscribe(client(`Bearer ${t.adminKey}`, other.url), ORDER_CHANGES);
      await primed(sub, () => createOrder(alice.id));
      const stopping = other.close();
      await waitFor(() => (sub.closed ? true : undefined), 'the end of the stream');
      await stopping;
      closed = true;
      expect(sub.errors).toEqual([]);
      expect(sub.results.at(-1)).toEqual({
        errors: [{ message: 'the server is stopping', extensions: { code: 'GOING_AWAY', closeCode: 1001 } }],
      });
    } finally {
      if (!closed) await other.close();
    }
  });

  it('a stream whose reader stops reading is ended (TOO_SLOW) once its queue fills and cut within a second', async () => {
    const METRICS = 'sse-slow-reader-metrics-0123456789';
    const other = await startTestServer({
      databaseUrl: t.database.url,
      configPatch: (raw) => {
        raw.metrics = { enabled: true, token: METRICS };
        raw.realtime = { maxQueuedChanges: 20 };
      },
    });
    const metric = async (name: string) => {
      const text = await (
        await fetch(`${other.url}/metrics`, { headers: { authorization: `Bearer ${METRICS}` } })
      ).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      return line ? Number(line.split(' ')[1]) : 0;
    };
    try {
      const customer = (await rest('POST', 'Customer', { email: `${unique('slow')}@example.com`, name: 'S' })).body.data
        .id;
      const order = await createOrder(customer);
      const res = await post(
        { authorization: `Bearer ${t.adminKey}` },
        `subscription { orderChanged(where: { customerId: { equals: "${customer}" } }) { record { id note } } }`,
        other.url,
      );
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      let total = 0;
      // Read until the first change arrives (the subscription has taken effect), then stop reading.
      while (!text.includes('event: next')) {
        await rest('PATCH', `Order/${order.id}`, { total: ++total });
        const chunk = await Promise.race([reader.read(), new Promise<undefined>((r) => setTimeout(r, 200))]);
        if (chunk?.value) text += decoder.decode(chunk.value);
      }
      // /metrics sums every server of this Node process (the file's other server too): compare to now.
      const connections = await metric('realtime_connections');
      const subscriptions = await metric('realtime_subscriptions');
      const dropped = await metric('realtime_events_total{direction="dropped"}');
      const note = 'x'.repeat(64 * 1024);
      for (let i = 0; i < 600 && (await metric('realtime_subscriptions')) === subscriptions; i++)
        await rest('PATCH', `Order/${order.id}`, { total: ++total, note });
      expect(await metric('realtime_subscriptions')).toBe(subscriptions - 1);
      expect(await metric('realtime_events_total{direction="dropped"}')).toBe(dropped + 1);
      await waitFor(
        async () => ((await metric('realtime_connections')) === connections - 1 ? true : undefined),
        'the stream cut',
        3000,
      );
      await reader.cancel().catch(() => {});
    } finally {
      await other.close();
    }
  });

  it('caps: a second stream of a caller and one past the process maximum → 429 Problem before the stream', async () => {
    const small = await startTestServer({
      databaseUrl: t.database.url,
      configPatch: (raw) => {
        raw.realtime = { maxConnectionsPerCaller: 1, maxConnections: 2 };
      },
    });
    try {
      const first = subscribe(client(`Bearer ${t.adminKey}`, small.url), ORDER_CHANGES);
      await primed(first, () => createOrder(alice.id));
      const second = await post({ authorization: `Bearer ${t.adminKey}` }, undefined, small.url);
      expect(second.status).toBe(429);
      expect(await second.json()).toMatchObject({
        status: 429,
        detail: 'at most 1 connections per caller; close one first',
      });
      const other = subscribe(client(`Bearer ${alice.token}`, small.url), ORDER_CHANGES);
      await primed(other, () => createOrder(alice.id));
      const third = await post({ authorization: `Bearer ${bob.token}` }, undefined, small.url);
      expect(third.status).toBe(429);
      expect(await third.json()).toMatchObject({
        status: 429,
        detail: 'this server holds its maximum of 2 connections; try again later',
      });
      // A stream that ends gives its place back.
      first.stop();
      await waitFor(async () => {
        const again = await post({ authorization: `Bearer ${bob.token}` }, undefined, small.url);
        const ok = again.status === 200;
        await again.body?.cancel();
        return ok ? true : undefined;
      }, 'a free place');
      other.stop();
    } finally {
      await small.close();
    }
  });
});
