/**
 * `npm run bench:installed`: svcgen as users run it against the bare server, in the same run.
 * Writes the section "## Installed svcgen serve" of bench/RESULTS.md.
 *
 *   1. `npm pack` of this checkout (prepack compiles dist/), installed with `npm install -D` into a
 *      new project outside the repository (BENCH_INSTALLED_PROJECT reuses one from an earlier run);
 *      examples/shop's schema.prisma, svcgen.config.json and migrations copied in, `svcgen generate`;
 *   2. a fresh database seeded as for `npm run bench` (./database.ts);
 *   3. three servers: `svcgen serve --database-url <url>` with default flags (request log at info),
 *      the same with `--log-level warn`, both with stdout going to a file as under systemd or
 *      Docker; and the bare node:http + pg server (./bare-server.ts);
 *   4. per case, a 3 s warm-up of each server, then BENCH_ROUNDS rounds (default 8), each a short
 *      run (BENCH_DURATION, 4 s) of every server in rotating order, with autocannon (50
 *      connections); each figure is over all of a server's runs (requests/s their mean). The
 *      speed of a shared machine drifts by tens of percent within a minute: short runs that
 *      alternate give the three servers the same mix of fast and slow seconds, where one long run
 *      each compared whichever seconds each happened to get. CPU per request of each process
 *      from /proc.
 *
 * The config of the copied project differs from the example's as `npm run bench`'s does: the data
 * rate limit out of reach, the pool's wait bound at 60 s (50 connections of scans on 2 CPUs) and the
 * API key's share of the expensive-read budget out of reach (its 50 connections come from one key).
 * Environment as for ./run.ts: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL, BENCH_DURATION,
 * BENCH_WARMUP, BENCH_ROUNDS, BENCH_CASES, BENCH_RESULTS; BENCH_SERVE_NODE_FLAGS adds node flags to
 * every served process (e.g. `--cpu-prof --cpu-prof-dir=/tmp/profs` for a profile of each).
 *
 * BENCH_BEFORE=<git ref>: also svcgen as of that commit, installed the same way into a second
 * project (`npm pack` of a `git archive` of the commit, whose prepack compiles its dist/; never the
 * BENCH_INSTALLED_PROJECT one), with the same copied example, the same config patch and default
 * flags on the same database; it answers like the others (checkSameAnswers) and takes its turn in
 * every round. The section then gives after (info) / before per case, each against bare, and the
 * run's noise: the standard deviation of the rounds' after / before ratios (each round's pair ran
 * back to back), so a case more than that below 100 % is slower beyond the noise.
 */
import fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CASES, type BenchCase } from './cases.ts';
import { REPO, startServerChild } from './children.ts';
import { installedProject, patchConfig, svcgenBin } from './installed-project.ts';
import { cleanupOnExit } from './cleanups.ts';
import { combine, measureCase, serveCli, type Measurement, type Serving } from './cli-server.ts';
import { checkSameAnswers } from './equivalence.ts';
import { restoreSeed, seededBenchDatabase, serverVersion } from './database.ts';
import { commandLine, gitRevision, reportDate, writeSection } from './results-file.ts';

const CONNECTIONS = 50;
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const CASE_IDS = (process.env.BENCH_CASES ?? 'read-one,list-20,list-filtered,list-embed,create').split(',');
const WARMUP = { connections: CONNECTIONS, warmupS: 0, durationS: WARMUP_S };
const RUN = { connections: CONNECTIONS, warmupS: 0, durationS: DURATION_S };
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## Installed svcgen serve';
/** The aims of issue "speed as users run it", against the bare server. */
const AIM = { geomean: 0.9, min: 0.8, p99Factor: 1.5, logCost: 0.03 };

const BEFORE = process.env.BENCH_BEFORE || undefined;
type ServerName = 'info' | 'warn' | 'bare' | 'before';
const SERVERS: ServerName[] = BEFORE ? ['info', 'warn', 'bare', 'before'] : ['info', 'warn', 'bare'];
const LABEL: Record<ServerName, string> = {
  info: '`svcgen serve` (default flags: log level info)',
  warn: '`svcgen serve --log-level warn`',
  bare: 'bare node:http + pg',
  before: `\`svcgen serve\` of ${BEFORE} (default flags)`,
};
type Measured = Record<ServerName, Measurement & { rounds: number[] }>;

