/**
 * `npm run bench:bulk`: rows a second written by POST /Order/_bulk, as `svcgen serve` runs it.
 *
 *   1. a fresh database seeded like `npm run bench` but smaller (./database.ts: 1,000 orders of 100
 *      customers), an admin API key and a stored management token;
 *   2. the svcgen server child of ./svcgen-server.ts (compiled dist/, pg pool of 10, the in-process
 *      delivery worker), its config patched so that webhooks may deliver to the loopback receiver
 *      this process runs (node:http, answers 200 at once);
 *   3. per transactionMode (ALL_OR_NOTHING, BEST_EFFORT), without and then with one subscription
 *      (table Order, event INSERT), the latter twice: delivered by the in-process worker as it
 *      runs, then the write path alone (a second server with worker: false, so the events are
 *      queued and nothing delivers them during the load): BENCH_BULK_REQUESTS requests (default 50) of 100 orders each,
 *      BENCH_BULK_IN_FLIGHT in flight (default 10), after 10 such requests of warm-up; rows/s from
 *      the first request sent to the last 201 in; BENCH_BULK_ROUNDS rounds (default 3), the median
 *      reported; every response must be a 201 with 100 item keys;
 *   4. the figures on stdout (not RESULTS.md: a probe, not the benchmark).
 *
 * BENCH_BEFORE=<git ref> measures svcgen as of that commit too (checkoutSvcgen in ./children.ts),
 * on the same database, in the same rounds.
 * Environment: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL as for ./run.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomInt } from 'node:crypto';
import { createManagementToken } from '../runtime/keys/index.ts';
import { openDatabase } from '../runtime/db/index.ts';
import type { Fixture } from './cases.ts';
import { checkoutSvcgen, startServerChild, type ServerChild } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase } from './database.ts';

const API = '/gw/api/rest';
const ITEMS = 100;
const REQUESTS = Number(process.env.BENCH_BULK_REQUESTS ?? 50);
const IN_FLIGHT = Number(process.env.BENCH_BULK_IN_FLIGHT ?? 10);
const ROUNDS = Number(process.env.BENCH_BULK_ROUNDS ?? 3);
const WARMUP_REQUESTS = 10;
const MODES = ['ALL_OR_NOTHING', 'BEST_EFFORT'] as const;

const log = (message: string) => console.error(`[bench:bulk] ${message}`);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function send(
  base: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<{ status: number; body: any; text: string }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const all: Record<string, string | number> = { ...headers };
  if (payload !== undefined)
    Object.assign(all, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) });
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(target, base), { method, headers: all, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, text, body: text ? JSON.parse(text) : undefined });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/** `count` bulk requests, `IN_FLIGHT` at a time; rows a second. */
async function load(server: ServerChild, f: Fixture, mode: string, count: number): Promise<number> {
  const headers = { 'x-project-id': f.projectId, authorization: `Bearer ${f.apiKey}` };
  let next = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < count) {
      next++;
      const items = Array.from({ length: ITEMS }, () => ({
        total: randomInt(100, 99_999) / 100,
        customerId: f.customerIds[randomInt(0, f.customerIds.length)],
      }));
      const res = await send(server.url, 'POST', `${API}/Order/_bulk`, headers, { items, transactionMode: mode });
      if (res.status !== 201 || res.body?.data?.items?.length !== ITEMS)
        throw new Error(`${server.name}: POST /Order/_bulk answered ${res.status} ${res.text.slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  return (count * ITEMS) / ((performance.now() - started) / 1000);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const cleanups = cleanupOnExit(log);
  try {
    const dbServer = await findDatabaseServer(log);
    const database = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    const fixture = await prepareDatabase(database.url, { cities: 10, customers: 100, orders: 1_000 });
    const db = openDatabase(database.url);
    const managementToken = (await createManagementToken(db, 'bench-bulk')).token;
    await db.close();

    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    cleanups.add(() => new Promise((resolve) => receiver.close(() => resolve())));
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

    const env = {
      BENCH_DATABASE_URL: database.url,
      BENCH_CONFIG_PATCH: JSON.stringify({ webhooks: { allowHttp: true, allowPrivateTargets: true } }),
    };
    const builds: { name: string; env: Record<string, string> }[] = [];
    if (process.env.BENCH_BEFORE) {
      const before = checkoutSvcgen(process.env.BENCH_BEFORE, cleanups.add);
      builds.push({ name: `before (${before.sha})`, env: before.env });
    }
    builds.push({ name: 'svcgen', env: {} });
    const start = async (name: string, extra: Record<string, string>) => {
      const child = await startServerChild(name, 'bench/svcgen-server.ts', { ...env, ...extra });
      cleanups.add(() => child.stop());
      return child;
    };
    const withWorker = async () => Promise.all(builds.map((b) => start(b.name, b.env)));
    const writeOnly = async () =>
      Promise.all(builds.map((b) => start(`${b.name} without worker`, { ...b.env, BENCH_SVCGEN_WORKER: 'false' })));

    const manage = {
      'x-project-id': fixture.projectId,
      environment: 'master',
      authorization: `Bearer ${managementToken}`,
    };
    const figures: string[] = [];
    // The servers with a worker stop before the write-only ones start: no worker drains their queue meanwhile.
    const plans = [
      { subscribed: false, servers: withWorker, stop: false },
      { subscribed: true, servers: undefined, stop: true },
      { subscribed: true, servers: writeOnly, stop: true },
    ];
    let servers: ServerChild[] = [];
    for (const plan of plans) {
      const subscribed = plan.subscribed;
      if (plan.servers) servers = await plan.servers();
      const subs: { server: ServerChild; id: string }[] = [];
      if (subscribed) {
        for (const server of servers) {
          const res = await send(server.url, 'POST', `${API}/_webhooks`, manage, {
            projectId: fixture.projectId,
            environment: 'master',
            table: 'Order',
            events: ['INSERT'],
            url: `${receiverUrl}/hook`,
            secret: 'bench-bulk-secret-0123456789',
          });
          if (res.status !== 201) throw new Error(`POST /_webhooks answered ${res.status} ${res.text}`);
          subs.push({ server, id: String(res.body.id) });
        }
      }
      for (const mode of MODES) {
        const rates = new Map<ServerChild, number[]>(servers.map((s) => [s, []]));
        for (const server of servers) await load(server, fixture, mode, WARMUP_REQUESTS);
        for (let round = 0; round < ROUNDS; round++) {
          for (const server of servers) rates.get(server)!.push(await load(server, fixture, mode, REQUESTS));
        }
        for (const server of servers) {
          const line = `${server.name}, ${mode}, ${subscribed ? 'one subscription' : 'no subscription'}: ${Math.round(median(rates.get(server)!))} rows/s (rounds: ${rates.get(server)!.map(Math.round).join(', ')})`;
          log(line);
          figures.push(line);
        }
      }
      for (const { server, id } of subs) {
        const res = await send(server.url, 'DELETE', `${API}/_webhooks/${id}`, manage);
        if (res.status !== 204) throw new Error(`DELETE /_webhooks answered ${res.status} ${res.text}`);
      }
      if (plan.stop) for (const server of servers) await server.stop();
    }
    console.log(
      `${REQUESTS} requests of ${ITEMS} orders, ${IN_FLIGHT} in flight, median of ${ROUNDS} rounds\n${figures.join('\n')}`,
    );
  } finally {
    await cleanups.finish();
    agent.destroy();
  }
}

await main();
