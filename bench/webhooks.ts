/**
 * `npm run bench:webhooks`: how fast webhook events reach a receiver, and what an active
 * subscription costs the writes, in one run.
 *
 *   1. a fresh database seeded like `npm run bench` (./database.ts: 100,000 orders, an admin API key);
 *   2. child processes, each this file started again with BENCH_WEBHOOKS_ROLE (through
 *      ./children.ts and ./child-harness.ts, so each reports its CPU time and SQL statements):
 *      - the receiver: node:http, answers 200 as soon as a request's body is in, and records per
 *        path the x-service-delivery header (the event id), the order id of the record and the time
 *        the request's head arrived; the parent reads that back over HTTP;
 *      - svcgen servers: runtime `startServer` serving examples/shop (pg pool of 10) with a
 *        management token, the example's config patched with webhooks { allowHttp: true,
 *        allowPrivateTargets: true } (the receiver is on loopback) and the data rate limit out of
 *        reach as in ./svcgen-server.ts; the first with its in-process delivery worker (the normal
 *        `svcgen serve`), the second with `worker: false`;
 *      - a delivery worker: runtime `startWorkerProcess` (`svcgen worker`), alongside the second server;
 *      subscriptions (table Order, event INSERT, one receiver path each) are made through
 *      POST /_webhooks with the management token and removed with DELETE afterwards;
 *   3. delivery throughput: BENCH_WEBHOOK_EVENTS orders (default 10,000) created with
 *      POST /Order/_bulk, 100 items a request, BULK_IN_FLIGHT requests in flight; from the first
 *      201 (≈ the first commit) to the last receipt; every event id checked against the database
 *      (svcgen.webhook_deliveries) and duplicates counted;
 *   4. latency: single POST /Order requests paced at BENCH_WEBHOOK_RATE a second (default 200) for
 *      BENCH_WEBHOOK_SECONDS (default 10), open loop; latency = arrival at the receiver minus the
 *      arrival of the POST's 201 (the commit precedes it), and minus the moment the POST was sent;
 *   5. POST /Order with autocannon (50 connections, BENCH_WARMUP s warm-up, BENCH_DURATION s
 *      measured) without and with one active subscription: on the first server (in-process
 *      worker), then on the second (worker: false) with the worker process; the CPU time of every
 *      process and of PostgreSQL's backends per request;
 *      plus, as a diagnostic, the write side alone (a subscription, no worker running during the
 *      load) and a fresh worker process delivering the backlog it left; PostgreSQL's wait events
 *      sampled throughout;
 *   6. CPU profiles (BENCH_PROFILE s; 0 skips): the server writing with a subscription and no
 *      worker, then a worker process delivering that backlog;
 *   7. the section "## Webhooks" of bench/RESULTS.md (replaced, or appended), also on stdout.
 *
 * Environment as for ./run.ts: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL, BENCH_DURATION /
 * BENCH_WARMUP / BENCH_PROFILE (seconds), BENCH_RESULTS; and BENCH_WEBHOOK_EVENTS,
 * BENCH_WEBHOOK_SECONDS, BENCH_WEBHOOK_RATE.
 */
import { randomBytes, randomInt } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { loadService } from '../cli/project.ts';
import { parseConfig, startServer, startWorkerProcess } from '../runtime/index.ts';
import { gitRevision, reportDate, writeSection } from './results-file.ts';
import { CASES, type Fixture } from './cases.ts';
import { runChild } from './child-harness.ts';
import { REPO, startServerChild, type ServerChild } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { BackendCpu, machineBusy, machineSample } from './cpu.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, restoreSeed, serverVersion } from './database.ts';
import { IDLE, summarizeProfile, type ProfileSummary } from './profile.ts';

const CONNECTIONS = 50;
const POOL_SIZE = 10; // startServer's pool
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const EVENTS = Number(process.env.BENCH_WEBHOOK_EVENTS ?? 10_000);
const LATENCY_S = Number(process.env.BENCH_WEBHOOK_SECONDS ?? 10);
const PROFILE_S = Number(process.env.BENCH_PROFILE ?? 5);
const RATE = Number(process.env.BENCH_WEBHOOK_RATE ?? 200);
const BULK_ITEMS = 100;
const BULK_IN_FLIGHT = 4;
/** Orders created through the API (and delivered) before anything is measured: JIT, pools, connections. */
const WARMUP_EVENTS = 1_000;
/** How long deliveries may take to arrive after the writes stopped before the run fails. */
const DRAIN_TIMEOUT_MS = 180_000;
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
const AIM = { eventsPerSecond: 1_000, p99Ms: 250, writeShare: 0.8 } as const;
const API = '/gw/api/rest';
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## Webhooks';
const PROJECT_DIR = path.join(REPO, 'examples/shop');
const RATE_LIMIT = 1_000_000_000;
const SECRET = 'bench-webhook-secret';

