// What a write to a watched table captures (docs/realtime.md "What a write costs"): only the rows
// some live subscriber's role filter and `where` can want get an event row and a NOTIFY; a broader
// subscription widens the capture before it starts; a webhook still gets every row it matches.
import { createClient } from 'graphql-ws';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startRealtimeServer, subscribe, waitFor, type RealtimeServer } from '../support/realtime.ts';
import { MANAGEMENT_TOKEN } from '../support/server.ts';

const ORDER_CHANGES = `subscription($where: OrderWhere) {
  orderChanged(where: $where) { event record { id status customerId } }
}`;

let live: RealtimeServer;
let listen: pg.Client;
/** The live notifications heard on the shared channel, in order: `<environment>\t<table>\t<ids>`. */
const heard: string[] = [];

beforeAll(async () => {
  live = await startRealtimeServer({
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true };
    },
  });
  listen = new pg.Client({ connectionString: live.t.database.url });
  await listen.connect();
  listen.on('notification', (n) => {
    if (n.payload?.startsWith('live:')) heard.push(n.payload.slice('live:'.length));
  });
  await listen.query('LISTEN svcgen');
});
afterAll(async () => {
  await listen?.end();
  await live?.close();
});

function subscribeOrders(token: string, variables: Record<string, unknown> = {}) {
  const client = live.track(
    createClient({
      url: live.wsUrl,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { 'X-Project-Id': 'shop', Authorization: `Bearer ${token}`, environment: 'master' },
    }),
  );
  return subscribe(client, ORDER_CHANGES, variables);
}

const changes = (sub: { results: any[] }) =>
  sub.results.map((r) => r.data.orderChanged as { event: string; record: { id: number; status: string } });

async function createOrder(customerId: string, status = 'open'): Promise<number> {
  return (await live.createOrder(customerId, { status })).id;
}

/** The server's declared interest in Order: its JSON filters (null: every row; undefined: no row). */
async function interest(): Promise<unknown[] | null | undefined> {
  const rows = await live.t.db.query<{ filters: unknown[] | null }>(
    `SELECT filters FROM svcgen.live_interest WHERE environment = 'master' AND table_name = 'Order'`,
  );
  return rows.length ? rows[0]!.filters : undefined;
}

async function interestIs(expected: unknown[] | null | undefined, what: string): Promise<void> {
  await waitFor(async () => (JSON.stringify(await interest()) === JSON.stringify(expected) ? true : undefined), what);
}

async function capturedFor(orderId: number): Promise<number> {
  const rows = await live.t.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM svcgen.webhook_events WHERE table_name = 'Order' AND (record->>'id')::int = $1`,
    [orderId],
  );
  return rows[0]!.n;
}

describe('capture narrowed to what live subscribers can want', () => {
  it("a role filter narrows it: another customer's write gets no event row and no NOTIFY; one's own gets both", async () => {
    const { alice, bob } = live;
    const sub = subscribeOrders(alice.token);
    await interestIs([{ customerId: alice.id }], 'alice’s interest');
    const before = heard.length;
    const others = await createOrder(bob.id);
    const mine = await createOrder(alice.id);
    await waitFor(() => (sub.results.length >= 1 ? true : undefined), 'alice’s change');
    expect(changes(sub)).toEqual([{ event: 'INSERT', record: { id: mine, status: 'open', customerId: alice.id } }]);
    expect(await capturedFor(others)).toBe(0);
    expect(await capturedFor(mine)).toBe(1);
    // Notifications arrive in commit order: bob's write, committed first, would have come first.
    await waitFor(() => (heard.length > before ? true : undefined), 'the notification of alice’s write');
    expect(heard.slice(before)).toHaveLength(1);
    expect(heard[before]).toMatch(/^master\tOrder\tevt_[0-9a-f]+$/);
    sub.stop();
    await interestIs(undefined, 'the interest row dropped with the last subscriber');
  });

  it('a where narrows it; a broader subscription widens it before it starts, and each still sees only what it asked for', async () => {
    const { alice, bob } = live;
    const paid = subscribeOrders(live.t.adminKey, { where: { status: { equals: 'paid' } } });
    await interestIs([{ status: 'paid' }], 'the paid-only interest');
    const open1 = await createOrder(alice.id, 'open');
    const paid1 = await createOrder(alice.id, 'paid');
    await waitFor(() => (paid.results.length >= 1 ? true : undefined), 'the paid order');
    expect(await capturedFor(open1)).toBe(0);

    const every = subscribeOrders(live.t.adminKey);
    await interestIs(null, 'interest widened to every row');
    const open2 = await createOrder(bob.id, 'open');
    await waitFor(() => (every.results.length >= 1 ? true : undefined), 'the open order');
    expect(changes(every).map((c) => c.record.id)).toEqual([open2]);
    expect(changes(paid).map((c) => c.record.id)).toEqual([paid1]);
    expect(await capturedFor(open2)).toBe(1);
    paid.stop();
    every.stop();
    await interestIs(undefined, 'the interest row dropped');
  });

  it('a where that can never hold captures nothing, and a webhook on the table still gets every row it matches', async () => {
    const { alice } = live;
    const never = subscribeOrders(live.t.adminKey, {
      where: { status: { equals: 'paid' }, and: [{ status: { equals: 'open' } }] },
    });
    await interestIs([], 'an empty interest');
    const before = heard.length;
    expect(await capturedFor(await createOrder(alice.id))).toBe(0);

    const hook = await live.t.request('POST', '/gw/api/rest/_webhooks', {
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Order',
        events: ['INSERT'],
        url: 'http://127.0.0.1:9/unused',
        secret: 'capture-secret-0123456789',
      },
      environment: 'master',
      key: MANAGEMENT_TOKEN,
    });
    expect(hook.status, hook.text).toBe(201);
    // Every process learns of the new subscription on the shared channel: write until one is captured.
    await waitFor(
      async () => ((await capturedFor(await createOrder(alice.id))) === 1 ? true : undefined),
      'a webhook event',
    );
    // The webhook's events are no live subscriber's business: still no NOTIFY.
    expect(heard.slice(before)).toEqual([]);
    expect(never.results).toEqual([]);
    expect(never.errors).toEqual([]);
    never.stop();
  });
});
