/**
 * `npm run bench:auth`: what user authentication costs, in one run.
 *
 *   1. a fresh database seeded like `npm run bench` (./database.ts: 100,000 orders, an admin API key);
 *   2. two svcgen server children on it (./svcgen-server.ts, pg pools of 10), the example's config
 *      patched through BENCH_CONFIG_PATCH: a role `reader` open to signup that may read every table,
 *      no e-mail verification, login/signup rate limits out of reach, and `auth.jwe` false on the
 *      first child ("jws server"), true on the second ("jwe server"). The signing keys live in the
 *      database per environment, so both children share them;
 *   3. one user signed up with roleId reader, logged in once on each child: one JWS and one JWE
 *      access token, each used for the whole run (the realistic, cached verification path);
 *   4. GET /Order/<id> (random id) with 50 connections, three credentials — the API key (jws
 *      server), the JWS token (jws server), the JWE token (jwe server) — in the order A B C C B A,
 *      each run with its own warm-up, the runs of a credential averaged (BENCH_ROUNDS=n repeats the
 *      pattern n times, for steadier figures on a busy machine);
 *   5. the server process's CPU per request (child harness) and that of PostgreSQL's backends
 *      (./cpu.ts), a short V8 CPU profile per credential (./profile.ts), and in this process the
 *      cost of one uncached token verification (RSA) and of the cached lookup;
 *   6. login throughput: POST /auth/login (one user, correct password) with 12 connections, against
 *      the bcrypt limit measured here (cores ÷ median time of one cost-10 bcryptjs compareSync), while
 *      a sequential trickle of GET /Order/<id> with the API key (20 a second) measures latency;
 *   7. login answers one at a time: an unknown e-mail, a wrong and the right password, in turns;
 *   8. the section "## Authentication" of bench/RESULTS.md (replaced, or appended), also on stdout.
 *
 * Environment as for ./run.ts: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL, BENCH_DURATION /
 * BENCH_WARMUP / BENCH_PROFILE (seconds; BENCH_PROFILE=0 skips the profiles), BENCH_RESULTS; and
 * BENCH_ROUNDS (default 1).
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import autocannon from 'autocannon';
import bcrypt from 'bcryptjs';
import pg from 'pg';
import { audience, verifyAccessToken } from '../runtime/auth/tokens/access-tokens.ts';
import { loadEnvironmentKeys, looksLikeJwt } from '../runtime/auth/tokens/index.ts';
import { openDatabase } from '../runtime/db/index.ts';
import { SecretBox } from '../runtime/secrets/index.ts';
import { gitRevision, reportDate, writeSection } from './results-file.ts';
import { CASES, type Fixture } from './cases.ts';
import type { LoopDelay } from './child-harness.ts';
import { REPO, startServerChild, type ServerChild } from './children.ts';
import { BackendCpu, machineBusy, machineSample } from './cpu.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, serverVersion } from './database.ts';
import { IDLE, SOCKET_WRITE_CATEGORY, summarizeProfile, type ProfileSummary } from './profile.ts';
import { cleanupOnExit } from './cleanups.ts';
import { sendJson, type Sent as SentAs } from './equivalence.ts';

type Sent = SentAs<any>;

const CONNECTIONS = 50;
const POOL_SIZE = 10; // startServer's pool
const LOGIN_CONNECTIONS = 12;
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const PROFILE_S = Number(process.env.BENCH_PROFILE ?? 5);
const SEED = { cities: 100, customers: 1_000, orders: 100_000 };
const TRICKLE_INTERVAL_MS = 50; // 20 requests a second, one at a time
const IDLE_TRICKLE_S = Math.min(5, DURATION_S);
/** Sequential requests per credential on the otherwise idle servers: the latency a credential adds. */
const UNLOADED_S = Math.min(3, DURATION_S);
const BCRYPT_COST = 10;
const BCRYPT_SAMPLES = 10;
/** Aims: requests/s with a user access token as a share of the API key's ... */
const AIM = { jws: 0.95, jwe: 0.9 } as const;
/** ... and logins/s as a share of the bcrypt limit. */
const AIM_LOGIN = 0.8;
/** Long enough that the one token per credential outlives any BENCH_DURATION (the default is 900 s). */
const ACCESS_TOKEN_TTL_S = 86_400;
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## Authentication';

const USER = {
  email: 'reader@bench.example.com',
  password: 'Bench-reader-password-1',
  firstName: 'Bench',
  lastName: 'Reader',
};
const READER_ROLE = 'reader';

type VariantId = 'apiKey' | 'jws' | 'jwe';
const VARIANT_IDS: readonly VariantId[] = ['apiKey', 'jws', 'jwe'];
const ROUNDS = Math.max(1, Math.floor(Number(process.env.BENCH_ROUNDS ?? 1)));
/** A B C C B A (per round): each credential measured once early and once late, so drift (other work
 *  on the machine, the database warming up, autovacuum) weighs on all three alike. */
const ORDER: readonly VariantId[] = Array.from(
  { length: ROUNDS },
  () => ['apiKey', 'jws', 'jwe', 'jwe', 'jws', 'apiKey'] as const,
).flat();

interface Variant {
  id: VariantId;
  label: string;
  server: ServerChild;
  /** the Authorization header */
  authorization: string;
}

const readOne = CASES.find((c) => c.id === 'read-one')!;

