/**
 * `npm run bench:bulk`: rows a second written by POST /Order/_bulk, as `svcgen serve` runs it, with
 * and without a webhook subscription.
 *
 *   1. a fresh database seeded like `npm run bench` but smaller (./database.ts: 1,000 orders of 100
 *      customers), an admin API key and a stored management token;
 *   2. the svcgen server child of ./svcgen-server.ts (compiled dist/, pg pool of 10), its config
 *      patched so that webhooks may deliver to the loopback receiver this process runs (node:http,
 *      answers 200 at once); first with its in-process delivery worker, then (stopped before) a
 *      second one with worker: false, which measures the write path alone (the events are queued
 *      and nothing delivers them meanwhile);
 *   3. per server and transactionMode (ALL_OR_NOTHING, BEST_EFFORT), BENCH_BULK_ROUNDS rounds
 *      (default 5), each one load without any subscription and then one with a subscription (table
 *      Order, event INSERT) created just before and deleted just after it, so that both sides of a
 *      round see the same machine: a load is BENCH_BULK_REQUESTS requests (default 50) of 100
 *      orders each, BENCH_BULK_IN_FLIGHT in flight (default 10), after 10 such requests of warm-up
 *      per server and mode; rows/s from the first request sent to the last 201 in; every response
 *      must be a 201 with 100 item keys; with a worker, a round ends once the worker has nothing
 *      left (outbox and job queue empty); reported: the median rows/s of each side and the median
 *      of the rounds' ratios subscribed ÷ unsubscribed;
 *   4. the section "## Bulk writes" of bench/RESULTS.md (replaced, or appended; BENCH_RESULTS: another
 *      file), the figures also on stderr.
 *
 * BENCH_BEFORE=<git ref> measures svcgen as of that commit too (checkoutSvcgen in ./children.ts),
 * on the same database, in the same rounds.
 * Environment: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL as for ./run.ts.
 */
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { randomInt } from 'node:crypto';
import { createManagementToken } from '../runtime/keys/index.ts';
import { openDatabase } from '../runtime/db/index.ts';
import { QUEUE_SCHEMA } from '../runtime/db/index.ts';
import type { Fixture } from './cases.ts';
import { checkoutSvcgen, REPO, startServerChild, type ServerChild } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, serverVersion } from './database.ts';
import { gitRevision, reportDate, writeSection } from './results-file.ts';

const API = '/gw/api/rest';
const ITEMS = 100;
const REQUESTS = Number(process.env.BENCH_BULK_REQUESTS ?? 50);
const IN_FLIGHT = Number(process.env.BENCH_BULK_IN_FLIGHT ?? 10);
const ROUNDS = Number(process.env.BENCH_BULK_ROUNDS ?? 5);
const WARMUP_REQUESTS = 10;
const MODES = ['ALL_OR_NOTHING', 'BEST_EFFORT'] as const;
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## Bulk writes';
/** Issue 20's aim for the subscribed write path against the unsubscribed one. */
const AIM = 0.8;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

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

/**
 * The diagnosis behind the figures, measured by hand on 2026-11-26 (PostgreSQL 15, the same 2 busy
 * CPUs): the statements as the server sends them, run by pgbench (10 clients, 5 s, five rounds
 * alternating).
 */
const WHERE_THE_TIME_GOES = [
  '### Where the time goes',
  '',
  'Measured by hand on 2026-11-26 (the statement the server sends for a 100-item ALL_OR_NOTHING bulk, values inlined, run by `pgbench -c 10 -j 2 -T 5`, five rounds alternating; statements a second, median):',
  '',
  '| statement | statements/s | of the unsubscribed |',
  '|---|--:|--:|',
  '| INSERT of 100 orders (no subscription) | 689 | 100 % |',
  '| … with the capture CTEs of 9011327 (hook, event, fanout, event_row, outbox, live, live_event, live_row, live_notice) | 326 | 47 % |',
  '| … with the capture as one function call (svcgen.capture_events, dd6cbfb) | 365 | 53 % |',
  '',
  'A second set of five rounds, later and busier: the function call at 52–61 % of the unsubscribed statement (median 56 %).',
  '',
  '- Planning: `EXPLAIN (ANALYZE, SUMMARY)` gave 0.42–0.57 ms of planning for the unsubscribed statement and 1.2–1.5 ms with the nine capture CTEs, planned again for every request. The function keeps its plans per connection; what the statement still plans is one CTE.',
  '- What remains is writing: an event row per order (heap tuple and primary-key entry, 440 bytes of WAL each against 170 for the order) and building each record as JSON (`row_to_json`, timestamps through `to_char`): with the function call doing nothing at all, the statement ran at 70–88 % of the unsubscribed one (six rounds, median 74 %).',
  "- Through HTTP the ratio is higher than at the database (the request's own work in Node is the same on both sides): the write path alone is near the aim, within this machine's noise.",
  '- With the worker in the same process the deliveries compete for the same 2 CPUs: bench:webhooks measured 151 µs of server and 322 µs of PostgreSQL CPU per delivered event against about 40 µs of CPU per unsubscribed row here, so a subscribed bulk load that is delivered as it is written runs at a quarter of the unsubscribed one. Delivery throughput (2,549 events/s end to end, the "Webhooks" section) meets its aim; deliveries made by `svcgen worker` on other cores leave the API process the write path alone (the rows without a worker).',
];

