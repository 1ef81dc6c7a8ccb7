/**
 * The svcgen server of the benchmark, in its own process so that the load generator does not share
 * its event loop: the example shop project served by runtime `startServer` (pool of 10 connections),
 * from the compiled dist/ as an installed svcgen runs.
 * Started by ./run.ts with BENCH_DATABASE_URL; reports its port over IPC (./child-harness.ts).
 *
 * The changes to the example's config: the shared data rate limit (6,000 requests a minute per
 * project by default) is raised out of reach — the limiter still runs as in production, it counts
 * every request and adds the counts to PostgreSQL in batches (an UPSERT every ~10 ms) — and so is
 * the wait bound of the pool and of the expensive-read budget (database.poolWaitTimeoutMs), and the
 * one key's share of that budget (database.expensiveReadsPerCaller).
 *
 * BENCH_CONFIG_PATCH (optional, JSON): merged into the config before it is parsed — objects key by
 * key, anything else replaced (./auth.ts adds a role, turns e-mail verification off, sets auth.jwe).
 * BENCH_SVCGEN_WORKER=false: no in-process webhook delivery worker (./bulk.ts measures the write
 * path alone: events are queued, nothing delivers them).
 * BENCH_LOG_LEVEL=info|warn: request logging as `svcgen serve --log-level <level>` does it, JSON
 * lines on this process's stdout (redirect run.ts's stdout to a file or pipe); none without it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { runChild } from './child-harness.ts';

// svcgen as installed runs compiled: dist/, which ./children.ts builds before starting this child.
// BENCH_SVCGEN_DIST and BENCH_SVCGEN_PROJECT serve another commit's build and example instead (checkoutSvcgen in ./children.ts).
const distDir = process.env.BENCH_SVCGEN_DIST ?? path.resolve(import.meta.dirname, '../dist');
const projectDir = process.env.BENCH_SVCGEN_PROJECT ?? path.resolve(import.meta.dirname, '../examples/shop');
const dist = (file: string) => pathToFileURL(path.join(distDir, file)).href;
const { loadService } = (await import(dist('cli/project.js'))) as typeof import('../cli/project.ts');
const { parseConfig, startServer } = (await import(dist('runtime/index.js'))) as typeof import('../runtime/index.ts');
// As `svcgen serve` does before it serves (a checkout from before it existed has no such module).
if (fs.existsSync(path.join(distDir, 'cli/heap-tuning.js'))) {
  ((await import(dist('cli/heap-tuning.js'))) as typeof import('../cli/heap-tuning.ts')).tuneHeapForServing();
}

const databaseUrl = process.env.BENCH_DATABASE_URL;
if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set');
const RATE_LIMIT = 1_000_000_000;
const WAIT_TIMEOUT_MS = 60_000;

await runChild(async () => {
  const loaded = await loadService(projectDir);
  const service = loaded.service;
  const raw = JSON.parse(JSON.stringify(loaded.config));
  raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: RATE_LIMIT };
  // 50 connections of scans (filtered list, aggregate, cursor walk) on 2 CPUs keep ~45 of them
  // queued in the expensive-read budget; past the default 2 s wait svcgen would answer some with
  // 503 database-busy, as it should in production, but the bench measures throughput. All 50 come
  // from one API key, whose share of the budget (database.expensiveReadsPerCaller, 28) would answer
  // the others 429: the share is raised out of reach as well.
  raw.database = { ...raw.database, poolWaitTimeoutMs: WAIT_TIMEOUT_MS, expensiveReadsPerCaller: 100_000 };
  if (process.env.BENCH_CONFIG_PATCH) merge(raw, JSON.parse(process.env.BENCH_CONFIG_PATCH));
  const config = parseConfig(raw, 'bench config', Object.keys(service.tables));
  const server = await startServer({
    projectDir,
    service,
    config,
    databaseUrl,
    port: 0,
    host: '127.0.0.1',
    worker: process.env.BENCH_SVCGEN_WORKER !== 'false',
    log: (message) => console.error(`[svcgen] ${message}`),
    logging: process.env.BENCH_LOG_LEVEL
      ? { level: process.env.BENCH_LOG_LEVEL as 'info' | 'warn', format: 'json' }
      : undefined,
  });
  return { port: server.port, close: () => server.close() };
});

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function merge(target: Record<string, unknown>, patch: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(patch)) {
    const current = target[key];
    if (isObject(current) && isObject(value)) merge(current, value);
    else target[key] = value;
  }
}
