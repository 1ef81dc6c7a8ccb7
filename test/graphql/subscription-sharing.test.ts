// Subscribers alike share each change's permission and `where` check, and its execution
// (runtime/realtime/matching.ts, sharedVisibleChange, sharedExecution): neither may cross a
// principal, a `where` or a selection. Two
// customers, each with sockets of the same and of different filters, and an admin key likewise:
// each subscription gets exactly the changes its own role and `where` allow.
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { AuthTestServer } from '../support/auth.ts';
import { type Customer, graphqlWsUrl, REST, type RealtimeServer, startRealtimeServer } from '../support/realtime.ts';

let live: RealtimeServer;
let t: AuthTestServer;
let alice: Customer;
let bob: Customer;

beforeAll(async () => {
  live = await startRealtimeServer();
  ({ t, alice, bob } = live);
});
afterAll(() => live?.close());

async function createOrder(customerId: string, total: number): Promise<number> {
  const res = await t.request('POST', `${REST}/Order`, { body: { customerId, total } });
  expect(res.status, res.text).toBe(201);
  return (res.body.data as { id: number }).id;
}

interface Sub {
  readonly name: string;
  readonly ids: number[];
  readonly errors: unknown[];
  readonly records: unknown[];
}

const QUERY = 'subscription($where: OrderWhere) { orderChanged(where: $where, events: [INSERT]) { record { id } } }';

function subscribe(name: string, authorization: string, total: number | null, query = QUERY): Sub {
  const c = live.track(
    createClient({
      url: graphqlWsUrl(t.url),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      lazy: false,
      connectionParams: { 'X-Project-Id': 'shop', Authorization: authorization },
      onNonLazyError: () => {},
    }),
  );
  const sub: Sub = { name, ids: [], errors: [], records: [] };
  c.subscribe(
    {
      query,
      variables: { where: total === null ? null : { total: { equals: total } } },
    },
    {
      next: (value) => {
        const record = (value.data as any).orderChanged.record;
        sub.ids.push(record.id);
        sub.records.push(record);
      },
      error: (error) => sub.errors.push(error),
      complete: () => {},
    },
  );
  return sub;
}

/** Polls `done`: a change arrives when the hub hands it out, with nothing to await in between. */
async function until(done: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within 10 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

it('alike subscribers share a check, and it never crosses a principal or a where', async () => {
  const subs = {
    alice42a: subscribe('alice 42 (a)', `Bearer ${alice.token}`, 42),
    alice42b: subscribe('alice 42 (b)', `Bearer ${alice.token}`, 42),
    alice43: subscribe('alice 43', `Bearer ${alice.token}`, 43),
    aliceAll: subscribe('alice, no where', `Bearer ${alice.token}`, null),
    bob42: subscribe('bob 42', `Bearer ${bob.token}`, 42),
    bobAll: subscribe('bob, no where', `Bearer ${bob.token}`, null),
    admin42a: subscribe('admin 42 (a)', `Bearer ${t.adminKey}`, 42),
    admin42b: subscribe('admin 42 (b)', `Bearer ${t.adminKey}`, 42),
    admin43: subscribe('admin 43', `Bearer ${t.adminKey}`, 43),
    // The same where as admin42a, another selection: executed on its own.
    admin42total: subscribe(
      'admin 42, total selected',
      `Bearer ${t.adminKey}`,
      42,
      'subscription($where: OrderWhere) { orderChanged(where: $where, events: [INSERT]) { record { id total } } }',
    ),
  };
  const all = Object.values(subs);
  // Subscriptions take effect once their process's interest is written: write probes (each
  // matched by some subscriber of every kind) until every one has received something.
  for (let attempt = 0; !all.every((s) => s.ids.length > 0); attempt++) {
    if (all.some((s) => s.errors.length)) throw new Error(JSON.stringify(all.map((s) => s.errors)));
    if (attempt === 50) throw new Error('the subscriptions never took effect');
    for (const [customer, total] of [
      [alice.id, 42],
      [alice.id, 43],
      [bob.id, 42],
    ] as const)
      await createOrder(customer, total);
    await new Promise((r) => setTimeout(r, 200));
  }
  // The probes' changes are all handed out once the last one reached its subscribers.
  const last = await createOrder(bob.id, 43);
  await until(() => subs.bobAll.ids.includes(last) && subs.admin43.ids.includes(last), 'the last probe');
  for (const s of all) {
    s.ids.length = 0;
    s.records.length = 0;
  }

  const a42 = await createOrder(alice.id, 42);
  const a43 = await createOrder(alice.id, 43);
  const b42 = await createOrder(bob.id, 42);
  const b43 = await createOrder(bob.id, 43);
  const a44 = await createOrder(alice.id, 44);
  const b44 = await createOrder(bob.id, 44);
  const expected: Record<keyof typeof subs, number[]> = {
    alice42a: [a42],
    alice42b: [a42],
    alice43: [a43],
    aliceAll: [a42, a43, a44],
    bob42: [b42],
    bobAll: [b42, b43, b44],
    admin42a: [a42, b42],
    admin42b: [a42, b42],
    admin43: [a43, b43],
    admin42total: [a42, b42],
  };
  // The last orders (44) reach the unfiltered subscribers last: once they have them, every
  // earlier change has been handed out to everyone (one hub, commit order).
  await until(() => subs.aliceAll.ids.includes(a44) && subs.bobAll.ids.includes(b44), 'the last changes');
  const got = Object.fromEntries(Object.entries(subs).map(([k, s]) => [k, s.ids]));
  expect(got).toEqual(expected);
  expect(subs.admin42a.records).toEqual([{ id: a42 }, { id: b42 }]);
  expect(subs.admin42total.records).toEqual([
    { id: a42, total: 42 },
    { id: b42, total: 42 },
  ]);
});