const log = (message: string) => console.error(`[bench:webhooks] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => (b === 0 ? 'n/a' : `${fmt((100 * a) / b)} %`);
const share = (v: number | undefined) => (v === undefined ? 'n/a' : `${fmt(100 * v)} %`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Wall-clock time in ms with sub-ms resolution, comparable between the processes of this machine. */
const now = () => performance.timeOrigin + performance.now();

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

// ---- the child processes ------------------------------------------------------------------------

type Role = 'server' | 'worker' | 'receiver';

/** The example's config with the bench's patch, parsed (same for servers and the worker process). */
async function benchConfig() {
  const loaded = await loadService(PROJECT_DIR);
  const raw = JSON.parse(JSON.stringify(loaded.config));
  raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: RATE_LIMIT };
  raw.webhooks = { ...raw.webhooks, allowHttp: true, allowPrivateTargets: true };
  return { service: loaded.service, config: parseConfig(raw, 'bench config', Object.keys(loaded.service.tables)) };
}

interface PathLog {
  /** event ids in order of first arrival */
  ids: string[];
  /** record.id of each (null when the body had none) */
  orders: (number | null)[];
  /** arrival of the request's head, ms (now()) */
  at: number[];
  seen: Set<string>;
  /** requests whose event id had arrived before */
  duplicates: number;
  duplicateIds: string[];
  /** requests without x-service-delivery, not an Order INSERT, or with a body that is not the event */
  unexpected: number;
}

/** The receiver child: POST /hooks/<name> records and answers 200; GET /control/... reports. */
async function runReceiver(): Promise<{ port: number; close(): Promise<void> }> {
  const logs = new Map<string, PathLog>();
  /** TCP connections accepted so far (deliveries and the parent's control requests) */
  let connections = 0;
  const logOf = (name: string) => {
    let l = logs.get(name);
    if (!l)
      logs.set(
        name,
        (l = { ids: [], orders: [], at: [], seen: new Set(), duplicates: 0, duplicateIds: [], unexpected: 0 }),
      );
    return l;
  };
  const server = http.createServer((req, res) => {
    const at = now();
    const url = new URL(req.url ?? '/', 'http://receiver');
    if (req.method === 'POST' && url.pathname.startsWith('/hooks/')) {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        res.writeHead(200, { 'content-length': '0' }).end();
        const l = logOf(url.pathname.slice('/hooks/'.length));
        const id = req.headers['x-service-delivery'];
        let order: number | null = null;
        let ok = typeof id === 'string' && req.headers['x-service-event'] === 'INSERT';
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            id?: string;
            table?: string;
            record?: { id?: number };
          };
          order = typeof body.record?.id === 'number' ? body.record.id : null;
          ok &&= body.id === id && body.table === 'Order' && order !== null;
        } catch {
          ok = false;
        }
        if (!ok) l.unexpected++;
        if (typeof id !== 'string') return;
        if (l.seen.has(id)) {
          l.duplicates++;
          if (l.duplicateIds.length < 20) l.duplicateIds.push(id);
          return;
        }
        l.seen.add(id);
        l.ids.push(id);
        l.orders.push(order);
        l.at.push(at);
      });
      return;
    }
    const reply = (body: unknown) => {
      const text = JSON.stringify(body);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
    };
    req.resume();
    const name = url.searchParams.get('path') ?? '';
    const l = logOf(name);
    if (url.pathname === '/control/clock') return reply({ now: now() });
    if (url.pathname === '/control/summary') {
      return reply({
        distinct: l.ids.length,
        duplicates: l.duplicates,
        unexpected: l.unexpected,
        lastAt: l.at[l.at.length - 1] ?? null,
        connections,
      });
    }
    if (url.pathname === '/control/log') {
      return reply({
        ids: l.ids,
        orders: l.orders,
        at: l.at,
        duplicates: l.duplicates,
        duplicateIds: l.duplicateIds,
        unexpected: l.unexpected,
      });
    }
    res.writeHead(404).end();
  });
  server.keepAliveTimeout = 60_000;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

async function runRole(role: Role): Promise<void> {
  await runChild(async () => {
    if (role === 'receiver') return runReceiver();
    const databaseUrl = process.env.BENCH_DATABASE_URL;
    if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set');
    const { service, config } = await benchConfig();
    const childLog = (message: string) => console.error(`[svcgen ${role}] ${message}`);
    if (role === 'worker') {
      const worker = await startWorkerProcess({ config, databaseUrl, log: childLog });
      return { port: 0, close: () => worker.stop() };
    }
    const server = await startServer({
      projectDir: PROJECT_DIR,
      service,
      config,
      databaseUrl,
      port: 0,
      host: '127.0.0.1',
      managementToken: process.env.BENCH_MANAGEMENT_TOKEN,
      worker: process.env.BENCH_WEBHOOKS_WORKER !== 'false',
      log: childLog,
    });
    return { port: server.port, close: () => server.close() };
  });
}

// ---- HTTP from the parent -------------------------------------------------------------------------

interface Sent {
  status: number;
  text: string;
  body: any;
  /** when the request was handed to the socket layer / when the response head arrived (now()) */
  sentAt: number;
  at: number;
}

/** A keep-alive request; resolves once the whole response is in. */
function request(
  agent: http.Agent,
  base: string,
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<Sent> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const allHeaders: Record<string, string | number> = { ...headers };
  if (payload !== undefined) {
    allHeaders['content-type'] = 'application/json';
    allHeaders['content-length'] = Buffer.byteLength(payload);
  }
  return new Promise<Sent>((resolve, reject) => {
    const sentAt = now();
    const req = http.request(`${base}${target}`, { method, agent, headers: allHeaders }, (res) => {
      const at = now();
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, text, body: parsed, sentAt, at });
      });
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function expectStatus(what: string, sent: Promise<Sent>, status: number): Promise<Sent> {
  const res = await sent;
  if (res.status !== status)
    throw new Error(`${what}: expected ${status}, got ${res.status}: ${res.text.slice(0, 500)}`);
  return res;
}

interface Context {
  fixture: Fixture;
  managementToken: string;
  receiver: ServerChild;
  /** a pg client on the benchmark database */
  db: pg.Client;
  backends: BackendCpu;
  databaseUrl: string;
  databaseName: string;
  /** a pg client on the maintenance database: pg_stat_activity, pg_stat_database */
  monitor: pg.Client;
  /** the process delivering now (server with its in-process worker, or the worker process): waits fail at once when it exits */
  deliverer?: ServerChild;
  agent: http.Agent;
}

const dataHeaders = (ctx: Context) => ({
  'x-project-id': ctx.fixture.projectId,
  authorization: `Bearer ${ctx.fixture.apiKey}`,
});
const manageHeaders = (ctx: Context) => ({
  'x-project-id': ctx.fixture.projectId,
  environment: 'master',
  authorization: `Bearer ${ctx.managementToken}`,
});
const newOrder = (f: Fixture) => ({
  total: randomInt(100, 99_999) / 100,
  customerId: f.customerIds[randomInt(0, f.customerIds.length)],
});

interface Subscription {
  id: string;
  /** the receiver path, /hooks/<name> */
  name: string;
}

async function subscribe(ctx: Context, server: ServerChild, name: string): Promise<Subscription> {
  const res = await expectStatus(
    'POST /_webhooks',
    request(ctx.agent, server.url, 'POST', `${API}/_webhooks`, manageHeaders(ctx), {
      projectId: ctx.fixture.projectId,
      environment: 'master',
      table: 'Order',
      events: ['INSERT'],
      url: `${ctx.receiver.url}/hooks/${name}`,
      secret: SECRET,
    }),
    201,
  );
  const sub = { id: String(res.body.id), name };
  // One order through the API, awaited at the receiver: the subscription is in force (and the path warm).
  const created = await expectStatus(
    `POST ${API}/Order (probe)`,
    request(ctx.agent, server.url, 'POST', `${API}/Order`, dataHeaders(ctx), newOrder(ctx.fixture)),
    201,
  );
  await waitForReceipts(ctx, name, 1, 30_000);
  const first = await receiverLog(ctx, name);
  if (first.orders[0] !== created.body.data.id)
    throw new Error(`the probe of ${name} delivered order ${first.orders[0]}, expected ${created.body.data.id}`);
  return sub;
}

async function unsubscribe(ctx: Context, server: ServerChild, sub: Subscription): Promise<void> {
  await expectStatus(
    `DELETE /_webhooks/${sub.id}`,
    request(ctx.agent, server.url, 'DELETE', `${API}/_webhooks/${sub.id}`, manageHeaders(ctx)),
    204,
  );
}

async function activeSubscriptions(ctx: Context, server: ServerChild): Promise<number> {
  const res = await expectStatus(
    'GET /_webhooks',
    request(ctx.agent, server.url, 'GET', `${API}/_webhooks`, manageHeaders(ctx)),
    200,
  );
  return (res.body.data as { active: boolean }[]).filter((s) => s.active).length;
}

interface ReceiverSummary {
  distinct: number;
  duplicates: number;
  unexpected: number;
  lastAt: number | null;
  /** TCP connections the receiver accepted since it started */
  connections: number;
}

interface ReceiverLog {
  ids: string[];
  orders: (number | null)[];
  /** arrival times, converted to this process's clock */
  at: number[];
  duplicates: number;
  duplicateIds: string[];
  unexpected: number;
}

let clockOffsetMs = 0;

async function receiverSummary(ctx: Context, name: string): Promise<ReceiverSummary> {
  return (
    await expectStatus(
      'receiver summary',
      request(ctx.agent, ctx.receiver.url, 'GET', `/control/summary?path=${name}`, {}),
      200,
    )
  ).body;
}

async function receiverLog(ctx: Context, name: string): Promise<ReceiverLog> {
  const body = (
    await expectStatus(
      'receiver log',
      request(ctx.agent, ctx.receiver.url, 'GET', `/control/log?path=${name}`, {}),
      200,
    )
  ).body as ReceiverLog;
  return { ...body, at: body.at.map((t) => t - clockOffsetMs) };
}

/**
 * The receiver's clock minus this process's, from the exchange with the shortest round trip
 * (both read the same system clock, so it should be ~0; measured rather than assumed).
 */
async function measureClockOffset(ctx: Context): Promise<{ offsetMs: number; rttMs: number }> {
  let best = { offsetMs: 0, rttMs: Infinity };
  for (let i = 0; i < 50; i++) {
    const res = await expectStatus(
      'receiver clock',
      request(ctx.agent, ctx.receiver.url, 'GET', '/control/clock', {}),
      200,
    );
    const end = now();
    const rtt = end - res.sentAt;
    if (rtt < best.rttMs) best = { offsetMs: (res.body.now as number) - (res.sentAt + end) / 2, rttMs: rtt };
  }
  return best;
}

/** Throws when the delivering process has exited (then nothing would arrive any more). */
async function checkDeliverer(ctx: Context): Promise<void> {
  if (!ctx.deliverer) return;
  await ctx.deliverer.stats().catch((error: unknown) => {
    throw new Error(
      `${ctx.deliverer!.name} is gone while deliveries were awaited (see its output above): ${(error as Error).message}`,
    );
  });
}

/** Waits until `count` distinct events reached the path, or the timeout; answers what arrived. */
async function waitForReceipts(
  ctx: Context,
  name: string,
  count: number,
  timeoutMs = DRAIN_TIMEOUT_MS,
): Promise<ReceiverSummary> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const summary = await receiverSummary(ctx, name);
    if (summary.distinct >= count || Date.now() > deadline) return summary;
    await checkDeliverer(ctx);
    await sleep(50);
  }
}

interface DeliveryCounts {
  total: number;
  delivered: number;
  /** deliveries that needed more than one attempt */
  retried: number;
}

/** Deliveries of the subscription: recorded ones, plus those its events' outbox rows still hold (total only). */
async function deliveryCounts(ctx: Context, sub: Subscription): Promise<DeliveryCounts> {
  const { rows } = await ctx.db.query<DeliveryCounts>(
    `SELECT (count(*) + (SELECT count(*) FROM svcgen.webhook_event_outbox o, unnest(o.webhook_ids) AS w WHERE w = $1))::int AS total,
            (count(*) FILTER (WHERE status = 'delivered'))::int AS delivered,
            (count(*) FILTER (WHERE attempts > 1))::int AS retried
     FROM svcgen.webhook_deliveries WHERE webhook_id = $1`,
    [sub.id],
  );
  return rows[0]!;
}

/** The events of a subscription in the database: id → created_at (ms) and its delivery's state. */
async function deliveredEvents(
  ctx: Context,
  sub: Subscription,
): Promise<Map<string, { createdAt: number; status: string; attempts: number }>> {
  const { rows } = await ctx.db.query<{ id: string; created: string; status: string; attempts: number }>(
    `SELECT e.id, (extract(epoch FROM e.created_at) * 1000)::text AS created, d.status, d.attempts
     FROM svcgen.webhook_deliveries d JOIN svcgen.webhook_events e ON e.id = d.event_id WHERE d.webhook_id = $1`,
    [sub.id],
  );
  return new Map(rows.map((r) => [r.id, { createdAt: Number(r.created), status: r.status, attempts: r.attempts }]));
}

/**
 * Waits until every delivery of the subscription is delivered and has reached the receiver (the
 * database is the reference: writes still in flight when a load stops are counted once they commit).
 */
async function drain(
  ctx: Context,
  sub: Subscription,
  notBefore = 0,
): Promise<{ counts: DeliveryCounts; summary: ReceiverSummary; complete: boolean }> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  for (;;) {
    const counts = await deliveryCounts(ctx, sub);
    const summary = await receiverSummary(ctx, sub.name);
    const complete = counts.delivered === counts.total && summary.distinct >= counts.total && now() >= notBefore;
    if (complete || Date.now() > deadline) return { counts, summary, complete };
    await checkDeliverer(ctx);
    await sleep(100);
  }
}

/** Deletes the orders beyond the seed and the events no delivery refers to; vacuums. */
async function restore(ctx: Context): Promise<void> {
  await ctx.db.query(
    'DELETE FROM svcgen.webhook_events e WHERE NOT EXISTS (SELECT 1 FROM svcgen.webhook_deliveries d WHERE d.event_id = e.id)',
  );
  await restoreSeed(ctx.databaseUrl, ctx.fixture);
  await ctx.db.query('VACUUM ANALYZE svcgen.webhook_events, svcgen.webhook_deliveries');
}

// ---- CPU and wait accounting --------------------------------------------------------------------

interface Usage {
  elapsedS: number;
  /** CPU µs per child process (by name) */
  childCpuUs: Record<string, number>;
  /** SQL statements sent per child process */
  childQueries: Record<string, number>;
  pgCpuUs: number | undefined;
  /** this process (load generator), µs */
  loadCpuUs: number;
  machineBusy: number | undefined;
  machineIrq: number | undefined;
  /** share of the machine's CPU used by processes outside the benchmark */
  otherLoad: number | undefined;
  /** transactions committed in the benchmark database (pg_stat_database; flushed by the backends about once a second, so approximate) */
  commits: number;
  /** what the database's active backends were doing, sampled every WAIT_SAMPLE_MS: "type:event" (or "CPU") → samples */
  waits: Record<string, number>;
  waitSamples: number;
}

const WAIT_SAMPLE_MS = 50;

async function commitCount(ctx: Context): Promise<number> {
  const { rows } = await ctx.monitor.query<{ n: string }>(
    'SELECT xact_commit AS n FROM pg_stat_database WHERE datname = $1',
    [ctx.databaseName],
  );
  return Number(rows[0]!.n);
}

/** Samples pg_stat_activity (active backends of the benchmark database) until stopped. */
function sampleWaits(ctx: Context): { stop(): Promise<{ waits: Record<string, number>; samples: number }> } {
  const waits: Record<string, number> = {};
  let samples = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const { rows } = await ctx.monitor.query<{ wait: string | null }>(
        `SELECT wait_event_type || ':' || wait_event AS wait FROM pg_stat_activity
         WHERE datname = $1 AND state = 'active' AND pid <> pg_backend_pid()`,
        [ctx.databaseName],
      );
      samples++;
      for (const r of rows) waits[r.wait ?? 'CPU'] = (waits[r.wait ?? 'CPU'] ?? 0) + 1;
      await sleep(WAIT_SAMPLE_MS);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { waits, samples };
    },
  };
}

async function accounted<T>(
  ctx: Context,
  children: ServerChild[],
  work: () => Promise<T>,
): Promise<{ value: T; usage: Usage }> {
  const before = await Promise.all(children.map((c) => c.stats()));
  const pgBefore = await ctx.backends.sample();
  const commitsBefore = await commitCount(ctx);
  const machineBefore = machineSample();
  const loadBefore = process.cpuUsage();
  const startedAt = now();
  const sampler = sampleWaits(ctx);
  const value = await work();
  const { waits, samples } = await sampler.stop();
  const elapsedMs = now() - startedAt;
  const loadCpu = process.cpuUsage(loadBefore);
  const machineAfter = machineSample();
  const pgAfter = await ctx.backends.sample();
  const after = await Promise.all(children.map((c) => c.stats()));
  const childCpuUs: Record<string, number> = {};
  const childQueries: Record<string, number> = {};
  children.forEach((c, i) => {
    childCpuUs[c.name] = after[i]!.cpuMicros - before[i]!.cpuMicros;
    childQueries[c.name] = after[i]!.queries - before[i]!.queries;
  });
  const pgCpuUs = BackendCpu.spent(pgBefore, pgAfter);
  const machine = machineBusy(machineBefore, machineAfter);
  const loadCpuUs = loadCpu.user + loadCpu.system;
  const oursUs = Object.values(childCpuUs).reduce((a, b) => a + b, 0) + (pgCpuUs ?? 0) + loadCpuUs;
  const otherLoad =
    machine === undefined || pgCpuUs === undefined
      ? undefined
      : Math.max(0, machine.busy - machine.irq - oursUs / (elapsedMs * 1000 * os.availableParallelism()));
  // the backends flush their counters when idle, at most once a second: wait for this window's
  await sleep(1_100);
  const commits = (await commitCount(ctx)) - commitsBefore;
  return {
    value,
    usage: {
      elapsedS: elapsedMs / 1000,
      childCpuUs,
      childQueries,
      pgCpuUs,
      loadCpuUs,
      machineBusy: machine?.busy,
      machineIrq: machine?.irq,
      otherLoad,
      commits,
      waits,
      waitSamples: samples,
    },
  };
}

// ---- 1. delivery throughput ---------------------------------------------------------------------

interface ThroughputResult {
  events: number;
  requests: number;
  /** first request sent, first 201, last 201, first and last receipt (ms, this clock) */
  firstSent: number;
  firstCommit: number;
  lastCommit: number;
  firstReceipt: number;
  lastReceipt: number;
  deliveries: DeliveryCounts;
  receivedDistinct: number;
  duplicates: number;
  duplicateIds: string[];
  unexpected: number;
  /** event ids in the database the receiver never got */
  missing: number;
  /** created orders no received event carried */
  ordersMissing: number;
  /** received but unknown to the database (for this subscription) */
  foreign: number;
  /** TCP connections the receiver accepted meanwhile */
  connections: number;
  /** event created_at → receipt, ms */
  lagMs: number[];
  usage: Usage;
}

/** Creates `count` orders with POST /Order/_bulk, BULK_IN_FLIGHT requests at a time; answers the order ids and times. */
async function bulkCreate(
  ctx: Context,
  server: ServerChild,
  count: number,
): Promise<{ orderIds: number[]; firstSent: number; firstCommit: number; lastCommit: number; requests: number }> {
  const requests = Math.ceil(count / BULK_ITEMS);
  const orderIds: number[] = [];
  let next = 0;
  let firstSent = Infinity;
  let firstCommit = Infinity;
  let lastCommit = 0;
  const lane = async () => {
    while (next < requests) {
      const i = next++;
      const n = Math.min(BULK_ITEMS, count - i * BULK_ITEMS);
      const items = Array.from({ length: n }, () => newOrder(ctx.fixture));
      const res = await expectStatus(
        `POST ${API}/Order/_bulk`,
        request(ctx.agent, server.url, 'POST', `${API}/Order/_bulk`, dataHeaders(ctx), { items }),
        201,
      );
      const outcome = res.body.data as { totalSucceeded: number; items: { id: number }[] };
      if (outcome.totalSucceeded !== n)
        throw new Error(
          `POST ${API}/Order/_bulk: ${outcome.totalSucceeded} of ${n} items created: ${res.text.slice(0, 500)}`,
        );
      firstSent = Math.min(firstSent, res.sentAt);
      firstCommit = Math.min(firstCommit, res.at);
      lastCommit = Math.max(lastCommit, res.at);
      for (const item of outcome.items) orderIds.push(item.id);
    }
  };
  await Promise.all(Array.from({ length: BULK_IN_FLIGHT }, lane));
  return { orderIds, firstSent, firstCommit, lastCommit, requests };
}

async function warmUp(ctx: Context, server: ServerChild): Promise<void> {
  const sub = await subscribe(ctx, server, 'warmup');
  await bulkCreate(ctx, server, WARMUP_EVENTS);
  const { complete, counts } = await drain(ctx, sub);
  if (!complete)
    throw new Error(
      `warm-up: ${counts.delivered} of ${counts.total} deliveries done after ${DRAIN_TIMEOUT_MS / 1000} s`,
    );
  await unsubscribe(ctx, server, sub);
  await restore(ctx);
}

async function measureThroughput(
  ctx: Context,
  server: ServerChild,
  children: ServerChild[],
): Promise<ThroughputResult> {
  const sub = await subscribe(ctx, server, 'throughput');
  const probe = await deliveryCounts(ctx, sub);
  const connectionsBefore = (await receiverSummary(ctx, sub.name)).connections;
  const m = await accounted(ctx, children, async () => {
    const created = await bulkCreate(ctx, server, EVENTS);
    const drained = await drain(ctx, sub);
    return { created, drained };
  });
  const { created, drained } = m.value;
  if (!drained.complete)
    log(
      `  not drained after ${DRAIN_TIMEOUT_MS / 1000} s: ${drained.counts.delivered} of ${drained.counts.total} delivered, ${drained.summary.distinct} received`,
    );
  const got = await receiverLog(ctx, sub.name);
  const db = await deliveredEvents(ctx, sub);
  const received = new Set(got.ids);
  const orders = new Set(got.orders);
  const createdSet = new Set(created.orderIds);
  const run = got.ids
    .map((id, i) => ({ id, order: got.orders[i]!, at: got.at[i]! }))
    .filter((r) => createdSet.has(r.order));
  const lagMs = run.filter((r) => db.has(r.id)).map((r) => r.at - db.get(r.id)!.createdAt);
  const result: ThroughputResult = {
    events: created.orderIds.length,
    requests: created.requests,
    firstSent: created.firstSent,
    firstCommit: created.firstCommit,
    lastCommit: created.lastCommit,
    firstReceipt: Math.min(...run.map((r) => r.at)),
    lastReceipt: Math.max(...run.map((r) => r.at)),
    deliveries: {
      ...drained.counts,
      total: drained.counts.total - probe.total,
      delivered: drained.counts.delivered - probe.delivered,
    },
    receivedDistinct: run.length,
    duplicates: got.duplicates,
    duplicateIds: got.duplicateIds,
    unexpected: got.unexpected,
    missing: [...db.keys()].filter((id) => !received.has(id)).length,
    ordersMissing: created.orderIds.filter((id) => !orders.has(id)).length,
    foreign: got.ids.filter((id) => !db.has(id)).length,
    connections: drained.summary.connections - connectionsBefore,
    lagMs,
    usage: m.usage,
  };
  await unsubscribe(ctx, server, sub);
  await restore(ctx);
  return result;
}

// ---- 2. latency at a steady rate --------------------------------------------------------------

interface LatencyResult {
  sent: number;
  seconds: number;
  /** the largest delay of a send past its slot (the parent's timer), ms */
  maxSendLagMs: number;
  /** receipt − 201 arrival, ms */
  fromResponseMs: number[];
  /** receipt − request sent, ms */
  fromSendMs: number[];
  /** 201 arrival − request sent, ms */
  responseMs: number[];
  /** receipt − the event's created_at in the database, ms */
  fromCreatedMs: number[];
  received: number;
  missing: number;
  duplicates: number;
  deliveries: DeliveryCounts;
  usage: Usage;
}

async function measureLatency(ctx: Context, server: ServerChild, children: ServerChild[]): Promise<LatencyResult> {
  const sub = await subscribe(ctx, server, 'latency');
  const probe = await deliveryCounts(ctx, sub);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const intervalMs = 1000 / RATE;
  const total = Math.round(RATE * LATENCY_S);
  const m = await accounted(ctx, children, async () => {
    const posts: Promise<Sent>[] = [];
    let maxSendLagMs = 0;
    const startedAt = now();
    for (let i = 0; i < total; i++) {
      const due = startedAt + i * intervalMs;
      const wait = due - now();
      if (wait > 1) await sleep(wait);
      maxSendLagMs = Math.max(maxSendLagMs, now() - due);
      const post = expectStatus(
        `POST ${API}/Order`,
        request(agent, server.url, 'POST', `${API}/Order`, dataHeaders(ctx), newOrder(ctx.fixture)),
        201,
      );
      post.catch(() => {}); // reported by Promise.all below
      posts.push(post);
    }
    const results = await Promise.all(posts);
    const seconds = (now() - startedAt) / 1000;
    const drained = await drain(ctx, sub);
    return { results, maxSendLagMs, seconds, drained };
  });
  agent.destroy();
  const { results, maxSendLagMs, seconds, drained } = m.value;
  if (!drained.complete)
    log(
      `  not drained after ${DRAIN_TIMEOUT_MS / 1000} s: ${drained.counts.delivered} of ${drained.counts.total} delivered`,
    );
  const got = await receiverLog(ctx, sub.name);
  const db = await deliveredEvents(ctx, sub);
  const byOrder = new Map<number, { at: number; id: string }>();
  got.orders.forEach((order, i) => order !== null && byOrder.set(order, { at: got.at[i]!, id: got.ids[i]! }));
  const fromResponseMs: number[] = [];
  const fromSendMs: number[] = [];
  const fromCreatedMs: number[] = [];
  let missing = 0;
  for (const r of results) {
    const receipt = byOrder.get(r.body.data.id as number);
    if (!receipt) {
      missing++;
      continue;
    }
    fromResponseMs.push(receipt.at - r.at);
    fromSendMs.push(receipt.at - r.sentAt);
    const e = db.get(receipt.id);
    if (e) fromCreatedMs.push(receipt.at - e.createdAt);
  }
  const result: LatencyResult = {
    sent: results.length,
    seconds,
    maxSendLagMs,
    fromResponseMs,
    fromSendMs,
    responseMs: results.map((r) => r.at - r.sentAt),
    fromCreatedMs,
    received: fromResponseMs.length,
    missing,
    duplicates: got.duplicates,
    deliveries: {
      ...drained.counts,
      total: drained.counts.total - probe.total,
      delivered: drained.counts.delivered - probe.delivered,
    },
    usage: m.usage,
  };
  await unsubscribe(ctx, server, sub);
  await restore(ctx);
  return result;
}

// ---- 3. POST /Order with and without a subscription ---------------------------------------------

const createCase = CASES.find((c) => c.id === 'create')!;
const WORKER = 'worker process';
const POST_LABEL: Record<PostRunId, string> = {
  'none-inprocess': 'no subscription — server with in-process worker',
  'subscribed-inprocess': '1 subscription — **in-process worker** (`svcgen serve`)',
  'none-workerprocess': 'no subscription — server `worker: false` + worker process',
  'subscribed-workerprocess': '1 subscription — server `worker: false` + **worker process** (`svcgen worker`)',
  'queued-workerprocess': 'diagnostic: 1 subscription, **no worker running** (capture and queueing only)',
};

function loadPosts(ctx: Context, server: ServerChild, seconds: number): autocannon.Instance {
  return autocannon({
    url: server.url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: dataHeaders(ctx),
    requests: [
      {
        setupRequest(req, context) {
          const r = createCase.next(ctx.fixture, context, 0);
          req.method = r.method;
          req.path = r.path;
          req.headers = { ...req.headers, 'content-type': 'application/json' };
          req.body = JSON.stringify(r.body);
          return req;
        },
      },
    ],
  });
}

function statusCounts(result: autocannon.Result): Record<string, number> {
  return Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, Number(s.count)]));
}

function requireCreated(what: string, result: autocannon.Result): void {
  const counts = statusCounts(result);
  if (Object.keys(counts).every((code) => code === '201') && result.errors === 0 && result.non2xx === 0) return;
  throw new Error(
    `${what}: expected every response to be 201, got ${JSON.stringify(counts)}, connection errors ${result.errors}, timeouts ${result.timeouts}`,
  );
}

type PostRunId =
  | 'none-inprocess'
  | 'subscribed-inprocess'
  | 'none-workerprocess'
  | 'subscribed-workerprocess'
  | 'queued-workerprocess';
type PostMode = 'none' | 'subscribed' | 'queued';

interface PostRun {
  id: PostRunId;
  mode: PostMode;
  label: string;
  rps: number;
  requests: number;
  p50: number;
  p99: number;
  usage: Usage;
  /** subscribed and queued runs */
  delivery?: {
    /** events the measured load created (deliveries in the database) */
    events: number;
    /** of those, received by the end of the load */
    receivedDuringLoad: number;
    /** from the end of the load to the last receipt, s */
    drainS: number;
    complete: boolean;
    /** event created_at → receipt, ms (subscribed runs) */
    lagMs: number[];
    duplicates: number;
    missing: number;
    retried: number;
  };
  /** queued runs: the backlog (warm-up and measured load) delivered afterwards by a worker process started for it */
  backlog?: {
    events: number;
    /** worker process launched → ready, s */
    startS: number;
    /** worker process launched → first receipt, → last receipt, s */
    firstS: number;
    lastS: number;
    usage: Usage;
  };
  /** unsubscribed runs: events recorded meanwhile (must be 0) */
  eventsRecorded?: number;
}

async function countEvents(ctx: Context): Promise<number> {
  return Number((await ctx.db.query<{ n: string }>('SELECT count(*) AS n FROM svcgen.webhook_events')).rows[0]!.n);
}

/** The worker process of the second server, for the queued run: stopped before its load, a new one started after. */
interface WorkerControl {
  stop(): Promise<void>;
  start(): Promise<ServerChild>;
}

/**
 * One POST /Order run. 'none': no active subscription; 'subscribed': one, delivered while the
 * load runs; 'queued': one, with no worker running during the load (the write side alone:
 * capture and queueing), then the backlog delivered by a fresh worker process, timed.
 */
async function measurePosts(
  ctx: Context,
  id: PostRunId,
  label: string,
  mode: PostMode,
  server: ServerChild,
  children: ServerChild[],
  workerControl?: WorkerControl,
): Promise<PostRun> {
  let sub: Subscription | undefined;
  let eventsBefore = 0;
  if (mode === 'none') {
    const active = await activeSubscriptions(ctx, server);
    if (active !== 0) throw new Error(`${label}: ${active} active subscription(s) left`);
    eventsBefore = await countEvents(ctx);
  } else {
    sub = await subscribe(ctx, server, id);
    if (mode === 'queued') await workerControl!.stop();
  }
  const warm = await loadPosts(ctx, server, WARMUP_S);
  requireCreated(`${label} (warm-up)`, warm);
  let before: DeliveryCounts | undefined;
  if (sub && mode === 'subscribed') {
    const warmDrain = await drain(ctx, sub);
    if (!warmDrain.complete)
      throw new Error(`${label}: the warm-up's deliveries did not arrive within ${DRAIN_TIMEOUT_MS / 1000} s`);
    before = warmDrain.counts;
  } else if (sub) before = await settledCounts(ctx, sub);
  const m = await accounted(ctx, children, async () => {
    const startedAt = now();
    const result = await loadPosts(ctx, server, DURATION_S);
    return { result, startedAt, endedAt: now() };
  });
  const { result, startedAt, endedAt } = m.value;
  requireCreated(`${label} (measurement)`, result);
  const run: PostRun = {
    id,
    mode,
    label,
    rps: result.requests.average,
    requests: result.requests.total,
    p50: result.latency.p50,
    p99: result.latency.p99,
    usage: m.usage,
  };
  if (sub) {
    let drained: Awaited<ReturnType<typeof drain>>;
    if (mode === 'queued') {
      const queued = await settledCounts(ctx, sub);
      const startAt = now();
      const worker = await workerControl!.start();
      const readyAt = now();
      const d = await accounted(ctx, [server, worker, ctx.receiver], () => drain(ctx, sub!));
      drained = d.value;
      const got = await receiverLog(ctx, sub.name);
      const after = got.at.filter((t) => t >= startAt);
      run.backlog = {
        events: queued.total - queued.delivered,
        startS: (readyAt - startAt) / 1000,
        firstS: (Math.min(...after) - startAt) / 1000,
        lastS: (Math.max(...after) - startAt) / 1000,
        usage: d.usage,
      };
    } else drained = await drain(ctx, sub, endedAt + 500);
    const got = await receiverLog(ctx, sub.name);
    const db = await deliveredEvents(ctx, sub);
    const received = new Set(got.ids);
    const measured = got.ids.map((eid, i) => ({ id: eid, at: got.at[i]! })).filter((r) => r.at >= startedAt);
    const lastAt = Math.max(endedAt, ...measured.map((r) => r.at));
    run.delivery = {
      events: drained.counts.total - before!.total,
      receivedDuringLoad: measured.filter((r) => r.at <= endedAt).length,
      drainS: (lastAt - endedAt) / 1000,
      complete: drained.complete,
      lagMs:
        mode === 'subscribed' ? measured.filter((r) => db.has(r.id)).map((r) => r.at - db.get(r.id)!.createdAt) : [],
      duplicates: got.duplicates,
      missing: [...db.keys()].filter((eid) => !received.has(eid)).length,
      retried: drained.counts.retried,
    };
    await unsubscribe(ctx, server, sub);
  } else {
    run.eventsRecorded = (await countEvents(ctx)) - eventsBefore;
  }
  await restore(ctx);
  return run;
}

