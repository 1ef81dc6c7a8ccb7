/**
 * What runs beside requests, with every database connection cut without a word (the fault proxy,
 * test/support/tcp-proxy.ts; docs/deployment.md "What survives what"): the LISTEN connection that
 * feeds subscriptions, the webhook worker's graphile-worker pools, and the shared rate limiter.
 * The server process survives each cut and each comes back by itself.
 */
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { graphqlWsUrl, subscribe, waitFor } from '../support/realtime.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { expectProblem, MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { until } from '../support/until.ts';
import { collectUnhandled } from '../support/unhandled.ts';

/** Errors no handler caught in this process (the server runs in it): each would end `svcgen serve`. */
const unhandled = collectUnhandled();

let database: TestDatabase;
let proxy: TcpProxy;
let t: TestServer;
let receiver: Receiver;
const clients: Client[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  const target = new URL(database.url);
  proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  receiver = await startReceiver();
  t = await startTestServer({
    databaseUrl: proxy.url(database.url),
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0, 100, 100], timeoutMs: 1000 };
    },
  });
}, 60_000);

afterAll(async () => {
  for (const c of clients) await c.dispose();
  await t?.close();
  await receiver?.close();
  await proxy?.close();
  await database?.drop();
});

const readyz = () => t.request('GET', '/readyz', { key: false, project: false });

function client(): Client {
  const c = createClient({
    url: graphqlWsUrl(t.url),
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    connectionParams: { 'x-project-id': 'shop', authorization: `Bearer ${t.adminKey}`, environment: 'master' },
    onNonLazyError: () => {},
  });
  clients.push(c);
  return c;
}

describe('every database connection cut without a word', () => {
  it('a subscriber is closed with 1011 as docs/realtime.md promises, and once reconnected it receives the changes committed after', async () => {
    const query = 'subscription { cityChanged(events: [INSERT]) { record { name } } }';
    const createCity = (name: string) => t.request('POST', '/gw/api/rest/City', { body: { name, country: 'SB' } });
    const first = subscribe(client(), query);
    // Live once one change arrives (its process declares its interest first).
    await until(
      async () => (await createCity('before-cut'), first.results.length),
      (n) => n > 0,
      10_000,
      'the first subscription live',
    );
    expect(proxy.cut()).toBeGreaterThan(0);
    const closed = await waitFor(() => (first.closed ? first.errors[0] : undefined), 'the subscription closed');
    expect(closed).toMatchObject({
      code: 1011,
      reason: 'the server lost its channel to the database; changes may have been missed',
    });
    await until(readyz, (r) => r.status === 200, 10_000, 'the LISTEN connection back');

    const second = subscribe(client(), query);
    await until(
      async () => (await createCity('after-cut'), second.results.length),
      (n) => n > 0,
      10_000,
      'the new subscription receives a change made after the cut',
    );
    expect(second.results[0].data.cityChanged.record.name).toBe('after-cut');
    expect(second.closed).toBe(false);
    expect(unhandled, 'errors no handler caught').toEqual([]);
  }, 40_000);

  it("the webhook worker's connections cut: it starts again by itself, and a delivery queued after the cut is delivered", async () => {
    const created = await t.request('POST', '/gw/api/rest/_webhooks', {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Customer',
        events: ['INSERT'],
        url: `${receiver.url}/cut`,
        secret: 's3cret',
      },
    });
    expect(created.status, created.text).toBe(201);
    const customer = (email: string) => t.request('POST', '/gw/api/rest/Customer', { body: { email, name: 'Cut' } });
    expect((await customer('before-cut@example.com')).status).toBe(201);
    await receiver.waitFor('/cut', 1);

    // The runner's pool, its LISTEN and the outbox drain's connections go; new ones are accepted at once.
    const accepted = proxy.accepted;
    expect(proxy.cut()).toBeGreaterThan(0);
    const res = await until(
      () => customer('after-cut@example.com'),
      (r) => r.status === 201,
      10_000,
      'a write after the cut',
    );
    expect(res.status).toBe(201);
    const delivered = await receiver.waitFor('/cut', 2, 20_000);
    expect(delivered.map((d) => d.body.record.email)).toEqual(['before-cut@example.com', 'after-cut@example.com']);
    expect(proxy.accepted, 'connections opened again after the cut').toBeGreaterThan(accepted);
    expect(unhandled, 'errors no handler caught').toEqual([]);
  }, 40_000);
});

describe('the shared rate limiter with its connections cut (docs/api.md §5.18 "Across server processes")', () => {
  const LIMIT = 30;
  let limited: TestServer;

  afterAll(() => limited?.close());

  it('keeps serving and keeps limiting: 200 (or 503 with Retry-After) up to the limit, then 429, never a 500', async () => {
    limited = await startTestServer({
      databaseUrl: proxy.url(database.url),
      configPatch: (raw) => (raw.rateLimits = { dataPerMinutePerProject: 1_000_000, dataPerMinutePerCaller: LIMIT }),
    });
    const key = (await limited.createKey(['admin'])).key;
    const statuses: number[] = [];
    let cuts = 0;
    for (let i = 0; i < LIMIT + 20; i++) {
      // A cut every ten requests: the limiter's writes of the shared count lose their connection.
      if (i % 10 === 5) cuts += proxy.cut() > 0 ? 1 : 0;
      const res = await limited.request('GET', '/gw/api/rest/City?limit=1', { key });
      statuses.push(res.status);
      if (res.status === 429) {
        expectProblem(res, 429, 'rate-limited');
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      } else if (res.status !== 200) {
        expectProblem(res, 503);
        expect(res.headers.get('retry-after')).toBe('1');
      }
    }
    expect(cuts).toBe(5);
    const count = (status: number) => statuses.filter((s) => s === status).length;
    // A hit whose write was cut is counted locally; at most one per cut can be missing from the shared count.
    expect(count(200)).toBeLessThanOrEqual(LIMIT + cuts);
    // A request right after a cut may meet a pooled connection whose end is not heard yet: 503, its hit counted.
    expect(count(200) + count(503)).toBeGreaterThanOrEqual(LIMIT);
    const firstRefusal = statuses.indexOf(429);
    expect(firstRefusal).toBeGreaterThanOrEqual(LIMIT);
    expect(
      statuses.slice(firstRefusal).filter((s) => s === 200),
      'none served once limited',
    ).toEqual([]);
    expect(statuses.slice(-4), 'limited at the end').toEqual([429, 429, 429, 429]);
    expect(unhandled, 'errors no handler caught').toEqual([]);
  }, 60_000);
});
