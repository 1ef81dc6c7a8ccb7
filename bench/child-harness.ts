/**
 * The part of a benchmark server child that is not the server: the same for svcgen and the
 * baseline, so whatever it costs, both pay it.
 *
 * - counts SQL statements sent by any pg.Client of this process (one integer increment per
 *   statement); while profiling it also counts them by SQL text;
 * - answers the parent over the IPC channel (see ./children.ts for the other side):
 *     { type: 'stats' }          → { queries, cpuMicros }
 *     { type: 'profile-start' }  → starts V8's CPU profiler (the one behind --cpu-prof) and the SQL trace
 *     { type: 'profile-stop' }   → writes the .cpuprofile, answers { file, statements: [sql, count, values][] }
 *                                  (values: the parameters of the statement's first execution, for EXPLAIN)
 *     { type: 'heap-start', survivors? } → starts V8's sampling heap profiler, keeping the samples of objects the GC
 *                                  has collected since (so the profile is what was allocated, not what lives);
 *                                  survivors: true drops those a young-generation collection took, so the
 *                                  profile is what outlived one (promoted to the old generation, or alive)
 *     { type: 'heap-stop' }      → writes the .heapprofile, answers { file }
 *     { type: 'loop-delay-start' } → starts measuring the event loop's delay (perf_hooks, 1 ms resolution)
 *     { type: 'loop-delay-stop' }  → stops it, answers { count, meanMs, p50Ms, p99Ms, maxMs } (see LoopDelay)
 *     { type: 'stop' }           → closes the server and exits
 * - tells the parent { type: 'ready', port } once the server listens.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import pg from 'pg';
import v8 from 'node:v8';
import vm from 'node:vm';

export interface ChildServer {
  port: number;
  close(): Promise<void>;
}

/** V8's gc(), exposed on first use (only a survivors profile needs it). */
let gcFunction: ((options: { type: 'minor' | 'major' }) => void) | undefined;
function minorGc() {
  if (!gcFunction) {
    v8.setFlagsFromString('--expose-gc');
    gcFunction = vm.runInNewContext('gc');
  }
  return gcFunction!;
}

export type ChildRequest =
  | { id: number; type: 'stats' }
  | { id: number; type: 'profile-start' }
  | { id: number; type: 'profile-stop'; file: string }
  | { id: number; type: 'heap-start'; survivors?: boolean }
  | { id: number; type: 'heap-stop'; file: string }
  | { id: number; type: 'loop-delay-start' }
  | { id: number; type: 'loop-delay-stop' }
  | { id: number; type: 'stop' };

export interface ChildStats {
  /** SQL statements sent since the process started */
  queries: number;
  /** user + system CPU time of this process since it started, µs */
  cpuMicros: number;
}

/** Time between runs of a 1 ms timer while measured (about 1 ms when idle): a long one is a busy main thread or a starved process. */
export interface LoopDelay {
  /** samples taken */
  count: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

let queries = 0;
let trace: Map<string, { count: number; values: unknown[] }> | undefined;

type QueryFn = (...args: unknown[]) => unknown;
const clientPrototype = pg.Client.prototype as unknown as { query: QueryFn };
const originalQuery = clientPrototype.query;
clientPrototype.query = function query(this: unknown, ...args: unknown[]) {
  queries++;
  if (trace) {
    const first = args[0];
    const text = typeof first === 'string' ? first : (first as { text?: string } | null)?.text;
    if (text) {
      const seen = trace.get(text);
      if (seen) seen.count++;
      else {
        const values = Array.isArray(args[1]) ? args[1] : (first as { values?: unknown[] } | null)?.values;
        trace.set(text, { count: 1, values: ipcSafe(values ?? []) });
      }
    }
  }
  return originalQuery.apply(this, args);
};

/** Parameters as they can cross the (JSON) IPC channel: Dates as ISO text, Buffers as hex bytea, BigInts as text. */
function ipcSafe(values: unknown[]): unknown[] {
  return values.map((v) =>
    v instanceof Date
      ? v.toISOString()
      : Buffer.isBuffer(v)
        ? `\\x${v.toString('hex')}`
        : typeof v === 'bigint'
          ? v.toString()
          : v,
  );
}

function send(message: unknown): void {
  process.send?.(message);
}

/** Starts the server through `start`, then serves the parent's requests until told to stop. */
export async function runChild(start: () => Promise<ChildServer>): Promise<void> {
  if (!process.send) throw new Error('start this file through bench/run.ts (it needs an IPC channel to the parent)');
  const server = await start();
  let session: Session | undefined;
  let heapSession: Session | undefined;
  let survivorsOnly = false;
  let loopDelay: IntervalHistogram | undefined;
  let stopping = false;

  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await server.close().catch((error: unknown) => console.error(error));
    process.exit(0);
  };

