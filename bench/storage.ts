/**
 * `npm run bench:storage`: file storage on local disk (docs/storage.md) against a bare node:http
 * server streaming to and from disk, in the same run. Writes the section "## File storage" of
 * bench/RESULTS.md. Not run by CI.
 *
 *   1. svcgen compiled (dist/, `tsc -p tsconfig.build.json`) and laid out as an installed package
 *      in a temp dir (its bin/ copied, dist/ and node_modules linked), so bin/svcgen.js runs the
 *      compiled JavaScript as after `npm install svcgen`;
 *   2. a fresh database with the shop's migrations (./database.ts) and an admin API key;
 *   3. a copy of examples/shop with a bucket `bench` (application/octet-stream, up to 2 GiB, the
 *      admin role may do everything), the files in a temp dir, the data rate limits out of reach and
 *      http.requestTimeoutMs at 10 minutes (a 1 GiB upload on a loaded machine takes longer than
 *      the default 30 s), served by `svcgen serve --database-url <url>` with default flags (request
 *      log at info to a file);
 *   4. the bare server (./storage-bare-server.ts): node:http, pipeline(req, fs.createWriteStream)
 *      and pipeline(fs.createReadStream, res), nothing else;
 *   5. per round: 1-byte uploads (what an upload costs besides its bytes), sequential uploads and
 *      downloads of 1 MiB and 100 MiB (MB/s over the time of the requests alone), the requests
 *      alternating between the two servers (A B, B A, ...; who starts rotates with the round) so
 *      that the drift of a shared machine hits both alike; then 200 concurrent downloads of a
 *      100 kB file (autocannon: p50, p99, req/s), one server after the other; after the rounds,
 *      once per server, the RSS of the process that serves (the one holding the listening socket)
 *      sampled every 250 ms on a worker thread during a 1 GiB upload.
 *
 * The client is undici (one keep-alive connection per server for the sequential cases), sending the same
 * 64 KiB of random bytes over and over (no disk read on its side) and counting what it receives;
 * its CPU share is reported, so a client at 100 % of a CPU shows. Every svcgen upload's size and
 * sha256 are checked against what was sent; every answer must have the expected status.
 *
 * `--quick`: 1 MiB, 10 MiB and 100 MiB instead of 1 MiB, 100 MiB and 1 GiB, fewer requests, one
 * round, shorter concurrency runs (a smoke test; it writes the section too, saying so).
 * `BENCH_STORAGE_PROFILE=<case>` (upload-small, upload-large, download-small, download-large, upload-1-byte): no
 * report; svcgen serve runs under V8's CPU profiler (the one behind --cpu-prof) while the client repeats that case
 * for 20 s, then the profile's summary (./profile.ts) is printed: where svcgen's time goes.
 * `BENCH_STORAGE_CASES=<case>,...` (the cases above, and `upload-1-byte`): only those, round by round, with the
 * 1-byte uploads and the warm-up, no concurrency runs, no RSS upload and no report; each round logs MB/s and the
 * server's CPU ms per request of both servers, and the end the median ratio (a quick A/B of one change).
 * Environment: SVCGEN_BENCH_DATABASE_URL or DATABASE_URL (else the local server or an embedded
 * one, as ./database.ts finds it), BENCH_ROUNDS, BENCH_RESULTS; BENCH_NOTE: a sentence put into the
 * report as it is (what else ran on the machine, say).
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import autocannon from 'autocannon';
import { Agent, request, stream } from 'undici';
import { buildSvcgen, REPO, startServerChild } from './children.ts';
import { cleanupOnExit } from './cleanups.ts';
import { summarizeProfile } from './profile.ts';
import { processTree, serveCli, treeCpuMicros, treeCpuSpent } from './cli-server.ts';
import { machineBusy, machineSample } from './cpu.ts';
import { createBenchDatabase, findDatabaseServer, prepareDatabase, serverVersion } from './database.ts';
import { gitRevision, reportDate, writeSection } from './results-file.ts';

const QUICK = process.argv.includes('--quick');
const MiB = 1024 * 1024;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 1 : 5));
const SMALL = { size: MiB, count: QUICK ? 10 : 60, label: '1 MiB' };
const LARGE = QUICK ? { size: 10 * MiB, count: 2, label: '10 MiB' } : { size: 100 * MiB, count: 3, label: '100 MiB' };
const HUGE = QUICK ? { size: 100 * MiB, label: '100 MiB' } : { size: 1024 * MiB, label: '1 GiB' };
const CONCURRENT = {
  size: 100_000,
  connections: 200,
  warmupS: QUICK ? 1 : 2,
  durationS: QUICK ? 3 : 10,
};
const RSS_INTERVAL_MS = 250;
/** Mean machine busy share above which the report warns that other processes shared the machine. */
const BUSY_WARNING = 0.9;
const FIXED_COUNT = QUICK ? 10 : 40;
/** Aims of the issue: svcgen at least this share of the bare server's throughput; RSS within ± this during the big upload. */
const AIM = { ratio: 0.7, rssMiB: 20 };
const CHUNK = randomBytes(64 * 1024);
const BUCKET = 'bench';
const PROJECT_ID = 'shop';
const RESULTS_FILE = process.env.BENCH_RESULTS
  ? path.resolve(process.env.BENCH_RESULTS)
  : path.join(REPO, 'bench', 'RESULTS.md');
const SECTION = '## File storage';