/** The subscription's delivery counts once writes still in flight have committed (unchanged over 300 ms). */
async function settledCounts(ctx: Context, sub: Subscription): Promise<DeliveryCounts> {
  let last = await deliveryCounts(ctx, sub);
  for (;;) {
    await sleep(300);
    const next = await deliveryCounts(ctx, sub);
    if (next.total === last.total) return next;
    last = next;
  }
}

// ---- 4. where the time goes: CPU profiles ----------------------------------------------------------

interface ProcessProfile {
  summary: ProfileSummary;
  /** requests (server) or events delivered (worker) while profiled */
  units: number;
  /** the process's CPU time while profiled, µs per unit */
  cpuPerUnitUs: number;
  /** SQL text, times sent per unit */
  statements: [string, number][];
  file: string;
}

interface Profiles {
  /** the server while it writes with a subscription and no worker runs (the write side alone) */
  server: ProcessProfile;
  /** the worker process delivering the backlog those writes left */
  worker: ProcessProfile;
}

/**
 * The write side and the delivery side apart, each under V8's CPU profiler (which slows them
 * somewhat): PROFILE_S s of POST /Order with a subscription and no worker running, profiling the
 * server; then a new worker process delivering that backlog, profiled from its start to the last receipt.
 */
async function profileBothSides(
  ctx: Context,
  server: ServerChild,
  workerControl: WorkerControl,
  dir: string,
): Promise<Profiles> {
  const sub = await subscribe(ctx, server, 'profile');
  await workerControl.stop();
  const serverFile = path.join(dir, 'server-subscribed-writes.cpuprofile');
  const before = await server.stats();
  await server.startProfile();
  const result = await loadPosts(ctx, server, PROFILE_S);
  const { statements: serverStatements } = await server.stopProfile(serverFile);
  const after = await server.stats();
  requireCreated('POST /Order (profile)', result);
  await settledCounts(ctx, sub);
  const worker = await workerControl.start();
  const workerFile = path.join(dir, 'worker-delivering.cpuprofile');
  const workerBefore = await worker.stats();
  await worker.startProfile();
  const startedAt = now();
  const drained = await drain(ctx, sub);
  const { statements: workerStatements } = await worker.stopProfile(workerFile);
  const endedAt = now();
  const workerAfter = await worker.stats();
  if (!drained.complete) throw new Error(`profile: the backlog was not delivered within ${DRAIN_TIMEOUT_MS / 1000} s`);
  const got = await receiverLog(ctx, sub.name);
  const delivered = got.at.filter((t) => t >= startedAt && t <= endedAt).length;
  const requests = result.requests.total;
  const perUnit = (list: [string, number, unknown[]][], units: number): [string, number][] =>
    list.slice(0, 6).map(([sql, count]) => [sql.replace(/\s+/g, ' ').trim(), count / units]);
  await unsubscribe(ctx, server, sub);
  await restore(ctx);
  return {
    server: {
      summary: summarizeProfile(serverFile, 10),
      units: requests,
      cpuPerUnitUs: (after.cpuMicros - before.cpuMicros) / requests,
      statements: perUnit(serverStatements, requests),
      file: serverFile,
    },
    worker: {
      summary: summarizeProfile(workerFile, 10),
      units: delivered,
      cpuPerUnitUs: (workerAfter.cpuMicros - workerBefore.cpuMicros) / delivered,
      statements: perUnit(workerStatements, delivered),
      file: workerFile,
    },
  };
}

