/**
 * `npm run bench`: svcgen against a hand-written node:http + pg baseline on the same requests, and
 * on the five core requests (get, list, filtered+sorted list, embed, create) against the bare
 * baseline too (./bare-server.ts: the JSON built by PostgreSQL, no key lookup, no checks).
 *
 *   1. a fresh database (./database.ts): the shop's migrations, 100,000 orders of 1,000 customers
 *      in 100 cities; a case that creates orders is followed by deleting them again (and VACUUM);
 *   2. both servers in child processes (./svcgen-server.ts, ./baseline-server.ts), pg pools of 10;
 *   3. the same responses from both, checked once per case before anything is measured;
 *   4. per case (./cases.ts) and server: 3 s warm-up, 10 s measured with autocannon, 50 connections,
 *      3 rounds (BENCH_ROUNDS) in rotating order, the median round reported; any unexpected status
 *      fails the run;
 *   5. a CPU profile of both servers per case (V8 profiler in the child, 5 s under the same load)
 *      plus the SQL statements sent during it, summarized under "Where the time goes", with the
 *      plan of each server's main statement (EXPLAIN ANALYZE on the idle database, afterwards);
 *   6. bench/RESULTS.md; then the children are stopped and the database dropped.
 *
 * Environment: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL (a PostgreSQL server to create the
 * database on); for experiments: BENCH_ROUNDS, BENCH_DURATION / BENCH_WARMUP / BENCH_PROFILE (seconds; 0 skips
 * profiling), BENCH_CASES (ids, comma separated), BENCH_LIST_MAX_OFFSET, BENCH_RESULTS (report file),
 * BENCH_RATE (a fixed rate of requests/s, to compare CPU per request below saturation).
 *
 * BENCH_BEFORE=<git ref> (e.g. e432f19) measures svcgen as of that commit too, as the server
 * "before": checked out into a temporary git worktree and compiled (checkoutSvcgen in ./children.ts),
 * serving that commit's examples/shop through ./svcgen-server.ts on the same database; its answers
 * are checked against svcgen's (a case where they differ is reported and not measured for it), it
 * takes its turn in every round, and RESULTS.md gets a section "Before and after".
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { CASES, fillRequest, headersFor, type BenchCase, type Fixture } from './cases.ts';
import { checkoutSvcgen, REPO, startServerChild, type ServerChild } from './children.ts';
import { checkSameAnswers, send } from './equivalence.ts';
import {
  createBenchDatabase,
  findDatabaseServer,
  prepareDatabase,
  restoreSeed,
  serverVersion,
  type BenchDatabase,
  type DatabaseServer,
} from './database.ts';
import { IDLE, SOCKET_WRITE_CATEGORY, summarizeProfile, type ProfileSummary } from './profile.ts';
import { BackendCpu, machineBusy, machineSample } from './cpu.ts';
import pg from 'pg';
import { cleanupOnExit } from './cleanups.ts';
import { commandLine, gitRevision, readSection, reportDate } from './results-file.ts';

/** Sections of RESULTS.md that other scripts write (bench:installed, bench:graphql, bench:auth, bench:webhooks, bench:bulk, bench:soak, bench:workers), kept as they are. */
const OTHER_SECTIONS = [
  '## Installed svcgen serve',
  '## GraphQL',
  '## Authentication',
  '## Webhooks',
  '## Bulk writes',
  '## Soak',
  '## Workers',
];

const CONNECTIONS = 50;
const POOL_SIZE = 10; // svcgen's startServer uses max 10; the baseline is configured to match
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
/** Measurements per case and server; the median one by requests/s is reported. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PROFILE_S = Number(process.env.BENCH_PROFILE ?? 5);
/** Requests/s for experiments on CPU per request below saturation (BENCH_RATE); unlimited by default. */
const RATE = process.env.BENCH_RATE ? Number(process.env.BENCH_RATE) : undefined;
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
/** The aim of the issue: svcgen serves at least this share of the baseline's requests/s ... */
const AIM_RPS_SHARE = 0.6;
/** ... with a p99 latency of at most this multiple of the baseline's. */
const AIM_P99_FACTOR = 2;
/** Against the bare baseline: the geometric mean of svcgen's share of its requests/s over the five core cases ... */
const AIM_BARE_GEOMEAN = 0.9;
/** ... none below this share ... */
const AIM_BARE_MIN = 0.8;
/** ... and a p99 latency of at most this multiple of the bare server's. */
const AIM_BARE_P99_FACTOR = 1.5;
const BENCH_DIR = path.join(REPO, 'bench');
const PROFILE_DIR = path.join(BENCH_DIR, 'profiles');
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(BENCH_DIR, 'RESULTS.md');
/** An earlier commit of svcgen to measure against this checkout, as the server 'before' (not profiled). */
const BEFORE = process.env.BENCH_BEFORE || undefined;

type ServerName = 'svcgen' | 'baseline' | 'bare' | 'before';
/** The servers profiled and compared case by case; the bare one only answers the cases marked `bare`. */
const SERVERS: readonly ServerName[] = ['svcgen', 'baseline'];
const serversOf = (benchCase: BenchCase): ServerName[] => [
  ...SERVERS,
  ...(benchCase.bare ? ['bare' as const] : []),
  ...(BEFORE ? ['before' as const] : []),
];

