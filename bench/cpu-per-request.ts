/**
 * `npm run bench:cpu`: the server's CPU time per request at a fixed, paced request rate, svcgen
 * against the bare server in the same run — a figure that a machine loaded by other work disturbs
 * far less than requests/s at saturation. Writes the section "## CPU per request" of bench/RESULTS.md.
 *
 *   1. a fresh database seeded as for `npm run bench` (./database.ts);
 *   2. servers: svcgen from compiled dist/ (./svcgen-server.ts, request log at info as `svcgen
 *      serve` writes it by default: JSON lines on stdout — run this with stdout going to a file,
 *      `npm run bench:cpu > /tmp/serve.log`), one per entry of BENCH_SVCGEN (comma-separated,
 *      default `.`): `.` is this checkout (compiled into its dist/), a path starting with `/` a
 *      checkout compiled there already, anything else a git ref, checked out into a temporary
 *      worktree and compiled (e.g. BENCH_SVCGEN=HEAD~1,. for before and after); `<label>=` before
 *      an entry names it in the report (BENCH_SVCGEN=before=HEAD~1,after=.); and the bare
 *      node:http + pg server (./bare-server.ts);
 *   3. per case, BENCH_ROUNDS rounds (default 3) with the servers in rotating order: a 2 s warm-up,
 *      then BENCH_DURATION s (default 10) at BENCH_RATE requests/s (default 400, autocannon's
 *      overallRate over BENCH_CONNECTIONS connections, default 100, so that a slow answer on a busy
 *      machine does not hold the rate down); the server process's user + system CPU from /proc before
 *      and after, less what it spends idle in as long (measured for 3 s just before), divided by the
 *      requests answered; each figure is the median round;
 *   4. BENCH_PROFILE=1: afterwards, per case and svcgen server (BENCH_PROFILE=all: and the bare one), 5 s at the same rate under V8's CPU
 *      profiler and 5 s under its sampling heap profiler (objects the GC collected included, so it
 *      shows what each request allocates), then 5 s more keeping only the objects that outlived a
 *      young-generation collection (what gets promoted: a request's objects should die young, and
 *      each one promoted is old-generation GC work), summarized; the files go to bench/profiles/cpu-*.
 *
 * Environment: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL, BENCH_CASES (default read-one,create),
 * BENCH_RATE, BENCH_CONNECTIONS, BENCH_DURATION, BENCH_ROUNDS, BENCH_SVCGEN, BENCH_PROFILE, BENCH_RESULTS,
 * BENCH_PROFILE_INTERVAL (the CPU profiler's sampling interval in µs, default 500).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { CASES, fillRequest, headersFor, type BenchCase, type Fixture } from './cases.ts';
import { checkoutSvcgen, REPO, startServerChild, type ServerChild } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { treeCpuMicros, treeCpuSpent } from './cli-server.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, restoreSeed, serverVersion } from './database.ts';
import { IDLE, summarizeProfile } from './profile.ts';
import { gitRevision, reportDate, writeSection } from './results-file.ts';

const RATE = Number(process.env.BENCH_RATE ?? 400);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = 2;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 100);
const PROFILE_S = 5;
const IDLE_S = 3;
const CASE_IDS = (process.env.BENCH_CASES ?? 'read-one,create').split(',');
const SVCGEN = (process.env.BENCH_SVCGEN ?? '.').split(',');
const PROFILE = process.env.BENCH_PROFILE === '1' || process.env.BENCH_PROFILE === 'all';
/** BENCH_PROFILE=all profiles the bare server too, for a side-by-side reading of the same categories. */
const PROFILE_BARE = process.env.BENCH_PROFILE === 'all';
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const PROFILE_DIR = path.join(REPO, 'bench', 'profiles');
const SECTION = '## CPU per request';

