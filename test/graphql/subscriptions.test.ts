// GraphQL subscriptions over WebSocket (docs/realtime.md) with the real graphql-ws client: a
// customer sees only its own orders and only the fields it may read, `where` and `events` filter,
// changes arrive in commit order, a rolled-back write sends nothing, revoking the key closes the
// socket (4401), and the protocol's close codes answer abuse (subscribe before init 4401,
// duplicate id 4409, bad credentials 4403).
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import type { AuthTestServer } from '../support/auth.ts';
import {
  type Customer,
  graphqlWsUrl,
  primed,
  REST,
  type RealtimeServer,
  startRealtimeServer,
  subscribe,
  unique,
  waitFor,
} from '../support/realtime.ts';
import { MANAGEMENT_TOKEN, startTestServer } from '../support/server.ts';

let live: RealtimeServer;
let t: AuthTestServer;
let wsUrl: string;
let alice: Customer;
let bob: Customer;
let rest: RealtimeServer['rest'];
let createOrder: RealtimeServer['createOrder'];

beforeAll(async () => {
  live = await startRealtimeServer({
    configPatch: (raw) => {
      // A role whose read filter takes a value of the key's context ($context.customer).
      raw.roles.accountant = {
        tables: {
          Order: { read: { filter: { customerId: '$context.customer' }, fields: ['id', 'total', 'customerId'] } },
        },
      };
    },
  });
  ({ t, wsUrl, alice, bob, rest, createOrder } = live);
});
afterAll(() => live?.close());

function client(authorization: string, extra: Record<string, unknown> = {}, url = wsUrl): Client {
  return live.track(
    createClient({
      url,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      lazy: false,
      // Header names in any case (docs/realtime.md "Connecting").
      connectionParams: { 'x-project-id': 'shop', AUTHORIZATION: authorization, Environment: 'master', ...extra },
      onNonLazyError: () => {},
    }),
  );
}

const ORDER_CHANGES = `subscription($where: OrderWhere, $events: [ChangeEvent!]) {
  orderChanged(where: $where, events: $events) { id event record { id total status customerId } changedFields timestamp }
}`;