function profileReport(p: Profiles): string[] {
  const out: string[] = [];
  out.push('### Where the time goes', '');
  out.push(
    `Afterwards, each side under V8's CPU profiler (started in the child through node:inspector; it slows the process somewhat): the server (\`worker: false\`) ` +
      `during ${PROFILE_S} s of the same POST /Order load with a subscription and no worker running (${fmt(p.server.units)} requests), then a new worker ` +
      `process delivering the backlog those requests left (${fmt(p.worker.units)} events delivered while profiled). Self time of the main thread per ` +
      'request / per delivered event, by category, and the SQL statements each sent (per request / per event). The .cpuprofile files are in the temp ' +
      'directory the run printed (Chrome DevTools → Performance, or speedscope).',
    '',
  );
  const unit = (x: ProcessProfile, ms: number) => (1000 * ms) / x.units;
  const names = [
    ...new Set([...p.server.summary.categories, ...p.worker.summary.categories].map((c) => c.name)),
  ].filter((n) => n !== IDLE);
  const get = (x: ProcessProfile, name: string) => x.summary.categories.find((c) => c.name === name)?.ms ?? 0;
  names.sort(
    (a, b) =>
      unit(p.server, get(p.server, b)) +
      unit(p.worker, get(p.worker, b)) -
      unit(p.server, get(p.server, a)) -
      unit(p.worker, get(p.worker, a)),
  );
  out.push(
    '| main thread, µs | server, per request (subscribed writes) | worker process, per event delivered |',
    '|---|--:|--:|',
  );
  for (const name of names) {
    const a = unit(p.server, get(p.server, name));
    const b = unit(p.worker, get(p.worker, name));
    if (a < 1 && b < 1) continue;
    out.push(`| ${name} | ${fmt(a)} | ${fmt(b)} |`);
  }
  out.push(
    `| **total (busy)** | **${fmt(unit(p.server, p.server.summary.busyMs))}** | **${fmt(unit(p.worker, p.worker.summary.busyMs))}** |`,
  );
  out.push(
    `| process CPU time (all threads, for comparison) | ${fmt(p.server.cpuPerUnitUs)} | ${fmt(p.worker.cpuPerUnitUs)} |`,
    '',
  );
  for (const [name, x, per] of [
    ['Server', p.server, 'request'],
    ['Worker process', p.worker, 'event'],
  ] as const) {
    out.push(`${name}: top functions by self time, and its SQL statements per ${per}:`, '');
    out.push(`| function | where | category | µs/${per} |`, '|---|---|---|--:|');
    for (const f of x.summary.top.slice(0, 8))
      out.push(`| \`${f.name}\` | ${f.location} | ${f.category} | ${fmt(unit(x, f.ms), 1)} |`);
    out.push('');
    for (const [sql, n] of x.statements)
      out.push(`- ${fmt(n, 2)} × \`${sql.slice(0, 300)}${sql.length > 300 ? '…' : ''}\``);
    out.push('');
  }
  return out;
}

