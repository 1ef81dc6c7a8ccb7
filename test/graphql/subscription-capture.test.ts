// What a write to a watched table captures (docs/realtime.md "What a write costs"): only the rows
// some live subscriber's role filter and `where` can want get an event row and a NOTIFY; a broader
// subscription widens the capture before it starts; a webhook still gets every row it matches.
import { randomUUID } from 'node:crypto';
import { createClient, type Client } from 'graphql-ws';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const REST = '/gw/api/rest';
const ORDER_CHANGES = `subscription($where: OrderWhere) {
  orderChanged(where: $where) { event record { id status customerId } }
}`;

let t: TestServer;
let listen: pg.Client;
/** The live notifications heard on the shared channel, in order: `<environment>\t<table>\t<ids>`. */
const heard: string[] = [];
const clients: Client[] = [];
let alice: string;
let bob: string;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true };
      // A role whose read filter takes a value of the key's context ($context.customer).
      raw.roles.accountant = {
        tables: {
          Order: { read: { filter: { customerId: '$context.customer' }, fields: ['id', 'status', 'customerId'] } },
        },
      };
    },
  });
  listen = new pg.Client({ connectionString: t.database.url });
  await listen.connect();
  listen.on('notification', (n) => {
    if (n.payload?.startsWith('live:')) heard.push(n.payload.slice('live:'.length));
  });
  await listen.query('LISTEN svcgen');
  [alice, bob] = [randomUUID(), randomUUID()];
  for (const id of [alice, bob]) {
    const res = await t.request('POST', `${REST}/Customer`, { body: { id, email: `${id}@example.com`, name: 'c' } });
    expect(res.status, res.text).toBe(201);
  }
});
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await listen?.end();
  await t?.close();
});

async function createOrder(customerId: string, status = 'open'): Promise<number> {
  const res = await t.request('POST', `${REST}/Order`, { body: { customerId, total: 10, status } });
  expect(res.status, res.text).toBe(201);
  return (res.body.data as { id: number }).id;
}

function subscribe(key: string, variables: Record<string, unknown> = {}) {
  const client = createClient({
    url: `${t.url.replace(/^http/, 'ws')}/gw/api/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { 'X-Project-Id': 'shop', Authorization: `Bearer ${key}`, environment: 'master' },
  });
  clients.push(client);
  const received: { event: string; record: { id: number; status: string; customerId: string } }[] = [];
  const errors: unknown[] = [];
  const stop = client.subscribe(
    { query: ORDER_CHANGES, variables },
    { next: (v: any) => received.push(v.data.orderChanged), error: (e) => errors.push(e), complete: () => {} },
  );
  return { received, errors, stop };
}

/** This server's declared interest in Order: its JSON filters (null: every record). */
async function interest(): Promise<unknown[] | null | undefined> {
  const rows = await t.db.query<{ filters: unknown[] | null }>(
    `SELECT filters FROM svcgen.live_interest WHERE environment = 'master' AND table_name = 'Order'`,
  );
  return rows.length ? rows[0]!.filters : undefined;
}

async function capturedFor(orderId: number): Promise<number> {
  const rows = await t.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM svcgen.webhook_events WHERE table_name = 'Order' AND (record->>'id')::int = $1`,
    [orderId],
  );
  return rows[0]!.n;
}

describe('capture narrowed to what live subscribers can want', () => {
  it("a role filter narrows it: another customer's write gets no event row and no NOTIFY; one's own gets both", async () => {
    const { key } = await t.createKey(['accountant'], { context: { customer: alice } });
    const sub = subscribe(key);
    await until(interest, (f) => JSON.stringify(f) === JSON.stringify([{ customerId: alice }]), 5000, 'interest');
    const before = heard.length;
    const others = await createOrder(bob);
    const mine = await createOrder(alice);
    await until(
      async () => sub.received.length,
      (n) => n >= 1,
      5000,
      'alice’s change',
    );
    expect(sub.received).toEqual([{ event: 'INSERT', record: { id: mine, status: 'open', customerId: alice } }]);
    expect(await capturedFor(others)).toBe(0);
    expect(await capturedFor(mine)).toBe(1);
    // Notifications arrive in commit order: bob's write, committed first, would have come first.
    await until(
      async () => heard.length,
      (n) => n > before,
      5000,
      'the notification of alice’s write',
    );
    expect(heard.slice(before)).toHaveLength(1);
    expect(heard[before]).toMatch(/^master\tOrder\tevt_[0-9a-f]+$/);
    sub.stop();
    await until(interest, (f) => f === undefined, 5000, 'the interest row dropped with the last subscriber');
  });

  it('a where narrows it; a broader subscription widens it before it starts, and each still sees only what it asked for', async () => {
    const paid = subscribe(t.adminKey, { where: { status: { equals: 'paid' } } });
    await until(interest, (f) => JSON.stringify(f) === JSON.stringify([{ status: 'paid' }]), 5000, 'interest');
    const open1 = await createOrder(alice, 'open');
    const paid1 = await createOrder(alice, 'paid');
    await until(
      async () => paid.received.length,
      (n) => n >= 1,
      5000,
      'the paid order',
    );
    expect(await capturedFor(open1)).toBe(0);

    const every = subscribe(t.adminKey);
    await until(interest, (f) => f === null, 5000, 'interest widened to every record');
    const open2 = await createOrder(bob, 'open');
    await until(
      async () => every.received.length,
      (n) => n >= 1,
      5000,
      'the open order',
    );
    expect(every.received.map((c) => c.record.id)).toEqual([open2]);
    expect(paid.received.map((c) => c.record.id)).toEqual([paid1]);
    expect(await capturedFor(open2)).toBe(1);
    paid.stop();
    every.stop();
    await until(interest, (f) => f === undefined, 5000, 'the interest row dropped');
  });

  it('a where that can never hold captures nothing, and a webhook on the table still gets every row it matches', async () => {
    const never = subscribe(t.adminKey, {
      where: { status: { equals: 'paid' }, and: [{ status: { equals: 'open' } }] },
    });
    await until(interest, (f) => JSON.stringify(f) === '[]', 5000, 'an empty interest');
    const before = heard.length;
    const quiet = await createOrder(alice);
    expect(await capturedFor(quiet)).toBe(0);

    const hook = await t.request('POST', `${REST}/_webhooks`, {
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
    const hooked = await until(
      async () => {
        const id = await createOrder(alice);
        return { id, captured: await capturedFor(id) };
      },
      (r) => r.captured === 1,
      5000,
      'a webhook event for a new order',
    );
    expect(hooked.captured).toBe(1);
    // The webhook's events are no live subscriber's business: still no NOTIFY.
    expect(heard.slice(before)).toEqual([]);
    expect(never.received).toEqual([]);
    expect(never.errors).toEqual([]);
    never.stop();
  });
});
