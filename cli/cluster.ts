/**
 * `svcgen serve --workers <n>`: one primary process and n workers (node:cluster) sharing one port.
 *
 * The primary serves no HTTP and loads no server runtime: it prepares the database once (system
 * schema, migrations), forks the workers, replaces one that dies, and on SIGINT/SIGTERM asks every
 * worker to drain. Each worker is a whole `svcgen serve` with its own pool and migrate: false; the
 * state that must hold across processes (keys, revocations, rate limits, idempotency) lives in
 * PostgreSQL, as it does for separate `svcgen serve` processes.
 *
 * Webhook delivery runs in worker 1 only (and in its replacement): graphile-worker would be safe in
 * all of them, but every copy adds its own pool and LISTEN connection against max_connections while
 * one process keeps up with what one `svcgen serve` delivers; `svcgen worker` scales delivery apart.
 *
 * /metrics (when on) answers for the whole server whichever worker gets the scrape: that worker asks
 * the primary, which collects every listening worker's metrics and adds them up
 * (runtime/observability/aggregate.ts).
 */
import cluster, { type Worker } from 'node:cluster';
import path from 'node:path';
import type { Config } from '../runtime/config/index.ts';
import type { ServiceModule } from '../runtime/model/index.ts';
import type { MetricsJson, MetricsText } from '../runtime/observability/index.ts';
import type { WorkerMetrics } from '../runtime/observability/aggregate.ts';

/** The worker's settings, handed over by the primary in the environment of the fork. */
const DATABASE_URL_VARIABLE = 'SVCGEN_WORKER_DATABASE_URL';
const DELIVERY_VARIABLE = 'SVCGEN_WORKER_DELIVERY';

interface ListeningMessage {
  svcgen: 'listening';
  url: string;
}
interface StopMessage {
  svcgen: 'stop';
}
/** A worker asks for the whole server's /metrics text. */
interface MetricsRequest {
  svcgen: 'metrics';
  id: number;
}
/** The primary asks each worker for its own metrics... */
interface CollectMetrics {
  svcgen: 'collect-metrics';
  id: number;
}
/** ...which each answers... */
interface WorkerMetricsMessage {
  svcgen: 'worker-metrics';
  id: number;
  metrics?: MetricsJson;
  error?: string;
}
/** ...and the asking worker gets their sum, or why not. */
interface MetricsAnswer {
  svcgen: 'cluster-metrics';
  id: number;
  text?: MetricsText;
  error?: string;
}

/** Waits for every worker to drain before killing what is left (a worker's own drain forces at 10 s). */
const STOP_BOUND_MS = 20_000;
/** A worker that dies sooner after its start counts as crashing in a loop: the pause before the next one doubles. */
const STABLE_AFTER_MS = 10_000;
const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 10_000;
/** A worker's /metrics answers 503 when the primary's answer takes longer (rather than hang the scraper). */
const METRICS_ASK_BOUND_MS = 2_000;
/** The primary waits this long for every worker's metrics: less than the above, so the 503 names who did not answer. */
const METRICS_COLLECT_BOUND_MS = 1_500;

export function isClusterWorker(): boolean {
  return cluster.isWorker;
}

// ---------------------------------------------------------------------------------------------
// The worker side

export function workerSettings(): { databaseUrl: string; delivery: boolean } {
  const databaseUrl = process.env[DATABASE_URL_VARIABLE];
  if (!databaseUrl) throw new Error(`a svcgen serve worker needs ${DATABASE_URL_VARIABLE} from its primary`);
  return { databaseUrl, delivery: process.env[DELIVERY_VARIABLE] === '1' };
}

/**
 * Resolves when the primary asks this worker to stop, or on the first SIGINT/SIGTERM the worker gets
 * itself (Ctrl-C reaches the whole process group): either way it drains like a single `serve`. A
 * second signal exits at once.
 */