// ---- report -----------------------------------------------------------------------------------

interface Environment {
  date: string;
  revision: string;
  cpus: number;
  cpuModel: string;
  os: string;
  node: string;
  postgres: string;
  databaseServer: string;
  concurrency: number;
  clock: { offsetMs: number; rttMs: number };
}

interface Results {
  env: Environment;
  throughput: ThroughputResult;
  latency: LatencyResult;
  posts: PostRun[];
  profiles: Profiles | undefined;
}

const met = (ok: boolean) => (ok ? 'met' : '**missed**');

function cpuCells(u: Usage, per: number): Record<string, string> {
  const cell = (us: number | undefined) => (us === undefined ? 'n/a' : fmt(us / per));
  return {
    server: cell(
      Object.entries(u.childCpuUs)
        .filter(([n]) => n.includes('server'))
        .reduce((s, [, v]) => s + v, 0),
    ),
    worker: cell(u.childCpuUs[WORKER]),
    receiver: cell(u.childCpuUs.receiver),
    pg: cell(u.pgCpuUs),
    load: cell(u.loadCpuUs),
  };
}

function report(r: Results): string {
  const { env, throughput: t, latency: l, posts } = r;
  const out: string[] = [];
  out.push(SECTION, '');
  out.push(
    `Written by \`npm run bench:webhooks\` (bench/webhooks.ts) on ${env.date}. Rerun it rather than editing this section.`,
    '',
  );
  out.push(
    `- Command: \`npm run bench:webhooks\` (BENCH_WEBHOOK_EVENTS=${EVENTS}, BENCH_WEBHOOK_RATE=${RATE}, BENCH_WEBHOOK_SECONDS=${LATENCY_S}, ` +
      `BENCH_WARMUP=${WARMUP_S}, BENCH_DURATION=${DURATION_S}); commit ${env.revision}`,
  );
  out.push(
    `- Machine: ${env.cpus} CPUs (os.availableParallelism(); ${env.cpuModel}), ${env.os}; Node.js ${env.node}; PostgreSQL ${env.postgres} (${env.databaseServer})`,
  );
  out.push(
    `- Data: a fresh database seeded as for \`npm run bench\` (${fmt(SEED.orders)} orders of ${fmt(SEED.customers)} customers); the orders a measurement ` +
      'creates, and the events no delivery refers to any more, are deleted (and the tables vacuumed) after it.',
  );
  out.push(
    '- Processes, each in its own child (this file started again in another role, with the CPU and SQL accounting of bench/child-harness.ts): ' +
      `**server** = runtime \`startServer\` serving examples/shop (pg pool of ${POOL_SIZE}) with a management token, the example's config with ` +
      '`webhooks.allowHttp` and `webhooks.allowPrivateTargets` true (the receiver is on loopback) and the data rate limit out of reach, otherwise ' +
      `the defaults (delivery \`concurrency\` ${env.concurrency}, \`timeoutMs\` 5000); the **in-process worker** is the one \`startServer\` runs by default ` +
      '(`svcgen serve`); the **worker process** is runtime `startWorkerProcess` (`svcgen worker`) next to a server started with `worker: false` ' +
      '(`svcgen serve --no-worker`), never together with the first server, as both would take jobs from the same queue. **receiver** = a node:http ' +
      "server answering 200 as soon as a request's body is in, recording the `x-service-delivery` header, the record's id and the arrival of the request's head.",
  );
  out.push(
    '- Subscriptions: table Order, events [INSERT], one receiver path each, made with POST /_webhooks (management token) and removed with DELETE ' +
      'after the measurement; each is proven in force by one order created through the API and awaited at the receiver before its measurement. ' +
      `Before anything is measured, ${fmt(WARMUP_EVENTS)} orders are created and delivered through a warm-up subscription.`,
  );
  out.push(
    '- Clocks: every time is `performance.timeOrigin + performance.now()` of the process that took it (the system clock, sub-millisecond); ' +
      `the receiver's offset from the benchmark process, measured over 50 round trips (shortest ${fmt(env.clock.rttMs, 2)} ms), was ` +
      `${fmt(env.clock.offsetMs, 3)} ms and is subtracted. "Event created" is \`svcgen.webhook_events.created_at\` (PostgreSQL's \`now()\`, the start of the writing transaction).`,
  );
  out.push(
    `- Noise: the load generator (this process), the server, the worker, the receiver and PostgreSQL share ${env.cpus} CPUs: absolute figures are low; ` +
      'compare the ratios, and treat differences of a few per cent as noise.',
  );
  const windows = [
    t.usage,
    l.usage,
    ...posts.map((p) => p.usage),
    ...posts.flatMap((p) => (p.backlog ? [p.backlog.usage] : [])),
  ];
  const disturbed = windows.filter((u) => (u.otherLoad ?? 0) > 0.1).length;
  if (disturbed) {
    out.push(
      '',
      `> **Warning:** in ${disturbed} of ${windows.length} measurements other processes used more than 10 % of the machine's CPU (the "other processes" ` +
        'figures); those figures are lower and noisier than on a quiet machine.',
    );
  }
  out.push('');

  const ratio = (sub: PostRunId, none: PostRunId) => {
    const a = posts.find((p) => p.id === sub)!;
    const b = posts.find((p) => p.id === none)!;
    return a.rps / b.rps;
  };
  const throughput = t.events / ((t.lastReceipt - t.firstCommit) / 1000);
  const p99 = percentile(l.fromResponseMs, 99);
  const inProcess = ratio('subscribed-inprocess', 'none-inprocess');
  const workerProcess = ratio('subscribed-workerprocess', 'none-workerprocess');
  out.push('### Summary', '');
  out.push('| measure | result | aim | |', '|---|--:|--:|:-:|');
  out.push(
    `| delivery throughput, first commit → last receipt (events/s) | **${fmt(throughput)}** | ≥ ${fmt(AIM.eventsPerSecond)} | ${met(throughput >= AIM.eventsPerSecond)} |`,
  );
  out.push(
    `| latency at ${RATE} events/s, 201 → receipt, p99 (ms) | **${fmt(p99, 1)}** | ≤ ${AIM.p99Ms} | ${met(p99 <= AIM.p99Ms)} |`,
  );
  out.push(
    `| POST /Order req/s, subscribed ÷ unsubscribed, in-process worker | **${fmt(100 * inProcess)} %** | ≥ ${fmt(100 * AIM.writeShare)} % | ${met(inProcess >= AIM.writeShare)} |`,
  );
  out.push(
    `| POST /Order req/s, subscribed ÷ unsubscribed, worker process (server \`worker: false\`) | **${fmt(100 * workerProcess)} %** | ≥ ${fmt(100 * AIM.writeShare)} % | ${met(workerProcess >= AIM.writeShare)} |`,
  );
  const lost = t.missing + t.ordersMissing + l.missing + posts.reduce((s, p) => s + (p.delivery?.missing ?? 0), 0);
  const dups = t.duplicates + l.duplicates + posts.reduce((s, p) => s + (p.delivery?.duplicates ?? 0), 0);
  const queuedRun = posts.find((p) => p.id === 'queued-workerprocess');
  const queuedBase = posts.find((p) => p.id === 'none-workerprocess');
  if (queuedRun && queuedBase) {
    out.push(
      `| diagnostic: POST /Order req/s with a subscription but no worker running (capture and queueing alone) ÷ unsubscribed | ${pct(queuedRun.rps, queuedBase.rps)} | | |`,
    );
  }
  if (queuedRun?.backlog) {
    const b = queuedRun.backlog;
    out.push(
      `| diagnostic: delivery alone, a backlog of ${fmt(b.events)} events, no writes (events/s) | ${fmt(b.events / (b.lastS - b.firstS))} | | |`,
    );
  }
  out.push(
    `| events not delivered / delivered twice, all measurements | ${fmt(lost)} / ${fmt(dups)} | 0 / 0 | ${met(lost === 0 && dups === 0)} |`,
  );
  out.push('');

  out.push('### Delivery throughput', '');
  out.push(
    `One subscription, server with its in-process worker. ${fmt(t.events)} orders created with POST /Order/_bulk (${BULK_ITEMS} items a request, ` +
      `${fmt(t.requests)} requests, ${BULK_IN_FLIGHT} in flight); the clock runs from the first 201 (≈ the first commit; the first request was sent ` +
      `${fmt(t.firstCommit - t.firstSent, 1)} ms before) to the last receipt. Every event is checked against svcgen.webhook_deliveries (all \`delivered\`) ` +
      'and against the created orders, and `x-service-delivery` values are counted distinct at the receiver.',
    '',
  );
  const span = (a: number, b: number) => (b - a) / 1000;
  out.push('| | |', '|---|--:|');
  out.push(`| events delivered / s, first commit → last receipt | **${fmt(throughput)}** |`);
  out.push(`| … first request sent → last receipt | ${fmt(t.events / span(t.firstSent, t.lastReceipt))} |`);
  out.push(
    `| writes: orders committed / s (first request sent → last 201) | ${fmt(t.events / span(t.firstSent, t.lastCommit))} |`,
  );
  out.push(
    `| time: first commit → last commit / → first receipt / → last receipt (s) | ${fmt(span(t.firstCommit, t.lastCommit), 2)} / ${fmt(span(t.firstCommit, t.firstReceipt), 3)} / ${fmt(span(t.firstCommit, t.lastReceipt), 2)} |`,
  );
  out.push(`| last commit → last receipt (s) | ${fmt(span(t.lastCommit, t.lastReceipt), 2)} |`);
  out.push(
    `| event created → receipt, p50 / p99 / max (ms) | ${fmt(percentile(t.lagMs, 50))} / ${fmt(percentile(t.lagMs, 99))} / ${fmt(Math.max(...t.lagMs))} |`,
  );
  out.push(
    `| deliveries in the database / \`delivered\` / needing more than one attempt | ${fmt(t.deliveries.total)} / ${fmt(t.deliveries.delivered)} / ${fmt(t.deliveries.retried)} |`,
  );
  out.push(
    `| distinct event ids received / duplicates / not an Order INSERT | ${fmt(t.receivedDistinct)} / ${fmt(t.duplicates)} / ${fmt(t.unexpected)} |`,
  );
  out.push(
    `| event ids never received / orders without an event received / received ids unknown to the database | ${fmt(t.missing)} / ${fmt(t.ordersMissing)} / ${fmt(t.foreign)} |`,
  );
  out.push(
    `| TCP connections the receiver accepted meanwhile (the sender keeps connections alive: ≤ concurrency expected) | ${fmt(t.connections)} |`,
  );
  const tc = cpuCells(t.usage, t.events);
  out.push(
    `| CPU per event (µs): server (API + worker) / receiver / PostgreSQL / load generator | ${tc.server} / ${tc.receiver} / ${tc.pg} / ${tc.load} |`,
  );
  out.push(
    `| SQL statements per event (server process, writes and deliveries) | ${fmt((t.usage.childQueries['server (in-process worker)'] ?? 0) / t.events, 2)} |`,
  );
  out.push(
    `| transactions committed per event (pg_stat_database, approximate) | ${fmt(t.usage.commits / t.events, 2)} |`,
  );
  out.push(`| PostgreSQL active backends (mean): wait events (see below) | ${waitSummary(t.usage)} |`);
  out.push(
    `| machine CPU busy / … interrupts / … other processes | ${share(t.usage.machineBusy)} / ${share(t.usage.machineIrq)} / ${share(t.usage.otherLoad)} |`,
  );
  if (t.duplicateIds.length)
    out.push(`| duplicated event ids (first ${t.duplicateIds.length}) | ${t.duplicateIds.join(', ')} |`);
  out.push('');

  out.push(`### Latency at ${RATE} events/s`, '');
  out.push(
    `One subscription, server with its in-process worker. Single POST /Order requests sent on a fixed schedule (one every ${fmt(1000 / RATE, 1)} ms, ` +
      `whatever the responses do; up to 64 keep-alive connections) for ${fmt(LATENCY_S)} s. Each receipt is matched to its POST by the order id in ` +
      "the event's record.",
    '',
  );
  const row = (name: string, v: number[]) =>
    `| ${name} | ${fmt(percentile(v, 50), 1)} | ${fmt(percentile(v, 99), 1)} | ${fmt(Math.max(...v), 1)} |`;
  out.push('| latency (ms) | p50 | p99 | max |', '|---|--:|--:|--:|');
  out.push(row('**201 arrived → receipt**', l.fromResponseMs));
  out.push(row('POST sent → receipt', l.fromSendMs));
  out.push(row('event created (database) → receipt', l.fromCreatedMs));
  out.push(row('POST sent → 201 arrived', l.responseMs));
  out.push('');
  out.push(
    `${fmt(l.sent)} POSTs in ${fmt(l.seconds, 2)} s (${fmt(l.sent / l.seconds)}/s; the latest send was ${fmt(l.maxSendLagMs, 1)} ms behind its slot); ` +
      `${fmt(l.received)} received, ${fmt(l.missing)} missing, ${fmt(l.duplicates)} duplicates; deliveries ${fmt(l.deliveries.delivered)} of ${fmt(l.deliveries.total)} ` +
      `\`delivered\`, ${fmt(l.deliveries.retried)} needing more than one attempt. Machine CPU busy ${share(l.usage.machineBusy)}, other processes ` +
      `${share(l.usage.otherLoad)}; PostgreSQL active backends ${waitSummary(l.usage)}.`,
    '',
  );

  out.push('### POST /Order with and without a subscription', '');
  out.push(
    `autocannon (in this process), ${CONNECTIONS} connections, ${WARMUP_S} s warm-up then ${DURATION_S} s measured, the requests of \`npm run bench\`'s ` +
      'POST /Order case ({ total, customerId }). First the server with its in-process worker: without, then with a subscription; then that ' +
      'server stopped, the server with `worker: false` and the worker process started: without, then with a subscription (the worker process ' +
      "runs in both, idle in the first). In a subscribed run the warm-up's deliveries are awaited before the measured load; after it, the " +
      'remaining deliveries (the backlog) are awaited and timed. Last, as a diagnostic, the write side alone: a subscription with the worker ' +
      'process stopped during the load (events are captured and queued, nothing is delivered), then a new worker process started to deliver ' +
      `the backlog (see "Delivery alone" below). Aim: subscribed ≥ ${fmt(100 * AIM.writeShare)} % of unsubscribed requests/s.`,
    '',
  );
  out.push(
    '| run | req/s | ÷ unsubscribed | p50 (ms) | p99 (ms) | responses | events received during the load | backlog drained after (s) | event created → receipt p50 / p99 (ms) |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  const baseOf = (p: PostRun) =>
    p.mode === 'none' ? undefined : posts.find((q) => q.id === `none-${p.id.split('-')[1]}`);
  for (const p of posts) {
    const base = baseOf(p);
    const d = p.delivery;
    const received = !d
      ? `(events recorded: ${fmt(p.eventsRecorded ?? 0)})`
      : `${fmt(d.receivedDuringLoad)} of ${fmt(d.events)}`;
    const drained = !d ? '' : p.backlog ? 'see below' : `${fmt(d.drainS, 1)}${d.complete ? '' : ' (**not drained**)'}`;
    const lag = d?.lagMs.length ? `${fmt(percentile(d.lagMs, 50))} / ${fmt(percentile(d.lagMs, 99))}` : '';
    out.push(
      `| ${p.label} | ${fmt(p.rps)} | ${base ? `**${pct(p.rps, base.rps)}**` : ''} | ${fmt(p.p50)} | ${fmt(p.p99)} | ${fmt(p.requests)} | ${received} | ${drained} | ${lag} |`,
    );
  }
  out.push('');
  out.push(
    'CPU time per request (µs) during the measured load, SQL statements the server and worker sent and transactions PostgreSQL committed ' +
      "(pg_stat_database, approximate) per request, and what PostgreSQL's active backends were doing (pg_stat_activity sampled every " +
      `${WAIT_SAMPLE_MS} ms: mean active backends, then the most frequent wait events as a share of those backend samples; "CPU" = no wait event):`,
    '',
  );
  out.push(
    '| run | server | worker process | receiver | PostgreSQL backends | load generator | all | SQL statements | commits | active backends: waits | machine busy / other processes |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|',
  );
  for (const p of posts) out.push(usageRow(p.label, p.usage, p.requests));
  out.push('');
  out.push(
    'Reading the wait events: `LWLock:WALWrite` / `IO:WALSync` are commits waiting for the WAL flush (`synchronous_commit` on). A ' +
      'subscribed write also writes its events and one outbox row (more WAL per commit, no extra commit); the worker adds its own ' +
      'transactions (draining the outbox into deliveries and jobs, claiming a job\'s deliveries with their lease, recording the outcomes, completing the job; see the SQL statements and commits columns), and on this 2-CPU machine it delivers and the receiver receives on the same CPUs that serve the writes. "CPU" is a backend running.',
    '',
  );
  const detail = posts
    .filter((p) => p.delivery)
    .map(
      (p) =>
        `${p.label}: ${fmt(p.delivery!.missing)} never received, ${fmt(p.delivery!.duplicates)} duplicates, ${fmt(p.delivery!.retried)} retried`,
    );
  out.push(
    `Deliveries: ${detail.join('; ')}. The unsubscribed runs recorded no event (checked: svcgen.webhook_events unchanged).`,
    '',
  );

  const queued = posts.find((p) => p.backlog);
  if (queued?.backlog) {
    const b = queued.backlog;
    out.push('### Delivery alone, from a backlog', '');
    out.push(
      `The ${fmt(b.events)} events the diagnostic run queued (its warm-up and measured load) with no worker running, delivered by a worker process ` +
        `started afterwards, with no writes going on: it was ready ${fmt(b.startS, 2)} s after its launch, the first event arrived at ` +
        `${fmt(b.firstS, 2)} s, the last at ${fmt(b.lastS, 2)} s: **${fmt(b.events / (b.lastS - b.firstS))} events/s** (first → last receipt; ` +
        `${fmt(b.events / b.lastS)} events/s counting the worker's start). Per event:`,
      '',
    );
    out.push(
      '| | server | worker process | receiver | PostgreSQL backends | load generator | all | SQL statements | commits | active backends: waits | machine busy / other processes |',
      '|---|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|',
    );
    out.push(usageRow('delivering the backlog', b.usage, b.events));
    out.push('');
  }
  if (r.profiles) out.push(...profileReport(r.profiles));
  return out.join('\n');
}

/** One row of the CPU tables: per unit (request or event). */
function usageRow(label: string, u: Usage, per: number): string {
  const c = cpuCells(u, per);
  const all = (Object.values(u.childCpuUs).reduce((a, b) => a + b, 0) + (u.pgCpuUs ?? 0) + u.loadCpuUs) / per;
  const queries =
    Object.entries(u.childQueries)
      .filter(([n]) => n !== 'receiver')
      .reduce((sum, [, v]) => sum + v, 0) / per;
  return (
    `| ${label} | ${c.server} | ${c.worker} | ${c.receiver} | ${c.pg} | ${c.load} | ${fmt(all)} | ${fmt(queries, 2)} | ${fmt(u.commits / per, 2)} | ` +
    `${waitSummary(u)} | ${share(u.machineBusy)} / ${share(u.otherLoad)} |`
  );
}

/** "3.1: Lock:object 40 %, LWLock:WALWrite 30 %, CPU 20 %" */
function waitSummary(u: Usage): string {
  const total = Object.values(u.waits).reduce((a, b) => a + b, 0);
  if (u.waitSamples === 0 || total === 0) return 'n/a';
  const top = Object.entries(u.waits)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 4)
    .map(([name, n]) => `${name} ${fmt((100 * n) / total)} %`);
  return `${fmt(total / u.waitSamples, 1)}: ${top.join(', ')}`;
}