const log = (message: string) => console.error(`[bench:auth] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => (b === 0 ? 'n/a' : `${fmt((100 * a) / b)} %`);
const share = (v: number | undefined) => (v === undefined ? 'n/a' : `${fmt(100 * v)} %`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

// ---- config and accounts -----------------------------------------------------------------------

function configPatch(jwe: boolean): unknown {
  return {
    auth: { emailVerification: false, jwe, accessTokenTtl: ACCESS_TOKEN_TTL_S },
    rateLimits: { loginPerMinutePerIp: 1_000_000_000, signupPerMinutePerIp: 1_000_000_000 },
    roles: { [READER_ROLE]: { signup: true, tables: { '*': { read: true } } } },
  };
}

// The bench reads fields of answers it knows.
const send = sendJson<any>;

async function expectStatus(what: string, sent: Promise<Sent>, status: number): Promise<Sent> {
  const res = await sent;
  if (res.status !== status)
    throw new Error(`${what}: expected ${status}, got ${res.status}: ${res.text.slice(0, 500)}`);
  return res;
}

async function login(server: ServerChild, fixture: Fixture): Promise<string> {
  const res = await expectStatus(
    `POST /auth/login on the ${server.name}`,
    send(`${server.url}/auth/login`, {
      method: 'POST',
      headers: { 'x-project-id': fixture.projectId },
      body: { email: USER.email, password: USER.password },
    }),
    200,
  );
  const { accessToken, user } = res.body as { accessToken: string; user: { roles: string[] } };
  if (!user.roles.includes(READER_ROLE))
    throw new Error(`the user logged in with roles ${JSON.stringify(user.roles)}, expected ${READER_ROLE}`);
  return accessToken;
}

// ---- GET load ---------------------------------------------------------------------------------

function dataHeaders(fixture: Fixture, authorization: string): Record<string, string> {
  return { 'x-project-id': fixture.projectId, authorization };
}

function loadReads(variant: Variant, fixture: Fixture, seconds: number): autocannon.Instance {
  return autocannon({
    url: variant.server.url,
    connections: CONNECTIONS,
    duration: seconds,
    headers: dataHeaders(fixture, variant.authorization),
    requests: [
      {
        setupRequest(req, context) {
          const r = readOne.next(fixture, context, 0);
          req.method = r.method;
          req.path = r.path;
          return req;
        },
      },
    ],
  });
}

function statusCounts(result: autocannon.Result): Record<string, number> {
  return Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, Number(s.count)]));
}

/** Fails the run, with a sample body, when a response had another status than `status`. */
async function requireStatus(
  what: string,
  result: autocannon.Result,
  status: number,
  sample: () => Promise<Sent>,
): Promise<void> {
  const counts = statusCounts(result);
  const unexpected = Object.keys(counts).filter((code) => Number(code) !== status);
  if (unexpected.length === 0 && result.errors === 0 && result.timeouts === 0 && (status >= 300 || result.non2xx === 0))
    return;
  let example = '';
  try {
    const res = await sample();
    example = `\nsample response: ${res.status} ${res.text.slice(0, 500)}`;
  } catch (error) {
    example = `\nsample request failed: ${(error as Error).message}`;
  }
  throw new Error(
    `${what}: expected every response to be ${status}, got ${JSON.stringify(counts)}, connection errors ${result.errors}, ` +
      `timeouts ${result.timeouts}${example}`,
  );
}

interface ReadRun {
  variant: VariantId;
  rps: number;
  requests: number;
  p50: number;
  p99: number;
  /** server process CPU (all threads), µs */
  serverCpuUs: number;
  /** PostgreSQL backends of the database, µs (undefined: not measurable) */
  pgCpuUs: number | undefined;
  /** this process (autocannon), µs */
  loadCpuUs: number;
  queries: number;
  machineBusy: number | undefined;
  machineIrq: number | undefined;
  /** share of the machine's CPU used by processes outside the benchmark */
  otherLoad: number | undefined;
}

/** CPU and machine readings around a measured load. */
async function accounted<T>(
  server: ServerChild,
  backends: BackendCpu,
  work: () => Promise<T>,
): Promise<{
  value: T;
  serverCpuUs: number;
  queries: number;
  pgCpuUs: number | undefined;
  loadCpuUs: number;
  machine: ReturnType<typeof machineBusy>;
  otherLoad: number | undefined;
}> {
  const before = await server.stats();
  const pgBefore = await backends.sample();
  const machineBefore = machineSample();
  const loadBefore = process.cpuUsage();
  const startedAt = process.hrtime.bigint();
  const value = await work();
  const elapsedUs = Number(process.hrtime.bigint() - startedAt) / 1000;
  const loadCpu = process.cpuUsage(loadBefore);
  const machineAfter = machineSample();
  const pgAfter = await backends.sample();
  const after = await server.stats();
  const pgCpuUs = BackendCpu.spent(pgBefore, pgAfter);
  const machine = machineBusy(machineBefore, machineAfter);
  const serverCpuUs = after.cpuMicros - before.cpuMicros;
  const loadCpuUs = loadCpu.user + loadCpu.system;
  const oursUs = serverCpuUs + (pgCpuUs ?? 0) + loadCpuUs;
  const otherLoad =
    machine === undefined || pgCpuUs === undefined
      ? undefined
      : Math.max(0, machine.busy - machine.irq - oursUs / (elapsedUs * os.availableParallelism()));
  return { value, serverCpuUs, queries: after.queries - before.queries, pgCpuUs, loadCpuUs, machine, otherLoad };
}

async function measureReads(variant: Variant, fixture: Fixture, backends: BackendCpu): Promise<ReadRun> {
  const sample = () =>
    send(`${variant.server.url}${readOne.sample(fixture).path}`, {
      headers: dataHeaders(fixture, variant.authorization),
    });
  const warm = await loadReads(variant, fixture, WARMUP_S);
  await requireStatus(`${variant.label} (warm-up)`, warm, 200, sample);
  const m = await accounted(variant.server, backends, async () => loadReads(variant, fixture, DURATION_S));
  const result = m.value;
  await requireStatus(`${variant.label} (measurement)`, result, 200, sample);
  return {
    variant: variant.id,
    rps: result.requests.average,
    requests: result.requests.total,
    p50: result.latency.p50,
    p99: result.latency.p99,
    serverCpuUs: m.serverCpuUs,
    pgCpuUs: m.pgCpuUs,
    loadCpuUs: m.loadCpuUs,
    queries: m.queries,
    machineBusy: m.machine?.busy,
    machineIrq: m.machine?.irq,
    otherLoad: m.otherLoad,
  };
}

interface VariantSummary {
  rps: number;
  p50: number;
  p99: number;
  requests: number;
  serverCpuPerRequestUs: number;
  pgCpuPerRequestUs: number | undefined;
  loadCpuPerRequestUs: number;
  queriesPerRequest: number;
}

function summarize(runs: ReadRun[]): VariantSummary {
  const mean = (f: (r: ReadRun) => number) => runs.reduce((s, r) => s + f(r), 0) / runs.length;
  const requests = runs.reduce((s, r) => s + r.requests, 0);
  const pg = runs.every((r) => r.pgCpuUs !== undefined)
    ? runs.reduce((s, r) => s + r.pgCpuUs!, 0) / requests
    : undefined;
  return {
    rps: mean((r) => r.rps),
    p50: mean((r) => r.p50),
    p99: mean((r) => r.p99),
    requests,
    serverCpuPerRequestUs: runs.reduce((s, r) => s + r.serverCpuUs, 0) / requests,
    pgCpuPerRequestUs: pg,
    loadCpuPerRequestUs: runs.reduce((s, r) => s + r.loadCpuUs, 0) / requests,
    queriesPerRequest: runs.reduce((s, r) => s + r.queries, 0) / requests,
  };
}

interface VariantProfile {
  summary: ProfileSummary;
  requests: number;
  cpuPerRequestUs: number;
  /** SQL statements sent while profiled, per request */
  statementsPerRequest: number;
  /** of which revocation checks (runtime/auth/tokens/revocations.ts checkDatabase), per request */
  revocationChecksPerRequest: number;
  /** of which `SELECT 1` round trips on the LISTEN connection (NotificationChannel.barrier), per request */
  barriersPerRequest: number;
  /** the most frequent statements: SQL text, times sent per request */
  topStatements: [string, number][];
}

async function profileReads(variant: Variant, fixture: Fixture, dir: string): Promise<VariantProfile> {
  const file = path.join(dir, `read-one-${variant.id}.cpuprofile`);
  await variant.server.startProfile();
  const before = await variant.server.stats();
  const result = await loadReads(variant, fixture, PROFILE_S);
  const { statements } = await variant.server.stopProfile(file);
  const after = await variant.server.stats();
  await requireStatus(`${variant.label} (profile)`, result, 200, () =>
    send(`${variant.server.url}${readOne.sample(fixture).path}`, {
      headers: dataHeaders(fixture, variant.authorization),
    }),
  );
  const requests = result.requests.total;
  const count = (match: (sql: string) => boolean) =>
    statements.filter(([sql]) => match(sql)).reduce((n, [, c]) => n + c, 0);
  return {
    summary: summarizeProfile(file, 40),
    requests,
    cpuPerRequestUs: (after.cpuMicros - before.cpuMicros) / requests,
    statementsPerRequest: count(() => true) / requests,
    revocationChecksPerRequest: count((sql) => sql.includes('svcgen.revoked_tokens')) / requests,
    barriersPerRequest: count((sql) => sql.trim() === 'SELECT 1') / requests,
    topStatements: statements.slice(0, 4).map(([sql, c]) => [sql.replace(/\s+/g, ' ').trim(), c / requests]),
  };
}

// ---- token verification in this process --------------------------------------------------------

interface VerificationCost {
  /** one full verification (what the first request with a token pays), median µs */
  uncachedUs: Record<'jws' | 'jwe', number>;
  /** per request once cached: looksLikeJwt + a Map lookup by the token text of a fresh string, median µs */
  cachedUs: Record<'jws' | 'jwe', number>;
  tokenBytes: Record<'jws' | 'jwe', number>;
}

async function measureVerification(
  databaseUrl: string,
  projectId: string,
  tokens: Record<'jws' | 'jwe', string>,
): Promise<VerificationCost> {
  const db = openDatabase(databaseUrl, { max: 1 });
  try {
    // as the server children do: no SVCGEN_SECRET passed, so the database-kept sealing key
    const box = await SecretBox.open(db, undefined);
    const keys = await loadEnvironmentKeys(db, box, projectId, 'master', true);
    const aud = audience(projectId, 'master');
    const uncachedUs = { jws: 0, jwe: 0 };
    const cachedUs = { jws: 0, jwe: 0 };
    for (const kind of ['jws', 'jwe'] as const) {
      const token = tokens[kind];
      const times: number[] = [];
      for (let i = 0; i < 120; i++) {
        const t = performance.now();
        await verifyAccessToken(keys, aud, token);
        if (i >= 20) times.push((performance.now() - t) * 1000);
      }
      uncachedUs[kind] = median(times);
      // The cached path, as a request sees it: a new string from the header each time (so V8
      // hashes it anew), the shape test, the lookup. Minus making the string.
      const cache = new Map([[token, 1]]);
      const bytes = Buffer.from(token);
      const rounds = 20_000;
      const perOp = (withLookup: boolean) => {
        const t = performance.now();
        let hits = 0;
        for (let i = 0; i < rounds; i++) {
          const text = bytes.toString('latin1');
          if (withLookup && looksLikeJwt(text) && cache.get(text) !== undefined) hits++;
          else if (!withLookup && text.length > 0) hits++;
        }
        if (hits !== rounds) throw new Error('cached-path measurement went wrong');
        return ((performance.now() - t) * 1000) / rounds;
      };
      const samples: number[] = [];
      for (let i = 0; i < 7; i++) samples.push(perOp(true) - perOp(false));
      cachedUs[kind] = Math.max(0, median(samples));
    }
    return { uncachedUs, cachedUs, tokenBytes: { jws: tokens.jws.length, jwe: tokens.jwe.length } };
  } finally {
    await db.close();
  }
}

// ---- logins -----------------------------------------------------------------------------------

interface BcryptLimit {
  cores: number;
  /** wall time of one compareSync, median of BCRYPT_SAMPLES */
  medianMs: number;
  /** CPU time of one compareSync (this process), median: below the wall time when the machine is busy */
  medianCpuMs: number;
  minMs: number;
  maxMs: number;
  /** logins/s if every core did nothing but bcrypt */
  limit: number;
}

function measureBcrypt(): BcryptLimit {
  const hash = bcrypt.hashSync(USER.password, BCRYPT_COST);
  for (let i = 0; i < 2; i++) bcrypt.compareSync(USER.password, hash); // warm the JIT
  const times: number[] = [];
  const cpuTimes: number[] = [];
  for (let i = 0; i < BCRYPT_SAMPLES; i++) {
    const cpu = process.cpuUsage();
    const t = performance.now();
    if (!bcrypt.compareSync(USER.password, hash)) throw new Error('bcrypt compareSync did not match');
    times.push(performance.now() - t);
    const spent = process.cpuUsage(cpu);
    cpuTimes.push((spent.user + spent.system) / 1000);
  }
  const cores = os.availableParallelism();
  const medianMs = median(times);
  return {
    cores,
    medianMs,
    medianCpuMs: median(cpuTimes),
    minMs: Math.min(...times),
    maxMs: Math.max(...times),
    limit: cores / (medianMs / 1000),
  };
}

interface TrickleResult {
  latenciesMs: number[];
  failures: string[];
  seconds: number;
}

/**
 * GET /Order/<id> one at a time, one every `intervalMs` (at once when the last one took longer;
 * 0: back to back), until stopped. With the API key unless told otherwise.
 */
function startTrickle(
  server: ServerChild,
  fixture: Fixture,
  intervalMs = TRICKLE_INTERVAL_MS,
  authorization = `Bearer ${fixture.apiKey}`,
): { stop(): Promise<TrickleResult> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const headers = dataHeaders(fixture, authorization);
  const latenciesMs: number[] = [];
  const failures: string[] = [];
  let stopped = false;
  const get = (p: string) =>
    new Promise<number>((resolve, reject) => {
      const req = http.get(`${server.url}${p}`, { agent, headers }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      });
      req.on('error', reject);
    });
  const startedAt = performance.now();
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const due = startedAt + i * intervalMs;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      if (stopped) break;
      const t = performance.now();
      try {
        const status = await get(readOne.next(fixture, {}, 0).path);
        latenciesMs.push(performance.now() - t);
        if (status !== 200) failures.push(`status ${status}`);
      } catch (error) {
        failures.push((error as Error).message);
      }
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      agent.destroy();
      return { latenciesMs, failures, seconds: (performance.now() - startedAt) / 1000 };
    },
  };
}

/** One connection, one request at a time, back to back: a credential's own latency, no queueing. */
async function unloadedLatency(variant: Variant, fixture: Fixture): Promise<TrickleResult> {
  const warm = startTrickle(variant.server, fixture, 0, variant.authorization);
  await sleep(500);
  await warm.stop();
  const run = startTrickle(variant.server, fixture, 0, variant.authorization);
  await sleep(UNLOADED_S * 1000);
  const result = await run.stop();
  if (result.failures.length) throw new Error(`${variant.label} (unloaded): ${result.failures.slice(0, 3).join('; ')}`);
  return result;
}

interface LoginResult {
  loginsPerSecond: number;
  logins: number;
  p50: number;
  p99: number;
  /** bcrypt worker threads included */
  serverCpuPerLoginUs: number;
  pgCpuPerLoginUs: number | undefined;
  /** this process: autocannon and the trickle */
  loadCpuPerLoginUs: number;
  machineBusy: number | undefined;
  otherLoad: number | undefined;
  trickle: TrickleResult;
  /** the server's event loop during the measured login load */
  loopDelay: LoopDelay;
  /** the server's threads by nice value after the load, e.g. "0 × 11, 10 × 2" (Linux /proc), or undefined */
  threadNice: string | undefined;
}

/** The threads of a process counted by nice value (field 19 of /proc/<pid>/task/<tid>/stat). */
function threadNice(pid: number): string | undefined {
  try {
    const counts = new Map<number, number>();
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const nice = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
      counts.set(nice, (counts.get(nice) ?? 0) + 1);
    }
    return [...counts]
      .sort((a, b) => a[0] - b[0])
      .map(([nice, n]) => `${nice} × ${n}`)
      .join(', ');
  } catch {
    return undefined;
  }
}

function loadLogins(server: ServerChild, fixture: Fixture, seconds: number): autocannon.Instance {
  return autocannon({
    url: `${server.url}/auth/login`,
    connections: LOGIN_CONNECTIONS,
    duration: seconds,
    method: 'POST',
    headers: { 'x-project-id': fixture.projectId, 'content-type': 'application/json' },
    body: JSON.stringify({ email: USER.email, password: USER.password }),
  });
}

async function measureLogins(server: ServerChild, fixture: Fixture, backends: BackendCpu): Promise<LoginResult> {
  const sample = () =>
    send(`${server.url}/auth/login`, {
      method: 'POST',
      headers: { 'x-project-id': fixture.projectId },
      body: { email: USER.email, password: USER.password },
    });
  // When autocannon stops, up to LOGIN_CONNECTIONS logins are still queued for the bcrypt pool: one
  // more login, queued behind them, returns once they are done (the pool serves in order).
  const drain = async () => void (await expectStatus('POST /auth/login (drain)', sample(), 200));
  const warm = await loadLogins(server, fixture, WARMUP_S);
  await requireStatus('POST /auth/login (warm-up)', warm, 200, sample);
  await drain();
  let elapsedS = 0;
  const m = await accounted(server, backends, async () => {
    await server.startLoopDelay();
    const trickle = startTrickle(server, fixture);
    const t = performance.now();
    const result = await loadLogins(server, fixture, DURATION_S);
    elapsedS = (performance.now() - t) / 1000;
    return { result, trickle: await trickle.stop(), loopDelay: await server.stopLoopDelay() };
  });
  const { result, trickle, loopDelay } = m.value;
  await requireStatus('POST /auth/login (measurement)', result, 200, sample);
  const nice = threadNice(server.pid); // the hashing workers are still there (the pool keeps them)
  await drain();
  const logins = result.requests.total;
  return {
    loginsPerSecond: logins / elapsedS,
    logins,
    p50: result.latency.p50,
    p99: result.latency.p99,
    serverCpuPerLoginUs: m.serverCpuUs / logins,
    pgCpuPerLoginUs: m.pgCpuUs === undefined ? undefined : m.pgCpuUs / logins,
    loadCpuPerLoginUs: m.loadCpuUs / logins,
    machineBusy: m.machine?.busy,
    otherLoad: m.otherLoad,
    trickle,
    loopDelay,
    threadNice: nice,
  };
}

/** Rounds of the login-answer timing, and the first ones left out (worker start, dummy hash). */
const ANSWER_ROUNDS = 20;
const ANSWER_WARMUP = 2;

interface LoginAnswerTimes {
  /** ms per answer, one at a time on an otherwise idle server */
  unknownEmail: number[];
  wrongPassword: number[];
  rightPassword: number[];
}

/**
 * How long a login takes to answer an unknown e-mail, a wrong password and the right one (each
 * one bcrypt comparison: test/auth/accounts.test.ts counts them), one request at a time, in turns
 * so that drift on a shared machine affects the three alike. The right password after each wrong
 * one clears the account's failure count, so it never locks.
 */
async function measureLoginAnswers(server: ServerChild, fixture: Fixture): Promise<LoginAnswerTimes> {
  const times: LoginAnswerTimes = { unknownEmail: [], wrongPassword: [], rightPassword: [] };
  const timed = async (what: string, email: string, password: string, status: number) => {
    const started = performance.now();
    await expectStatus(
      what,
      send(`${server.url}/auth/login`, {
        method: 'POST',
        headers: { 'x-project-id': fixture.projectId },
        body: { email, password },
      }),
      status,
    );
    return performance.now() - started;
  };
  for (let i = 0; i < ANSWER_WARMUP + ANSWER_ROUNDS; i++) {
    const unknown = await timed(
      'POST /auth/login (unknown e-mail)',
      `nobody-${i}-${Date.now().toString(36)}@bench.example.com`,
      USER.password,
      401,
    );
    const wrong = await timed('POST /auth/login (wrong password)', USER.email, `${USER.password}-wrong`, 401);
    const right = await timed('POST /auth/login (right password)', USER.email, USER.password, 200);
    if (i < ANSWER_WARMUP) continue;
    times.unknownEmail.push(unknown);
    times.wrongPassword.push(wrong);
    times.rightPassword.push(right);
  }
  return times;
}

// ---- report -----------------------------------------------------------------------------------

interface Environment {
  date: string;
  /** the commit measured, and whether runtime/ had uncommitted changes */
  revision: string;
  cpus: number;
  cpuModel: string;
  os: string;
  node: string;
  postgres: string;
  databaseServer: string;
}

interface Results {
  env: Environment;
  variants: Record<VariantId, Variant>;
  runs: ReadRun[];
  summaries: Record<VariantId, VariantSummary>;
  profiles: Partial<Record<VariantId, VariantProfile>>;
  verification: VerificationCost;
  bcrypt: BcryptLimit;
  idleTrickle: TrickleResult;
  idleLoopDelay: LoopDelay;
  logins: LoginResult;
  loginAnswers: LoginAnswerTimes;
  unloaded: Record<VariantId, TrickleResult>;
}

const LABEL: Record<VariantId, string> = {
  apiKey: 'API key (role admin)',
  jws: 'JWS access token (role reader)',
  jwe: 'JWE access token (role reader)',
};
const SHORT: Record<VariantId, string> = { apiKey: 'API key', jws: 'JWS', jwe: 'JWE' };

function trickleRow(t: TrickleResult): string[] {
  const l = t.latenciesMs;
  return [
    fmt(l.length),
    fmt(percentile(l, 50), 1),
    fmt(percentile(l, 99), 1),
    fmt(Math.max(...l), 1),
    String(t.failures.length),
  ];
}

function report(r: Results): string {
  const { env, summaries: s } = r;
  const out: string[] = [];
  out.push(SECTION, '');
  out.push(
    `Written by \`npm run bench:auth\` (bench/auth.ts) on ${env.date}. Rerun it rather than editing this section.`,
    '',
  );
  out.push(
    `- Command: \`npm run bench:auth\` (BENCH_WARMUP=${WARMUP_S}, BENCH_DURATION=${DURATION_S}, BENCH_PROFILE=${PROFILE_S}, BENCH_ROUNDS=${ROUNDS}); ` +
      `commit ${env.revision}`,
  );
  out.push(
    `- Machine: ${env.cpus} CPUs (os.availableParallelism(); ${env.cpuModel}), ${env.os}; Node.js ${env.node}; PostgreSQL ${env.postgres} (${env.databaseServer})`,
  );
  out.push(
    `- Data and servers: a fresh database seeded as for \`npm run bench\` (${fmt(SEED.orders)} orders); two svcgen server children on it ` +
      `(runtime \`startServer\` serving examples/shop, pg pools of ${POOL_SIZE}), the example's config patched: role \`${READER_ROLE}\` ` +
      '(`signup: true`, `tables: {"*": {read: true}}`), `auth.emailVerification: false`, login/signup/data rate limits out of reach, ' +
      `\`auth.accessTokenTtl: ${ACCESS_TOKEN_TTL_S}\` (so the tokens outlive the run), and \`auth.jwe\` false on the **jws server**, true on the **jwe server**. ` +
      "Both share the environment's signing key through the database.",
  );
  out.push(
    `- Credentials: the bench's admin API key; one user signed up with roleId \`${READER_ROLE}\` and logged in once on each server, ` +
      `giving one JWS (${fmt(r.verification.tokenBytes.jws)} characters) and one JWE (${fmt(r.verification.tokenBytes.jwe)} characters) access token, ` +
      "each used for every request of the run: after its first request a token is served from the verifier's per-process cache " +
      '(runtime/auth/tokens/token-verifier.ts), which is the realistic steady state. All three answer the sample request with the same JSON.',
  );
  out.push(
    `- Noise: the load generator (this process), the servers and PostgreSQL share ${env.cpus} CPUs, and other work may run on the machine ` +
      'at the same time (the "other processes" column): absolute figures are low and vary by several per cent from run to run; ' +
      'compare the ratios, and treat differences of a few per cent as noise.',
  );
  const disturbed =
    r.runs.filter((run) => (run.otherLoad ?? 0) > 0.1).length + ((r.logins.otherLoad ?? 0) > 0.1 ? 1 : 0);
  if (disturbed) {
    out.push(
      '',
      `> **Warning:** in ${disturbed} measurement(s) other processes used more than 10 % of the machine's CPU; those figures are lower and noisier than on a quiet machine.`,
    );
  }
  out.push('');

  out.push('### GET /Order/<id> with a user access token', '');
  out.push(
    `${readOne.description}; ${CONNECTIONS} connections, ${WARMUP_S} s warm-up then ${DURATION_S} s measured per run. The three credentials ` +
      `ran in the order ${ORDER.map((v) => SHORT[v]).join(' → ')} (A B C C B A${ROUNDS > 1 ? `, ${ROUNDS} times` : ''}), each run with its own ` +
      "warm-up, so a drift of the machine over the run weighs on all three alike; each figure below is the mean of a credential's " +
      `${2 * ROUNDS} runs. ` +
      `Aim: JWS ≥ ${fmt(100 * AIM.jws)} % and JWE ≥ ${fmt(100 * AIM.jwe)} % of the API key's requests/s.`,
    '',
  );
  out.push(
    '| credential | server | req/s | p50 (ms) | p99 (ms) | req/s vs API key | aim |',
    '|---|---|--:|--:|--:|--:|:-:|',
  );
  for (const id of VARIANT_IDS) {
    const v = s[id];
    const aim =
      id === 'apiKey'
        ? ''
        : v.rps >= AIM[id] * s.apiKey.rps
          ? `met (≥ ${fmt(100 * AIM[id])} %)`
          : `**missed** (< ${fmt(100 * AIM[id])} %)`;
    out.push(
      `| ${LABEL[id]} | ${r.variants[id].server.name} | ${fmt(v.rps)} | ${fmt(v.p50, 1)} | ${fmt(v.p99, 1)} | ${id === 'apiKey' ? '100 %' : `**${pct(v.rps, s.apiKey.rps)}**`} | ${aim} |`,
    );
  }
  out.push('');
  out.push('Each run:', '');
  out.push(
    '| # | credential | req/s | p50 (ms) | p99 (ms) | responses | machine CPU busy | … interrupts | … other processes |',
    '|--:|---|--:|--:|--:|--:|--:|--:|--:|',
  );
  r.runs.forEach((run, i) => {
    out.push(
      `| ${i + 1} | ${SHORT[run.variant]} | ${fmt(run.rps)} | ${fmt(run.p50)} | ${fmt(run.p99)} | ${fmt(run.requests)} | ${share(run.machineBusy)} | ${share(run.machineIrq)} | ${share(run.otherLoad)} |`,
    );
  });
  out.push('');

  out.push('### Where the time goes', '');
  out.push('Per request, over all runs of each credential:', '');
  out.push('| | API key | JWS | JWE | JWS − API key | JWE − API key |', '|---|--:|--:|--:|--:|--:|');
  const row = (name: string, f: (v: VariantSummary) => number | undefined, digits = 0) => {
    const [a, b, c] = VARIANT_IDS.map((id) => f(s[id]));
    const cell = (x: number | undefined) => (x === undefined ? 'n/a' : fmt(x, digits));
    const diff = (x: number | undefined) =>
      x === undefined || a === undefined ? 'n/a' : `${x - a >= 0 ? '+' : '−'}${fmt(Math.abs(x - a), digits)}`;
    out.push(`| ${name} | ${cell(a)} | ${cell(b)} | ${cell(c)} | ${diff(b)} | ${diff(c)} |`);
  };
  row('server process CPU (µs, all threads)', (v) => v.serverCpuPerRequestUs);
  row('PostgreSQL backends CPU (µs)', (v) => v.pgCpuPerRequestUs);
  row('load generator CPU (µs)', (v) => v.loadCpuPerRequestUs);
  const total = (v: VariantSummary) => v.serverCpuPerRequestUs + (v.pgCpuPerRequestUs ?? 0) + v.loadCpuPerRequestUs;
  row('**all three (µs)**', total);
  row('SQL statements', (v) => v.queriesPerRequest, 2);
  out.push('');
  out.push(
    `CPU per request is less sensitive to the other processes than requests/s: by it, the JWS path costs ${pct(total(s.jws), total(s.apiKey))} ` +
      `and the JWE path ${pct(total(s.jwe), total(s.apiKey))} of the API key's (all three processes together).`,
    '',
  );
  const u = r.unloaded;
  out.push(
    `Latency of one request alone: one connection, requests back to back, ${UNLOADED_S} s per credential on the otherwise idle servers ` +
      '(what a credential adds to each request, without queueing):',
    '',
  );
  out.push('| credential | requests | p50 (ms) | p99 (ms) | p50 − API key (ms) |', '|---|--:|--:|--:|--:|');
  for (const id of VARIANT_IDS) {
    const l = u[id].latenciesMs;
    const d = percentile(l, 50) - percentile(u.apiKey.latenciesMs, 50);
    out.push(
      `| ${SHORT[id]} | ${fmt(l.length)} | ${fmt(percentile(l, 50), 2)} | ${fmt(percentile(l, 99), 2)} | ${id === 'apiKey' ? '' : `${d >= 0 ? '+' : '−'}${fmt(Math.abs(d), 2)}`} |`,
    );
  }
  out.push('');

  const profiled = VARIANT_IDS.filter((id) => r.profiles[id]);
  if (profiled.length === VARIANT_IDS.length) {
    const p = r.profiles as Record<VariantId, VariantProfile>;
    const perReq = (id: VariantId, ms: number) => (1000 * ms) / p[id].requests;
    const get = (id: VariantId, name: string) => p[id].summary.categories.find((c) => c.name === name)?.ms ?? 0;
    const names = [...new Set(VARIANT_IDS.flatMap((id) => p[id].summary.categories.map((c) => c.name)))].filter(
      (n) => n !== IDLE,
    );
    names.sort((x, y) => perReq('jwe', get('jwe', y)) - perReq('jwe', get('jwe', x)));
    out.push(
      `Main thread of the server by category, µs per request (V8 CPU profile, ${PROFILE_S} s per credential under the same load, ` +
        'which slows the server somewhat; the categories are those of `npm run bench`\'s "Where the time goes"):',
      '',
    );
    out.push('| category | API key | JWS | JWE |', '|---|--:|--:|--:|');
    for (const name of names) {
      const values = VARIANT_IDS.map((id) => perReq(id, get(id, name)));
      if (values.every((v) => v < 0.5)) continue;
      out.push(`| ${name} | ${values.map((v) => fmt(v)).join(' | ')} |`);
    }
    out.push(
      `| **total (busy)** | ${VARIANT_IDS.map((id) => `**${fmt(perReq(id, p[id].summary.busyMs))}**`).join(' | ')} |`,
    );
    out.push(
      `| total without socket write syscalls | ${VARIANT_IDS.map((id) => fmt(perReq(id, p[id].summary.busyMs - get(id, SOCKET_WRITE_CATEGORY)))).join(' | ')} |`,
    );
    out.push(
      `| server process CPU while profiled (all threads) | ${VARIANT_IDS.map((id) => fmt(p[id].cpuPerRequestUs)).join(' | ')} |`,
    );
    out.push(
      `| SQL statements while profiled, per request | ${VARIANT_IDS.map((id) => fmt(p[id].statementsPerRequest, 2)).join(' | ')} |`,
    );
    out.push(
      `| … of which revocation checks (svcgen.sessions / revoked_tokens) | ${VARIANT_IDS.map((id) => fmt(p[id].revocationChecksPerRequest, 4)).join(' | ')} |`,
    );
    out.push(
      `| … of which \`SELECT 1\` barriers on the LISTEN connection | ${VARIANT_IDS.map((id) => fmt(p[id].barriersPerRequest, 3)).join(' | ')} |`,
    );
    out.push('');
    const authFunctions = (id: VariantId) =>
      p[id].summary.top.filter(
        (f) =>
          /^svcgen runtime\/(auth|principal|keys)$/.test(f.category) ||
          f.category === 'other packages (jose)' ||
          f.location.startsWith('runtime/db/notifications.ts'),
      );
    out.push('SQL statements while profiled (the most frequent, per request):', '');
    for (const id of VARIANT_IDS) {
      out.push(
        `- ${SHORT[id]}: ${p[id].topStatements.map(([sql, n]) => `${fmt(n, 3)} × \`${sql.length > 160 ? `${sql.slice(0, 160)}…` : sql}\``).join('; ')}`,
      );
    }
    out.push('');
    out.push(
      'Functions of the credential check (runtime/auth, runtime/principal, runtime/keys, jose, the LISTEN channel in runtime/db/notifications.ts) ' +
        'among the top 40 by self time (tsx compiles each file to one line, so the line number is not shown):',
      '',
    );
    out.push('| credential | function | where | µs/request |', '|---|---|---|--:|');
    for (const id of VARIANT_IDS) {
      const fns = authFunctions(id);
      if (fns.length === 0) out.push(`| ${SHORT[id]} | (none) | | |`);
      for (const f of fns)
        out.push(`| ${SHORT[id]} | \`${f.name}\` | ${f.location.replace(/:\d+$/, '')} | ${fmt(perReq(id, f.ms), 1)} |`);
    }
    out.push('');
  }

  const v = r.verification;
  const barriers =
    r.profiles.jws && r.profiles.jwe
      ? `${fmt(r.profiles.jws.barriersPerRequest, 2)} (JWS) and ${fmt(r.profiles.jwe.barriersPerRequest, 2)} (JWE)`
      : '';
  out.push("Token verification, measured in the benchmark process with the environment's keys (median):", '');
  out.push('| | JWS | JWE |', '|---|--:|--:|');
  out.push(`| token length (characters) | ${fmt(v.tokenBytes.jws)} | ${fmt(v.tokenBytes.jwe)} |`);
  out.push(
    `| full verification, \`verifyAccessToken\` (µs) — once per token and process | ${fmt(v.uncachedUs.jws)} | ${fmt(v.uncachedUs.jwe)} |`,
  );
  out.push(
    `| cached path: \`looksLikeJwt\` + Map lookup by token text (µs) — every request | ${fmt(v.cachedUs.jws, 1)} | ${fmt(v.cachedUs.jwe, 1)} |`,
  );
  out.push('');
  out.push(
    `Note: a JWS costs one RS256 signature check (RSA public-key operation, ~${fmt(v.uncachedUs.jws)} µs) and a JWE additionally one ` +
      `RSA-OAEP-256 decryption (private-key operation) plus AES-GCM, ~${fmt(v.uncachedUs.jwe)} µs in all — but only the first time a ` +
      'process sees the token (runtime/auth/tokens/token-verifier.ts caches it by its text), and the revocation query against the ' +
      'database runs once per token and LISTEN epoch. Afterwards each request pays the shape test and a Map lookup (V8 hashes the ' +
      "header's new string each time, linear in its length, so the longer JWE costs a little more), the longer Authorization header " +
      'to read, the in-memory revocation sets, and `NotificationChannel.barrier()` (runtime/db/notifications.ts, awaited by ' +
      '`AccessTokenVerifier.checkRevocation`): a `SELECT 1` round trip on the LISTEN connection, shared by the requests that arrive ' +
      'while one is in flight' +
      (barriers
        ? ` (${barriers} per request under the load above; one per request when requests come one at a time, hence the added unloaded latency)`
        : '') +
      ". The API key's path (runtime/keys) has no per-request round trip.",
    '',
  );

  const l = r.logins;
  const b = r.bcrypt;
  out.push('### Login throughput', '');
  out.push(
    `POST /auth/login with the correct password of one user (failures alone count towards lockout), ${LOGIN_CONNECTIONS} connections, ` +
      `${WARMUP_S} s warm-up then ${DURATION_S} s measured, against the jws server. The limit: ${b.cores} cores ÷ the median time of one ` +
      `cost-${BCRYPT_COST} bcryptjs \`compareSync\` measured in the benchmark process just before (median of ${BCRYPT_SAMPLES}; ` +
      `the server's pool runs one worker thread per core). Aim: ≥ ${fmt(100 * AIM_LOGIN)} % of the limit.`,
    '',
  );
  // Everything a login costs besides the one bcrypt compare, on the same cores.
  const totalCpuMs = (l.serverCpuPerLoginUs + (l.pgCpuPerLoginUs ?? 0) + l.loadCpuPerLoginUs) / 1000;
  out.push('| | |', '|---|--:|');
  out.push(`| logins/s | **${fmt(l.loginsPerSecond, 1)}** |`);
  out.push(`| logins | ${fmt(l.logins)} |`);
  out.push(`| login latency p50 / p99 (ms) | ${fmt(l.p50)} / ${fmt(l.p99)} |`);
  out.push(
    `| bcrypt cost ${BCRYPT_COST} compareSync: wall time, median (min–max) (ms) | ${fmt(b.medianMs, 1)} (${fmt(b.minMs, 1)}–${fmt(b.maxMs, 1)}) |`,
  );
  out.push(`| … CPU time, median (ms) | ${fmt(b.medianCpuMs, 1)} |`);
  out.push(`| bcrypt limit (${b.cores} cores ÷ wall-time median) (logins/s) | ${fmt(b.limit, 1)} |`);
  out.push(
    `| logins/s ÷ limit | **${pct(l.loginsPerSecond, b.limit)}** (aim ≥ ${fmt(100 * AIM_LOGIN)} %: ${l.loginsPerSecond >= AIM_LOGIN * b.limit ? 'met' : '**missed**'}) |`,
  );
  if (l.otherLoad !== undefined && l.otherLoad > 0.02) {
    const available = b.limit * (1 - l.otherLoad);
    out.push(
      `| … against the limit scaled to the CPU share other processes left (limit × ${fmt(100 * (1 - l.otherLoad))} %; an estimate) | ` +
        `${pct(l.loginsPerSecond, available)} |`,
    );
  }
  out.push(
    `| server process CPU per login (ms, all threads, bcrypt workers included) | ${fmt(l.serverCpuPerLoginUs / 1000, 1)} |`,
  );
  out.push(
    `| PostgreSQL backends CPU per login (ms) | ${l.pgCpuPerLoginUs === undefined ? 'n/a' : fmt(l.pgCpuPerLoginUs / 1000, 1)} |`,
  );
  out.push(`| load generator + trickle CPU per login (ms) | ${fmt(l.loadCpuPerLoginUs / 1000, 1)} |`);
  out.push(
    `| bcrypt's share of all that CPU (compare CPU time ÷ the sum of the three above) | ${pct(b.medianCpuMs, totalCpuMs)} |`,
  );
  out.push(`| machine CPU busy / other processes | ${share(l.machineBusy)} / ${share(l.otherLoad)} |`);
  if (l.threadNice) out.push(`| server threads by nice value (/proc, after the load) | ${l.threadNice} |`);
  out.push('');
  out.push(
    "The limit assumes every core does nothing but bcrypt. Here the login path's other work (HTTP, the RS256 signature of the " +
      'access token on the main thread, the session INSERTs in PostgreSQL, the load generator) runs on the same cores, and so did ' +
      "other processes: bcrypt's share of the benchmark's CPU per login is roughly the ceiling of the ratio on this machine. " +
      "The limit is measured at normal priority; if the server's hashing threads run at a higher nice value (see the row above; " +
      'runtime/auth/passwords/password-hasher.ts), they give way to every other process that wants a CPU, so on a shared machine ' +
      "the ratio drops with the other processes' load — by design, not through lost work (the scaled row, shown when other processes were busy, estimates that).",
    '',
  );
  const a = r.loginAnswers;
  const answerRow = (label: string, xs: number[]) =>
    `| ${label} | ${fmt(median(xs), 1)} | ${fmt(percentile(xs, 90), 1)} | ${fmt(median(xs) / median(a.wrongPassword), 2)} |`;
  out.push('### Login answers: unknown e-mail, wrong and right password', '');
  out.push(
    `POST /auth/login against the idle jws server, one request at a time, ${ANSWER_ROUNDS} rounds of the three in turn (after ${ANSWER_WARMUP} left out). ` +
      'Each answer costs one bcrypt comparison (an unknown e-mail is compared with a dummy hash of the same cost), so that the time does ' +
      'not tell whether an account exists; the right password adds the session and the signed tokens.',
    '',
    '| login | median (ms) | p90 (ms) | median ÷ wrong password |',
    '|---|--:|--:|--:|',
    answerRow('unknown e-mail (401)', a.unknownEmail),
    answerRow('wrong password (401)', a.wrongPassword),
    answerRow('right password (200)', a.rightPassword),
    '',
  );
  out.push(
    `Meanwhile, GET /Order/<id> with the API key from a separate loop of the benchmark process, one request at a time, one every ` +
      `${TRICKLE_INTERVAL_MS} ms (${fmt(1000 / TRICKLE_INTERVAL_MS)}/s), against the same server; for reference the same trickle on the idle server ` +
      `(${IDLE_TRICKLE_S} s) just before:`,
    '',
  );
  const delay = (d: LoopDelay) => `${fmt(d.p50Ms, 1)} / ${fmt(d.p99Ms, 1)} / ${fmt(d.maxMs, 1)}`;
  out.push(
    '| trickle | requests | p50 (ms) | p99 (ms) | max (ms) | failed | server event loop delay p50 / p99 / max (ms) |',
    '|---|--:|--:|--:|--:|--:|--:|',
  );
  out.push(`| idle server | ${trickleRow(r.idleTrickle).join(' | ')} | ${delay(r.idleLoopDelay)} |`);
  out.push(`| during the login load | ${trickleRow(l.trickle).join(' | ')} | ${delay(l.loopDelay)} |`);
  out.push('');
  out.push(
    "Event loop delay: the time between runs of a 1 ms timer on the server's main thread (perf_hooks monitorEventLoopDelay in " +
      'the child harness; about 1 ms on an idle loop). bcrypt runs in worker threads, so a stalled loop would show here as a large maximum; a trickle latency well ' +
      'above the loop delay is time the process waited for a CPU (the bcrypt workers keep both cores busy) or PostgreSQL.',
    '',
  );
  return out.join('\n');
}