const log = (message: string) => console.error(`[bench:cpu] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

interface Round {
  cpuUs: number;
  /** the server's CPU µs per second while idle, taken off cpuUs */
  idleUsPerS: number;
  rps: number;
  p99: number;
}

async function paced(server: ServerChild, benchCase: BenchCase, fixture: Fixture, seconds: number) {
  const result = await autocannon({
    url: server.url,
    connections: CONNECTIONS,
    overallRate: RATE,
    duration: seconds,
    headers: headersFor(fixture),
    requests: [{ setupRequest: (req, context) => fillRequest(req, benchCase.next(fixture, context, 0)) }],
  });
  // A few 503s happen when other work on the machine holds PostgreSQL's connections; more fails the run.
  const failed = result.non2xx + result.errors;
  if (failed > result.requests.total / 100)
    throw new Error(`${benchCase.title} → ${server.name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  if (failed)
    log(`${benchCase.title} → ${server.name}: ${result.non2xx} non-2xx, ${result.errors} errors (under 1 %, kept)`);
  return result;
}

async function measure(server: ServerChild, benchCase: BenchCase, fixture: Fixture): Promise<Round> {
  await paced(server, benchCase, fixture, WARMUP_S);
  // What the server spends with no requests (timers, the webhook worker's polling, pool upkeep),
  // per second, is taken off: on a busy machine the paced rate is not always reached, and that
  // background work would be spread over fewer requests.
  const idleStart = performance.now();
  const idleBefore = treeCpuMicros(server.pid);
  await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000));
  const idlePerMs = treeCpuSpent(idleBefore, treeCpuMicros(server.pid)) / (performance.now() - idleStart);
  const start = performance.now();
  const before = treeCpuMicros(server.pid);
  const result = await paced(server, benchCase, fixture, DURATION_S);
  const spent = treeCpuSpent(before, treeCpuMicros(server.pid)) - idlePerMs * (performance.now() - start);
  return {
    cpuUs: spent / result.requests.total,
    idleUsPerS: idlePerMs * 1000,
    rps: result.requests.average,
    p99: result.latency.p99,
  };
}

interface HeapNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: HeapNode[];
}

/** Bytes allocated by function (self), largest first. */
function heapTop(file: string, count: number): { name: string; location: string; bytes: number }[] {
  const { head } = JSON.parse(fs.readFileSync(file, 'utf8')) as { head: HeapNode };
  const by = new Map<string, { name: string; location: string; bytes: number }>();
  const walk = (node: HeapNode) => {
    const f = node.callFrame;
    const location = f.url
      ? `${f.url
          .replace(/^file:\/\//, '')
          .replace(/^.*\/node_modules\//, '')
          .replace(`${REPO}/`, '')}:${f.lineNumber + 1}`
      : '(native)';
    const key = `${f.functionName}@${location}`;
    const entry = by.get(key) ?? { name: f.functionName || '(anonymous)', location, bytes: 0 };
    entry.bytes += node.selfSize;
    by.set(key, entry);
    for (const child of node.children) walk(child);
  };
  walk(head);
  return [...by.values()].sort((a, b) => b.bytes - a.bytes).slice(0, count);
}

async function profile(server: ServerChild, benchCase: BenchCase, fixture: Fixture): Promise<string[]> {
  const tag = server.name.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-|-$/g, '');
  fs.mkdirSync(PROFILE_DIR, { recursive: true });
  const cpuFile = path.join(PROFILE_DIR, `cpu-${benchCase.id}-${tag}.cpuprofile`);
  const heapFile = path.join(PROFILE_DIR, `cpu-${benchCase.id}-${tag}.heapprofile`);
  const survivorsFile = path.join(PROFILE_DIR, `cpu-${benchCase.id}-${tag}.survivors.heapprofile`);
  await paced(server, benchCase, fixture, WARMUP_S);
  await server.startProfile();
  const cpuRun = await paced(server, benchCase, fixture, PROFILE_S);
  await server.stopProfile(cpuFile);
  await server.startHeapSampling();
  const heapRun = await paced(server, benchCase, fixture, PROFILE_S);
  await server.stopHeapSampling(heapFile);
  await server.startHeapSampling(true);
  const survivorsRun = await paced(server, benchCase, fixture, PROFILE_S);
  await server.stopHeapSampling(survivorsFile);
  const perRequest = (ms: number, requests: number) => (ms * 1000) / requests;
  const summary = summarizeProfile(cpuFile, 12);
  const cpuRequests = cpuRun.requests.total;
  const heapRequests = heapRun.requests.total;
  const top = heapTop(heapFile, 12);
  const totalBytes = heapTop(heapFile, Number.MAX_SAFE_INTEGER).reduce((s, x) => s + x.bytes, 0);
  const survivorBytes = heapTop(survivorsFile, Number.MAX_SAFE_INTEGER).reduce((s, x) => s + x.bytes, 0);
  const out = [
    `<details><summary>${benchCase.title}, ${server.name}: main thread ${fmt(perRequest(summary.busyMs, cpuRequests))} µs busy per request (profiled), ` +
      `${fmt(totalBytes / heapRequests / 1024, 1)} KiB allocated per request (sampled), ` +
      `${fmt(survivorBytes / survivorsRun.requests.total)} bytes of it outlived a young-generation GC</summary>`,
    '',
    '| main thread by category | µs/request |',
    '|---|--:|',
    ...summary.categories
      .filter((c) => c.name !== IDLE)
      .slice(0, 10)
      .map((c) => `| ${c.name} | ${fmt(perRequest(c.ms, cpuRequests), 1)} |`),
    '',
    '| allocated by (self) | where | bytes/request |',
    '|---|---|--:|',
    ...top.map((t) => `| \`${t.name}\` | ${t.location} | ${fmt(t.bytes / heapRequests)} |`),
    '',
    '</details>',
    '',
  ];
  return out;
}