// ---- main -------------------------------------------------------------------------------------

function logPosts(p: PostRun): void {
  const d = p.delivery;
  log(
    `  ${fmt(p.rps)} req/s, p50 ${p.p50} ms, p99 ${p.p99} ms; machine busy ${share(p.usage.machineBusy)}` +
      (d
        ? `; received during the load ${fmt(d.receivedDuringLoad)} of ${fmt(d.events)}, drained ${fmt(d.drainS, 1)} s later`
        : `; events recorded ${p.eventsRecorded}`) +
      (p.backlog
        ? `; backlog of ${fmt(p.backlog.events)} delivered at ${fmt(p.backlog.events / (p.backlog.lastS - p.backlog.firstS))} events/s`
        : ''),
  );
}

async function main(): Promise<void> {
  const cleanups = cleanupOnExit(log);
  const revision = gitRevision();
  try {
    const dbServer = await findDatabaseServer(log);
    cleanups.add(() => dbServer.stop());
    log(`PostgreSQL: ${dbServer.origin}`);
    const database = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    log(`database ${database.name}: migrating and seeding ${fmt(SEED.orders)} orders`);
    const fixture = await prepareDatabase(database.url, SEED);
    const admin = new pg.Client({ connectionString: dbServer.url });
    admin.on('error', () => {});
    await admin.connect();
    cleanups.add(() => admin.end());
    const db = new pg.Client({ connectionString: database.url });
    db.on('error', () => {});
    await db.connect();
    cleanups.add(() => db.end());
    const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
    cleanups.add(async () => agent.destroy());

    const managementToken = `bench-${randomBytes(16).toString('hex')}`;
    const self = 'bench/webhooks.ts';
    const childEnv = (role: Role, extra: Record<string, string> = {}) => ({
      BENCH_WEBHOOKS_ROLE: role,
      BENCH_DATABASE_URL: database.url,
      ...extra,
    });
    const start = async (name: string, role: Role, extra: Record<string, string> = {}) => {
      const child = await startServerChild(name, self, childEnv(role, extra));
      cleanups.add(() => child.stop());
      log(`${name}: ${role === 'worker' ? 'ready' : child.url} (pid ${child.pid})`);
      return child;
    };

    const receiver = await start('receiver', 'receiver');
    const monitor = new pg.Client({ connectionString: dbServer.url });
    monitor.on('error', () => {});
    await monitor.connect();
    cleanups.add(() => monitor.end());
    const ctx: Context = {
      fixture,
      managementToken,
      receiver,
      db,
      backends: new BackendCpu(admin, database.name),
      databaseUrl: database.url,
      databaseName: database.name,
      monitor,
      agent,
    };
    const clock = await measureClockOffset(ctx);
    clockOffsetMs = clock.offsetMs;
    log(`receiver clock offset ${fmt(clock.offsetMs, 3)} ms (round trip ${fmt(clock.rttMs, 2)} ms)`);

    const serverA = await start('server (in-process worker)', 'server', { BENCH_MANAGEMENT_TOKEN: managementToken });
    ctx.deliverer = serverA;
    const childrenA = [serverA, receiver];
    log(`warm-up: ${fmt(WARMUP_EVENTS)} orders created and delivered`);
    await warmUp(ctx, serverA);

    log(`1. throughput: ${fmt(EVENTS)} orders by POST /Order/_bulk (${BULK_ITEMS} items, ${BULK_IN_FLIGHT} in flight)`);
    const throughput = await measureThroughput(ctx, serverA, childrenA);
    log(
      `  ${fmt(throughput.events / ((throughput.lastReceipt - throughput.firstCommit) / 1000))} events/s first commit → last receipt; ` +
        `${throughput.receivedDistinct} distinct received, ${throughput.missing} missing, ${throughput.duplicates} duplicates`,
    );

    log(`2. latency: POST /Order at ${RATE}/s for ${LATENCY_S} s`);
    const latency = await measureLatency(ctx, serverA, childrenA);
    log(
      `  201 → receipt p50 ${fmt(percentile(latency.fromResponseMs, 50), 1)} ms, p99 ${fmt(percentile(latency.fromResponseMs, 99), 1)} ms, ` +
        `max ${fmt(Math.max(...latency.fromResponseMs), 1)} ms; ${latency.missing} missing`,
    );

    const posts: PostRun[] = [];
    const runPosts = async (
      id: PostRunId,
      mode: PostMode,
      server: ServerChild,
      children: ServerChild[],
      workerControl?: WorkerControl,
    ) => {
      log(`3. POST /Order, ${POST_LABEL[id].replace(/\*\*|`/g, '')}: ${WARMUP_S} s warm-up, ${DURATION_S} s measured`);
      const run = await measurePosts(ctx, id, POST_LABEL[id], mode, server, children, workerControl);
      posts.push(run);
      logPosts(run);
    };
    await runPosts('none-inprocess', 'none', serverA, childrenA);
    await runPosts('subscribed-inprocess', 'subscribed', serverA, childrenA);
    await serverA.stop();

    const serverB = await start('server (worker: false)', 'server', {
      BENCH_MANAGEMENT_TOKEN: managementToken,
      BENCH_WEBHOOKS_WORKER: 'false',
    });
    let worker = await start(WORKER, 'worker');
    ctx.deliverer = worker;
    await runPosts('none-workerprocess', 'none', serverB, [serverB, worker, receiver]);
    await runPosts('subscribed-workerprocess', 'subscribed', serverB, [serverB, worker, receiver]);
    const workerControl: WorkerControl = {
      stop: () => worker.stop(),
      start: async () => (ctx.deliverer = worker = await start(WORKER, 'worker')),
    };
    await runPosts('queued-workerprocess', 'queued', serverB, [serverB, receiver], workerControl);

    let profiles: Profiles | undefined;
    if (PROFILE_S > 0) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-bench-webhooks-'));
      log(
        `4. profiles: the server writing with a subscription, no worker (${PROFILE_S} s), then a worker process delivering the backlog`,
      );
      profiles = await profileBothSides(ctx, serverB, workerControl, dir);
      log(`  CPU profiles (.cpuprofile) in ${dir}`);
    }

    const { config } = await benchConfig();
    const env: Environment = {
      date: reportDate(),
      revision,
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      postgres: await serverVersion(database.url),
      databaseServer: dbServer.origin,
      concurrency: config.webhooks.concurrency,
      clock,
    };
    const section = report({ env, throughput, latency, posts, profiles });
    writeSection(RESULTS_FILE, SECTION, section);
    log(`wrote the section "${SECTION}" of ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.log(section);
  } finally {
    await cleanups.finish();
  }
}

const role = process.env.BENCH_WEBHOOKS_ROLE as Role | undefined;
if (role) {
  await runRole(role);
} else {
  main().catch((error: unknown) => {
    console.error(
      `[bench:webhooks] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    process.exitCode = 1;
  });
}