const log = (message: string) => console.error(`[bench:installed] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => `${fmt((100 * a) / b)} %`;

function report(
  cases: BenchCase[],
  results: Map<string, Measured>,
  env: {
    date: string;
    postgres: string;
    revision: string;
    logLines: Record<'info' | 'warn', number>;
    before?: string;
  },
): string {
  const out: string[] = [SECTION, ''];
  out.push(
    `Written by \`npm run bench:installed\` (bench/installed.ts) on ${env.date}, commit ${env.revision}; Node.js ${process.version}, ` +
      `PostgreSQL ${env.postgres}; ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown'}) shared by the load generator, the servers and PostgreSQL.`,
    '',
    'svcgen as users run it: `npm pack` of this checkout installed with `npm install -D` into a new project holding a copy of ' +
      'examples/shop (`svcgen generate` run there), served by `node_modules/svcgen/bin/svcgen.js serve --database-url <url>` ' +
      'with default flags, stdout (the request log, one JSON line per request at info) going to a file. Beside it the same ' +
      'with `--log-level warn`, and the bare server of `npm run bench` (node:http + pg, the record JSON built by PostgreSQL, no checks). ' +
      `The project's config differs from the example's only as \`npm run bench\`'s does (data rate limit out of reach, pool wait bound 60 s). ` +
      `The seeded database of \`npm run bench\`; autocannon, ${CONNECTIONS} connections. Per case a ${WARMUP_S} s warm-up of each server, then ` +
      `${ROUNDS} rounds of a ${DURATION_S} s run of each server in rotating order: requests/s is the mean of a server's runs, CPU per request is over all ` +
      "their requests, p99 the median run's. Short alternating runs share the drift of a shared machine's speed among the servers.",
    '',
    `Request log lines written during the run: ${fmt(env.logLines.info)} at info, ${fmt(env.logLines.warn)} at warn.`,
    '',
    `Command: \`${commandLine('bench/installed.ts')}\``,
    '',
  );
  out.push(
    `Aims: against the bare server, a geometric mean of at least ${AIM.geomean * 100} %, none below ${AIM.min * 100} %, p99 at most ${AIM.p99Factor}×; ` +
      `info within ${AIM.logCost * 100} % of warn on every case.`,
    '',
    '| case | info req/s | warn req/s | bare req/s | info / bare | warn / bare | info / warn | p99 info / warn / bare (ms) | p99 info / bare |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  const ratios = { info: [] as number[], warn: [] as number[] };
  for (const c of cases) {
    const r = results.get(c.id)!;
    ratios.info.push(r.info.rps / r.bare.rps);
    ratios.warn.push(r.warn.rps / r.bare.rps);
    out.push(
      `| ${c.title} | ${fmt(r.info.rps)} | ${fmt(r.warn.rps)} | ${fmt(r.bare.rps)} | **${pct(r.info.rps, r.bare.rps)}** | ${pct(r.warn.rps, r.bare.rps)} | ` +
        `${pct(r.info.rps, r.warn.rps)} | ${r.info.p99} / ${r.warn.p99} / ${r.bare.p99} | ${fmt(r.info.p99 / r.bare.p99, 2)}× |`,
    );
  }
  const geomean = (xs: number[]) => Math.exp(xs.reduce((s, x) => s + Math.log(x), 0) / xs.length);
  out.push(
    `| **geometric mean** | | | | **${pct(geomean(ratios.info), 1)}** | ${pct(geomean(ratios.warn), 1)} | ${pct(geomean(ratios.info), geomean(ratios.warn))} | | |`,
  );
  if (env.before) out.push(...beforeAndAfter(cases, results, env.before));
  out.push(
    '',
    'Requests/s of every round, in the order measured:',
    '',
    `| case | ${SERVERS.join(' | ')} |`,
    `|---|${SERVERS.map(() => '---|').join('')}`,
  );
  for (const c of cases) {
    const r = results.get(c.id)!;
    out.push(`| ${c.title} | ${SERVERS.map((s) => r[s].rounds.map((x) => fmt(x)).join(' / ')).join(' | ')} |`);
  }
  out.push(
    '',
    'Where the CPUs went over all runs (µs per request; machine busy share, mean of the runs):',
    '',
    '| case | server | server processes | PostgreSQL | load generator | machine busy |',
    '|---|---|--:|--:|--:|--:|',
  );
  for (const c of cases) {
    for (const s of SERVERS) {
      const m = results.get(c.id)![s];
      out.push(
        `| ${c.title} | ${LABEL[s]} | ${fmt(m.serverUs)} | ${m.postgresUs === undefined ? 'n/a' : fmt(m.postgresUs)} | ${fmt(m.loadUs)} | ${m.busy === undefined ? 'n/a' : pct(m.busy, 1)} |`,
      );
    }
  }
  out.push('');
  return out.join('\n');
}