describe('what a subscriber sees', () => {
  it("a customer gets its own orders' changes with the fields it may read, never another customer's", async () => {
    const sub = subscribe(client(`Bearer ${alice.token}`), ORDER_CHANGES);
    await primed(sub, () => createOrder(alice.id));
    const others = await createOrder(bob.id, { total: 66 });
    const mine = await createOrder(alice.id, { total: 42 });
    const got = await waitFor(() => sub.results[0], 'the INSERT of alice’s order');
    expect(got.data.orderChanged).toMatchObject({
      event: 'INSERT',
      record: { id: mine.id, total: 42, status: 'open', customerId: alice.id },
      changedFields: [],
    });
    expect(got.data.orderChanged.id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(Number.isNaN(Date.parse(got.data.orderChanged.timestamp))).toBe(false);
    // Bob's order came first; were it delivered, it would be the first result.
    expect(sub.results.map((r) => r.data.orderChanged.record.id)).not.toContain(others.id);
    sub.stop();
  });

  it('fields the role may not read are not in the schema: selecting one is refused', async () => {
    const sub = subscribe(client(`Bearer ${alice.token}`), 'subscription { orderChanged { record { id note } } }');
    await waitFor(() => (sub.closed ? true : undefined), 'the refusal');
    expect(sub.errors).toEqual([
      [expect.objectContaining({ message: 'Cannot query field "note" on type "OrderRecord".' })],
    ]);
  });

  it('where and events filter: only UPDATEs to paid orders; changedFields names what the update set', async () => {
    const sub = subscribe(client(`Bearer ${t.adminKey}`), ORDER_CHANGES, {
      where: { status: { equals: 'paid' } },
      events: ['UPDATE'],
    });
    const probe = await createOrder(alice.id, { status: 'paid' });
    await primed(sub, () => rest('PATCH', `Order/${probe.id}`, { total: 11 }));
    const order = await createOrder(alice.id);
    expect((await rest('PATCH', `Order/${order.id}`, { total: 12 })).status).toBe(200);
    expect((await rest('PATCH', `Order/${order.id}`, { status: 'paid' })).status).toBe(200);
    const got = await waitFor(() => sub.results[0], 'the UPDATE to paid');
    expect(got.data.orderChanged).toMatchObject({
      event: 'UPDATE',
      record: { id: order.id, status: 'paid', total: 12 },
      changedFields: ['status'],
    });
    sub.stop();
  });

  it('a case-insensitive where matches as the REST filter does: A-Z folded, other letters as written', async () => {
    const sub = subscribe(client(`Bearer ${t.adminKey}`), ORDER_CHANGES, { where: { note: { icontains: 'rush' } } });
    await primed(sub, () => createOrder(alice.id, { note: 'RUSH probe' }));
    const orders: { id: number }[] = [];
    for (const note of ['Rush order', 'RÜSH', 'no hurry', 'ruSH 50%', 'last rush'])
      orders.push(await createOrder(alice.id, { note }));
    const last = orders[orders.length - 1]!.id;
    await waitFor(
      () => (sub.results.some((r) => r.data.orderChanged.record.id === last) ? true : undefined),
      'the last rush',
    );
    const delivered = sub.results.map((r) => r.data.orderChanged.record.id);
    expect(delivered).toEqual([orders[0]!.id, orders[3]!.id, last]);
    const listed = await rest('GET', `Order?note=icontains.rush&id=in.(${orders.map((o) => o.id).join(',')})&sort=id`);
    expect(listed.body.data.map((o: { id: number }) => o.id)).toEqual(delivered);
    sub.stop();
  });

  it('changes arrive in commit order', async () => {
    const sub = subscribe(client(`Bearer ${t.adminKey}`), ORDER_CHANGES, { events: ['UPDATE'] });
    const order = await createOrder(alice.id);
    await primed(sub, () => rest('PATCH', `Order/${order.id}`, { total: 1 }));
    for (let total = 2; total <= 21; total++)
      expect((await rest('PATCH', `Order/${order.id}`, { total })).status).toBe(200);
    await waitFor(() => (sub.results.length >= 20 ? true : undefined), 'twenty updates');
    expect(sub.results.map((r) => r.data.orderChanged.record.total)).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 2),
    );
    sub.stop();
  });

  it("an API key's role filter with $context: only that customer's orders, only the role's fields", async () => {
    const { key } = await t.createKey(['accountant'], { context: { customer: bob.id } });
    const sub = subscribe(
      client(`Bearer ${key}`),
      'subscription { orderChanged { event record { id total customerId } } }',
    );
    await primed(sub, () => createOrder(bob.id));
    await createOrder(alice.id, { total: 1 });
    const bobs = await createOrder(bob.id, { total: 2 });
    const got = await waitFor(() => sub.results[0], 'bob’s order');
    expect(got.data.orderChanged).toEqual({ event: 'INSERT', record: { id: bobs.id, total: 2, customerId: bob.id } });
    const fields = subscribe(client(`Bearer ${key}`), 'subscription { orderChanged { record { status } } }');
    await waitFor(() => (fields.closed ? true : undefined), 'the refusal');
    expect(fields.errors).toEqual([
      [expect.objectContaining({ message: 'Cannot query field "status" on type "OrderRecord".' })],
    ]);
    sub.stop();
  });

  it('an UPDATE that takes a record out of the filter sends nothing; DELETE sends the record as it was', async () => {
    const sub = subscribe(client(`Bearer ${t.adminKey}`), ORDER_CHANGES, { where: { status: { equals: 'open' } } });
    await primed(sub, () => createOrder(alice.id));
    const order = await createOrder(alice.id, { total: 5 });
    expect((await rest('PATCH', `Order/${order.id}`, { status: 'cancelled' })).status).toBe(200);
    const open = await createOrder(alice.id, { total: 6 });
    expect((await rest('DELETE', `Order/${open.id}`)).status).toBe(204);
    await waitFor(() => (sub.results.length >= 3 ? true : undefined), 'three changes');
    expect(sub.results.map((r) => `${r.data.orderChanged.event} ${r.data.orderChanged.record.id}`)).toEqual([
      `INSERT ${order.id}`,
      `INSERT ${open.id}`,
      `DELETE ${open.id}`,
    ]);
    sub.stop();
  });

  it('a where through a relation is refused with the reason', async () => {
    const sub = subscribe(client(`Bearer ${t.adminKey}`), ORDER_CHANGES, {
      where: { customer: { name: { equals: 'x' } } },
    });
    await waitFor(() => (sub.closed ? true : undefined), 'the refusal');
    // Refused when its source stream is set up: an execution result with the error, then complete.
    expect(sub.errors).toEqual([]);
    expect(sub.results).toEqual([
      {
        errors: [
          expect.objectContaining({
            message:
              'this subscription cannot be matched in memory: the condition on customer.name goes through a relation',
            extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
          }),
        ],
      },
    ]);
  });

  it('a subscriber on another process gets the changes written through this one', async () => {
    const other = await startTestServer({ databaseUrl: t.database.url });
    try {
      const otherUrl = graphqlWsUrl(other.url);
      const sub = subscribe(client(`Bearer ${t.adminKey}`, {}, otherUrl), ORDER_CHANGES, { events: ['INSERT'] });
      await primed(sub, () => createOrder(alice.id));
      const orders = [];
      for (let i = 0; i < 5; i++) orders.push(await createOrder(alice.id, { total: 100 + i }));
      await waitFor(() => (sub.results.length >= 5 ? true : undefined), 'five inserts');
      expect(sub.results.map((r) => r.data.orderChanged.record.id)).toEqual(orders.map((o) => o.id));
      // SIGTERM's path: stopping that server closes its sockets with 1001.
      const closed = new Promise<number>((resolve) => {
        const ws = new WebSocket(otherUrl, 'graphql-transport-ws');
        ws.on('open', () =>
          ws.send(
            JSON.stringify({
              type: 'connection_init',
              payload: { 'X-Project-Id': 'shop', Authorization: `Bearer ${t.adminKey}` },
            }),
          ),
        );
        ws.on('message', (data) => {
          if (JSON.parse(String(data)).type === 'connection_ack') void other.server.close();
        });
        ws.on('close', (code) => resolve(code));
      });
      expect(await closed).toBe(1001);
    } finally {
      await other.close();
    }
  });

  it('one statement changing 200 rows: every change arrives (its ids go out in two NOTIFY messages)', async () => {
    const customer = (await rest('POST', 'Customer', { email: `${unique('many')}@example.com`, name: 'Many' })).body
      .data.id;
    const ids: number[] = [];
    for (let round = 0; round < 2; round++) {
      const items = Array.from({ length: 100 }, () => ({ customerId: customer, total: 1 }));
      const res = await rest('POST', 'Order/_bulk', { items });
      expect(res.status, res.text).toBe(201);
      ids.push(...res.body.data.items.map((item: { id: number }) => item.id));
    }
    const sub = subscribe(client(`Bearer ${t.adminKey}`), ORDER_CHANGES, {
      where: { customerId: { equals: customer } },
      events: ['UPDATE'],
    });
    await primed(sub, () => rest('PATCH', `Order/${ids[0]}`, { total: 2 }));
    const res = await t.request('PATCH', `${REST}/Order?customerId=equals.${customer}`, { body: { total: 9 } });
    expect(res.status, res.text).toBe(200);
    await waitFor(() => (sub.results.length >= 200 ? true : undefined), '200 updates');
    const got = sub.results.map((r) => r.data.orderChanged.record);
    expect(got.map((r) => r.id).sort((a, b) => a - b)).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(got.map((r) => r.total))).toEqual(new Set([9]));
    sub.stop();
  });

  it('a subscriber in staging gets staging changes only', async () => {
    const { key } = await t.createKey(['admin'], { environment: 'staging' });
    const sub = subscribe(
      client(`Bearer ${key}`, { environment: 'staging' }),
      'subscription { cityChanged(events: [INSERT]) { record { name } } }',
    );
    const city = (name: string, environment: string, k: string) =>
      t.request('POST', `${REST}/City`, { body: { name, country: 'NL' }, environment, key: k });
    await primed(sub, async () => expect((await city(unique('probe'), 'staging', key)).status).toBe(201));
    expect((await city('Master City', 'master', t.adminKey)).status).toBe(201);
    expect((await city('Staging City', 'staging', key)).status).toBe(201);
    await waitFor(() => sub.results[0], 'the staging insert');
    expect(sub.results.map((r) => r.data.cityChanged.record.name)).toEqual(['Staging City']);
    sub.stop();
  });

  it('a rolled-back write sends nothing', async () => {
    const sub = subscribe(
      client(`Bearer ${t.adminKey}`),
      'subscription { customerChanged(events: [INSERT]) { event record { id email } } }',
    );
    await primed(sub, () => rest('POST', 'Customer', { email: `${unique('probe')}@example.com`, name: 'Probe' }));
    const existing = `${unique('taken')}@example.com`;
    expect((await rest('POST', 'Customer', { email: existing, name: 'Taken' })).status).toBe(201);
    const doomed = `${unique('doomed')}@example.com`;
    const res = await rest('POST', 'Customer/_bulk', {
      items: [
        { email: doomed, name: 'D' },
        { email: existing, name: 'Dup' },
      ],
    });
    expect(res.status, res.text).toBe(422);
    const after = `${unique('after')}@example.com`;
    expect((await rest('POST', 'Customer', { email: after, name: 'After' })).status).toBe(201);
    await waitFor(() => (sub.results.length >= 2 ? true : undefined), 'two inserts');
    expect(sub.results.map((r) => r.data.customerChanged.record.email)).toEqual([existing, after]);
    sub.stop();
  });
});