export function nextStopRequest(): Promise<string> {
  return new Promise((resolve) => {
    let received = false;
    let signals = 0;
    const stop = (reason: string) => {
      if (!received) {
        received = true;
        resolve(reason);
      }
    };
    process.on('message', (message: Partial<StopMessage>) => {
      if (message?.svcgen === 'stop') stop('primary');
    });
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        // Counted apart from the primary's message: Ctrl-C reaches both, and that is one request to stop.
        if (++signals > 1) process.exit(1);
        stop(signal);
      });
    }
  });
}

export function reportListening(url: string): void {
  const message: ListeningMessage = { svcgen: 'listening', url };
  process.send?.(message);
}

/**
 * The worker's side of /metrics: answers the primary's collections with this process's metrics, and
 * returns what /metrics calls instead of reading its own registry (startServer's clusterMetrics).
 */
export function clusterMetricsSource(): () => Promise<MetricsText> {
  const waiting = new Map<number, (answer: MetricsAnswer) => void>();
  process.on('message', (message: Partial<CollectMetrics | MetricsAnswer>) => {
    if (message?.svcgen === 'cluster-metrics') waiting.get(message.id!)?.(message as MetricsAnswer);
    if (message?.svcgen === 'collect-metrics') void sendOwnMetrics(message.id!);
  });
  let lastId = 0;
  return () =>
    new Promise((resolve, reject) => {
      const id = ++lastId;
      const settle = (answer: Omit<MetricsAnswer, 'svcgen' | 'id'>) => {
        clearTimeout(bound);
        waiting.delete(id);
        if (answer.text) resolve(answer.text);
        else reject(new Error(answer.error));
      };
      const bound = setTimeout(
        () => settle({ error: `the primary process did not answer within ${METRICS_ASK_BOUND_MS} ms` }),
        METRICS_ASK_BOUND_MS,
      );
      waiting.set(id, settle);
      if (!process.connected) return settle({ error: 'this worker is no longer connected to the primary process' });
      const request: MetricsRequest = { svcgen: 'metrics', id };
      process.send!(request, undefined, {}, (error) => {
        if (error) settle({ error: `the primary process cannot be reached: ${error.message}` });
      });
    });
}

async function sendOwnMetrics(id: number): Promise<void> {
  const { metricsAsJson } = await import('../runtime/observability/index.ts');
  const answer: WorkerMetricsMessage = await metricsAsJson().then(
    (metrics) => ({ svcgen: 'worker-metrics', id, metrics }),
    (error: unknown) => ({
      svcgen: 'worker-metrics',
      id,
      error: error instanceof Error ? error.message : String(error),
    }),
  );
  // Gone meanwhile (stopping): the primary's bound answers for it.
  if (process.connected) process.send!(answer, undefined, {}, () => {});
}

/** Closes the channel to the primary, so that the worker exits once its server and pool are closed. */
export function leaveCluster(): void {
  if (cluster.worker?.isConnected()) cluster.worker.disconnect();
}

// ---------------------------------------------------------------------------------------------
// The primary side

export interface PrimaryOptions {
  projectDir: string;
  service: ServiceModule;
  config: Config;
  databaseUrl: string;
  /** The session connection migrations need (serve's --direct-database-url). */
  directDatabaseUrl?: string;
  workers: number;
  migrate: boolean;
  /** Whether worker 1 delivers webhooks (serve's --worker / --no-worker). */
  delivery: boolean;
  /** Resolves on the primary's first SIGINT/SIGTERM. */
  stopSignal: Promise<NodeJS.Signals>;
  /** stderr: progress, replaced workers, stopping. */
  log: (line: string) => void;
  /** Once every worker listens: the shared URL and the workers' pids. */
  onListening: (url: string, pids: number[], applied: number) => void;
}

