/**
 * `npm run bench:workers`: what `svcgen serve --workers 2` gains over `--workers 1` on this
 * machine. Writes the section "## Workers" of bench/RESULTS.md.
 *
 *   1. a fresh database seeded as for `npm run bench` (./database.ts);
 *   2. a copy of examples/shop with the data rate limit out of reach, served by the real CLI
 *      (`svcgen serve --workers <n> --no-worker --log-level warn`) for n = 1, then 2;
 *   3. per case and n: 3 s warm-up, 10 s measured with autocannon (50 connections), while the CPU
 *      of the svcgen processes (the primary and its workers), of PostgreSQL's backends and of the
 *      load generator is read from /proc, so the report can say where the CPUs went.
 *
 * Environment as for ./run.ts: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL, BENCH_DURATION,
 * BENCH_WARMUP, BENCH_CASES, BENCH_RESULTS; BENCH_WORKERS (default "1,2").
 */
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CASES, type BenchCase } from './cases.ts';
import { REPO } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { measureCase, serveCli, processTree, type Measurement } from './cli-server.ts';
import { restoreSeed, seededBenchDatabase, serverVersion } from './database.ts';
import { gitRevision, reportDate, writeSection } from './results-file.ts';

const CONNECTIONS = 50;
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WORKER_COUNTS = (process.env.BENCH_WORKERS ?? '1,2').split(',').map(Number);
const CASE_IDS = (process.env.BENCH_CASES ?? 'read-one,list-20,create,list-embed').split(',');
const LOAD = { connections: CONNECTIONS, warmupS: WARMUP_S, durationS: DURATION_S };
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## Workers';

const log = (message: string) => console.error(`[bench:workers] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => `${fmt((100 * a) / b)} %`;

function report(
  cases: BenchCase[],
  results: Map<string, Map<number, Measurement>>,
  env: { date: string; postgres: string; revision: string },
): string {
  const out: string[] = [SECTION, ''];
  out.push(
    `Written by \`npm run bench:workers\` (bench/workers.ts) on ${env.date}, commit ${env.revision}; Node.js ${process.version}, ` +
      `PostgreSQL ${env.postgres}; ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown'}) shared by the load generator, svcgen and PostgreSQL.`,
    '',
  );
  out.push(
    `The real CLI of this checkout (bin/svcgen.js, which runs the TypeScript source under tsx; both runs alike), ` +
      `\`svcgen serve --workers <n> --no-worker --log-level warn\` (NODE_ENV=production) on a copy of examples/shop with the data rate limit ` +
      `out of reach, each worker with its pool of 10; the seeded database of \`npm run bench\`; autocannon with ${CONNECTIONS} connections, ` +
      `${WARMUP_S} s warm-up and ${DURATION_S} s measured per case. CPU per request from /proc: the svcgen processes (primary and workers), ` +
      "PostgreSQL's backends, the load generator.",
    '',
  );
  const counts = WORKER_COUNTS;
  out.push(
    `| case | ${counts.map((n) => `req/s, ${n} worker${n > 1 ? 's' : ''}`).join(' | ')} | ${counts
      .slice(1)
      .map((n) => `${n} / ${counts[0]}`)
      .join(' | ')} | ` + `${counts.map((n) => `p99 (ms), ${n}`).join(' | ')} |`,
    `|---|${counts.map(() => '--:').join('|')}|${counts
      .slice(1)
      .map(() => '--:')
      .join('|')}|${counts.map(() => '--:').join('|')}|`,
  );
  for (const c of cases) {
    const byCount = results.get(c.id)!;
    const first = byCount.get(counts[0]!)!;
    out.push(
      `| ${c.title} | ${counts.map((n) => fmt(byCount.get(n)!.rps)).join(' | ')} | ${counts
        .slice(1)
        .map((n) => `**${fmt(byCount.get(n)!.rps / first.rps, 2)}×**`)
        .join(' | ')} | ` + `${counts.map((n) => fmt(byCount.get(n)!.p99)).join(' | ')} |`,
    );
  }
  out.push('', 'Where the CPUs went (µs per request; machine busy share):', '');
  out.push('| case | workers | svcgen | PostgreSQL | load generator | machine busy |', '|---|--:|--:|--:|--:|--:|');
  for (const c of cases) {
    for (const n of counts) {
      const m = results.get(c.id)!.get(n)!;
      out.push(
        `| ${c.title} | ${n} | ${fmt(m.serverUs)} | ${m.postgresUs === undefined ? 'n/a' : fmt(m.postgresUs)} | ${fmt(m.loadUs)} | ${m.busy === undefined ? 'n/a' : pct(m.busy, 1)} |`,
      );
    }
  }
  out.push('');
  return out.join('\n');
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
    const { database, fixture, backends } = await seededBenchDatabase(cleanups.add, log, SEED);

    const projectDir = await mkdtemp(path.join(os.tmpdir(), 'svcgen-bench-workers-'));
    cleanups.add(() => rm(projectDir, { recursive: true, force: true }));
    await cp(path.join(REPO, 'examples/shop'), projectDir, { recursive: true });
    const configFile = path.join(projectDir, 'svcgen.config.json');
    const config = JSON.parse(await readFile(configFile, 'utf8'));
    config.rateLimits = { ...config.rateLimits, dataPerMinutePerProject: 1_000_000_000 };
    await writeFile(configFile, JSON.stringify(config, null, 2));

    const results = new Map<string, Map<number, Measurement>>(cases.map((c) => [c.id, new Map()]));
    for (const n of WORKER_COUNTS) {
      const serving = await serveCli({
        bin: path.join(REPO, 'bin/svcgen.js'),
        args: [
          '--project',
          projectDir,
          '--database-url',
          database.url,
          '--workers',
          String(n),
          '--no-worker',
          '--log-level',
          'warn',
        ],
        cwd: projectDir,
        env: { ...process.env, NODE_ENV: 'production' },
        label: `svcgen serve --workers ${n}`,
      });
      // Stopped below as well; this stops it on Ctrl-C, which skips the finally.
      cleanups.add(() => serving.stop());
      log(
        `svcgen serve --workers ${n}: ${serving.url} (pid ${serving.pid}, ${processTree(serving.pid).length} processes)`,
      );
      try {
        for (const c of cases) {
          try {
            const m = await measureCase(serving, c, fixture, backends, LOAD);
            results.get(c.id)!.set(n, m);
            log(
              `  ${c.title}: ${fmt(m.rps)} req/s, p99 ${m.p99} ms; CPU µs/request svcgen ${fmt(m.serverUs)}, PostgreSQL ${m.postgresUs === undefined ? 'n/a' : fmt(m.postgresUs)}, load ${fmt(m.loadUs)}`,
            );
          } finally {
            if (c.writes) await restoreSeed(database.url, fixture);
          }
        }
      } finally {
        await serving.stop();
      }
    }
    const section = report(cases, results, {
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
  console.error(`[bench:workers] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
