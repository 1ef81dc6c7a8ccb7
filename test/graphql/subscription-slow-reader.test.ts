// A subscriber that stops reading while changes keep coming (docs/realtime.md "Lifecycle and limits"): one
// change a statement, so no single statement overflows it; once the kernel's buffers and its queue
// of realtime.maxQueuedChanges are full it is closed with 1013 and its socket dropped within a
// second (it would never read the close frame), counted as `dropped`; a subscriber beside it that
// reads gets every change in order; the connection and subscription counts return to what the
// reader alone holds.
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { waitFor } from '../support/realtime.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const METRICS = 'realtime-slow-reader-metrics-0123';
const QUERY =
  'subscription($c: String!) { orderChanged(where: { customerId: { equals: $c } }) { event record { id total note } } }';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.metrics = { enabled: true, token: METRICS };
      raw.realtime = { maxQueuedChanges: 20 };
    },
  });
});
afterAll(async () => {
  await t?.close();
});

async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(' ')[1]) : 0;
}

it('a reader that stops reading is closed with 1013 and dropped once its buffer fills; a reader beside it gets every change', async () => {
  const url = `${t.url.replace(/^http/, 'ws')}/gw/api/graphql`;
  const customer = (
    await t.request('POST', '/gw/api/rest/Customer', { body: { email: 'slow@example.com', name: 'S' } })
  ).body.data.id as string;
  const order = (await t.request('POST', '/gw/api/rest/Order', { body: { customerId: customer, total: 0 } })).body.data
    .id as number;
  const write = async (total: number, note = '') => {
    const res = await t.request('PATCH', `/gw/api/rest/Order/${order}`, { body: { total, note } });
    expect(res.status, res.text).toBe(200);
  };

  // The reader: graphql-ws's client, reading everything.
  const reader = createClient({
    url,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { 'X-Project-Id': 'shop', Authorization: `Bearer ${t.adminKey}` },
  });
  const totals: number[] = [];
  reader.subscribe(
    { query: QUERY, variables: { c: customer } },
    { next: (r: any) => totals.push(r.data.orderChanged.record.total), error: () => {}, complete: () => {} },
  );

  // The slow one: a raw socket that stops reading once its subscription has taken effect.
  const slow = new WebSocket(url, 'graphql-transport-ws');
  let slowGot = 0;
  const slowClosed = new Promise<void>((resolve) => slow.on('close', () => resolve()));
  slow.on('open', () =>
    slow.send(
      JSON.stringify({
        type: 'connection_init',
        payload: { 'X-Project-Id': 'shop', Authorization: `Bearer ${t.adminKey}` },
      }),
    ),
  );
  slow.on('message', (data) => {
    const message = JSON.parse(String(data));
    if (message.type === 'connection_ack')
      slow.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: QUERY, variables: { c: customer } } }));
    if (message.type === 'next') slowGot++;
  });
  let total = 0;
  await waitFor(
    async () => {
      await write(++total);
      return slowGot > 0 && totals.length > 0 ? true : undefined;
    },
    'both subscriptions live',
    10_000,
  );
  expect(await metric('realtime_connections')).toBe(2);
  expect(await metric('realtime_subscriptions')).toBe(2);
  const droppedBefore = await metric('realtime_events_total{direction="dropped"}');
  slow.pause();

  // 64 KiB a change, one change a statement: the kernel's buffers fill, then the queue.
  const note = 'x'.repeat(64 * 1024);
  const first = total + 1;
  for (let i = 0; i < 600 && (await metric('realtime_subscriptions')) === 2; i++) await write(++total, note);
  expect(await metric('realtime_subscriptions')).toBe(1);
  expect(await metric('realtime_events_total{direction="dropped"}')).toBe(droppedBefore + 1);
  // Dropped within a second, though it never reads the close frame: what was buffered for it is freed.
  await waitFor(
    async () => ((await metric('realtime_connections')) === 1 ? true : undefined),
    'the slow socket dropped',
    3000,
  );

  // The reader is unaffected: every change, in order, and it keeps getting them.
  await write(++total);
  await waitFor(() => (totals.at(-1) === total ? true : undefined), 'the reader caught up', 20_000);
  expect(totals.slice(totals.indexOf(first))).toEqual(Array.from({ length: total - first + 1 }, (_, i) => first + i));
  slow.resume();
  await slowClosed;
  await reader.dispose();
  await waitFor(
    async () => ((await metric('realtime_connections')) === 0 ? true : undefined),
    'no socket left',
    10_000,
  );
});
