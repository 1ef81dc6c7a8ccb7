/**
 * `npm run bench`: svcgen against a hand-written node:http + pg baseline on the same requests.
 *
 *   1. a fresh database (./database.ts): the shop's migrations, 100,000 orders of 1,000 customers;
 *   2. both servers in child processes (./svcgen-server.ts, ./baseline-server.ts), pg pools of 10;
 *   3. the same responses from both, checked once per case before anything is measured;
 *   4. per case (./cases.ts) and server: 3 s warm-up, 10 s measured with autocannon, 50 connections;
 *      the server measured first alternates from case to case; any unexpected status fails the run;
 *   5. a CPU profile of both servers per case (V8 profiler in the child, 5 s under the same load)
 *      plus the SQL statements sent during it, summarized under "Where the time goes";
 *   6. bench/RESULTS.md; then the children are stopped and the database dropped.
 *
 * Environment: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL (a PostgreSQL server to create the
 * database on); BENCH_DURATION / BENCH_WARMUP / BENCH_PROFILE (seconds), BENCH_CASES (ids,
 * comma separated) for quicker runs while developing.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import autocannon from 'autocannon';
import { CASES, type BenchCase, type BenchRequest, type Fixture } from './cases.ts';
import { REPO, startServerChild, type ServerChild } from './children.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, serverVersion, type BenchDatabase, type DatabaseServer } from './database.ts';
import { IDLE, summarizeProfile, type ProfileSummary } from './profile.ts';

const CONNECTIONS = 50;
const POOL_SIZE = 10; // svcgen's startServer uses max 10; the baseline is configured to match
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const PROFILE_S = Number(process.env.BENCH_PROFILE ?? 5);
const SEED = { customers: 1_000, orders: 100_000 };
const BENCH_DIR = path.join(REPO, 'bench');
const PROFILE_DIR = path.join(BENCH_DIR, 'profiles');
const RESULTS_FILE = path.join(BENCH_DIR, 'RESULTS.md');

type ServerName = 'svcgen' | 'baseline';
const SERVERS: readonly ServerName[] = ['svcgen', 'baseline'];

interface Measurement {
  rps: number;
  requests: number;
  p50: number;
  p99: number;
  non2xx: number;
  statusCounts: Record<string, number>;
  /** server process CPU (all threads), µs per request */
  cpuPerRequestUs: number;
  /** SQL statements sent by the server per request */
  queriesPerRequest: number;
}

interface CaseProfile {
  summary: ProfileSummary;
  requests: number;
  statements: [string, number][];
  file: string;
}

interface CaseResult {
  benchCase: BenchCase;
  order: ServerName[];
  measured: Record<ServerName, Measurement>;
  profiles: Partial<Record<ServerName, CaseProfile>>;
}

const log = (message: string) => console.error(`[bench] ${message}`);

// ---- load -------------------------------------------------------------------------------------

function headersFor(fixture: Fixture): Record<string, string> {
  return { 'x-project-id': fixture.projectId, authorization: `Bearer ${fixture.apiKey}` };
}

async function load(server: ServerChild, benchCase: BenchCase, fixture: Fixture, seconds: number): Promise<autocannon.Result> {
  const steps = benchCase.sequence ?? 1;
  const requests: autocannon.Request[] = [];
  for (let step = 0; step < steps; step++) {
    requests.push({
      setupRequest(req, context) {
        const r = benchCase.next(fixture, context, step);
        req.method = r.method;
        req.path = r.path;
        if (r.body !== undefined) {
          req.headers = { ...req.headers, 'content-type': 'application/json' };
          req.body = JSON.stringify(r.body);
        }
        return req;
      },
      onResponse: benchCase.onResponse ? (status, body, context) => benchCase.onResponse!(status, body, context) : undefined,
    });
  }
  return autocannon({ url: server.url, connections: CONNECTIONS, duration: seconds, headers: headersFor(fixture), requests });
}

function statusCounts(result: autocannon.Result): Record<string, number> {
  return Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, Number(s.count)]));
}

/** Fails the run, with sample bodies, when a response had another status than the case's. */
async function requireExpectedStatuses(server: ServerChild, benchCase: BenchCase, fixture: Fixture, result: autocannon.Result, phase: string) {
  const counts = statusCounts(result);
  const unexpected = Object.entries(counts).filter(([code]) => Number(code) !== benchCase.status);
  if (unexpected.length === 0 && result.errors === 0 && result.non2xx === 0) return;
  const samples: string[] = [];
  for (let i = 0; i < 20 && samples.length < 3; i++) {
    const res = await send(server, benchCase.next(fixture, {}, 0), fixture);
    if (res.status !== benchCase.status) samples.push(`${res.status} ${res.text.slice(0, 500)}`);
  }
  throw new Error(
    `${server.name} ${benchCase.title} (${phase}): expected every response to be ${benchCase.status}, got ` +
      `${JSON.stringify(counts)}, non-2xx ${result.non2xx}, connection errors ${result.errors}, timeouts ${result.timeouts}` +
      (samples.length ? `\nsample responses:\n  ${samples.join('\n  ')}` : ''),
  );
}