interface Measurement {
  rps: number;
  requests: number;
  p50: number;
  p99: number;
  non2xx: number;
  statusCounts: Record<string, number>;
  /** server process CPU (all threads), µs per request */
  cpuPerRequestUs: number;
  /** CPU of the PostgreSQL backends of the benchmark database and parallel workers, µs per request (local server only) */
  pgCpuPerRequestUs: number | undefined;
  /** CPU of this process (autocannon), µs per request */
  loadCpuPerRequestUs: number;
  /** busy share of all CPUs of the machine, 0..1 */
  machineBusy: number | undefined;
  /** interrupt (mostly loopback networking) share of all CPUs, 0..1 */
  machineIrq: number | undefined;
  /** share of the machine's CPU used by processes outside the benchmark (other work on the machine), 0..1 */
  otherLoad: number | undefined;
  /** SQL statements sent by the server per request */
  queriesPerRequest: number;
  /** requests/s of every round, in the order measured (the median round is the one reported) */
  roundsRps?: number[];
}

/** The round with the median requests/s (the lower middle one of an even count). */
function median(rounds: Measurement[]): Measurement {
  const sorted = [...rounds].sort((a, b) => a.rps - b.rps);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}

interface StatementPlan {
  sql: string;
  /** EXPLAIN (ANALYZE, BUFFERS) output */
  plan: string;
  /** median execution time of EXPLAIN (ANALYZE, TIMING OFF) over a few runs, ms */
  executionMs: number;
  planningMs: number;
}

interface CaseProfile {
  summary: ProfileSummary;
  requests: number;
  /** the server process's CPU time while profiled, µs per request */
  cpuPerRequestUs: number;
  /** SQL text, times sent, the parameters of its first execution */
  statements: [string, number, unknown[]][];
  file: string;
  /** the plan of the most frequent statement */
  plan?: StatementPlan;
}

interface CaseResult {
  benchCase: BenchCase;
  order: ServerName[];
  measured: Record<'svcgen' | 'baseline', Measurement> & { bare?: Measurement; before?: Measurement };
  profiles: Partial<Record<ServerName, CaseProfile>>;
  /** why the before server was not measured on the case: how its answer differs from svcgen's */
  beforeDiffers?: string;
}

const log = (message: string) => console.error(`[bench] ${message}`);

// ---- load -------------------------------------------------------------------------------------

async function load(
  server: ServerChild,
  benchCase: BenchCase,
  fixture: Fixture,
  seconds: number,
): Promise<autocannon.Result> {
  const steps = benchCase.sequence ?? 1;
  const requests: autocannon.Request[] = [];
  for (let step = 0; step < steps; step++) {
    requests.push({
      setupRequest: (req, context) => fillRequest(req, benchCase.next(fixture, context, step)),
      onResponse: benchCase.onResponse
        ? (status, body, context) => benchCase.onResponse!(status, body, context)
        : undefined,
    });
  }
  return autocannon({
    url: server.url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: headersFor(fixture),
    requests,
    overallRate: RATE,
  });
}

function statusCounts(result: autocannon.Result): Record<string, number> {
  return Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, Number(s.count)]));
}

/** Fails the run, with sample bodies, when a response had another status than the case's. */
async function requireExpectedStatuses(
  server: ServerChild,
  benchCase: BenchCase,
  fixture: Fixture,
  result: autocannon.Result,
  phase: string,
) {
  const counts = statusCounts(result);
  const unexpected = Object.entries(counts).filter(([code]) => Number(code) !== benchCase.status);
  if (unexpected.length === 0 && result.errors === 0 && result.non2xx === 0) return;
  const samples: string[] = [];
  for (let i = 0; i < 20 && samples.length < 3; i++) {
    try {
      const res = await send(server, benchCase.next(fixture, {}, 0), fixture);
      if (res.status !== benchCase.status) samples.push(`${res.status} ${res.text.slice(0, 500)}`);
    } catch (error) {
      samples.push(
        `request failed: ${(error as Error).message}${(error as Error).cause ? ` (${String((error as Error).cause)})` : ''}`,
      );
    }
  }
  throw new Error(
    `${server.name} ${benchCase.title} (${phase}): expected every response to be ${benchCase.status}, got ` +
      `${JSON.stringify(counts)}, non-2xx ${result.non2xx}, connection errors ${result.errors}, timeouts ${result.timeouts}` +
      (samples.length ? `\nsample responses:\n  ${samples.join('\n  ')}` : ''),
  );
}

async function measure(
  server: ServerChild,
  benchCase: BenchCase,
  fixture: Fixture,
  backends: BackendCpu,
  databaseUrl: string,
): Promise<Measurement> {
  try {
    return await measureOnce(server, benchCase, fixture, backends);
  } finally {
    if (benchCase.writes)
      log(`  restored the seed: deleted ${fmt(await restoreSeed(databaseUrl, fixture))} created orders, vacuumed`);
  }
}

async function measureOnce(
  server: ServerChild,
  benchCase: BenchCase,
  fixture: Fixture,
  backends: BackendCpu,
): Promise<Measurement> {
  const warm = await load(server, benchCase, fixture, WARMUP_S);
  await requireExpectedStatuses(server, benchCase, fixture, warm, 'warm-up');
  const before = await server.stats();
  const pgBefore = await backends.sample();
  const machineBefore = machineSample();
  const loadBefore = process.cpuUsage();
  const startedAt = process.hrtime.bigint();
  const result = await load(server, benchCase, fixture, DURATION_S);
  const elapsedUs = Number(process.hrtime.bigint() - startedAt) / 1000;
  const loadCpu = process.cpuUsage(loadBefore);
  const machineAfter = machineSample();
  const pgAfter = await backends.sample();
  const after = await server.stats();
  await requireExpectedStatuses(server, benchCase, fixture, result, 'measurement');
  const requests = result.requests.total;
  const pgSpent = BackendCpu.spent(pgBefore, pgAfter);
  const busy = machineBusy(machineBefore, machineAfter);
  const capacityUs = elapsedUs * os.availableParallelism();
  const oursUs = after.cpuMicros - before.cpuMicros + (pgSpent ?? 0) + loadCpu.user + loadCpu.system;
  return {
    otherLoad:
      busy === undefined || pgSpent === undefined ? undefined : Math.max(0, busy.busy - busy.irq - oursUs / capacityUs),
    pgCpuPerRequestUs: pgSpent === undefined ? undefined : pgSpent / requests,
    loadCpuPerRequestUs: (loadCpu.user + loadCpu.system) / requests,
    machineBusy: busy?.busy,
    machineIrq: busy?.irq,
    rps: result.requests.average,
    requests,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    statusCounts: statusCounts(result),
    cpuPerRequestUs: (after.cpuMicros - before.cpuMicros) / requests,
    queriesPerRequest: (after.queries - before.queries) / requests,
  };
}