const log = (message: string) => console.error(`[bench:storage] ${message}`);
const fmt = (n: number, digits = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const pct = (a: number, b: number) => `${fmt((100 * a) / b)} %`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

const SERVERS = ['svcgen', 'bare'] as const;
type ServerName = (typeof SERVERS)[number];

/** `size` bytes: CHUNK over and over, the last one cut. */
async function* bytes(size: number): AsyncGenerator<Buffer> {
  for (let sent = 0; sent < size; sent += CHUNK.length)
    yield sent + CHUNK.length <= size ? CHUNK : CHUNK.subarray(0, size - sent);
}

function sha256Of(size: number): string {
  const hash = createHash('sha256');
  for (let sent = 0; sent < size; sent += CHUNK.length)
    hash.update(sent + CHUNK.length <= size ? CHUNK : CHUNK.subarray(0, size - sent));
  return hash.digest('hex');
}

/** What the client does with one server: upload, download and delete files it names by a ref. */
interface Target {
  readonly name: ServerName;
  readonly url: string;
  readonly pid: number;
  upload(size: number): Promise<string>;
  downloadPath(ref: string): string;
  /** Deletes the file and resolves once its bytes are gone from disk (svcgen removes them in a background job). */
  remove(ref: string): Promise<void>;
  readonly headers: Record<string, string>;
}

const agent = new Agent({
  connections: CONCURRENT.connections + 8,
  keepAliveTimeout: 30_000,
  bodyTimeout: 0,
  headersTimeout: 0,
});

async function expectStatus(res: Awaited<ReturnType<typeof request>>, status: number, what: string): Promise<string> {
  const text = await res.body.text();
  if (res.statusCode !== status)
    throw new Error(`${what}: expected ${status}, got ${res.statusCode}: ${text.slice(0, 500)}`);
  return text;
}

function svcgenTarget(url: string, pid: number, apiKey: string, sums: Map<number, string>, filesDir: string): Target {
  const headers = { 'x-project-id': PROJECT_ID, authorization: `Bearer ${apiKey}` };
  const base = `${url}/gw/api/rest/_files/${BUCKET}`;
  return {
    name: 'svcgen',
    url,
    pid,
    headers,
    async upload(size) {
      const res = await request(`${base}?name=bench-${size}.bin`, {
        method: 'POST',
        dispatcher: agent,
        headers: { ...headers, 'content-type': 'application/octet-stream', 'content-length': String(size) },
        body: Readable.from(bytes(size), { objectMode: false }),
      });
      const { data } = JSON.parse(await expectStatus(res, 201, `svcgen upload of ${size} bytes`));
      let sum = sums.get(size);
      if (sum === undefined) sums.set(size, (sum = sha256Of(size)));
      if (data.size !== size || data.sha256 !== sum)
        throw new Error(`svcgen stored ${data.size} bytes with sha256 ${data.sha256}; sent ${size} with ${sum}`);
      return data.id as string;
    },
    downloadPath: (id) => `/gw/api/rest/_files/${BUCKET}/${id}/content`,
    async remove(id) {
      await expectStatus(
        await request(`${base}/${id}`, { method: 'DELETE', dispatcher: agent, headers }),
        204,
        'svcgen delete',
      );
      const bytesOf = path.join(filesDir, 'master', BUCKET, id);
      for (let waited = 0; fs.existsSync(bytesOf); waited += 20) {
        if (waited > 60_000) throw new Error(`svcgen kept the bytes of deleted file ${id} for a minute`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
  };
}

function bareTarget(url: string, pid: number): Target {
  let next = 0;
  return {
    name: 'bare',
    url,
    pid,
    headers: {},
    async upload(size) {
      const ref = `upload-${next++}.bin`;
      const res = await request(`${url}/files/${ref}`, {
        method: 'PUT',
        dispatcher: agent,
        headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
        body: Readable.from(bytes(size), { objectMode: false }),
      });
      const { size: stored } = JSON.parse(await expectStatus(res, 201, `bare upload of ${size} bytes`));
      if (stored !== size) throw new Error(`bare stored ${stored} bytes of ${size}`);
      return ref;
    },
    downloadPath: (ref) => `/files/${ref}`,
    async remove(ref) {
      await expectStatus(
        await request(`${url}/files/${ref}`, { method: 'DELETE', dispatcher: agent }),
        204,
        'bare delete',
      );
    },
  };
}

/** One download, its bytes counted and dropped by a Writable (undici's stream(): the client's cheapest way to take a body). */
async function download(target: Target, ref: string, size: number): Promise<void> {
  let received = 0;
  let status = 0;
  await stream(
    `${target.url}${target.downloadPath(ref)}`,
    { method: 'GET', dispatcher: agent, headers: target.headers },
    ({ statusCode }) => {
      status = statusCode;
      return new Writable({
        write(chunk: Buffer, _encoding, done) {
          received += chunk.length;
          done();
        },
      });
    },
  );
  if (status !== 200 || received !== size)
    throw new Error(`${target.name} download: status ${status}, ${received} bytes of ${size}`);
}

/** Where the CPUs went during one measurement, as shares of its wall time (1 = one whole CPU). */
interface CpuShares {
  server: number;
  client: number;
  busy: number | undefined;
}

async function withCpu<T>(target: Target, run: () => Promise<T>): Promise<{ value: T; ms: number; cpu: CpuShares }> {
  const serverBefore = treeCpuMicros(target.pid);
  const clientBefore = process.cpuUsage();
  const machineBefore = machineSample();
  const start = performance.now();
  const value = await run();
  const ms = performance.now() - start;
  const client = process.cpuUsage(clientBefore);
  const busy = machineBusy(machineBefore, machineSample())?.busy;
  const server = treeCpuSpent(serverBefore, treeCpuMicros(target.pid));
  return { value, ms, cpu: { server: server / 1000 / ms, client: (client.user + client.system) / 1000 / ms, busy } };
}

interface Throughput {
  mbps: number;
  /** mean time of one request, ms */
  msEach: number;
  cpu: CpuShares;
}

/** Which stored file a download case reads. */
type StoredFiles = { small: string; large: string; concurrent: string };

/**
 * `count` sequential transfers of `size` bytes to or from each of `targets`, interleaved request
 * by request (A B, B A, A B, ...), so that the drift of a shared machine's speed hits both alike.
 * MB/s over each server's own request times; CPU shares over them too. Uploaded files are deleted
 * after all transfers (svcgen's background removals would otherwise run during the next upload).
 */
async function transfers(
  targets: Target[],
  kind: 'upload' | 'download',
  size: number,
  count: number,
  file: (target: Target) => string,
): Promise<Map<Target, Throughput>> {
  const sums = new Map(targets.map((t) => [t, { ms: 0, server: 0, client: 0, refs: [] as string[] }]));
  const machineBefore = machineSample();
  for (let i = 0; i < count; i++) {
    for (let k = 0; k < targets.length; k++) {
      const target = targets[(i + k) % targets.length]!;
      const one = await withCpu(target, () =>
        kind === 'upload' ? target.upload(size) : download(target, file(target), size).then(() => undefined),
      );
      const sum = sums.get(target)!;
      sum.ms += one.ms;
      sum.server += one.cpu.server * one.ms;
      sum.client += one.cpu.client * one.ms;
      if (one.value !== undefined) sum.refs.push(one.value);
    }
  }
  const busy = machineBusy(machineBefore, machineSample())?.busy;
  const out = new Map<Target, Throughput>();
  for (const [target, sum] of sums) {
    for (const ref of sum.refs) await target.remove(ref);
    out.set(target, {
      mbps: (size * count) / MiB / (sum.ms / 1000),
      msEach: sum.ms / count,
      cpu: { server: sum.server / sum.ms, client: sum.client / sum.ms, busy },
    });
  }
  return out;
}

interface Concurrent {
  rps: number;
  p50: number;
  p99: number;
  cpu: CpuShares;
}

async function concurrentDownloads(target: Target, ref: string, seconds: number): Promise<Concurrent> {
  const options = {
    url: `${target.url}${target.downloadPath(ref)}`,
    connections: CONCURRENT.connections,
    headers: target.headers,
  };
  const run = await withCpu(target, async () => await autocannon({ ...options, duration: seconds }));
  const result = run.value;
  if (result.non2xx || result.errors || result.timeouts)
    throw new Error(
      `${target.name}: concurrent downloads had ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`,
    );
  const perResponse = result.throughput.total / result.requests.total;
  if (perResponse < CONCURRENT.size)
    throw new Error(`${target.name}: ${fmt(perResponse)} bytes per response, expected the whole file`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, cpu: run.cpu };
}

/**
 * The pid among `pid` and its descendants that holds the listening socket of `url`'s port (Linux
 * /proc/net/tcp*: the LISTEN socket's inode, then /proc/<pid>/fd): the process that serves, whose
 * memory the RSS table reports. Throws when none does (the bench would measure the wrong process).
 */
function servingPid(pid: number, url: string): number {
  const port = Number(new URL(url).port);
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let lines: string[] = [];
    try {
      lines = fs.readFileSync(table, 'utf8').trim().split('\n').slice(1);
    } catch {
      continue;
    }
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      // local_address is <hex ip>:<hex port>; st 0A is LISTEN; the inode is the tenth field
      if (Number.parseInt(f[1]!.split(':')[1]!, 16) === port && f[3] === '0A') inodes.add(`socket:[${f[9]}]`);
    }
  }
  for (const p of processTree(pid)) {
    let fds: string[] = [];
    try {
      fds = fs.readdirSync(`/proc/${p}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (inodes.has(fs.readlinkSync(`/proc/${p}/fd/${fd}`))) return p;
      } catch {
        // closed meanwhile
      }
    }
  }
  throw new Error(`no process in the tree of pid ${pid} listens on port ${port}`);
}

/** Resident set size of one process, MiB (Linux /proc VmRSS). */
function rssMiB(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? Number.NaN) / 1024;
}

/**
 * Samples a process's VmRSS every `intervalMs` on a worker thread: the bench's own thread is busy
 * sending the upload, and a timer there fires late and seldom. Resolves once the worker took its
 * first sample; stop() resolves with all of them (a last one taken at stop).
 */
async function rssSampler(pid: number, intervalMs: number): Promise<{ stop(): Promise<number[]> }> {
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const read = () => Number(/^VmRSS:\\s+(\\d+) kB/m.exec(fs.readFileSync('/proc/' + workerData.pid + '/status', 'utf8'))[1]) / 1024;
const samples = [read()];
const timer = setInterval(() => samples.push(read()), workerData.intervalMs);
parentPort.postMessage('ready');
parentPort.once('message', () => { clearInterval(timer); samples.push(read()); parentPort.postMessage(samples); });`,
    { eval: true, workerData: { pid, intervalMs } },
  );
  await new Promise<void>((resolve, reject) => {
    worker.once('message', () => resolve());
    worker.once('error', reject);
  });
  return {
    stop: () =>
      new Promise<number[]>((resolve, reject) => {
        worker.once('message', (samples: number[]) => {
          void worker.terminate();
          resolve(samples);
        });
        worker.once('error', reject);
        worker.postMessage('stop');
      }),
  };
}

interface RssRun {
  /** the process measured: the one holding the listening socket */
  pid: number;
  before: number;
  samples: number[];
  after: number;
  mbps: number;
  seconds: number;
}

/** One upload of `size` bytes while the serving process's RSS is sampled every RSS_INTERVAL_MS. */
/** The most any sample rose above the lowest sample before it. */
function rssGrowth(samples: readonly number[]): number {
  let lowest = Number.POSITIVE_INFINITY;
  let growth = 0;
  for (const x of samples) {
    lowest = Math.min(lowest, x);
    growth = Math.max(growth, x - lowest);
  }
  return growth;
}

async function rssDuringUpload(target: Target, size: number): Promise<RssRun> {
  const pid = servingPid(target.pid, target.url);
  const before = rssMiB(pid);
  const sampler = await rssSampler(pid, RSS_INTERVAL_MS);
  const start = performance.now();
  let ref: string;
  let samples: number[];
  try {
    ref = await target.upload(size);
  } finally {
    samples = await sampler.stop();
  }
  const ms = performance.now() - start;
  const after = rssMiB(pid);
  await target.remove(ref);
  return { pid, before, samples, after, mbps: size / MiB / (ms / 1000), seconds: ms / 1000 };
}

/** svcgen laid out as `npm install` would: bin/ copied (so it finds no cli/main.ts and runs dist/), dist/ compiled. */
async function installedSvcgen(dir: string): Promise<string> {
  buildSvcgen();
  const pkg = path.join(dir, 'svcgen');
  await mkdir(path.join(pkg, 'bin'), { recursive: true });
  for (const file of ['svcgen.js', 'resolve-fallback.js'])
    await cp(path.join(REPO, 'bin', file), path.join(pkg, 'bin', file));
  await cp(path.join(REPO, 'package.json'), path.join(pkg, 'package.json'));
  for (const item of ['dist', 'node_modules', 'templates'])
    await symlink(path.join(REPO, item), path.join(pkg, item), 'dir');
  return path.join(pkg, 'bin', 'svcgen.js');
}

/** A copy of examples/shop with the bench bucket, its files under `filesDir`. */
async function benchProject(dir: string, filesDir: string): Promise<string> {
  const project = path.join(dir, 'shop');
  for (const item of ['package.json', 'schema.prisma', 'svcgen.config.json', 'migrations', 'generated'])
    await cp(path.join(REPO, 'examples/shop', item), path.join(project, item), { recursive: true });
  const file = path.join(project, 'svcgen.config.json');
  const config = JSON.parse(await readFile(file, 'utf8'));
  config.rateLimits = {
    ...config.rateLimits,
    dataPerMinutePerProject: 1_000_000_000,
    dataPerMinutePerCaller: 1_000_000_000,
  };
  // 200 concurrent downloads from 127.0.0.1: past http.maxConnectionsPerAddress (200) with the rest.
  config.http = { ...config.http, requestTimeoutMs: 600_000, maxConnectionsPerAddress: null };
  config.storage = {
    ...config.storage,
    root: filesDir,
    // Throughput, not the per-caller limits: one key makes every upload (files of up to 2 GiB) and 200 concurrent downloads.
    limits: {
      uploadsPerMinutePerCaller: null,
      bytesPerDayPerCaller: null,
      concurrentUploadsPerCaller: null,
      concurrentDownloadsPerCaller: null,
    },
    buckets: {
      ...config.storage?.buckets,
      [BUCKET]: {
        maxBytes: 2048 * MiB,
        contentTypes: ['application/octet-stream'],
        roles: { admin: { read: true, create: true, delete: true } },
      },
    },
  };
  await writeFile(file, JSON.stringify(config, null, 2));
  return project;
}

type Case = 'upload-small' | 'upload-large' | 'download-small' | 'download-large';
const CASES: { id: Case; title: string }[] = [
  { id: 'upload-small', title: `upload ${SMALL.label} (× ${SMALL.count})` },
  { id: 'upload-large', title: `upload ${LARGE.label} (× ${LARGE.count})` },
  { id: 'download-small', title: `download ${SMALL.label} (× ${SMALL.count})` },
  { id: 'download-large', title: `download ${LARGE.label} (× ${LARGE.count})` },
];

interface Results {
  throughput: Map<Case, Record<ServerName, Throughput[]>>;
  concurrent: Record<ServerName, Concurrent[]>;
  /** ms per upload of one byte: what an upload costs besides its bytes */
  fixed: Record<ServerName, number[]>;
  rss: Record<ServerName, RssRun>;
}

/** The round whose MB/s is the median, with the CPU shares measured in it. */
function medianRun<T>(runs: T[], key: (t: T) => number): T {
  const m = median(runs.map(key));
  return runs.find((r) => key(r) === m)!;
}

function report(results: Results, env: { date: string; revision: string; postgres: string }): string {
  const out: string[] = [SECTION, ''];
  const share = (x: number | undefined) => (x === undefined ? 'n/a' : pct(x, 1));
  out.push(
    `Written by \`npm run bench:storage${QUICK ? ' -- --quick' : ''}\` (bench/storage.ts) on ${env.date}, commit ${env.revision}; ` +
      `Node.js ${process.version}, PostgreSQL ${env.postgres}; ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim() ?? 'unknown'}) ` +
      `shared by the client, both servers and PostgreSQL; files on ${diskOf(os.tmpdir())}.`,
    '',
  );
  if (process.env.BENCH_NOTE) out.push(`> ${process.env.BENCH_NOTE}`, '');
  if (QUICK)
    out.push(
      '**`--quick` run: small sizes, one round. A smoke test, not figures to compare; run without `--quick`.**',
      '',
    );
  out.push(
    '**svcgen**: `svcgen serve --database-url <url>` with default flags (request log at info, stdout to a file), compiled (dist/) and run ' +
      'through bin/svcgen.js as after `npm install`, on a copy of examples/shop with a bucket `bench` (application/octet-stream, up to 2 GiB, admin may ' +
      'do everything) on local disk, the data rate limits out of reach and `http.requestTimeoutMs` at 10 minutes; raw-body uploads ' +
      '(`POST /_files/bench?name=…`, Content-Type and Content-Length) with an admin API key, each checked (size, sha256) and deleted again ' +
      'outside the measured time; downloads of `GET /_files/bench/<id>/content`. **bare**: bench/storage-bare-server.ts, node:http with ' +
      '`pipeline(req, fs.createWriteStream(file))` and `pipeline(fs.createReadStream(file), res)`: no credentials, no hash, no size limit, ' +
      'no metadata row, no rename into place.',
    '',
    `Client: undici in the bench process, keep-alive connections, sending the same 64 KiB of random bytes over and over and dropping what ` +
      `it receives. Sequential transfers alternate request by request between the servers (A B, B A, …; who starts rotates with the round), ` +
      `so that the drift of a shared machine hits both alike; MB/s = MiB moved / seconds of that server's requests. ${ROUNDS} round${ROUNDS > 1 ? 's' : ''}; each ` +
      `MB/s is each server's median round; svcgen / bare is the median of the rounds' ratios (each round measures both side by side). ` +
      "CPU shares are of the measured wall time (100 % = one whole CPU): svcgen's or bare's process (all threads), the client, and the whole machine busy.",
    '',
    `Aims: svcgen at least ${AIM.ratio * 100} % of bare's MB/s on every transfer; RSS during a ${HUGE.label} upload flat: no sample ` +
      `more than ${AIM.rssMiB} MiB above the lowest one before it ("growth": memory the collector hands back is not growth), ` +
      `and none more than ${AIM.rssMiB} MiB above the value before the upload.`,
    '',
  );
  const busy = [...results.throughput.values()]
    .flatMap((r) => r.svcgen.map((m) => m.cpu.busy))
    .filter((b) => b !== undefined);
  const meanBusy = busy.reduce((a, b) => a + b, 0) / (busy.length || 1);
  if (busy.length && meanBusy >= BUSY_WARNING)
    out.push(
      `> **The machine was busy: ${pct(meanBusy, 1)} of all CPUs on average during the transfers**, more than the client and one server ` +
        'use (the CPU columns below); other processes shared the CPUs and the disk, and the figures vary from round to round with them. ' +
        'Rerun `npm run bench:storage` (about 4 minutes) on a quiet machine for figures to quote.',
      '',
    );
  out.push(
    '| transfer | svcgen MB/s | bare MB/s | svcgen / bare | aim | svcgen CPU | bare CPU | client CPU (with svcgen / bare) |',
    '|---|--:|--:|--:|:-:|--:|--:|--:|',
  );
  for (const c of CASES) {
    const runs = results.throughput.get(c.id)!;
    const s = medianRun(runs.svcgen, (r) => r.mbps);
    const b = medianRun(runs.bare, (r) => r.mbps);
    const ratio = median(runs.svcgen.map((r, i) => r.mbps / runs.bare[i]!.mbps));
    out.push(
      `| ${c.title} | ${fmt(s.mbps)} | ${fmt(b.mbps)} | **${pct(ratio, 1)}** | ${ratio >= AIM.ratio ? 'met' : 'missed'} | ` +
        `${share(s.cpu.server)} | ${share(b.cpu.server)} | ${share(s.cpu.client)} / ${share(b.cpu.client)} |`,
    );
  }
  out.push(
    '',
    'MB/s of every round (machine busy share during the case in brackets) and svcgen / bare per round:',
    '',
    '| transfer | svcgen | bare | svcgen / bare |',
    '|---|---|---|---|',
  );
  for (const c of CASES) {
    const runs = results.throughput.get(c.id)!;
    const list = (rs: Throughput[]) => rs.map((r) => `${fmt(r.mbps)} (${share(r.cpu.busy)})`).join(' / ');
    const ratios = runs.svcgen.map((r, i) => pct(r.mbps, runs.bare[i]!.mbps)).join(' / ');
    out.push(`| ${c.title} | ${list(runs.svcgen)} | ${list(runs.bare)} | ${ratios} |`);
  }
  const fs0 = median(results.fixed.svcgen);
  const fb = median(results.fixed.bare);
  out.push(
    '',
    `What an upload costs besides its bytes: ms per upload of 1 byte (× ${FIXED_COUNT}, sequential), median round: svcgen ${fmt(fs0, 2)}, ` +
      `bare ${fmt(fb, 2)} (rounds: svcgen ${results.fixed.svcgen.map((x) => fmt(x, 2)).join(' / ')}; bare ${results.fixed.bare.map((x) => fmt(x, 2)).join(' / ')}). ` +
      'svcgen checks the API key and the rate limit, holds back the first bytes for the type check, writes into `.incoming/` and renames into place, ' +
      'and inserts the metadata row (with its webhook event capture) in one statement (the bucket has no quota, no daily limit is set, ' +
      'no Idempotency-Key is sent: nothing else to do in a transaction); bare opens, writes and closes a file.',
  );
  const cs = medianRun(results.concurrent.svcgen, (r) => r.rps);
  const cb = medianRun(results.concurrent.bare, (r) => r.rps);
  out.push(
    '',
    `### ${CONCURRENT.connections} concurrent downloads of a ${fmt(CONCURRENT.size / 1000)} kB file`,
    '',
    `autocannon, ${CONCURRENT.connections} connections, ${CONCURRENT.warmupS} s warm-up then ${CONCURRENT.durationS} s measured; the median round by requests/s.`,
    '',
    '| | svcgen | bare | svcgen / bare |',
    '|---|--:|--:|--:|',
    `| requests/s | ${fmt(cs.rps)} | ${fmt(cb.rps)} | **${pct(cs.rps, cb.rps)}** |`,
    `| MB/s | ${fmt((cs.rps * CONCURRENT.size) / MiB)} | ${fmt((cb.rps * CONCURRENT.size) / MiB)} | |`,
    `| latency p50 (ms) | ${cs.p50} | ${cb.p50} | |`,
    `| latency p99 (ms) | ${cs.p99} | ${cb.p99} | ${fmt(cs.p99 / cb.p99, 2)}× |`,
    `| server CPU | ${share(cs.cpu.server)} | ${share(cb.cpu.server)} | |`,
    `| client CPU | ${share(cs.cpu.client)} | ${share(cb.cpu.client)} | |`,
    `| machine busy | ${share(cs.cpu.busy)} | ${share(cb.cpu.busy)} | |`,
    `| requests/s, each round | ${results.concurrent.svcgen.map((r) => fmt(r.rps)).join(' / ')} | ${results.concurrent.bare.map((r) => fmt(r.rps)).join(' / ')} | |`,
    `| p99 (ms), each round | ${results.concurrent.svcgen.map((r) => r.p99).join(' / ')} | ${results.concurrent.bare.map((r) => r.p99).join(' / ')} | |`,
  );
  out.push('', `### Memory during a ${HUGE.label} upload`, '');
  out.push(
    `RSS of the process that serves (the one holding the listening socket, found through /proc/net/tcp and its fds; its child processes, ` +
      `such as the esbuild service tsx starts, are not counted) in MiB: /proc VmRSS, sampled every ${RSS_INTERVAL_MS} ms on a worker thread ` +
      '(the client thread is busy sending), from just before one upload per server to just after it, after the rounds above.',
    '',
    '| | pid | before | min | max | growth | max − before | after | samples (over s) | upload MB/s | aim |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|',
  );
  for (const name of SERVERS) {
    const r = results.rss[name];
    const min = Math.min(...r.samples);
    const max = Math.max(...r.samples);
    const growth = rssGrowth(r.samples);
    const met = growth <= AIM.rssMiB && max - r.before <= AIM.rssMiB;
    out.push(
      `| ${name} | ${r.pid} | ${fmt(r.before, 1)} | ${fmt(min, 1)} | ${fmt(max, 1)} | ${fmt(growth, 1)} | ${fmt(max - r.before, 1)} | ${fmt(r.after, 1)} | ${r.samples.length} (${fmt(r.seconds, 1)}) | ${fmt(r.mbps)} | ${name === 'svcgen' ? (met ? 'met' : 'missed') : ''} |`,
    );
  }
  for (const name of SERVERS)
    out.push('', `${name}, every sample: ${results.rss[name].samples.map((x) => fmt(x, 1)).join(', ')}`);
  out.push('');
  return out.join('\n');
}

/**
 * A module for `node --import` that runs V8's CPU profiler (the one behind --cpu-prof, which
 * NODE_OPTIONS does not take) from start to exit and writes `<dir>/serve.cpuprofile`.
 */
async function profilerPreload(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'preload.mjs');
  await writeFile(
    file,
    `import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
const session = new Session();
session.connect();
session.post('Profiler.enable');
session.post('Profiler.setSamplingInterval', { interval: 1000 });
session.post('Profiler.start');
process.once('exit', () => {
  // the in-thread session answers synchronously
  session.post('Profiler.stop', (error, result) => {
    if (!error) writeFileSync(${JSON.stringify(path.join(dir, 'serve.cpuprofile'))}, JSON.stringify(result.profile));
  });
});
`,
  );
  return file;
}

function runCase(targets: Target[], id: Case, stored: (t: Target) => StoredFiles): Promise<Map<Target, Throughput>> {
  const size = id.endsWith('small') ? SMALL : LARGE;
  const kind = id.startsWith('upload') ? 'upload' : 'download';
  return transfers(targets, kind, size.size, size.count, (t) =>
    id.endsWith('small') ? stored(t).small : stored(t).large,
  );
}

/** What BENCH_STORAGE_PROFILE may name: a case, or `upload-1-byte` (what an upload costs besides its bytes). */
type ProfileCase = Case | 'upload-1-byte';
const PROFILE_CASES: ProfileCase[] = [...CASES.map((c) => c.id), 'upload-1-byte'];

/** Repeats one case against svcgen for 20 s (BENCH_STORAGE_PROFILE). */
async function profile(target: Target, id: ProfileCase, stored: StoredFiles): Promise<void> {
  const until = performance.now() + 20_000;
  let moved = 0;
  let uploads = 0;
  while (performance.now() < until) {
    if (id === 'upload-1-byte') {
      await transfers([target], 'upload', 1, FIXED_COUNT, () => '');
      uploads += FIXED_COUNT;
      continue;
    }
    await runCase([target], id, () => stored);
    moved += id.endsWith('small') ? SMALL.size * SMALL.count : LARGE.size * LARGE.count;
  }
  log(
    `profiled ${id}: ${id === 'upload-1-byte' ? `${fmt(uploads)} uploads` : `${fmt(moved / MiB)} MiB moved`} in 20 s`,
  );
}

/** CPU ms of the server per request in a measurement. */
const cpuMsEach = (t: Throughput) => t.cpu.server * t.msEach;

/** BENCH_STORAGE_CASES: only `cases`, ROUNDS rounds, logged; no report. */
async function someCases(
  targets: Record<ServerName, Target>,
  cases: ProfileCase[],
  stored: Record<ServerName, StoredFiles>,
): Promise<void> {
  const both = SERVERS.map((name) => targets[name]);
  await transfers(both, 'upload', 1, 20, () => '');
  await transfers(both, 'upload', SMALL.size, 10, () => '');
  await transfers(both, 'download', SMALL.size, 10, (t) => stored[t.name].small);
  const ratios = new Map<ProfileCase, number[]>(cases.map((c) => [c, []]));
  const cpu = new Map<ProfileCase, Record<ServerName, number[]>>(cases.map((c) => [c, { svcgen: [], bare: [] }]));
  for (let round = 0; round < ROUNDS; round++) {
    const pair = round % 2 === 0 ? both : [...both].reverse();
    for (const id of cases) {
      const m =
        id === 'upload-1-byte'
          ? await transfers(pair, 'upload', 1, FIXED_COUNT, () => '')
          : await runCase(pair, id, (t) => stored[t.name]);
      const [s, b] = [m.get(targets.svcgen)!, m.get(targets.bare)!];
      ratios.get(id)!.push(id === 'upload-1-byte' ? b.msEach / s.msEach : s.mbps / b.mbps);
      cpu.get(id)!.svcgen.push(cpuMsEach(s));
      cpu.get(id)!.bare.push(cpuMsEach(b));
      log(
        `round ${round + 1}, ${id}: svcgen ${fmt(s.mbps)} MB/s ${fmt(s.msEach, 2)} ms, CPU ${fmt(cpuMsEach(s), 2)} ms each; ` +
          `bare ${fmt(b.mbps)} MB/s ${fmt(b.msEach, 2)} ms, CPU ${fmt(cpuMsEach(b), 2)} ms each; ${pct(s.mbps, b.mbps)}; machine busy ${pct(s.cpu.busy ?? 0, 1)}`,
      );
    }
  }
  for (const id of cases)
    log(
      `${id}: svcgen / bare median ${pct(median(ratios.get(id)!), 1)} (${ratios
        .get(id)!
        .map((r) => pct(r, 1))
        .join(' / ')}); ` +
        `server CPU ms per request, median: svcgen ${fmt(median(cpu.get(id)!.svcgen), 2)}, bare ${fmt(median(cpu.get(id)!.bare), 2)}`,
    );
}

function diskOf(dir: string): string {
  try {
    const mounts = fs
      .readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .map((l) => l.split(' '));
    const real = fs.realpathSync(dir);
    const best = mounts
      .filter((m) => m[1] && (real === m[1] || real.startsWith(m[1] === '/' ? '/' : `${m[1]}/`)))
      .sort((a, b) => b[1]!.length - a[1]!.length)[0];
    return best ? `${best[0]} (${best[2]}) mounted at ${best[1]}` : real;
  } catch {
    return dir;
  }
}

async function main(): Promise<void> {
  const cleanups = cleanupOnExit(log);
  const revision = gitRevision();
  try {
    const tmp = await mkdtemp(path.join(os.tmpdir(), 'svcgen-bench-storage-'));
    cleanups.add(() => rm(tmp, { recursive: true, force: true }));
    const bin = await installedSvcgen(tmp);
    const svcgenFiles = path.join(tmp, 'files-svcgen');
    const bareFiles = path.join(tmp, 'files-bare');
    await mkdir(bareFiles, { recursive: true });
    const project = await benchProject(tmp, svcgenFiles);

    const dbServer = await findDatabaseServer(log);
    cleanups.add(() => dbServer.stop());
    const database = await createBenchDatabase(dbServer.url);
    cleanups.add(() => database.drop());
    const fixture = await prepareDatabase(database.url, { cities: 1, customers: 1, orders: 1 });

    const profileCase = process.env.BENCH_STORAGE_PROFILE as ProfileCase | undefined;
    if (profileCase !== undefined && !PROFILE_CASES.includes(profileCase))
      throw new Error(`BENCH_STORAGE_PROFILE: no case "${profileCase}"; cases: ${PROFILE_CASES.join(', ')}`);
    const profileDir = path.join(tmp, 'profile');
    const serving = await serveCli({
      bin,
      args: ['--database-url', database.url],
      cwd: project,
      env: profileCase ? { ...process.env, NODE_OPTIONS: `--import=${await profilerPreload(profileDir)}` } : undefined,
      stdoutFile: path.join(tmp, 'serve.log'),
      label: 'svcgen serve',
    });
    cleanups.add(() => serving.stop());
    log(`svcgen serve: ${serving.url} (pid ${serving.pid})`);
    const bare = await startServerChild('storage-bare', 'bench/storage-bare-server.ts', {
      BENCH_STORAGE_DIR: bareFiles,
    });
    cleanups.add(() => bare.stop());
    cleanups.add(() => agent.close());
    const sums = new Map<number, string>();
    const targets: Record<ServerName, Target> = {
      svcgen: svcgenTarget(serving.url, serving.pid, fixture.apiKey, sums, svcgenFiles),
      bare: bareTarget(bare.url, bare.pid),
    };

    // The files downloaded, uploaded once per server.
    const stored = {} as Record<ServerName, StoredFiles>;
    for (const name of SERVERS) {
      const t = targets[name];
      stored[name] = {
        small: await t.upload(SMALL.size),
        large: await t.upload(LARGE.size),
        concurrent: await t.upload(CONCURRENT.size),
      };
    }

    if (profileCase) {
      await profile(targets.svcgen, profileCase, stored.svcgen);
      await serving.stop(); // writes the profile
      const [file] = fs.readdirSync(profileDir).filter((f) => f.endsWith('.cpuprofile'));
      if (!file) throw new Error(`no profile in ${profileDir}`);
      const kept = path.join(os.tmpdir(), `svcgen-bench-storage-${profileCase}.cpuprofile`);
      await cp(path.join(profileDir, file), kept);
      console.log(JSON.stringify(summarizeProfile(kept, 40), null, 2));
      log(`the profile: ${kept} (open it in Chrome DevTools or VS Code)`);
      return;
    }

    const onlyCases = process.env.BENCH_STORAGE_CASES?.split(',').map((c) => c.trim());
    if (onlyCases) {
      const unknown = onlyCases.filter((c) => !PROFILE_CASES.includes(c as ProfileCase));
      if (unknown.length)
        throw new Error(`BENCH_STORAGE_CASES: no case ${unknown.join(', ')}; cases: ${PROFILE_CASES.join(', ')}`);
      await someCases(targets, onlyCases as ProfileCase[], stored);
      return;
    }

    const results: Results = {
      throughput: new Map(CASES.map((c) => [c.id, { svcgen: [], bare: [] }])),
      concurrent: { svcgen: [], bare: [] },
      fixed: { svcgen: [], bare: [] },
      rss: {} as Record<ServerName, RssRun>,
    };
    const both = SERVERS.map((name) => targets[name]);
    const storedOf = (t: Target) => stored[t.name];
    // Warm-up, not measured: JIT, pools, caches, the first files of each directory.
    await transfers(both, 'upload', 1, 20, () => '');
    await transfers(both, 'upload', SMALL.size, 10, () => '');
    await transfers(both, 'download', SMALL.size, 10, (t) => stored[t.name].small);
    for (let round = 0; round < ROUNDS; round++) {
      // Requests alternate between the servers; who goes first rotates with the round.
      const pair = round % 2 === 0 ? both : [...both].reverse();
      const fixed = await transfers(pair, 'upload', 1, FIXED_COUNT, () => '');
      for (const t of both) results.fixed[t.name].push(fixed.get(t)!.msEach);
      log(
        `round ${round + 1}, 1-byte uploads: ${both.map((t) => `${t.name} ${fmt(fixed.get(t)!.msEach, 2)} ms`).join(', ')}`,
      );
      for (const c of CASES) {
        const m = await runCase(pair, c.id, storedOf);
        for (const t of both) results.throughput.get(c.id)![t.name].push(m.get(t)!);
        const busy = m.get(both[0]!)!.cpu.busy;
        log(
          `round ${round + 1}, ${c.title}: ${both.map((t) => `${t.name} ${fmt(m.get(t)!.mbps)} MB/s (server CPU ${pct(m.get(t)!.cpu.server, 1)}, client ${pct(m.get(t)!.cpu.client, 1)})`).join(', ')}; machine busy ${busy === undefined ? 'n/a' : pct(busy, 1)}`,
        );
      }
      for (const t of pair) {
        await concurrentDownloads(t, stored[t.name].concurrent, CONCURRENT.warmupS);
        const m = await concurrentDownloads(t, stored[t.name].concurrent, CONCURRENT.durationS);
        results.concurrent[t.name].push(m);
        log(
          `round ${round + 1}, concurrent downloads → ${t.name}: ${fmt(m.rps)} req/s, p50 ${m.p50} ms, p99 ${m.p99} ms`,
        );
      }
    }
    for (const name of SERVERS) {
      const r = await rssDuringUpload(targets[name], HUGE.size);
      results.rss[name] = r;
      log(
        `${HUGE.label} upload → ${name}: ${fmt(r.mbps)} MB/s; RSS of pid ${r.pid} before ${fmt(r.before, 1)} MiB, ${r.samples.length} samples in ${fmt(r.seconds, 1)} s: min ${fmt(Math.min(...r.samples), 1)}, max ${fmt(Math.max(...r.samples), 1)}, after ${fmt(r.after, 1)}`,
      );
    }

    const section = report(results, { date: reportDate(), revision, postgres: await serverVersion(database.url) });
    writeSection(RESULTS_FILE, SECTION, section);
    log(`wrote the section "${SECTION}" of ${path.relative(process.cwd(), RESULTS_FILE)}`);
    console.log(section);
  } finally {
    await cleanups.finish();
  }
}

main().catch((error: unknown) => {
  console.error(`[bench:storage] FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  process.exitCode = 1;
});