async function measure(server: ServerChild, benchCase: BenchCase, fixture: Fixture): Promise<Measurement> {
  const warm = await load(server, benchCase, fixture, WARMUP_S);
  await requireExpectedStatuses(server, benchCase, fixture, warm, 'warm-up');
  const before = await server.stats();
  const result = await load(server, benchCase, fixture, DURATION_S);
  const after = await server.stats();
  await requireExpectedStatuses(server, benchCase, fixture, result, 'measurement');
  const requests = result.requests.total;
  return {
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

async function profileCase(server: ServerChild, benchCase: BenchCase, fixture: Fixture): Promise<CaseProfile> {
  const warm = await load(server, benchCase, fixture, Math.min(WARMUP_S, 2));
  await requireExpectedStatuses(server, benchCase, fixture, warm, 'profile warm-up');
  const file = path.join(PROFILE_DIR, `${benchCase.id}-${server.name}.cpuprofile`);
  await server.startProfile();
  const result = await load(server, benchCase, fixture, PROFILE_S);
  const { statements } = await server.stopProfile(file);
  await requireExpectedStatuses(server, benchCase, fixture, result, 'profile');
  return { summary: summarizeProfile(file), requests: result.requests.total, statements, file };
}

// ---- equivalence ------------------------------------------------------------------------------

interface Sent {
  status: number;
  text: string;
  body: unknown;
  headers: Headers;
}

async function send(server: ServerChild, request: BenchRequest, fixture: Fixture): Promise<Sent> {
  const headers: Record<string, string> = headersFor(fixture);
  if (request.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${server.url}${request.path}`, {
    method: request.method,
    headers,
    body: request.body === undefined ? undefined : JSON.stringify(request.body),
  });
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, text, body, headers: res.headers };
}

/** Same keys in the same order and same JSON types, recursively. */
function shape(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shape);
  if (value !== null && typeof value === 'object') return Object.entries(value).map(([k, v]) => [k, shape(v)]);
  return value === null ? 'null' : typeof value;
}

/** A copy of `body` with the values at `paths` replaced by their JSON type. */
function withOpaque(body: unknown, paths: readonly string[]): unknown {
  const copy = structuredClone(body);
  for (const p of paths) {
    const keys = p.split('.');
    let at: any = copy;
    for (const k of keys.slice(0, -1)) at = at?.[k];
    const last = keys[keys.length - 1]!;
    if (at && typeof at === 'object' && last in at) at[last] = `<${at[last] === null ? 'null' : typeof at[last]}>`;
  }
  return copy;
}

function firstDifference(a: unknown, b: unknown, at = '$'): string {
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object') {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) {
      if (!isDeepStrictEqual((a as any)[k], (b as any)[k])) return firstDifference((a as any)[k], (b as any)[k], `${at}.${k}`);
    }
    return `${at} (key order)`;
  }
  return `${at}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`;
}

async function checkSameAnswers(benchCase: BenchCase, servers: Record<ServerName, ServerChild>, fixture: Fixture): Promise<void> {
  const request = benchCase.sample(fixture);
  const [a, b] = [await send(servers.svcgen, request, fixture), await send(servers.baseline, request, fixture)];
  const problems: string[] = [];
  for (const [name, r] of [['svcgen', a], ['baseline', b]] as const) {
    if (r.status !== benchCase.status) problems.push(`${name} answered ${r.status}, expected ${benchCase.status}: ${r.text.slice(0, 300)}`);
  }
  if (a.headers.get('content-type') !== b.headers.get('content-type')) {
    problems.push(`content-type differs: ${a.headers.get('content-type')} vs ${b.headers.get('content-type')}`);
  }
  if ((a.headers.get('location') === null) !== (b.headers.get('location') === null)) problems.push('only one of them sends Location');
  const comparable = (body: unknown) => (benchCase.compare === 'exact' ? withOpaque(body, benchCase.opaque ?? []) : shape(body));
  const [ca, cb] = [comparable(a.body), comparable(b.body)];
  if (!isDeepStrictEqual(ca, cb)) {
    const where = firstDifference(ca, cb);
    problems.push(`bodies differ (${benchCase.compare}) at ${where}:\n  svcgen:   ${a.text.slice(0, 600)}\n  baseline: ${b.text.slice(0, 600)}`);
  }
  if (problems.length) throw new Error(`${benchCase.title}: the servers do not answer alike:\n${problems.join('\n')}`);
}

// ---- report -----------------------------------------------------------------------------------

const fmt = (n: number, digits = 0) => n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => (b === 0 ? 'n/a' : `${fmt((100 * a) / b)} %`);

interface Environment {
  date: string;
  cpus: number;
  cpuModel: string;
  os: string;
  node: string;
  postgres: string;
  databaseServer: string;
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
    `- Data: a fresh database with the shop's migrations, ${fmt(SEED.orders)} orders of ${fmt(SEED.customers)} customers ` +
      '(one `INSERT … SELECT generate_series` each), `VACUUM ANALYZE`d.',
  );
  out.push(
    `- Servers, each in its own child process with a pg pool of ${POOL_SIZE}: **svcgen** = runtime \`startServer\` serving examples/shop; ` +
      '**baseline** = bench/baseline-server.ts, a hand-written node:http + pg server for the same requests (same JSON, key lookup by ' +
      'SHA-256 digest with a cache, URL/header/body validation, one prepared statement per request, ISO timestamps built in JS).',
  );
  out.push(
    `- Load: autocannon 9 (programmatic, in the parent process), ${CONNECTIONS} connections, ${WARMUP_S} s warm-up then ${DURATION_S} s measured ` +
      'per case and server; the server measured first alternates from case to case. Every response must have the expected status, ' +
      'and both servers must give the same answer to a sample request, or the run fails.',
  );
  out.push(
    `- The load generator, both servers and PostgreSQL share the same ${env.cpus} CPUs, so absolute figures are low and the ` +
      'ratio is the number to watch. "Server CPU" is the server process\'s user + system CPU time (all threads) per request; ' +
      '"SQL statements" counts what its pg clients sent.',
  );
  out.push('');

  out.push('## Summary', '');
  out.push('| case | svcgen req/s | baseline req/s | svcgen / baseline | svcgen p99 (ms) | baseline p99 (ms) | p99 svcgen / baseline |');
  out.push('|---|--:|--:|--:|--:|--:|--:|');
  for (const r of results) {
    const s = r.measured.svcgen;
    const b = r.measured.baseline;
    out.push(`| ${r.benchCase.title} | ${fmt(s.rps)} | ${fmt(b.rps)} | **${pct(s.rps, b.rps)}** | ${fmt(s.p99)} | ${fmt(b.p99)} | ${pct(s.p99, b.p99)} |`);
  }
  out.push('');

  for (const r of results) {
    const s = r.measured.svcgen;
    const b = r.measured.baseline;
    out.push(`## ${r.benchCase.title}`, '');
    out.push(`${r.benchCase.description}. Measured first: ${r.order[0]}.`, '');
    out.push('| | svcgen | baseline | svcgen / baseline |', '|---|--:|--:|--:|');
    out.push(`| requests/s | ${fmt(s.rps)} | ${fmt(b.rps)} | ${pct(s.rps, b.rps)} |`);
    out.push(`| latency p50 (ms) | ${fmt(s.p50)} | ${fmt(b.p50)} | ${pct(s.p50, b.p50)} |`);
    out.push(`| latency p99 (ms) | ${fmt(s.p99)} | ${fmt(b.p99)} | ${pct(s.p99, b.p99)} |`);
    out.push(`| responses | ${fmt(s.requests)} | ${fmt(b.requests)} | |`);
    out.push(`| non-2xx | ${s.non2xx} | ${b.non2xx} | |`);
    out.push(`| server CPU per request (µs) | ${fmt(s.cpuPerRequestUs)} | ${fmt(b.cpuPerRequestUs)} | ${pct(s.cpuPerRequestUs, b.cpuPerRequestUs)} |`);
    out.push(`| SQL statements per request | ${fmt(s.queriesPerRequest, 2)} | ${fmt(b.queriesPerRequest, 2)} | |`);
    out.push('');
  }

  out.push('## Where the time goes', '');
  out.push(
    `Each server was profiled afterwards under the same load for ${PROFILE_S} s per case with V8's CPU profiler (the one behind ` +
      '`--cpu-prof`, started in the child through node:inspector), which slows it down somewhat. Self time of the main thread, in µs ' +
      'per request; native builtins are charged to their JavaScript caller\'s category except JSON.parse/stringify; "program" is ' +
      'V8/libuv work outside JavaScript (socket I/O, the C++ HTTP parser). The .cpuprofile files are in bench/profiles/ ' +
      '(open them in Chrome DevTools → Performance, or speedscope).',
    '',
  );
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
    out.push(`| **total (busy)** | **${fmt(perReq(ps, ps.summary.busyMs))}** | **${fmt(perReq(pb, pb.summary.busyMs))}** |`);
    out.push(
      `| main thread busy | ${pct(ps.summary.busyMs, ps.summary.wallMs)} | ${pct(pb.summary.busyMs, pb.summary.wallMs)} |`,
      `| requests/s while profiled | ${fmt(ps.requests / PROFILE_S)} | ${fmt(pb.requests / PROFILE_S)} |`,
      '',
    );
    out.push('Top svcgen functions by self time:', '');
    out.push('| function | where | category | µs/request | % of busy |', '|---|---|---|--:|--:|');
    for (const f of ps.summary.top) {
      out.push(`| \`${f.name}\` | ${f.location} | ${f.category} | ${fmt(perReq(ps, f.ms), 1)} | ${fmt((100 * f.ms) / ps.summary.busyMs, 1)} |`);
    }
    out.push('');
    out.push('SQL statements per request while profiled:', '');
    for (const [server, p] of [['svcgen', ps], ['baseline', pb]] as const) {
      const total = p.statements.reduce((n, [, c]) => n + c, 0);
      out.push(`- ${server}: ${fmt(total / p.requests, 2)} per request`);
      for (const [sql, count] of p.statements.slice(0, 4)) {
        out.push(`  - ${fmt(count / p.requests, 2)} × \`${sql.replace(/\s+/g, ' ').slice(0, 400)}${sql.length > 400 ? '…' : ''}\``);
      }
    }
    out.push('');
  }
  return out.join('\n');
}

// ---- main -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const selected = process.env.BENCH_CASES ? CASES.filter((c) => process.env.BENCH_CASES!.split(',').includes(c.id)) : CASES;
  if (selected.length === 0) throw new Error(`BENCH_CASES matches no case; cases: ${CASES.map((c) => c.id).join(', ')}`);

  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    while (cleanups.length) await cleanups.pop()!().catch((error: unknown) => log(`cleanup: ${(error as Error).message}`));
  };
  let interrupted = false;
  process.once('SIGINT', () => {
    interrupted = true;
    log('interrupted; cleaning up');
    void cleanup().finally(() => process.exit(130));
  });

  try {
    const dbServer: DatabaseServer = await findDatabaseServer(log);
    cleanups.push(() => dbServer.stop());
    log(`PostgreSQL: ${dbServer.origin}`);
    const database: BenchDatabase = await createBenchDatabase(dbServer.url);
    cleanups.push(() => database.drop());
    log(`database ${database.name}: migrating and seeding ${fmt(SEED.orders)} orders`);
    const started = Date.now();
    const fixture = await prepareDatabase(database.url, SEED);
    log(`seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);

    const env = { BENCH_DATABASE_URL: database.url };
    const servers = {} as Record<ServerName, ServerChild>;
    for (const name of SERVERS) {
      const child = await startServerChild(name, `bench/${name}-server.ts`, env);
      cleanups.push(() => child.stop());
      servers[name] = child;
      log(`${name} server: ${child.url} (pid ${child.pid})`);
    }
    for (const c of selected) await checkSameAnswers(c, servers, fixture);
    log('both servers answer alike');

    const results: CaseResult[] = [];
    for (const [i, benchCase] of selected.entries()) {
      const order: ServerName[] = i % 2 === 0 ? ['svcgen', 'baseline'] : ['baseline', 'svcgen'];
      const measured = {} as Record<ServerName, Measurement>;
      for (const name of order) {
        log(`${benchCase.title} → ${name}: ${WARMUP_S} s warm-up, ${DURATION_S} s measured`);
        const m = await measure(servers[name], benchCase, fixture);
        measured[name] = m;
        log(`  ${fmt(m.rps)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, ${fmt(m.cpuPerRequestUs)} µs CPU/request`);
      }
      log(`  svcgen / baseline: ${pct(measured.svcgen.rps, measured.baseline.rps)}`);
      results.push({ benchCase, order, measured, profiles: {} });
    }

    if (PROFILE_S > 0) {
      fs.mkdirSync(PROFILE_DIR, { recursive: true });
      for (const r of results) {
        for (const name of SERVERS) {
          log(`profiling ${name} on ${r.benchCase.title} (${PROFILE_S} s)`);
          r.profiles[name] = await profileCase(servers[name], r.benchCase, fixture);
        }
      }
    }

    const environment: Environment = {
      date: new Date().toISOString().replace('T', ' ').slice(0, 16) + ' UTC',
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      postgres: await serverVersion(database.url),
      databaseServer: dbServer.origin,
    };
    fs.writeFileSync(RESULTS_FILE, `${report(environment, results)}\n`);
    log(`wrote ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.log(
      results
        .map((r) => `${r.benchCase.title}: svcgen ${fmt(r.measured.svcgen.rps)} req/s, baseline ${fmt(r.measured.baseline.rps)} req/s → ${pct(r.measured.svcgen.rps, r.measured.baseline.rps)}`)
        .join('\n'),
    );
  } finally {
    if (!interrupted) await cleanup();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});