// ---- main -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const cleanups = cleanupOnExit(log);

  // Read now: the children load the runtime as it is at their start.
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
    const backends = new BackendCpu(admin, database.name);

    // Both servers before any token exists (the keys are made by the first start and read by the second).
    const servers = {} as Record<'jws' | 'jwe', ServerChild>;
    for (const kind of ['jws', 'jwe'] as const) {
      const child = await startServerChild(`${kind} server`, 'bench/svcgen-server.ts', {
        BENCH_DATABASE_URL: database.url,
        BENCH_CONFIG_PATCH: JSON.stringify(configPatch(kind === 'jwe')),
      });
      cleanups.add(() => child.stop());
      servers[kind] = child;
      log(`${child.name}: ${child.url} (pid ${child.pid})`);
    }

    await expectStatus(
      'POST /auth/signup',
      send(`${servers.jws.url}/auth/signup`, {
        method: 'POST',
        headers: { 'x-project-id': fixture.projectId },
        body: { ...USER, roleId: READER_ROLE },
      }),
      201,
    );
    const tokens = { jws: await login(servers.jws, fixture), jwe: await login(servers.jwe, fixture) };
    if (tokens.jws.split('.').length !== 3) throw new Error('the jws server did not issue a JWS (3 parts)');
    if (tokens.jwe.split('.').length !== 5) throw new Error('the jwe server did not issue a JWE (5 parts)');
    log(
      `signed up ${USER.email} (role ${READER_ROLE}); tokens: JWS ${tokens.jws.length} characters, JWE ${tokens.jwe.length}`,
    );

    const variants: Record<VariantId, Variant> = {
      apiKey: {
        id: 'apiKey',
        label: `${LABEL.apiKey} → jws server`,
        server: servers.jws,
        authorization: `Bearer ${fixture.apiKey}`,
      },
      jws: {
        id: 'jws',
        label: `${LABEL.jws} → jws server`,
        server: servers.jws,
        authorization: `Bearer ${tokens.jws}`,
      },
      jwe: {
        id: 'jwe',
        label: `${LABEL.jwe} → jwe server`,
        server: servers.jwe,
        authorization: `Bearer ${tokens.jwe}`,
      },
    };
    // Same answer with every credential (and the user may read orders).
    const samplePath = readOne.sample(fixture).path;
    const answers = await Promise.all(
      VARIANT_IDS.map((id) =>
        expectStatus(
          `GET ${samplePath} with ${LABEL[id]}`,
          send(`${variants[id].server.url}${samplePath}`, {
            headers: dataHeaders(fixture, variants[id].authorization),
          }),
          200,
        ),
      ),
    );
    for (const [i, answer] of answers.entries()) {
      if (!isDeepStrictEqual(answer.body, answers[0]!.body)) {
        throw new Error(
          `GET ${samplePath}: ${LABEL[VARIANT_IDS[i]!]} got another answer than the API key:\n  ${answer.text.slice(0, 400)}\n  ${answers[0]!.text.slice(0, 400)}`,
        );
      }
    }
    log('all three credentials read the same order');

    const runs: ReadRun[] = [];
    for (const [i, id] of ORDER.entries()) {
      log(
        `run ${i + 1}/${ORDER.length}: GET /Order/<id>, ${variants[id].label}: ${WARMUP_S} s warm-up, ${DURATION_S} s measured`,
      );
      const run = await measureReads(variants[id], fixture, backends);
      runs.push(run);
      log(
        `  ${fmt(run.rps)} req/s, p50 ${run.p50} ms, p99 ${run.p99} ms; server CPU ${fmt(run.serverCpuUs / run.requests)} µs/request; ` +
          `machine busy ${share(run.machineBusy)}, other processes ${share(run.otherLoad)}`,
      );
    }
    const summaries = Object.fromEntries(
      VARIANT_IDS.map((id) => [id, summarize(runs.filter((r) => r.variant === id))]),
    ) as Record<VariantId, VariantSummary>;

    const profiles: Partial<Record<VariantId, VariantProfile>> = {};
    if (PROFILE_S > 0) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-bench-auth-'));
      for (const id of VARIANT_IDS) {
        log(`profiling ${variants[id].label} (${PROFILE_S} s)`);
        profiles[id] = await profileReads(variants[id], fixture, dir);
      }
      log(`CPU profiles (.cpuprofile) in ${dir}`);
    }

    log(`unloaded latency: one connection, back to back, ${UNLOADED_S} s per credential`);
    const unloaded = {} as Record<VariantId, TrickleResult>;
    for (const id of VARIANT_IDS) unloaded[id] = await unloadedLatency(variants[id], fixture);

    log('measuring token verification in this process');
    const verification = await measureVerification(database.url, fixture.projectId, tokens);

    log(`bcrypt: ${BCRYPT_SAMPLES} × compareSync, cost ${BCRYPT_COST}`);
    const bcryptLimit = measureBcrypt();
    log(
      `  median ${fmt(bcryptLimit.medianMs, 1)} ms → limit ${fmt(bcryptLimit.limit, 1)} logins/s on ${bcryptLimit.cores} cores`,
    );

    log(`trickle of GET /Order/<id> on the idle jws server (${IDLE_TRICKLE_S} s)`);
    await servers.jws.startLoopDelay();
    const idle = startTrickle(servers.jws, fixture);
    await sleep(IDLE_TRICKLE_S * 1000);
    const idleTrickle = await idle.stop();
    const idleLoopDelay = await servers.jws.stopLoopDelay();
    if (idleTrickle.failures.length)
      throw new Error(`the idle trickle failed: ${idleTrickle.failures.slice(0, 3).join('; ')}`);

    log(
      `POST /auth/login, ${LOGIN_CONNECTIONS} connections: ${WARMUP_S} s warm-up, ${DURATION_S} s measured, with the trickle`,
    );
    const logins = await measureLogins(servers.jws, fixture, backends);
    if (logins.trickle.failures.length)
      throw new Error(`the trickle during the login load failed: ${logins.trickle.failures.slice(0, 3).join('; ')}`);
    log(
      `  ${fmt(logins.loginsPerSecond, 1)} logins/s (${pct(logins.loginsPerSecond, bcryptLimit.limit)} of the limit), p99 ${logins.p99} ms`,
    );

    log(`login answers: unknown e-mail, wrong and right password, ${ANSWER_ROUNDS} rounds one at a time`);
    const loginAnswers = await measureLoginAnswers(servers.jws, fixture);
    log(
      `  medians ${fmt(median(loginAnswers.unknownEmail), 1)} / ${fmt(median(loginAnswers.wrongPassword), 1)} / ${fmt(median(loginAnswers.rightPassword), 1)} ms`,
    );

    const env: Environment = {
      date: reportDate(),
      revision,
      cpus: os.availableParallelism(),
      cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown CPU',
      os: `${os.type()} ${os.release()}`,
      node: process.version,
      postgres: await serverVersion(database.url),
      databaseServer: dbServer.origin,
    };
    const section = report({
      env,
      variants,
      runs,
      summaries,
      profiles,
      verification,
      bcrypt: bcryptLimit,
      idleTrickle,
      idleLoopDelay,
      logins,
      loginAnswers,
      unloaded,
    });
    writeSection(RESULTS_FILE, SECTION, section);
    log(`wrote the section "${SECTION}" of ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.log(section);
  } finally {
    await cleanups.finish();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench:auth] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