  process.on('message', (raw) => {
    const message = raw as ChildRequest;
    const reply = (body: Record<string, unknown>) => send({ id: message.id, ...body });
    const fail = (error: unknown) => reply({ error: error instanceof Error ? error.message : String(error) });
    switch (message.type) {
      case 'stats': {
        const cpu = process.cpuUsage();
        reply({ queries, cpuMicros: cpu.user + cpu.system } satisfies ChildStats);
        break;
      }
      case 'profile-start':
        (async () => {
          session = new Session();
          session.connect();
          await session.post('Profiler.enable');
          await session.post('Profiler.setSamplingInterval', {
            interval: Number(process.env.BENCH_PROFILE_INTERVAL ?? 500),
          });
          await session.post('Profiler.start');
          trace = new Map();
          reply({});
        })().catch(fail);
        break;
      case 'profile-stop':
        (async () => {
          if (!session) throw new Error('the profiler is not running');
          const { profile } = await session.post('Profiler.stop');
          session.disconnect();
          session = undefined;
          fs.writeFileSync(message.file, JSON.stringify(profile));
          const statements = [...(trace ?? new Map<string, { count: number; values: unknown[] }>())]
            .map(([sql, s]) => [sql, s.count, s.values] as const)
            .sort((a, b) => b[1] - a[1]);
          trace = undefined;
          reply({ file: message.file, statements });
        })().catch(fail);
        break;
      case 'heap-start':
        (async () => {
          heapSession = new Session();
          heapSession.connect();
          await heapSession.post('HeapProfiler.enable');
          await heapSession.post('HeapProfiler.startSampling', {
            samplingInterval: 4096,
            includeObjectsCollectedByMajorGC: true,
            includeObjectsCollectedByMinorGC: !message.survivors,
          });
          survivorsOnly = message.survivors === true;
          reply({});
        })().catch(fail);
        break;
      case 'heap-stop':
        (async () => {
          if (!heapSession) throw new Error('the heap profiler is not running');
          // What the young generation still holds has not been through a collection yet: two
          // of them leave only what is really alive (requests in flight) or was promoted.
          if (survivorsOnly) for (let i = 0; i < 2; i++) minorGc()({ type: 'minor' });
          const { profile } = await heapSession.post('HeapProfiler.stopSampling');
          heapSession.disconnect();
          heapSession = undefined;
          fs.writeFileSync(message.file, JSON.stringify(profile));
          reply({ file: message.file });
        })().catch(fail);
        break;
      case 'loop-delay-start':
        loopDelay?.disable();
        loopDelay = monitorEventLoopDelay({ resolution: 1 });
        loopDelay.enable();
        reply({});
        break;
      case 'loop-delay-stop': {
        if (!loopDelay) {
          fail(new Error('the event loop delay is not being measured'));
          break;
        }
        loopDelay.disable();
        const h = loopDelay;
        loopDelay = undefined;
        const ms = (ns: number) => ns / 1e6;
        reply({
          count: h.count,
          meanMs: ms(h.mean),
          p50Ms: ms(h.percentile(50)),
          p99Ms: ms(h.percentile(99)),
          maxMs: ms(h.max),
        } satisfies LoopDelay);
        break;
      }
      case 'stop':
        reply({});
        void stop();
        break;
    }
  });
  // The parent died or closed the channel: do not linger as an orphan holding database connections.
  process.on('disconnect', () => void stop());
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  send({ type: 'ready', port: server.port });
}