async function main(): Promise<void> {
  const cases = CASE_IDS.map((id) => {
    const c = CASES.find((x) => x.id === id);
    if (!c?.bare) throw new Error(`BENCH_CASES: "${id}" is not a case the bare server answers`);
    return c;
  });
  const cleanups = cleanupOnExit(log);
  const revision = gitRevision();
  const loadAtStart = os.loadavg()[0]!;
  try {
    const builds = SVCGEN.map((entry) => {
      const label = entry.includes('=') ? entry.slice(0, entry.indexOf('=')) : undefined;
      const spec = label === undefined ? entry : entry.slice(label.length + 1);
      const build = svcgenBuild(spec);
      return label === undefined ? build : { ...build, name: `svcgen ${label}` };
    });
    function svcgenBuild(spec: string): { name: string; env: Record<string, string> } {
      if (spec === '.') return { name: 'svcgen', env: {} };
      if (spec.startsWith('/')) {
        const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: spec, encoding: 'utf8' }).trim();
        return {
          name: `svcgen ${path.basename(spec)} (${sha}${execFileSync('git', ['status', '--porcelain', '--', 'runtime'], { cwd: spec, encoding: 'utf8' }).trim() ? ' + changes' : ''})`,
          env: {
            BENCH_SVCGEN_DIST: path.join(spec, 'dist'),
            BENCH_SVCGEN_PROJECT: path.join(spec, 'examples/shop'),
            TSX_TSCONFIG_PATH: path.join(spec, 'tsconfig.json'),
          },
        };
      }
      const checkout = checkoutSvcgen(spec, cleanups.add);
      return { name: `svcgen ${checkout.sha}`, env: checkout.env as Record<string, string> };
    }
    const dbServer = await findDatabaseServer(log);
    cleanups.add(() => dbServer.stop());
    const database = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    log(`database ${database.name}: migrating and seeding ${fmt(SEED.orders)} orders`);
    const fixture = await prepareDatabase(database.url, SEED);
    const servers: ServerChild[] = [];
    const start = async (name: string, script: string, env: Record<string, string>) => {
      const child = await startServerChild(name, script, { BENCH_DATABASE_URL: database.url, ...env });
      cleanups.add(() => child.stop());
      servers.push(child);
    };
    for (const build of builds)
      await start(build.name, 'bench/svcgen-server.ts', { ...build.env, BENCH_LOG_LEVEL: 'info' });
    await start('bare', 'bench/bare-server.ts', {});

    const results = new Map<string, Map<string, Round[]>>();
    for (const [i, c] of cases.entries()) {
      const byServer = new Map<string, Round[]>(servers.map((s) => [s.name, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (let k = 0; k < servers.length; k++) {
          const server = servers[(k + i + round) % servers.length]!;
          try {
            const r = await measure(server, c, fixture);
            byServer.get(server.name)!.push(r);
            log(
              `${c.title} → ${server.name}, round ${round + 1}: ${fmt(r.cpuUs, 1)} µs CPU/request (${fmt(r.rps)} req/s)`,
            );
          } finally {
            if (c.writes) await restoreSeed(database.url, fixture);
          }
        }
      }
      results.set(c.id, byServer);
    }
    const details: string[] = [];
    if (PROFILE) {
      for (const c of cases) {
        for (const server of servers.filter((s) => PROFILE_BARE || s.name !== 'bare')) {
          log(`${c.title} → ${server.name}: profiling`);
          try {
            details.push(...(await profile(server, c, fixture)));
          } finally {
            if (c.writes) await restoreSeed(database.url, fixture);
          }
        }
      }
    }

    const names = servers.map((s) => s.name);
    const out: string[] = [SECTION, ''];
    out.push(
      `Written by \`npm run bench:cpu\` (bench/cpu-per-request.ts) on ${reportDate()}, commit ${revision}; Node.js ${process.version}, ` +
        `PostgreSQL ${await serverVersion(database.url)}; ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown'}).`,
      '',
      `Server process CPU time (user + system, from /proc) per request at a paced ${fmt(RATE)} requests/s (autocannon overallRate, ${CONNECTIONS} connections), ` +
        `${DURATION_S} s after a ${WARMUP_S} s warm-up, less the CPU the server spends idle in as long (measured for ${IDLE_S} s just before), ${ROUNDS} rounds with the servers in rotating order, median round. ` +
        'svcgen serves from compiled dist/ (./svcgen-server.ts) with the request log at info, as `svcgen serve` by default, its stdout going to a file; ' +
        'the bare server is node:http + pg with the record JSON built by PostgreSQL and no checks. ' +
        'At a rate well below saturation the figure depends less on what else the machine runs than requests/s do, but a machine whose ' +
        'CPUs are oversubscribed still inflates it (cache misses, more wake-ups per request): compare the columns of one run, not runs. ' +
        `Load average (1 min) ${fmt(loadAtStart, 1)} at the start and ${fmt(os.loadavg()[0]!, 1)} at the end, on ${os.availableParallelism()} CPUs. ` +
        'The sampled bytes allocated per request (with BENCH_PROFILE=1, below) hardly depend on the machine at all.',
      '',
      `| case | ${names.map((n) => `${n} µs/request`).join(' | ')} | ${names
        .filter((n) => n !== 'bare')
        .map((n) => `${n} / bare`)
        .join(' | ')} | rounds (µs, in order measured) |`,
      `|---|${names.map(() => '--:').join('|')}|${names
        .filter((n) => n !== 'bare')
        .map(() => '--:')
        .join('|')}|---|`,
    );
    for (const c of cases) {
      const r = results.get(c.id)!;
      const med = new Map(names.map((n) => [n, median(r.get(n)!.map((x) => x.cpuUs))]));
      out.push(
        `| ${c.title} | ${names.map((n) => fmt(med.get(n)!)).join(' | ')} | ${names
          .filter((n) => n !== 'bare')
          .map((n) => `${fmt(med.get(n)! / med.get('bare')!, 2)}×`)
          .join(' | ')} | ${names
          .map(
            (n) =>
              `${n}: ${r
                .get(n)!
                .map((x) => fmt(x.cpuUs))
                .join(' / ')}`,
          )
          .join('; ')} |`,
      );
    }
    out.push('');
    if (details.length) {
      out.push(
        `Profiles (BENCH_PROFILE=1), ${PROFILE_S} s each at the same rate: the CPU profile's main-thread self time by category (wall time, see "Where the time goes") ` +
          'and the sampling heap profile (every 4 KiB on average, objects the GC collected included) by allocating function; ' +
          'in the title, the bytes per request a third sampling found still alive after a young-generation collection (promoted to the old generation).',
        '',
        ...details,
      );
    }
    const section = out.join('\n');
    writeSection(RESULTS_FILE, SECTION, section);
    log(`wrote the section "${SECTION}" of ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.error(section);
  } finally {
    await cleanups.finish();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench:cpu] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
