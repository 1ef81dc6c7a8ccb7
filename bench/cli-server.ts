/**
 * `svcgen serve` run as a user runs it, for the benchmarks that measure the real CLI
 * (./workers.ts, ./installed.ts): a spawned process on a free port, ready once /readyz answers 200,
 * its CPU (and its cluster workers') read from /proc, and one case measured against it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import autocannon from 'autocannon';
import { fillRequest, headersFor, type BenchCase, type Fixture } from './cases.ts';
import { BackendCpu, machineBusy, machineSample, processCpuMicros } from './cpu.ts';

const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 20_000;

export interface Serving {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

export interface ServeOptions {
  /** the svcgen executable: bin/svcgen.js of this checkout, or node_modules/svcgen/bin/svcgen.js of an installed project */
  readonly bin: string;
  /** arguments after `serve` (the port is added) */
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env?: NodeJS.ProcessEnv;
  /** where stdout goes (the request log): a file, as systemd or Docker would keep it; discarded without */
  readonly stdoutFile?: string;
  /** a name for error messages */
  readonly label: string;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Starts `svcgen serve … --port <free port>`; resolves once it answers /readyz with 200. */
export async function serveCli(options: ServeOptions): Promise<Serving> {
  const port = await freePort();
  const stdout = options.stdoutFile === undefined ? 'ignore' : fs.openSync(options.stdoutFile, 'a');
  // BENCH_SERVE_NODE_FLAGS: extra node flags for the served process (e.g. --cpu-prof --cpu-prof-dir=<dir>).
  const nodeFlags = (process.env.BENCH_SERVE_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const child: ChildProcess = spawn(
    process.execPath,
    [...nodeFlags, options.bin, 'serve', ...options.args, '--port', String(port)],
    {
      cwd: options.cwd,
      stdio: ['ignore', stdout, 'inherit'],
      env: options.env ?? process.env,
    },
  );
  if (typeof stdout === 'number') fs.closeSync(stdout); // the child holds its own copy
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  for (let waited = 0; ; waited += 100) {
    if (child.exitCode !== null) throw new Error(`${options.label} exited (${child.exitCode}) during start-up`);
    if (waited > READY_TIMEOUT_MS) {
      child.kill('SIGKILL');
      throw new Error(`${options.label} was not ready within ${READY_TIMEOUT_MS / 1000} s`);
    }
    const ready = await fetch(`${url}/readyz`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ready) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** The pids of a process and all its descendants (the cluster primary and its workers). */
export function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    let children: string[] = [];
    try {
      for (const task of fs.readdirSync(`/proc/${out[i]}/task`)) {
        children = children.concat(
          fs.readFileSync(`/proc/${out[i]}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean),
        );
      }
    } catch {
      // gone meanwhile
    }
    out.push(...children.map(Number));
  }
  return out;
}

/** CPU µs of a process and its descendants, by pid. */
export function treeCpuMicros(pid: number): Map<number, number> {
  return new Map(processTree(pid).map((p) => [p, processCpuMicros(p) ?? 0]));
}

/** CPU µs a process tree spent between two readings of treeCpuMicros. */
export function treeCpuSpent(before: Map<number, number>, after: Map<number, number>): number {
  let spent = 0;
  for (const [pid, cpu] of after) spent += cpu - (before.get(pid) ?? 0);
  return spent;
}

export interface Measurement {
  /** requests answered in the measured run */
  requests: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU µs per request of the server's processes, PostgreSQL's backends, the load generator */
  serverUs: number;
  postgresUs: number | undefined;
  loadUs: number;
  /** busy share of all CPUs */
  busy: number | undefined;
}

export interface LoadSettings {
  readonly connections: number;
  readonly warmupS: number;
  readonly durationS: number;
}

async function load(
  url: string,
  benchCase: BenchCase,
  fixture: Fixture,
  connections: number,
  seconds: number,
): Promise<autocannon.Result> {
  return autocannon({
    url,
    connections,
    duration: seconds,
    headers: headersFor(fixture),
    requests: [{ setupRequest: (req, context) => fillRequest(req, benchCase.next(fixture, context, 0)) }],
  });
}

/** A warm-up (none when `settings.warmupS` is 0), then one measured run of `benchCase` against the server at `target`; every answer must be 2xx. */
export async function measureCase(
  target: { readonly url: string; readonly pid: number },
  benchCase: BenchCase,
  fixture: Fixture,
  backends: BackendCpu,
  settings: LoadSettings,
): Promise<Measurement> {
  if (settings.warmupS > 0) {
    const warm = await load(target.url, benchCase, fixture, settings.connections, settings.warmupS);
    if (warm.non2xx || warm.errors)
      throw new Error(`${benchCase.title}: warm-up had ${warm.non2xx} non-2xx, ${warm.errors} errors`);
  }
  const serverBefore = treeCpuMicros(target.pid);
  const pgBefore = await backends.sample();
  const machineBefore = machineSample();
  const loadBefore = process.cpuUsage();
  const result = await load(target.url, benchCase, fixture, settings.connections, settings.durationS);
  const loadCpu = process.cpuUsage(loadBefore);
  const machineAfter = machineSample();
  const pgAfter = await backends.sample();
  const serverAfter = treeCpuMicros(target.pid);
  if (result.non2xx || result.errors)
    throw new Error(`${benchCase.title}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  const requests = result.requests.total;
  const pgSpent = BackendCpu.spent(pgBefore, pgAfter);
  return {
    requests,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    serverUs: treeCpuSpent(serverBefore, serverAfter) / requests,
    postgresUs: pgSpent === undefined ? undefined : pgSpent / requests,
    loadUs: (loadCpu.user + loadCpu.system) / requests,
    busy: machineBusy(machineBefore, machineAfter)?.busy,
  };
}

/**
 * Measured runs of equal length taken together: requests/s and the machine's busy share their
 * mean, CPU per request over all their requests, each latency percentile the median run's.
 */
export function combine(runs: readonly Measurement[]): Measurement {
  const requests = runs.reduce((sum, m) => sum + m.requests, 0);
  const perRequest = (of: (m: Measurement) => number | undefined) => {
    let spent = 0;
    for (const m of runs) {
      const us = of(m);
      if (us === undefined) return undefined;
      spent += us * m.requests;
    }
    return spent / requests;
  };
  const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
  const busy = runs.map((m) => m.busy);
  return {
    requests,
    rps: runs.reduce((sum, m) => sum + m.rps, 0) / runs.length,
    p50: mid(runs.map((m) => m.p50)),
    p99: mid(runs.map((m) => m.p99)),
    serverUs: perRequest((m) => m.serverUs)!,
    postgresUs: perRequest((m) => m.postgresUs),
    loadUs: perRequest((m) => m.loadUs)!,
    busy: busy.includes(undefined) ? undefined : (busy as number[]).reduce((a, b) => a + b, 0) / busy.length,
  };
}
