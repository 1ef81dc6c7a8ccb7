/**
 * `npm run bench:code`: what a project's own code (docs/own-code.md) costs, as users run it.
 * Writes the section "## Own code" of bench/RESULTS.md.
 *
 *   1. svcgen installed from `npm pack` into a new project holding a copy of examples/shop
 *      (./installed-project.ts), copied twice more with a code entry each (`svcgen generate` run
 *      in each), all three served by `svcgen serve` with default flags on one seeded database:
 *        - `none`: no code (what every table pays without hooks: the baseline);
 *        - `other`: hooks on City only (so Order has none), an endpoint reading one Order through
 *          the data API (`GET /order-by-id/:id`), and `POST /checkout` (an order and 5 items in one
 *          transaction through the data API, stock checked and taken with SQL, a receipt job queued);
 *        - `noop`: a beforeCreate and an afterWrite of Order that do nothing;
 *   2. per case, a 3 s warm-up of each server it runs on, then BENCH_ROUNDS rounds (default 6) of a
 *      BENCH_DURATION s run (default 4) of each in rotating order, autocannon with 50 connections;
 *      requests/s is the mean of a server's runs, CPU per request over all their requests.
 *
 * The aims of issue "your own code in the server": a table without hooks pays nothing (POST and GET
 * of Order on `other` against `none`); a no-op before + after hook costs at most 10 % on POST /Order;
 * the endpoint reading one record serves at least 90 % of the generated GET /Order/{id}.
 * Environment: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL, BENCH_DURATION, BENCH_WARMUP,
 * BENCH_ROUNDS, BENCH_RESULTS.
 */