/** Applies pending migrations once, before any worker starts (the workers run with migrate: false). */
async function prepareDatabase(options: PrimaryOptions): Promise<number> {
  const { openDatabase, ensureSystemSchema, refuseUnservable, applyMigrations } = await import(
    '../runtime/db/index.ts'
  );
  const db = openDatabase(options.directDatabaseUrl ?? options.databaseUrl, { max: 1 });
  try {
    await ensureSystemSchema(db);
    const migrationsDir = path.join(options.projectDir, 'migrations');
    // The same refusals as a single `serve` (runtime/server), said once instead of once per worker.
    await refuseUnservable(db, migrationsDir, options.config.environments, {
      hasTables: Object.keys(options.service.tables).length > 0,
      migrate: options.migrate,
    });
    if (!options.migrate) return 0;
    const applied = await applyMigrations(db, migrationsDir, options.config.environments, (m) =>
      options.log(`applying migration ${m.name} to ${m.environment}`),
    );
    return applied.length;
  } finally {
    await db.close().catch(() => {});
  }
}

interface Slot {
  /** 1-based, as printed */
  number: number;
  worker?: Worker;
  startedAt: number;
  listening: boolean;
  backoffMs: number;
  respawn?: NodeJS.Timeout;
}

/**
 * Runs the primary until it is told to stop and every worker has exited. Resolves with the exit
 * code: 0 after a clean drain, 1 when a worker failed to start or had to be killed.
 */
