/**
 * `npm run bench:soak`: svcgen under a steady mixed load for 10 minutes (SOAK_MINUTES), recording
 * each minute's requests/s, p50/p99 latency and the server's resident memory, so a leak (RSS that
 * keeps climbing) or a slow decay (p99 that keeps rising) shows as a trend. Writes the section
 * "## Soak" of bench/RESULTS.md.
 *
 *   1. a fresh database seeded as for `npm run bench` (./database.ts), svcgen in a child process
 *      (./svcgen-server.ts, the example's config with the data rate limit out of reach);
 *   2. SOAK_MINUTES runs of one minute each, 50 connections, every request drawn from the mix below;
 *      the server's RSS is read from /proc every second; any non-2xx fails the run;
 *   3. between minutes the orders created are deleted again (and the table vacuumed), so each
 *      minute reads the same 100,000 orders and a growing table is not mistaken for a slower server.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { CASES, fillRequest, headersFor, type BenchCase, type Fixture } from './cases.ts';
import { REPO, startServerChild } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, restoreSeed, serverVersion } from './database.ts';
import { gitRevision, reportDate, writeSection } from './results-file.ts';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const MINUTE_S = Number(process.env.SOAK_MINUTE_SECONDS ?? 60);
const CONNECTIONS = 50;
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## Soak';
/** RSS of the last minute at most this much above the second minute's (the first one warms up). */
const AIM_RSS_GROWTH = 0.1;

/** The mix, by share of requests: mostly cheap reads, some writes, a few scans. */
const MIX: [id: string, weight: number][] = [
  ['read-one', 50],
  ['list-20', 20],
  ['create', 15],
  ['list-embed', 14],
  ['list-filtered', 1],
];

const log = (message: string) => console.error(`[bench:soak] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

function pick(): BenchCase {
  const total = MIX.reduce((n, [, w]) => n + w, 0);
  let r = Math.random() * total;
  for (const [id, weight] of MIX) {
    r -= weight;
    if (r < 0) return CASES.find((c) => c.id === id)!;
  }
  return CASES.find((c) => c.id === MIX[0]![0])!;
}

function rssBytes(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

interface Minute {
  minute: number;
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  non2xx: number;
  errors: number;
  rssEndMb: number;
  rssMaxMb: number;
}

async function oneMinute(url: string, pid: number, fixture: Fixture, minute: number): Promise<Minute> {
  let rssMax = 0;
  const sampler = setInterval(() => (rssMax = Math.max(rssMax, rssBytes(pid))), 1000);
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: MINUTE_S,
    headers: headersFor(fixture),
    requests: [
      {
        setupRequest: (req) => fillRequest(req, pick().next(fixture, {}, 0)),
      },
    ],
  });
  clearInterval(sampler);
  const rssEnd = rssBytes(pid);
  const mb = (b: number) => b / (1024 * 1024);
  return {
    minute,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    rssEndMb: mb(rssEnd),
    rssMaxMb: mb(Math.max(rssMax, rssEnd)),
  };
}

function report(minutes: Minute[], env: { date: string; postgres: string; revision: string }): string {
  const out: string[] = [SECTION, ''];
  out.push(
    `Written by \`npm run bench:soak\` (bench/soak.ts) on ${env.date}, commit ${env.revision}; Node.js ${process.version}, PostgreSQL ${env.postgres}, ` +
      `${os.availableParallelism()} CPUs shared by the load generator, svcgen and PostgreSQL.`,
    '',
  );
  out.push(
    `${minutes.length} minutes of a steady mixed load on one svcgen process (runtime \`startServer\`, the example's config with the data ` +
      `rate limit out of reach), ${CONNECTIONS} connections, each request drawn at random: ` +
      `${MIX.map(([id, w]) => `${w} % ${CASES.find((c) => c.id === id)!.title}`).join(', ')}. ` +
      'Between minutes the created orders are deleted again (and the table vacuumed), so every minute reads the same 100,000 orders. ' +
      "RSS: the server process's resident memory (/proc VmRSS) at the end of each minute, and the highest reading of the minute (sampled every second).",
    '',
  );
  out.push(
    '| minute | req/s | p50 (ms) | p99 (ms) | responses | non-2xx | RSS at end (MB) | RSS max (MB) |',
    '|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  for (const m of minutes) {
    out.push(
      `| ${m.minute} | ${fmt(m.rps)} | ${fmt(m.p50)} | ${fmt(m.p99)} | ${fmt(m.requests)} | ${m.non2xx + m.errors} | ${fmt(m.rssEndMb)} | ${fmt(m.rssMaxMb)} |`,
    );
  }
  out.push('');
  if (minutes.length >= 3) {
    const second = minutes[1]!;
    const last = minutes[minutes.length - 1]!;
    const growth = last.rssEndMb / second.rssEndMb - 1;
    const p99s = minutes.slice(1).map((m) => m.p99);
    out.push(
      `RSS from minute 2 to minute ${last.minute}: ${fmt(second.rssEndMb)} → ${fmt(last.rssEndMb)} MB (${growth >= 0 ? '+' : '−'}${fmt(Math.abs(100 * growth), 1)} %); ` +
        `aim: flat (within +${fmt(100 * AIM_RSS_GROWTH)} %) — ${growth <= AIM_RSS_GROWTH ? 'met' : 'missed'}. ` +
        `p99 over minutes 2–${last.minute}: ${fmt(Math.min(...p99s))}–${fmt(Math.max(...p99s))} ms; ` +
        `req/s ${fmt(Math.min(...minutes.slice(1).map((m) => m.rps)))}–${fmt(Math.max(...minutes.slice(1).map((m) => m.rps)))}.`,
      '',
    );
  }
  return out.join('\n');
}

async function main(): Promise<void> {
  const cleanups = cleanupOnExit(log);
  // read now: the child loads the runtime as it is at its start
  const revision = gitRevision();
  try {
    const dbServer = await findDatabaseServer(log);
    cleanups.add(() => dbServer.stop());
    const database = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    log(`database ${database.name}: migrating and seeding ${fmt(SEED.orders)} orders`);
    const fixture = await prepareDatabase(database.url, SEED);
    const server = await startServerChild('svcgen', 'bench/svcgen-server.ts', { BENCH_DATABASE_URL: database.url });
    cleanups.add(() => server.stop());
    log(`svcgen: ${server.url} (pid ${server.pid}); ${MINUTES} × ${MINUTE_S} s`);
    const minutes: Minute[] = [];
    for (let minute = 1; minute <= MINUTES; minute++) {
      const m = await oneMinute(server.url, server.pid, fixture, minute);
      if (m.non2xx || m.errors)
        throw new Error(`minute ${minute}: ${m.non2xx} non-2xx responses, ${m.errors} connection errors`);
      minutes.push(m);
      log(
        `minute ${minute}: ${fmt(m.rps)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, RSS ${fmt(m.rssEndMb)} MB (max ${fmt(m.rssMaxMb)})`,
      );
      await restoreSeed(database.url, fixture);
    }
    const section = report(minutes, {
      date: reportDate(),
      postgres: await serverVersion(database.url),
      revision,
    });
    writeSection(RESULTS_FILE, SECTION, section);
    log(`wrote the section "${SECTION}" of ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.log(section);
  } finally {
    await cleanups.finish();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench:soak] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
