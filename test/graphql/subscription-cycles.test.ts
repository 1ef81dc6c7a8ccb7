// Subscribe/complete cycles leak nothing (docs/realtime.md): after 500 of them on one socket, the
// server counts one live subscription (the one kept, which receives) and, once the socket closes,
// none, and its interest row is gone. A file of its own: /metrics sums every server of the process.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestServer, type TestServer } from '../support/server.ts';

const TOKEN = 'realtime-metrics-token-0123456789';
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.metrics = { enabled: true, token: TOKEN };
    },
  });
});
afterAll(() => t?.close());

async function gauge(name: string): Promise<number> {
  const res = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  const line = (await res.text()).split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}

async function waitFor(probe: () => Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

it('500 subscribe/complete cycles leave no subscription, socket or interest row behind (/metrics)', async () => {
  const ws = new WebSocket(`${t.url.replace(/^http/, 'ws')}/gw/api/graphql`, 'graphql-transport-ws');
  const query = { query: 'subscription { productChanged { id } }' };
  const nexts: string[] = [];
  ws.on('open', () =>
    ws.send(
      JSON.stringify({
        type: 'connection_init',
        payload: { 'X-Project-Id': 'shop', Authorization: `Bearer ${t.adminKey}` },
      }),
    ),
  );
  ws.on('message', (data) => {
    const message = JSON.parse(String(data));
    if (message.type === 'next') nexts.push(message.id);
    if (message.type !== 'connection_ack') return;
    for (let i = 0; i < 500; i++) {
      ws.send(JSON.stringify({ id: `c${i}`, type: 'subscribe', payload: query }));
      ws.send(JSON.stringify({ id: `c${i}`, type: 'complete' }));
    }
    ws.send(JSON.stringify({ id: 'kept', type: 'subscribe', payload: query }));
  });
  // The kept subscription receives; the 500 completed ones are gone.
  await waitFor(async () => {
    const res = await t.request('POST', '/gw/api/rest/Product', {
      body: { sku: `sku-${randomUUID()}`, title: 'Probe', price: 1, tags: [] },
    });
    expect(res.status, res.text).toBe(201);
    return nexts.includes('kept');
  }, 'a change for the kept subscription');
  await waitFor(async () => (await gauge('realtime_subscriptions')) === 1, 'one subscription');
  expect(await gauge('realtime_connections')).toBe(1);
  expect(nexts.filter((id) => id !== 'kept')).toEqual([]);
  ws.close();
  await waitFor(async () => (await gauge('realtime_connections')) === 0, 'no socket');
  expect(await gauge('realtime_subscriptions')).toBe(0);
  await waitFor(
    async () => (await t.db.query(`SELECT 1 FROM svcgen.live_interest WHERE table_name = 'Product'`)).length === 0,
    'no interest row',
  );
});