describe('lifecycle and protocol', () => {
  /**
   * A raw socket speaking graphql-transport-ws: its close code and reason. `afterAck` goes once the
   * server acknowledged the first message (connection_init).
   */
  function raw(messages: unknown[], afterAck: unknown[] = []): Promise<{ code: number; reason: string }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
      ws.on('open', () => {
        for (const m of messages) ws.send(JSON.stringify(m));
      });
      ws.on('message', (data) => {
        if (JSON.parse(String(data)).type === 'connection_ack') for (const m of afterAck) ws.send(JSON.stringify(m));
      });
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
      ws.on('error', reject);
    });
  }
  const init = { type: 'connection_init', payload: { 'X-Project-Id': 'shop', Authorization: '' } };
  const subscribeMessage = (id: string) => ({
    id,
    type: 'subscribe',
    payload: { query: 'subscription { cityChanged { id } }' },
  });

  it('subscribe before connection_init → 4401', async () => {
    expect(await raw([subscribeMessage('1')])).toEqual({ code: 4401, reason: 'Unauthorized' });
  });

  it('the same subscription id twice → 4409', async () => {
    const auth = { ...init, payload: { ...init.payload, Authorization: `Bearer ${t.adminKey}` } };
    expect(await raw([auth], [subscribeMessage('1'), subscribeMessage('1')])).toEqual({
      code: 4409,
      reason: 'Subscriber for 1 already exists',
    });
  });

  it('realtime limits: a second subscription on a socket is refused, a second socket of a caller closes 4403, a burst past maxQueuedChanges closes 1013', async () => {
    const small = await startTestServer({
      databaseUrl: t.database.url,
      configPatch: (raw) => {
        raw.realtime = { maxQueuedChanges: 1, maxSubscriptionsPerConnection: 1, maxConnectionsPerCaller: 1 };
      },
    });
    try {
      const smallUrl = graphqlWsUrl(small.url);
      const customer = (await rest('POST', 'Customer', { email: `${unique('burst')}@example.com`, name: 'Burst' })).body
        .data.id;
      const orders = [await createOrder(customer), await createOrder(customer), await createOrder(customer)];
      const c = client(`Bearer ${t.adminKey}`, {}, smallUrl);
      const sub = subscribe(c, ORDER_CHANGES, { where: { customerId: { equals: customer } } });
      await primed(sub, () => rest('PATCH', `Order/${orders[0]!.id}`, { total: 1 }));
      const second = subscribe(c, 'subscription { cityChanged { id } }');
      await waitFor(() => (second.closed ? true : undefined), 'the refusal of a second subscription');
      expect(second.errors).toEqual([
        [expect.objectContaining({ message: 'at most 1 subscriptions per socket; complete one first' })],
      ]);
      expect(
        await new Promise((resolve) => {
          const ws = new WebSocket(smallUrl, 'graphql-transport-ws');
          ws.on('open', () =>
            ws.send(JSON.stringify({ ...init, payload: { ...init.payload, Authorization: `Bearer ${t.adminKey}` } })),
          );
          ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
        }),
      ).toEqual({ code: 4403, reason: 'at most 1 sockets per caller; close one first' });
      // One statement changing three matching rows: three changes at once, more than one may wait.
      const res = await t.request('PATCH', `${REST}/Order?customerId=equals.${customer}`, { body: { total: 7 } });
      expect(res.status, res.text).toBe(200);
      await waitFor(() => (sub.closed ? true : undefined), 'the close');
      expect(sub.errors).toEqual([
        expect.objectContaining({
          code: 1013,
          reason: 'changes come faster than this client reads them; subscribe again',
        }),
      ]);
    } finally {
      await small.close();
    }
  });

  it('a message that is not a protocol message → 4400; one over 256 KiB → 1009', async () => {
    const auth = { ...init, payload: { ...init.payload, Authorization: `Bearer ${t.adminKey}` } };
    expect(await raw([auth], [{ type: 'subscribe' }])).toEqual({ code: 4400, reason: 'Invalid message received' });
    const huge = {
      id: '1',
      type: 'subscribe',
      payload: { query: `subscription { cityChanged { id } } #${'x'.repeat(300_000)}` },
    };
    // graphql-ws would write the socket's error to console.error; svcgen sends it to the debug log.
    const consoleError = vi.spyOn(console, 'error');
    try {
      expect((await raw([auth], [huge])).code).toBe(1009);
      expect(consoleError).not.toHaveBeenCalled();
    } finally {
      consoleError.mockRestore();
    }
  });

  it('bad credentials → 4403 with what to fix', async () => {
    expect(await raw([init])).toEqual({
      code: 4403,
      reason:
        'send credentials in the Authorization header: "Bearer <access token or API key>" or "<key prefix> <API key>"',
    });
    const noProject = { type: 'connection_init', payload: { Authorization: `Bearer ${t.adminKey}` } };
    expect(await raw([noProject])).toEqual({
      code: 4403,
      reason: 'send the project id in the X-Project-Id header (or the project_id query parameter)',
    });
  });

  it('revoking the API key closes its socket with 4401', async () => {
    const { id, key } = await t.createKey(['admin']);
    const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    const acked = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        if (JSON.parse(String(data)).type === 'connection_ack') resolve();
      }),
    );
    ws.on('open', () =>
      ws.send(JSON.stringify({ ...init, payload: { ...init.payload, Authorization: `Bearer ${key}` } })),
    );
    await acked;
    const res = await t.request('DELETE', `${REST}/_apikeys/${id}`, { key: MANAGEMENT_TOKEN });
    expect(res.status, res.text).toBe(204);
    expect(await closed).toEqual({ code: 4401, reason: 'the API key was revoked' });
  });

  it("logout closes the user's socket with 4401", async () => {
    const session = await t.signupConfirmed(`${unique('carol')}@example.com`, { roleId: 'customer' });
    const ws = new WebSocket(wsUrl, 'graphql-transport-ws');
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
    const acked = new Promise<void>((resolve) =>
      ws.on('message', (data) => {
        if (JSON.parse(String(data)).type === 'connection_ack') resolve();
      }),
    );
    ws.on('open', () =>
      ws.send(
        JSON.stringify({ ...init, payload: { ...init.payload, Authorization: `Bearer ${session.accessToken}` } }),
      ),
    );
    await acked;
    expect((await t.auth('POST', '/auth/logout', { token: session.accessToken })).status).toBe(200);
    expect(await closed).toEqual({ code: 4401, reason: 'the session ended (logout or revocation)' });
  });

  it("losing the server's LISTEN connection closes subscribed sockets with 1011 (changes may have been missed)", async () => {
    const own = await startTestServer({ databaseUrl: t.database.url });
    try {
      const ownUrl = graphqlWsUrl(own.url);
      const ws = new WebSocket(ownUrl, 'graphql-transport-ws');
      const closed = new Promise<{ code: number; reason: string }>((resolve) =>
        ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
      );
      const acked = new Promise<void>((resolve) =>
        ws.on('message', (data) => {
          if (JSON.parse(String(data)).type === 'connection_ack') resolve();
        }),
      );
      ws.on('open', () =>
        ws.send(JSON.stringify({ ...init, payload: { ...init.payload, Authorization: `Bearer ${t.adminKey}` } })),
      );
      await acked;
      ws.send(
        JSON.stringify({ id: '1', type: 'subscribe', payload: { query: 'subscription { orderItemChanged { id } }' } }),
      );
      // Its subscription is live once the process declared its interest in OrderItem (no other test here watches it).
      await waitFor(async () => {
        const rows = await t.db.query('SELECT 1 FROM svcgen.live_interest WHERE table_name = $1', ['OrderItem']);
        return rows.length ? true : undefined;
      }, 'the interest row');
      // Both servers' LISTEN sessions go; only the one with a subscriber has a socket to close.
      await t.db.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'svcgen-listen' AND datname = current_database()`,
      );
      expect(await closed).toEqual({
        code: 1011,
        reason: 'the server lost its channel to the database; changes may have been missed',
      });
    } finally {
      await own.close();
    }
  });

  it('queries over the socket are refused: they go by HTTP', async () => {
    const sub = subscribe(client(`Bearer ${t.adminKey}`), '{ cityList { id } }');
    await waitFor(() => (sub.closed ? true : undefined), 'the refusal');
    expect(sub.errors).toEqual([
      [
        expect.objectContaining({
          message: 'subscriptions only: send queries and mutations by HTTP to /gw/api/graphql',
        }),
      ],
    ]);
  });
});