export async function runPrimary(options: PrimaryOptions): Promise<number> {
  let stopping = false;
  let announced = false;
  let finish!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (finish = resolve));
  let exitCode = 0;

  let stopBeforeStart: NodeJS.Signals | undefined;
  void options.stopSignal.then((signal) => (stopBeforeStart = signal));
  const applied = await prepareDatabase(options);
  if (stopBeforeStart) {
    options.log(`${stopBeforeStart}: stopping before any worker started`);
    return 0;
  }

  const slots: Slot[] = Array.from({ length: options.workers }, (_, i) => ({
    number: i + 1,
    startedAt: 0,
    listening: false,
    backoffMs: FIRST_BACKOFF_MS,
  }));
  let url = '';

  const live = () => slots.filter((s) => s.worker);
  const checkAllExited = () => {
    if (stopping && live().length === 0) finish(exitCode);
  };

  const fork = (slot: Slot) => {
    slot.respawn = undefined;
    slot.listening = false;
    slot.startedAt = Date.now();
    const worker = cluster.fork({
      [DATABASE_URL_VARIABLE]: options.databaseUrl,
      [DELIVERY_VARIABLE]: options.delivery && slot.number === 1 ? '1' : '0',
    });
    slot.worker = worker;
    worker.on('message', (message: Partial<ListeningMessage | MetricsRequest | WorkerMetricsMessage>) => {
      if (message?.svcgen === 'metrics') return void answerMetrics(worker, message.id!);
      if (message?.svcgen === 'worker-metrics')
        return collections.get(message.id!)?.(slot.number, message as WorkerMetricsMessage);
      if (message?.svcgen !== 'listening' || typeof message.url !== 'string') return;
      slot.listening = true;
      url ||= message.url;
      if (stopping) return askToStop(slot);
      if (announced) {
        options.log(`worker ${slot.number} replaced: pid ${worker.process.pid} listening`);
      } else if (slots.every((s) => s.listening)) {
        announced = true;
        options.onListening(
          url,
          slots.map((s) => s.worker!.process.pid!),
          applied,
        );
      }
    });
    worker.on('exit', (code, signal) => {
      if (slot.worker !== worker) return;
      slot.worker = undefined;
      const how = signal ? `killed by ${signal}` : `exit code ${code}`;
      if (stopping) return checkAllExited();
      if (!announced) {
        // A worker that cannot start (port in use, database unreachable) would fail again at once.
        options.log(
          `worker ${slot.number} (pid ${worker.process.pid}) stopped before listening (${how}): stopping the others`,
        );
        exitCode = 1;
        stop();
        return;
      }
      if (Date.now() - slot.startedAt >= STABLE_AFTER_MS) slot.backoffMs = FIRST_BACKOFF_MS;
      options.log(
        `worker ${slot.number} (pid ${worker.process.pid}) exited (${how}); starting a replacement in ${slot.backoffMs} ms`,
      );
      slot.respawn = setTimeout(() => fork(slot), slot.backoffMs);
      slot.backoffMs = Math.min(slot.backoffMs * 2, MAX_BACKOFF_MS);
    });
  };

  /** A listening worker drains on the message; one still starting gets a SIGTERM, which it turns into the same drain. */
  const askToStop = (slot: Slot) => {
    const worker = slot.worker;
    if (!worker) return;
    if (slot.listening && worker.isConnected()) {
      const message: StopMessage = { svcgen: 'stop' };
      worker.send(message);
    } else {
      worker.process.kill('SIGTERM');
    }
  };

  /** Collections under way: each takes the answers of the workers it asked. */
  const collections = new Map<number, (worker: number, message: WorkerMetricsMessage) => void>();
  let lastCollection = 0;
  /** Every listening worker's own metrics; fails when one of them does not send them within the bound. */
  const collectMetrics = () =>
    new Promise<WorkerMetrics[]>((resolve, reject) => {
      const id = ++lastCollection;
      const asked = slots.filter((s) => s.listening && s.worker?.isConnected());
      const missing = new Set(asked.map((s) => s.number));
      const reports: WorkerMetrics[] = [];
      const finish = (error?: string) => {
        clearTimeout(timer);
        collections.delete(id);
        if (error) reject(new Error(error));
        else resolve(reports);
      };
      const timer = setTimeout(
        () => finish(`worker ${[...missing].join(', ')} sent no metrics within ${METRICS_COLLECT_BOUND_MS} ms`),
        METRICS_COLLECT_BOUND_MS,
      );
      collections.set(id, (worker, message) => {
        if (!missing.delete(worker)) return;
        if (!message.metrics) return finish(`worker ${worker}: ${message.error}`);
        reports.push({ worker, metrics: message.metrics });
        if (missing.size === 0) finish();
      });
      const request: CollectMetrics = { svcgen: 'collect-metrics', id };
      // A worker gone meanwhile is the bound's to report; without a callback its send error would crash the primary.
      for (const slot of asked) slot.worker!.send(request, undefined, () => {});
      if (missing.size === 0) finish();
    });
  const answerMetrics = async (worker: Worker, id: number) => {
    const answer: MetricsAnswer = { svcgen: 'cluster-metrics', id };
    try {
      // prom-client alone, not the server runtime (see the top of this file).
      const { aggregateWorkerMetrics } = await import('../runtime/observability/aggregate.ts');
      answer.text = await aggregateWorkerMetrics(await collectMetrics());
    } catch (error) {
      answer.error = error instanceof Error ? error.message : String(error);
    }
    if (worker.isConnected()) worker.send(answer, undefined, () => {});
  };

  let bound: NodeJS.Timeout | undefined;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    for (const slot of slots) {
      clearTimeout(slot.respawn);
      askToStop(slot);
    }
    bound = setTimeout(() => {
      const left = live();
      options.log(
        `${left.length} worker(s) still running after ${STOP_BOUND_MS / 1000} s: killing pid ${left.map((s) => s.worker!.process.pid).join(', ')}`,
      );
      exitCode = 1;
      for (const slot of left) slot.worker!.process.kill('SIGKILL');
    }, STOP_BOUND_MS);
    checkAllExited();
  };

  void options.stopSignal.then((signal) => {
    if (stopping) return;
    options.log(`${signal}: finishing in-flight requests in ${live().length} worker(s) and stopping`);
    stop();
  });

  // Structured clone rather than JSON on the channel: a gauge's NaN (unknown) stays NaN in /metrics.
  cluster.setupPrimary({ serialization: 'advanced' });
  for (const slot of slots) fork(slot);
  const code = await finished;
  clearTimeout(bound);
  return code;
}