/** BENCH_BEFORE: after (info) against before per case, each against bare, and the run's noise. */
function beforeAndAfter(cases: BenchCase[], results: Map<string, Measured>, before: string): string[] {
  const rows = cases.map((c) => {
    const r = results.get(c.id)!;
    // Each round ran after and before back to back, so a round's ratio shares that moment's machine speed.
    const ratios = r.info.rounds.map((rps, i) => rps / r.before.rounds[i]!);
    return { c, r, ratios, sd: standardDeviation(ratios) };
  });
  const sds = rows.map((row) => row.sd).filter((sd) => sd !== undefined);
  const noise = sds.length ? Math.max(...sds) : undefined;
  const out = [
    '',
    `Before and after: **before** = \`svcgen serve\` of \`${before}\` (\`npm pack\` of that commit installed into a second ` +
      'project the same way, the same copied example and config patch, default flags), in every round beside the others. ' +
      "The run's noise is the largest, over the cases, standard deviation of the rounds' after / before ratios " +
      `(${noise === undefined ? 'n/a: one round' : `${fmt(100 * noise, 1)} points`}): a case whose after / before is more than that below 100 % is slower beyond the noise.`,
    '',
    '| case | after (info) req/s | before req/s | after / before | after / bare | before / bare | after − before (points of bare) | after / before, each round | sd of the rounds | beyond the noise |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|:-:|',
  ];
  for (const { c, r, ratios, sd } of rows) {
    const ratio = r.info.rps / r.before.rps;
    const points = (100 * (r.info.rps - r.before.rps)) / r.bare.rps;
    const verdict = noise === undefined ? 'n/a' : ratio < 1 - noise ? 'below' : ratio > 1 + noise ? 'above' : 'no';
    out.push(
      `| ${c.title} | ${fmt(r.info.rps)} | ${fmt(r.before.rps)} | **${pct(r.info.rps, r.before.rps)}** | ${pct(r.info.rps, r.bare.rps)} | ` +
        `${pct(r.before.rps, r.bare.rps)} | ${points >= 0 ? '+' : ''}${fmt(points, 1)} | ${ratios.map((x) => pct(x, 1)).join(' / ')} | ` +
        `${sd === undefined ? 'n/a' : `${fmt(100 * sd, 1)} points`} | ${verdict} |`,
    );
  }
  return out;
}

/** The sample standard deviation; undefined for fewer than two values. */
function standardDeviation(xs: readonly number[]): number | undefined {
  if (xs.length < 2) return undefined;
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return Math.sqrt(xs.reduce((sum, x) => sum + (x - mean) ** 2, 0) / (xs.length - 1));
}

function countLines(file: string): number {
  if (!fs.existsSync(file)) return 0;
  let lines = 0;
  const text = fs.readFileSync(file);
  for (const byte of text) if (byte === 10) lines++;
  return lines;
}