async function profileCase(
  server: ServerChild,
  benchCase: BenchCase,
  fixture: Fixture,
  databaseUrl: string,
): Promise<CaseProfile> {
  try {
    return await profileOnce(server, benchCase, fixture, databaseUrl);
  } finally {
    if (benchCase.writes) await restoreSeed(databaseUrl, fixture);
  }
}

async function profileOnce(
  server: ServerChild,
  benchCase: BenchCase,
  fixture: Fixture,
  databaseUrl: string,
): Promise<CaseProfile> {
  const warm = await load(server, benchCase, fixture, Math.min(WARMUP_S, 2));
  await requireExpectedStatuses(server, benchCase, fixture, warm, 'profile warm-up');
  const file = path.join(PROFILE_DIR, `${benchCase.id}-${server.name}.cpuprofile`);
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => {});
  await client.connect();
  await waitForIdleDatabase(client).finally(() => client.end().catch(() => {}));
  await server.startProfile();
  // First, the sample request: the SQL trace keeps the parameters of each statement's first
  // execution, so both servers' statements are explained with the same request's.
  await send(server, benchCase.sample(fixture), fixture);
  const before = await server.stats();
  const result = await load(server, benchCase, fixture, PROFILE_S);
  const { statements } = await server.stopProfile(file);
  const after = await server.stats();
  await requireExpectedStatuses(server, benchCase, fixture, result, 'profile');
  const requests = result.requests.total;
  return {
    summary: summarizeProfile(file),
    requests,
    cpuPerRequestUs: (after.cpuMicros - before.cpuMicros) / requests,
    statements,
    file,
  };
}

/**
 * Waits (at most 30 s) until no other session of the database runs a statement: the requests still
 * queued when a load stops (up to one per connection, slow ones in the scan-bound cases) finish.
 */