import { randomInt } from 'node:crypto';
import { cp, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { CASES, type BenchCase, type Fixture } from './cases.ts';
import { REPO } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { combine, measureCase, serveCli, type Measurement } from './cli-server.ts';
import { restoreSeed, seededBenchDatabase, serverVersion } from './database.ts';
import { installedProject, patchConfig, svcgenBin } from './installed-project.ts';
import { commandLine, gitRevision, reportDate, writeSection } from './results-file.ts';

const CONNECTIONS = 50;
const WARMUP = { connections: CONNECTIONS, warmupS: 0, durationS: Number(process.env.BENCH_WARMUP ?? 3) };
const RUN = { connections: CONNECTIONS, warmupS: 0, durationS: Number(process.env.BENCH_DURATION ?? 4) };
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
const PRODUCTS = 10;
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## Own code';
const API = '/gw/api/rest';

type ServerName = 'none' | 'other' | 'noop';
const LABEL: Record<ServerName, string> = {
  none: 'no code',
  other: 'hooks on City only; the endpoints',
  noop: 'no-op beforeCreate + afterWrite of Order',
};

const log = (message: string) => console.error(`[bench:code] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => `${fmt((100 * a) / b)} %`;

/** The code entries of the copies (examples/shop's tables; `generated/code.ts` types them). */
const CODE: Record<Exclude<ServerName, 'none'>, string> = {
  other: `import { z } from 'zod';
import { defineCode, defineEndpoint, defineJob } from './generated/code.ts';

const receipt = defineJob({
  name: 'receipt',
  payload: z.object({ orderId: z.number().int() }),
  async run() {},
});

const orderById = defineEndpoint({
  name: 'orderById',
  method: 'GET',
  path: '/order-by-id/:id',
  access: { roles: ['admin'] },
  input: z.object({ id: z.coerce.number().int() }),
  output: z.object({ data: z.record(z.string(), z.unknown()) }),
  async handler({ id }, ctx) {
    return ctx.data.Order.get(id);
  },
});

const checkout = defineEndpoint({
  name: 'checkout',
  method: 'POST',
  path: '/checkout',
  access: { roles: ['admin'] },
  status: 201,
  input: z.object({
    customerId: z.uuid(),
    items: z.array(z.object({ productId: z.number().int(), quantity: z.number().int().min(1) })).min(1).max(20),
  }),
  output: z.object({ orderId: z.number().int() }),
  async handler({ customerId, items }, ctx) {
    return ctx.transaction(async (tx) => {
      for (const item of items) {
        const taken = await tx.sql\`UPDATE "Product" SET stock = stock - \${item.quantity}
          WHERE id = \${item.productId} AND stock >= \${item.quantity} RETURNING id\`;
        if (taken.length === 0) throw new Error('no such product, or not enough in stock');
      }
      const order = await tx.data.Order.create({ customerId, total: items.length });
      await tx.data.OrderItem.bulkCreate(items.map((i) => ({ orderId: order.data.id, ...i })));
      await receipt.enqueue(tx, { orderId: order.data.id });
      return { orderId: order.data.id };
    });
  },
});

export default defineCode({
  hooks: { City: { beforeCreate: ({ input }) => input } },
  endpoints: [orderById, checkout],
  jobs: [receipt],
});
`,
  noop: `import { defineCode } from './generated/code.ts';

export default defineCode({
  hooks: { Order: { beforeCreate: ({ input }) => input, afterWrite() {} } },
});
`,
};

interface CodeCase {
  readonly benchCase: BenchCase;
  readonly servers: readonly ServerName[];
}

const byId = (id: string) => CASES.find((c) => c.id === id)!;

function endpointRead(): BenchCase {
  return {
    id: 'endpoint-read-one',
    title: 'GET /order-by-id/<id> (ctx.data.Order.get)',
    description: 'a user endpoint reading one record through the data API, as the caller',
    status: 200,
    next: (f) => ({ method: 'GET', path: `${API}/order-by-id/${randomInt(f.orderIds.min, f.orderIds.max)}` }),
    sample: (f) => ({ method: 'GET', path: `${API}/order-by-id/${f.orderIds.min + 2}` }),
    compare: 'exact',
  };
}

function checkoutCase(productIds: number[]): BenchCase {
  return {
    id: 'checkout',
    title: 'POST /checkout (order + 5 items + stock + job)',
    description: 'an order and 5 items through the data API in one transaction, 5 stock rows locked, a job queued',
    status: 201,
    next: (f) => ({
      method: 'POST',
      path: `${API}/checkout`,
      body: {
        customerId: f.customerIds[randomInt(0, f.customerIds.length - 1)],
        items: productIds.slice(0, 5).map((productId) => ({ productId, quantity: randomInt(1, 4) })),
      },
    }),
    sample: (f) => ({
      method: 'POST',
      path: `${API}/checkout`,
      body: { customerId: f.customerIds[0], items: [{ productId: productIds[0], quantity: 1 }] },
    }),
    compare: 'shape',
    writes: true,
  };
}

/** The seed again after a case that writes: items and jobs of the created orders first. */
async function restore(url: string, fixture: Fixture): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('DELETE FROM env_master."OrderItem" WHERE "orderId" > $1', [fixture.orderIds.max]);
    await client
      .query(`DELETE FROM graphile_worker._private_jobs WHERE task_id IN
      (SELECT id FROM graphile_worker._private_tasks WHERE identifier LIKE 'svcgen.code.%')`)
      .catch(() => {});
  } finally {
    await client.end();
  }
  await restoreSeed(url, fixture);
}

async function seedProducts(url: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const rows = await client.query<{ id: number }>(
      `INSERT INTO env_master."Product" (sku, title, price, stock, tags, "updatedAt")
       SELECT 'bench-' || g, 'product ' || g, 10, 1000000000, '{}', now() FROM generate_series(1, ${PRODUCTS}) g RETURNING id`,
    );
    return rows.rows.map((r) => r.id);
  } finally {
    await client.end();
  }
}

/** A copy of the installed project with its own code entry, generated. */
async function codeCopy(project: string, name: string, code: string, addCleanup: (s: () => Promise<void>) => void) {
  const dir = await mkdtemp(path.join(os.tmpdir(), `svcgen-bench-code-${name}-`));
  addCleanup(() => rm(dir, { recursive: true, force: true }));
  for (const entry of await readdir(project)) {
    if (entry === 'node_modules') await symlink(path.join(project, 'node_modules'), path.join(dir, 'node_modules'));
    else await cp(path.join(project, entry), path.join(dir, entry), { recursive: true });
  }
  await writeFile(path.join(dir, 'svcgen.code.ts'), code);
  execFileSync(process.execPath, [svcgenBin(dir), 'generate'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  return dir;
}

async function main(): Promise<void> {
  const cleanups = cleanupOnExit(log);
  const revision = gitRevision();
  try {
    const project = await installedProject(cleanups.add, log);
    await patchConfig(project, (config) => {
      config.database = { ...config.database, expensiveReadsPerCaller: 100_000 };
    });
    const dirs: Record<ServerName, string> = {
      none: project,
      other: await codeCopy(project, 'other', CODE.other, cleanups.add),
      noop: await codeCopy(project, 'noop', CODE.noop, cleanups.add),
    };
    const { database, fixture, backends } = await seededBenchDatabase(cleanups.add, log, SEED);
    const productIds = await seedProducts(database.url);
    const targets = {} as Record<ServerName, { url: string; pid: number }>;
    for (const name of Object.keys(dirs) as ServerName[]) {
      const serving = await serveCli({
        bin: svcgenBin(dirs[name]),
        args: ['--database-url', database.url],
        cwd: dirs[name],
        label: `svcgen serve (${name})`,
      });
      cleanups.add(() => serving.stop());
      targets[name] = serving;
      log(`svcgen serve (${LABEL[name]}): ${serving.url} (pid ${serving.pid})`);
    }
    const cases: CodeCase[] = [
      { benchCase: byId('create'), servers: ['none', 'other', 'noop'] },
      { benchCase: byId('read-one'), servers: ['none', 'other'] },
      { benchCase: endpointRead(), servers: ['other'] },
      { benchCase: checkoutCase(productIds), servers: ['other'] },
    ];
    const results = new Map<string, Map<ServerName, Measurement>>();
    for (const [i, { benchCase, servers }] of cases.entries()) {
      for (const name of servers) {
        try {
          await measureCase(targets[name], benchCase, fixture, backends, WARMUP);
        } finally {
          if (benchCase.writes) await restore(database.url, fixture);
        }
      }
      const rounds = new Map<ServerName, Measurement[]>(servers.map((s) => [s, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (let k = 0; k < servers.length; k++) {
          const name = servers[(k + i + round) % servers.length]!;
          try {
            const m = await measureCase(targets[name], benchCase, fixture, backends, RUN);
            rounds.get(name)!.push(m);
            log(`${benchCase.title} → ${name}, round ${round + 1}: ${fmt(m.rps)} req/s, p99 ${m.p99} ms`);
          } finally {
            if (benchCase.writes) await restore(database.url, fixture);
          }
        }
      }
      results.set(benchCase.id, new Map([...rounds].map(([name, ms]) => [name, combine(ms)])));
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

function report(
  cases: CodeCase[],
  results: Map<string, Map<ServerName, Measurement>>,
  run: { date: string; postgres: string; revision: string },
): string {
  const at = (id: string, name: ServerName) => results.get(id)!.get(name)!;
  const lines = [
    SECTION,
    '',
    `Written by \`npm run bench:code\` (bench/usercode.ts) on ${run.date}, commit ${run.revision}; Node.js ${process.version}, PostgreSQL ${run.postgres}; ${os.availableParallelism()} CPUs shared by the load generator, the servers and PostgreSQL.`,
    '',
    `Command: \`${commandLine('bench:code')}\``,
    '',
    'Three copies of the installed example, one database, `svcgen serve` with default flags: ' +
      (Object.keys(LABEL) as ServerName[]).map((n) => `**${n}**: ${LABEL[n]}`).join('; ') +
      `. ${ROUNDS} rounds of ${RUN.durationS} s per server and case in rotating order, 50 connections.`,
    '',
    '| case | server | req/s | p99 (ms) | CPU µs/request (server) |',
    '|---|---|--:|--:|--:|',
  ];
  for (const { benchCase, servers } of cases)
    for (const name of servers) {
      const m = at(benchCase.id, name);
      lines.push(`| ${benchCase.title} | ${name} | ${fmt(m.rps)} | ${m.p99} | ${fmt(m.serverUs)} |`);
    }
  lines.push(
    '',
    'Aims:',
    '',
    `- a table without hooks pays nothing: POST /Order other / none ${pct(at('create', 'other').rps, at('create', 'none').rps)}, GET /Order/<id> other / none ${pct(at('read-one', 'other').rps, at('read-one', 'none').rps)};`,
    `- a no-op before + after hook costs at most 10 % on POST /Order: noop / none ${pct(at('create', 'noop').rps, at('create', 'none').rps)};`,
    `- an endpoint reading one record through the data API serves at least 90 % of GET /Order/<id>: ${pct(at('endpoint-read-one', 'other').rps, at('read-one', 'other').rps)};`,
    `- checkout (order + 5 items + stock + job): ${fmt(at('checkout', 'other').rps)} req/s, p99 ${at('checkout', 'other').p99} ms.`,
    '',
  );
  return lines.join('\n');
}

main().catch((error: unknown) => {
  console.error(`[bench:code] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