async function main(): Promise<void> {
  const cases = CASE_IDS.map((id) => {
    const c = CASES.find((x) => x.id === id);
    if (!c) throw new Error(`BENCH_CASES: no case "${id}"; cases: ${CASES.map((x) => x.id).join(', ')}`);
    return c;
  });
  const cleanups = cleanupOnExit(log);
  const revision = gitRevision();
  try {
    const project = await installedProject(cleanups.add, log);
    // One API key sends all the connections: its share of the expensive-read budget
    // (database.expensiveReadsPerCaller) would answer some of a scan case's 50 with 429.
    await patchConfig(project, (config) => {
      config.database = { ...config.database, expensiveReadsPerCaller: 100_000 };
    });
    const beforeProject = BEFORE ? await installedProject(cleanups.add, log, BEFORE, false) : undefined;
    if (beforeProject)
      await patchConfig(beforeProject, (config) => {
        config.database = { ...config.database, expensiveReadsPerCaller: 100_000 };
      });
    const { database, fixture, backends } = await seededBenchDatabase(cleanups.add, log, SEED);

    const logDir = await mkdtemp(path.join(os.tmpdir(), 'svcgen-bench-logs-'));
    cleanups.add(() => rm(logDir, { recursive: true, force: true }));
    const logFile = (level: 'info' | 'warn') => path.join(logDir, `serve-${level}.log`);
    const targets = {} as Record<ServerName, { url: string; pid: number }>;
    const servings: Serving[] = [];
    for (const level of ['info', 'warn'] as const) {
      const serving = await serveCli({
        bin: svcgenBin(project),
        args: ['--database-url', database.url, ...(level === 'warn' ? ['--log-level', 'warn'] : [])],
        cwd: project,
        stdoutFile: logFile(level),
        label: `svcgen serve (${level})`,
      });
      cleanups.add(() => serving.stop());
      servings.push(serving);
      targets[level] = serving;
      log(`svcgen serve (${level}): ${serving.url} (pid ${serving.pid})`);
    }
    if (beforeProject) {
      const serving = await serveCli({
        bin: svcgenBin(beforeProject),
        args: ['--database-url', database.url],
        cwd: beforeProject,
        stdoutFile: path.join(logDir, 'serve-before.log'),
        label: `svcgen serve (${BEFORE})`,
      });
      cleanups.add(() => serving.stop());
      servings.push(serving);
      targets.before = serving;
      log(`svcgen serve (${BEFORE}): ${serving.url} (pid ${serving.pid})`);
    }
    const bare = await startServerChild('bare', 'bench/bare-server.ts', { BENCH_DATABASE_URL: database.url });
    cleanups.add(() => bare.stop());
    targets.bare = bare;

    // A ratio means something only when both servers do the same work.
    for (const c of cases) {
      try {
        const others = targets.before ? [bare, { name: `svcgen serve of ${BEFORE}`, url: targets.before.url }] : [bare];
        await checkSameAnswers(c, { name: 'svcgen serve', url: targets.info.url }, others, fixture);
      } finally {
        if (c.writes) await restoreSeed(database.url, fixture);
      }
    }
    log(`svcgen serve and the bare server${BEFORE ? ` and ${BEFORE}'s svcgen serve` : ''} answer alike`);

    const results = new Map<string, Measured>();
    for (const [i, c] of cases.entries()) {
      for (const name of SERVERS) {
        try {
          await measureCase(targets[name], c, fixture, backends, WARMUP);
        } finally {
          if (c.writes) await restoreSeed(database.url, fixture);
        }
      }
      const rounds = new Map<ServerName, Measurement[]>(SERVERS.map((s) => [s, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (let k = 0; k < SERVERS.length; k++) {
          const name = SERVERS[(k + i + round) % SERVERS.length]!;
          try {
            const m = await measureCase(targets[name], c, fixture, backends, RUN);
            rounds.get(name)!.push(m);
            log(
              `${c.title} → ${name}, round ${round + 1}: ${fmt(m.rps)} req/s, p99 ${m.p99} ms; CPU µs/request server ${fmt(m.serverUs)}, ` +
                `PostgreSQL ${m.postgresUs === undefined ? 'n/a' : fmt(m.postgresUs)}, load ${fmt(m.loadUs)}`,
            );
          } finally {
            if (c.writes) await restoreSeed(database.url, fixture);
          }
        }
      }
      const byServer = {} as Measured;
      for (const [name, ms] of rounds) byServer[name] = { ...combine(ms), rounds: ms.map((m) => m.rps) };
      results.set(c.id, byServer);
      log(
        `${c.title}: info / bare ${pct(byServer.info.rps, byServer.bare.rps)}, info / warn ${pct(byServer.info.rps, byServer.warn.rps)}` +
          (BEFORE ? `, info / before ${pct(byServer.info.rps, byServer.before.rps)}` : ''),
      );
    }
    // The servers stop (flushing their logs) before the lines are counted.
    for (const serving of servings) await serving.stop();
    const section = report(cases, results, {
      date: reportDate(),
      postgres: await serverVersion(database.url),
      revision,
      before: BEFORE,
      logLines: { info: countLines(logFile('info')), warn: countLines(logFile('warn')) },
    });
    writeSection(RESULTS_FILE, SECTION, section);
    log(`wrote the section "${SECTION}" of ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.log(section);
  } finally {
    await cleanups.finish();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench:installed] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