async function waitForIdleDatabase(client: pg.Client): Promise<void> {
  for (let waited = 0; waited < 30_000; waited += 100) {
    const { rows } = await client.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()",
    );
    if (rows[0]!.n === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The plan of `sql` with `values` (those of the case's sample request), as the server ran it: EXPLAIN (ANALYZE, BUFFERS) once for the
 * plan, then the median of 9 EXPLAIN (ANALYZE, TIMING OFF) for the time (per-node timing inflates
 * plans with many subplan calls). Inside a transaction that is rolled back, so writes leave nothing.
 */
async function explain(databaseUrl: string, sql: string, values: unknown[]): Promise<StatementPlan> {
  const client = new pg.Client({ connectionString: databaseUrl, options: '-c TimeZone=UTC' });
  client.on('error', () => {});
  await client.connect();
  try {
    await waitForIdleDatabase(client);
    await client.query('BEGIN');
    const run = async (options: string) =>
      (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (${options}) ${sql}`, values)).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n');
    await run('ANALYZE'); // warm the caches and the plan
    await run('ANALYZE');
    const plan = await run('ANALYZE, BUFFERS');
    const timings: { executionMs: number; planningMs: number }[] = [];
    for (let i = 0; i < 9; i++) {
      const text = await run('ANALYZE, TIMING OFF');
      timings.push({
        executionMs: Number(/Execution Time: ([\d.]+) ms/.exec(text)?.[1] ?? NaN),
        planningMs: Number(/Planning Time: ([\d.]+) ms/.exec(text)?.[1] ?? NaN),
      });
    }
    timings.sort((a, b) => a.executionMs - b.executionMs);
    return { sql, plan, ...timings[4]! };
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    await client.end().catch(() => {});
  }
}

// ---- report -----------------------------------------------------------------------------------

const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => (b === 0 ? 'n/a' : `${fmt((100 * a) / b)} %`);

const signed = (n: number) => `${n >= 0 ? '+' : '−'}${fmt(Math.abs(n))}`;

/** Profile categories per request for the at-a-glance line: application code (svcgen's runtime, the
 *  baseline's handlers) as one, socket write syscalls and idle left out (contention, not work). */
function glanceCategories(p: CaseProfile): Map<string, number> {
  const out = new Map<string, number>();
  for (const c of p.summary.categories) {
    if (c.name === IDLE || c.name === SOCKET_WRITE_CATEGORY) continue;
    const name =
      c.name.startsWith('svcgen ') || c.name === 'benchmark server code'
        ? 'application code (svcgen runtime / baseline handlers)'
        : c.name;
    out.set(name, (out.get(name) ?? 0) + (1000 * c.ms) / p.requests);
  }
  return out;
}

interface Environment {
  date: string;
  cpus: number;
  cpuModel: string;
  os: string;
  node: string;
  postgres: string;
  databaseServer: string;
  /** BENCH_BEFORE: the ref as given, its commit, this checkout's revision (gitRevision) */
  before?: { ref: string; sha: string; after: string };
}

function report(env: Environment, results: CaseResult[]): string {
  const out: string[] = [];
  out.push('# svcgen benchmark results', '');
  out.push(`Written by \`npm run bench\` (bench/run.ts) on ${env.date}. Rerun it rather than editing this file.`, '');
  out.push('## Setup', '');
  out.push(`- Command: \`npm run bench\``);
  out.push(`- Machine: ${env.cpus} CPUs (nproc; ${env.cpuModel}), ${env.os}`);
  out.push(`- Node.js ${env.node}; PostgreSQL ${env.postgres} (${env.databaseServer})`);
  out.push(
    `- Data: a fresh database with the shop's migrations (no indexes beyond theirs: primary keys, unique email and sku), ` +
      `${fmt(SEED.orders)} orders of ${fmt(SEED.customers)} customers in ${fmt(SEED.cities)} cities (1 customer in 20 without a city; ` +
      'one `INSERT … SELECT generate_series` per table), `VACUUM ANALYZE`d. The orders a write case creates are deleted again ' +
      '(and the table vacuumed) after each of its runs, so every case reads the same rows.',
  );
  out.push(
    `- Servers, each in its own child process with a pg pool of ${POOL_SIZE}: **svcgen** = runtime \`startServer\` serving examples/shop, ` +
      'compiled (dist/, built by the bench first) as an installed svcgen runs; ' +
      '**baseline** = bench/baseline-server.ts, a hand-written node:http + pg server for the same requests (same JSON, key lookup by ' +
      'SHA-256 digest with a cache, URL/header/body validation, one prepared statement per request, ISO timestamps built in JS). ' +
      "svcgen's config is the example's except for the shared data rate limit, raised out of reach (the limiter still counts and " +
      'syncs to PostgreSQL as in production), and the wait bound of its pool and expensive-read budget (`database.poolWaitTimeoutMs`, 2 s by ' +
      'default, raised to 60 s): 50 connections of scans on 2 CPUs keep most of them queued, and svcgen would refuse some with 503, as it ' +
      'should in production, where the bench wants throughput; the budget itself (5 expensive reads at a time) stays on, but the one ' +
      "API key's share of it (`database.expensiveReadsPerCaller`, 28 by default) is raised out of reach, as its 429s would be. " +
      '**bare** = bench/bare-server.ts, the physical limit of this design for the five core requests: node:http + pg, the record JSON ' +
      'built by PostgreSQL with one prepared statement, no key lookup, no X-Project-Id, no validation, no rate limit, no request log, ' +
      "no headers beyond Content-Type (and Location); its answers must equal svcgen's too.",
  );
  out.push(
    `- Load: autocannon 9 (programmatic, in the parent process), ${CONNECTIONS} connections, ${WARMUP_S} s warm-up then ${DURATION_S} s measured ` +
      `per case and server, ${ROUNDS} rounds with the servers in rotating order; each figure is the server's median round by requests/s ` +
      "(this machine's speed drifts by 10 % and more within minutes; every round is listed per case). Every response must have the expected status, " +
      'and both servers must give the same answer to a sample request (the cursor walk: to every page of one walk, each server ' +
      'following its own cursors), or the run fails.',
  );
  out.push(
    `- The load generator, both servers and PostgreSQL share the same ${env.cpus} CPUs, so absolute figures are low and the ` +
      "ratio is the number to watch. CPU per request: the server process's user + system time (all threads); the PostgreSQL " +
      "backends connected to the benchmark database and its parallel query workers (from /proc, local server only); the load generator's. " +
      '"SQL statements" counts what the server\'s pg clients sent, background work (rate-limit sync, last-used flush) included.',
  );
  out.push('');

  const disturbed = results.flatMap((r) =>
    serversOf(r.benchCase)
      .filter((n) => (r.measured[n]?.otherLoad ?? 0) > 0.1)
      .map((n) => `${r.benchCase.title} / ${n}: ${fmt(100 * r.measured[n]!.otherLoad!)} %`),
  );
  if (disturbed.length) {
    out.push(
      `> **Warning: other processes used a sizeable share of the machine's CPU during some measurements** (${disturbed.join('; ')}). ` +
        'Those figures are lower than on a quiet machine and the ratios less reliable; rerun when the machine is idle.',
      '',
    );
  }
  out.push('## Summary', '');
  out.push(
    `Aim: svcgen serves at least ${fmt(100 * AIM_RPS_SHARE)} % of the baseline's requests/s with a p99 latency of at most ` +
      `${fmt(AIM_P99_FACTOR)}× the baseline's, on every case.`,
    '',
  );
  out.push(
    '| case | svcgen req/s | baseline req/s | svcgen / baseline | svcgen p99 (ms) | baseline p99 (ms) | p99 svcgen / baseline | aim |',
  );
  out.push('|---|--:|--:|--:|--:|--:|--:|:-:|');
  for (const r of results) {
    const s = r.measured.svcgen;
    const b = r.measured.baseline;
    const misses = [s.rps < AIM_RPS_SHARE * b.rps ? 'req/s' : '', s.p99 > AIM_P99_FACTOR * b.p99 ? 'p99' : ''].filter(
      Boolean,
    );
    const aim = misses.length ? `missed (${misses.join(', ')})` : 'met';
    out.push(
      `| ${r.benchCase.title} | ${fmt(s.rps)} | ${fmt(b.rps)} | **${pct(s.rps, b.rps)}** | ${fmt(s.p99)} | ${fmt(b.p99)} | ${pct(s.p99, b.p99)} | ${aim} |`,
    );
  }
  out.push('');
  out.push(...bareSummary(results));
  out.push(...beforeAndAfter(env, results));

  for (const r of results) {
    const s = r.measured.svcgen;
    const b = r.measured.baseline;
    out.push(`## ${r.benchCase.title}`, '');
    out.push(`${r.benchCase.description}. Measured first: ${r.order[0]}.`, '');
    // the bare server's column, where it answered the case
    const x = r.measured.bare;
    const bare = (cell: (m: Measurement) => string, ratio?: (m: Measurement) => number) =>
      x ? ` ${cell(x)} |${ratio ? ` ${pct(ratio(s), ratio(x))}` : ''} |` : '';
    out.push(
      `| | svcgen | baseline | svcgen / baseline |${x ? ' bare | svcgen / bare |' : ''}`,
      `|---|--:|--:|--:|${x ? '--:|--:|' : ''}`,
    );
    out.push(
      `| requests/s (median round) | ${fmt(s.rps)} | ${fmt(b.rps)} | ${pct(s.rps, b.rps)} |${bare(
        (m) => fmt(m.rps),
        (m) => m.rps,
      )}`,
    );
    const each = (m: Measurement) => (m.roundsRps ?? [m.rps]).map((v) => fmt(v)).join(' / ');
    out.push(`| requests/s, each round | ${each(s)} | ${each(b)} | |${bare(each)}`);
    out.push(
      `| latency p50 (ms) | ${fmt(s.p50)} | ${fmt(b.p50)} | ${pct(s.p50, b.p50)} |${bare(
        (m) => fmt(m.p50),
        (m) => m.p50,
      )}`,
    );
    out.push(
      `| latency p99 (ms) | ${fmt(s.p99)} | ${fmt(b.p99)} | ${pct(s.p99, b.p99)} |${bare(
        (m) => fmt(m.p99),
        (m) => m.p99,
      )}`,
    );
    out.push(`| responses | ${fmt(s.requests)} | ${fmt(b.requests)} | |${bare((m) => fmt(m.requests))}`);
    out.push(`| non-2xx | ${s.non2xx} | ${b.non2xx} | |${bare((m) => String(m.non2xx))}`);
    out.push(
      `| server process CPU per request (µs) | ${fmt(s.cpuPerRequestUs)} | ${fmt(b.cpuPerRequestUs)} | ${pct(s.cpuPerRequestUs, b.cpuPerRequestUs)} |` +
        bare(
          (m) => fmt(m.cpuPerRequestUs),
          (m) => m.cpuPerRequestUs,
        ),
    );
    const pgCpu = (m: Measurement) => (m.pgCpuPerRequestUs === undefined ? 'n/a' : fmt(m.pgCpuPerRequestUs));
    const pgRatio = (m: Measurement, n: Measurement) =>
      m.pgCpuPerRequestUs === undefined || n.pgCpuPerRequestUs === undefined
        ? 'n/a'
        : pct(m.pgCpuPerRequestUs, n.pgCpuPerRequestUs);
    out.push(
      `| PostgreSQL backends CPU per request (µs) | ${pgCpu(s)} | ${pgCpu(b)} | ${pgRatio(s, b)} |${x ? ` ${pgCpu(x)} | ${pgRatio(s, x)} |` : ''}`,
    );
    out.push(
      `| load generator CPU per request (µs) | ${fmt(s.loadCpuPerRequestUs)} | ${fmt(b.loadCpuPerRequestUs)} | |${bare((m) => fmt(m.loadCpuPerRequestUs))}`,
    );
    const busy = (m: Measurement) => (m.machineBusy === undefined ? 'n/a' : `${fmt(100 * m.machineBusy)} %`);
    out.push(`| machine CPU busy (all ${os.availableParallelism()} CPUs) | ${busy(s)} | ${busy(b)} | |${bare(busy)}`);
    const share = (v: number | undefined) => (v === undefined ? 'n/a' : `${fmt(100 * v)} %`);
    out.push(
      `| … of which interrupts (loopback networking) | ${share(s.machineIrq)} | ${share(b.machineIrq)} | |${bare((m) => share(m.machineIrq))}`,
    );
    out.push(
      `| … of which everything else (other processes, PostgreSQL's own background processes) | ${share(s.otherLoad)} | ${share(b.otherLoad)} | |` +
        bare((m) => share(m.otherLoad)),
    );
    out.push(
      `| SQL statements per request | ${fmt(s.queriesPerRequest, 2)} | ${fmt(b.queriesPerRequest, 2)} | |${bare((m) => fmt(m.queriesPerRequest, 2))}`,
    );
    out.push('');
  }

  out.push('## Where the time goes', '');
  out.push(
    `Each server was profiled afterwards under the same load for ${PROFILE_S} s per case with V8's CPU profiler (the one behind ` +
      '`--cpu-prof`, started in the child through node:inspector), which slows it down somewhat. Self time of the main thread, in µs ' +
      "per request; native builtins are charged to their JavaScript caller's category except JSON.parse/stringify and socket " +
      'writes; "program" is V8/libuv work outside JavaScript. Note: the profiler samples wall time, so a sample taken while the ' +
      'thread sits in a write system call counts as busy even when the thread is not running — on loopback the kernel delivers ' +
      'the data to the receiver (PostgreSQL, the load generator) inside that call, and on a saturated machine the thread then ' +
      'waits for a CPU. The "socket write syscalls" row is therefore mostly CPU contention, not work; compare the totals with ' +
      "the process's CPU time. The .cpuprofile files are in bench/profiles/ (Chrome DevTools → Performance, or speedscope).",
    '',
  );
  out.push('At a glance (svcgen minus baseline, per request):', '');
  for (const r of results) {
    const ps = r.profiles.svcgen;
    const pb = r.profiles.baseline;
    const s = r.measured.svcgen;
    const b = r.measured.baseline;
    const parts = [
      `server process CPU ${signed(s.cpuPerRequestUs - b.cpuPerRequestUs)} µs (${fmt(s.cpuPerRequestUs)} vs ${fmt(b.cpuPerRequestUs)})`,
    ];
    if (s.pgCpuPerRequestUs !== undefined && b.pgCpuPerRequestUs !== undefined) {
      const times = s.pgCpuPerRequestUs / b.pgCpuPerRequestUs;
      parts.push(
        `PostgreSQL CPU ${signed(s.pgCpuPerRequestUs - b.pgCpuPerRequestUs)} µs (${fmt(s.pgCpuPerRequestUs)} vs ${fmt(b.pgCpuPerRequestUs)}` +
          `${times >= 2 ? `, ${fmt(times, 1)}× — the SQL statement is the bottleneck, see below` : ''})`,
      );
    }
    let line = `- **${r.benchCase.title}** (${pct(s.rps, b.rps)} of the baseline): ${parts.join('; ')}.`;
    if (ps && pb) {
      const diffs = [...glanceCategories(ps)].map(([name, us]) => ({
        name,
        us: us - (glanceCategories(pb).get(name) ?? 0),
      }));
      const top = diffs
        .filter((d) => d.us >= 3)
        .sort((x, y) => y.us - x.us)
        .slice(0, 5);
      if (top.length) line += ` Main thread (profile): ${top.map((d) => `${d.name} ${signed(d.us)} µs`).join(', ')}.`;
    }
    out.push(line);
  }
  out.push('');
  for (const r of results) {
    const ps = r.profiles.svcgen;
    const pb = r.profiles.baseline;
    if (!ps || !pb) continue;
    out.push(`### ${r.benchCase.title}`, '');
    const perReq = (p: CaseProfile, ms: number) => (1000 * ms) / p.requests;
    const names = new Set([...ps.summary.categories, ...pb.summary.categories].map((c) => c.name));
    names.delete(IDLE);
    const get = (p: CaseProfile, name: string) => p.summary.categories.find((c) => c.name === name)?.ms ?? 0;
    const rows = [...names].sort((x, y) => perReq(ps, get(ps, y)) - perReq(ps, get(ps, x)));
    out.push('| main thread, µs per request | svcgen | baseline |', '|---|--:|--:|');
    for (const name of rows) {
      const a = perReq(ps, get(ps, name));
      const b = perReq(pb, get(pb, name));
      if (a < 0.5 && b < 0.5) continue;
      out.push(`| ${name} | ${fmt(a)} | ${fmt(b)} |`);
    }
    const writes = (p: CaseProfile) => get(p, SOCKET_WRITE_CATEGORY);
    out.push(
      `| **total (busy)** | **${fmt(perReq(ps, ps.summary.busyMs))}** | **${fmt(perReq(pb, pb.summary.busyMs))}** |`,
    );
    out.push(
      `| total without socket write syscalls | ${fmt(perReq(ps, ps.summary.busyMs - writes(ps)))} | ${fmt(perReq(pb, pb.summary.busyMs - writes(pb)))} |`,
      `| server process CPU time (all threads, for comparison) | ${fmt(ps.cpuPerRequestUs)} | ${fmt(pb.cpuPerRequestUs)} |`,
      `| main thread busy | ${pct(ps.summary.busyMs, ps.summary.wallMs)} | ${pct(pb.summary.busyMs, pb.summary.wallMs)} |`,
      `| requests/s while profiled | ${fmt(ps.requests / PROFILE_S)} | ${fmt(pb.requests / PROFILE_S)} |`,
      '',
    );
    out.push('Top svcgen functions by self time:', '');
    out.push('| function | where | category | µs/request | % of busy |', '|---|---|---|--:|--:|');
    for (const f of ps.summary.top) {
      out.push(
        `| \`${f.name}\` | ${f.location} | ${f.category} | ${fmt(perReq(ps, f.ms), 1)} | ${fmt((100 * f.ms) / ps.summary.busyMs, 1)} |`,
      );
    }
    out.push('');
    out.push('SQL statements per request while profiled:', '');
    for (const [server, p] of [
      ['svcgen', ps],
      ['baseline', pb],
    ] as const) {
      const total = p.statements.reduce((n, [, c]) => n + c, 0);
      out.push(`- ${server}: ${fmt(total / p.requests, 2)} per request`);
      for (const [sql, count] of p.statements.slice(0, 4)) {
        out.push(
          `  - ${fmt(count / p.requests, 2)} × \`${sql.replace(/\s+/g, ' ').slice(0, 400)}${sql.length > 400 ? '…' : ''}\``,
        );
      }
    }
    out.push('');
    if (ps.plan || pb.plan) {
      out.push(
        'The main statement of each server (the first above), run afterwards on the idle database with the parameters it had ' +
          "for the case's sample request (the same request for both servers): execution time (median of 9 " +
          '`EXPLAIN (ANALYZE, TIMING OFF)`; single runs vary by ±10 %) and plan (`EXPLAIN (ANALYZE, BUFFERS)`).',
        '',
      );
      out.push('| | svcgen | baseline |', '|---|--:|--:|');
      const ms = (p: CaseProfile, key: 'executionMs' | 'planningMs') => (p.plan ? fmt(p.plan[key], 3) : 'n/a');
      out.push(`| execution (ms) | ${ms(ps, 'executionMs')} | ${ms(pb, 'executionMs')} |`);
      out.push(`| planning (ms) | ${ms(ps, 'planningMs')} | ${ms(pb, 'planningMs')} |`, '');
      for (const [server, p] of [
        ['svcgen', ps],
        ['baseline', pb],
      ] as const) {
        if (!p.plan) continue;
        out.push(
          `<details><summary>${server}: statement and plan</summary>`,
          '',
          '```sql',
          p.plan.sql.trim(),
          '```',
          '',
          '```',
          p.plan.plan,
          '```',
          '',
          '</details>',
          '',
        );
      }
    }
  }
  return out.join('\n');
}

/** The summary against the bare baseline: per case, the geometric mean, and the aim. */
function bareSummary(results: CaseResult[]): string[] {
  const rows = results.filter((r) => r.measured.bare);
  if (rows.length === 0) return [];
  const out: string[] = ['### Against the bare baseline', ''];
  out.push(
    `Aim: over the five core cases (get, list, filtered+sorted list, embed, create) svcgen serves a geometric mean of at least ` +
      `${fmt(100 * AIM_BARE_GEOMEAN)} % of the bare server's requests/s, none below ${fmt(100 * AIM_BARE_MIN)} %, each with a p99 latency of ` +
      `at most ${fmt(AIM_BARE_P99_FACTOR, 1)}× the bare server's.`,
    '',
  );
  out.push(
    '| case | svcgen req/s | bare req/s | svcgen / bare | svcgen p99 (ms) | bare p99 (ms) | p99 svcgen / bare | aim |',
    '|---|--:|--:|--:|--:|--:|--:|:-:|',
  );
  let logSum = 0;
  for (const r of rows) {
    const s = r.measured.svcgen;
    const x = r.measured.bare!;
    logSum += Math.log(s.rps / x.rps);
    const misses = [
      s.rps < AIM_BARE_MIN * x.rps ? 'req/s' : '',
      s.p99 > AIM_BARE_P99_FACTOR * x.p99 ? 'p99' : '',
    ].filter(Boolean);
    out.push(
      `| ${r.benchCase.title} | ${fmt(s.rps)} | ${fmt(x.rps)} | **${pct(s.rps, x.rps)}** | ${fmt(s.p99)} | ${fmt(x.p99)} | ${pct(s.p99, x.p99)} | ` +
        `${misses.length ? `missed (${misses.join(', ')})` : 'met'} |`,
    );
  }
  const geomean = Math.exp(logSum / rows.length);
  out.push(
    `| **geometric mean** | | | **${fmt(100 * geomean)} %** | | | | ${geomean >= AIM_BARE_GEOMEAN ? 'met' : 'missed'} |`,
    '',
  );
  return out;
}

/** BENCH_BEFORE: this checkout's svcgen against the earlier commit's, per case. */
function beforeAndAfter(env: Environment, results: CaseResult[]): string[] {
  if (!env.before) return [];
  const { ref, sha, after } = env.before;
  const out = [`## Before and after (${ref} → ${after.split(' ')[0]})`, ''];
  out.push(
    `**after** = this checkout (${after}), the svcgen server above; **before** = svcgen as of \`${ref}\` (commit ${sha}), checked ` +
      "out into a temporary git worktree, compiled with this checkout's TypeScript and serving that commit's examples/shop with the " +
      'same config changes. Both on the same database in the same run, each figure the median of the rounds measured in rotating ' +
      'order with the other servers; both must answer the sample requests alike, or the case is not measured for before.',
    '',
    `Command: \`${commandLine('bench/run.ts')}\``,
    '',
  );
  out.push(
    '| case | after req/s | before req/s | after / before | after p50 (ms) | before p50 (ms) | after p99 (ms) | before p99 (ms) |',
  );
  out.push('|---|--:|--:|--:|--:|--:|--:|--:|');
  for (const r of results) {
    const a = r.measured.svcgen;
    const x = r.measured.before;
    const cells = x
      ? [fmt(x.rps), `**${pct(a.rps, x.rps)}**`, fmt(a.p50), fmt(x.p50), fmt(a.p99), fmt(x.p99)]
      : ['not measured', 'answers differ', fmt(a.p50), '', fmt(a.p99), ''];
    out.push(`| ${r.benchCase.title} | ${fmt(a.rps)} | ${cells.join(' | ')} |`);
  }
  out.push('');
  for (const r of results.filter((r) => r.beforeDiffers)) {
    out.push(
      `Not measured for before: ${r.benchCase.title}, whose answers differ:`,
      '',
      '```',
      r.beforeDiffers!,
      '```',
      '',
    );
  }
  return out;
}

// ---- main -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const selected = process.env.BENCH_CASES
    ? CASES.filter((c) => process.env.BENCH_CASES!.split(',').includes(c.id))
    : CASES;
  if (selected.length === 0)
    throw new Error(`BENCH_CASES matches no case; cases: ${CASES.map((c) => c.id).join(', ')}`);

  const cleanups = cleanupOnExit(log);

  try {
    if (BEFORE) log(`before: checking out ${BEFORE} into a temporary git worktree and compiling it`);
    const before = BEFORE ? { ref: BEFORE, after: gitRevision(), ...checkoutSvcgen(BEFORE, cleanups.add) } : undefined;
    const dbServer: DatabaseServer = await findDatabaseServer(log);
    cleanups.add(() => dbServer.stop());
    log(`PostgreSQL: ${dbServer.origin}`);
    const database: BenchDatabase = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    log(`database ${database.name}: migrating and seeding ${fmt(SEED.orders)} orders`);
    const started = Date.now();
    const fixture = await prepareDatabase(database.url, SEED);
    log(`seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const admin = new pg.Client({ connectionString: dbServer.url });
    admin.on('error', () => {});
    await admin.connect();
    cleanups.add(() => admin.end());
    const backends = new BackendCpu(admin, database.name);

    const env = { BENCH_DATABASE_URL: database.url };
    const servers = {} as Record<ServerName, ServerChild>;
    for (const name of new Set(selected.flatMap(serversOf))) {
      const child =
        name === 'before'
          ? await startServerChild(name, 'bench/svcgen-server.ts', { ...env, ...before!.env })
          : await startServerChild(name, `bench/${name}-server.ts`, env);
      cleanups.add(() => child.stop());
      servers[name] = child;
      log(`${name} server: ${child.url} (pid ${child.pid})`);
    }
    const beforeDiffers = new Map<BenchCase, string>();
    for (const c of selected) {
      await checkSameAnswers(
        c,
        servers.svcgen,
        serversOf(c)
          .filter((name) => name !== 'svcgen' && name !== 'before')
          .map((name) => servers[name]),
        fixture,
      );
      if (!before) continue;
      await checkSameAnswers(c, servers.svcgen, [servers.before], fixture).catch((error: unknown) => {
        beforeDiffers.set(c, (error as Error).message);
        log(`NOT MEASURED for before: ${(error as Error).message}`);
      });
    }
    log(
      beforeDiffers.size
        ? `the servers answer alike, except before on ${beforeDiffers.size} case(s), not measured there`
        : 'both servers answer alike',
    );

    const results: CaseResult[] = [];
    for (const [i, benchCase] of selected.entries()) {
      // The server measured first rotates from case to case and from round to round; each server's
      // figure is its median round by requests/s (this machine's speed drifts by 10 % and more within minutes).
      const names = serversOf(benchCase).filter((name) => name !== 'before' || !beforeDiffers.has(benchCase));
      const order = names.map((_, k) => names[(k + i) % names.length]!);
      const rounds = new Map<ServerName, Measurement[]>(names.map((n) => [n, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const name of order.map((_, k) => order[(k + round) % order.length]!)) {
          log(
            `${benchCase.title} → ${name}, round ${round + 1} of ${ROUNDS}: ${WARMUP_S} s warm-up, ${DURATION_S} s measured`,
          );
          const m = await measure(servers[name], benchCase, fixture, backends, database.url);
          rounds.get(name)!.push(m);
          log(
            `  ${fmt(m.rps)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms; CPU µs/request: server ${fmt(m.cpuPerRequestUs)}, ` +
              `PostgreSQL ${m.pgCpuPerRequestUs === undefined ? 'n/a' : fmt(m.pgCpuPerRequestUs)}, load generator ${fmt(m.loadCpuPerRequestUs)}; ` +
              `machine busy ${m.machineBusy === undefined ? 'n/a' : `${fmt(100 * m.machineBusy)} %`} (interrupts ` +
              `${m.machineIrq === undefined ? 'n/a' : `${fmt(100 * m.machineIrq)} %`}, other processes ${m.otherLoad === undefined ? 'n/a' : `${fmt(100 * m.otherLoad)} %`})`,
          );
        }
      }
      const measured = {} as CaseResult['measured'];
      for (const [name, ms] of rounds) measured[name] = { ...median(ms), roundsRps: ms.map((m) => m.rps) };
      log(
        `  svcgen / baseline: ${pct(measured.svcgen.rps, measured.baseline.rps)}${measured.bare ? `, svcgen / bare: ${pct(measured.svcgen.rps, measured.bare.rps)}` : ''}` +
          `${measured.before ? `, after / before: ${pct(measured.svcgen.rps, measured.before.rps)}` : ''}`,
      );
      results.push({ benchCase, order, measured, profiles: {}, beforeDiffers: beforeDiffers.get(benchCase) });
    }

    if (PROFILE_S > 0) {
      fs.mkdirSync(PROFILE_DIR, { recursive: true });
      for (const r of results) {
        for (const name of SERVERS) {
          log(`profiling ${name} on ${r.benchCase.title} (${PROFILE_S} s)`);
          const p = await profileCase(servers[name], r.benchCase, fixture, database.url);
          const main = p.statements[0];
          if (main) {
            try {
              p.plan = await explain(database.url, main[0], main[2]);
            } catch (error) {
              log(`  EXPLAIN of ${name}'s statement failed: ${(error as Error).message}`);
            }
          }
          r.profiles[name] = p;
        }
      }
    }

    const environment: Environment = {
      date: reportDate(),
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      postgres: await serverVersion(database.url),
      databaseServer: dbServer.origin,
      before: before && { ref: before.ref, sha: before.sha, after: before.after },
    };
    const kept = OTHER_SECTIONS.map((heading) => readSection(RESULTS_FILE, heading)).join('');
    fs.writeFileSync(RESULTS_FILE, `${report(environment, results)}\n${kept}`);
    log(`wrote ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.log(
      results
        .map((r) => {
          const x = r.measured.before;
          const versus = !before
            ? ''
            : x
              ? `; before ${fmt(x.rps)} req/s → after / before ${pct(r.measured.svcgen.rps, x.rps)}`
              : '; before: not measured, answers differ';
          return `${r.benchCase.title}: svcgen ${fmt(r.measured.svcgen.rps)} req/s, baseline ${fmt(r.measured.baseline.rps)} req/s → ${pct(r.measured.svcgen.rps, r.measured.baseline.rps)}${versus}`;
        })
        .join('\n'),
    );
  } finally {
    await cleanups.finish();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