async function main() {
  const cleanups = cleanupOnExit(log);
  try {
    const dbServer = await findDatabaseServer(log);
    const database = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    const fixture = await prepareDatabase(database.url, { cities: 10, customers: 100, orders: 1_000 });
    const db = openDatabase(database.url);
    const managementToken = (await createManagementToken(db, 'bench-bulk')).token;
    cleanups.add(() => db.close());

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
    const subscribe = async (server: ServerChild) => {
      const res = await send(server.url, 'POST', `${API}/_webhooks`, manage, {
        projectId: fixture.projectId,
        environment: 'master',
        table: 'Order',
        events: ['INSERT'],
        url: `${receiverUrl}/hook`,
        secret: 'bench-bulk-secret-0123456789',
      });
      if (res.status !== 201) throw new Error(`POST /_webhooks answered ${res.status} ${res.text}`);
      return String(res.body.id);
    };
    const unsubscribe = async (server: ServerChild, id: string) => {
      const res = await send(server.url, 'DELETE', `${API}/_webhooks/${id}`, manage);
      if (res.status !== 204) throw new Error(`DELETE /_webhooks answered ${res.status} ${res.text}`);
    };
    const revision = gitRevision();
    const rows: string[] = [];
    // The servers with a worker stop before the write-only ones start: no worker drains their queue meanwhile.
    // With a worker, a round waits until it has nothing left to do (the subscription's outbox rows
    // drained, its jobs run) before the next unsubscribed load, which it would otherwise slow down.
    const idle = async () => {
      for (;;) {
        const [row] = await db.query<{ busy: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM svcgen.webhook_event_outbox) OR EXISTS (SELECT 1 FROM ${QUEUE_SCHEMA}._private_jobs) AS busy`,
        );
        if (!row!.busy) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    for (const [plan, worker] of [
      [withWorker, true],
      [writeOnly, false],
    ] as const) {
      const servers = await plan();
      for (const mode of MODES) {
        const plain = new Map<ServerChild, number[]>(servers.map((s) => [s, []]));
        const subscribed = new Map<ServerChild, number[]>(servers.map((s) => [s, []]));
        for (const server of servers) await load(server, fixture, mode, WARMUP_REQUESTS);
        for (let round = 0; round < ROUNDS; round++) {
          for (const server of servers) {
            plain.get(server)!.push(await load(server, fixture, mode, REQUESTS));
            const id = await subscribe(server);
            subscribed.get(server)!.push(await load(server, fixture, mode, REQUESTS));
            await unsubscribe(server, id);
            if (worker) await idle();
          }
        }
        for (const server of servers) {
          const a = plain.get(server)!;
          const b = subscribed.get(server)!;
          const ratio = median(b.map((x, i) => x / a[i]!));
          log(
            `${server.name}${worker ? ', with worker' : ''}, ${mode}: ${fmt(median(a))} / ${fmt(median(b))} rows/s, ${Math.round(ratio * 100)} %`,
          );
          rows.push(
            `| ${server.name.replace(/ without worker$/, '')} | ${worker ? 'in-process worker delivering' : 'none (write path alone)'} | ${mode} | ${fmt(median(a))} | ${fmt(median(b))} | **${Math.round(ratio * 100)} %** | ${worker ? '' : ratio >= AIM ? 'met' : '**missed**'} | ${a.map((x, i) => `${fmt(x)} / ${fmt(b[i]!)}`).join('; ')} |`,
          );
        }
      }
      for (const server of servers) await server.stop();
    }
    const section = [
      SECTION,
      '',
      `Written by \`npm run bench:bulk\` (bench/bulk.ts) on ${reportDate()}, commit ${revision}; Node.js ${process.version}, PostgreSQL ${await serverVersion(database.url)}; ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown'}) shared by the load generator, the server, PostgreSQL and whatever else ran (other processes were busy during this run: compare the two columns of a round, not runs).`,
      '',
      `POST /Order/_bulk of ${ITEMS} new orders a request, ${REQUESTS} requests a load, ${IN_FLIGHT} in flight, by the server of \`npm run bench\` (compiled dist/, pool of 10) on a fresh database of 1,000 orders. ` +
        `Each of ${ROUNDS} rounds is one load without any webhook subscription and then one with a subscription (table Order, event INSERT, a loopback receiver answering 200 at once) created just before and deleted just after it. ` +
        "Rows/s from the first request sent to the last 201; the median of the rounds, and the median of the rounds' ratios. " +
        'With the in-process worker (as `svcgen serve` runs by default) the subscribed load also pays for the deliveries made meanwhile on the same 2 CPUs, and a round ends once the worker is idle; ' +
        'without it (`svcgen serve --no-worker`, deliveries left to `svcgen worker` elsewhere) the figure is the write path alone. ' +
        `Aim (issue 20): the write path with one subscription at ≥ ${Math.round(AIM * 100)} % of the unsubscribed one.`,
      '',
      '| build | delivery | transactionMode | no subscription (rows/s) | one subscription (rows/s) | subscribed ÷ unsubscribed | aim | rounds (rows/s: no subscription / one) |',
      '|---|---|---|--:|--:|--:|:-:|---|',
      ...rows,
      '',
      ...WHERE_THE_TIME_GOES,
    ].join('\n');
    writeSection(RESULTS_FILE, SECTION, section);
    log(`wrote ${SECTION} to ${RESULTS_FILE}`);
  } finally {
    await cleanups.finish();
    agent.destroy();
  }
}

await main();
