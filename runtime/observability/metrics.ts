/**
 * Prometheus metrics of this process (prom-client), in a registry of its own so that a project's
 * code using prom-client's global registry does not mix with it. Labels are bounded: `route` is a
 * route pattern (a table name from the model, never a raw path), `limit` a bucket kind.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

const registry = new Registry();
const registers = [registry];

const httpRequests = new Counter({
  name: 'http_requests_total',
  help: 'HTTP requests answered, by route pattern, method and status',
  labelNames: ['route', 'method', 'status'] as const,
  registers,
});

const httpDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'Time from receiving a request to the end of its response, by route pattern and method',
  labelNames: ['route', 'method'] as const,
  // From a cached GET by id (≈ 0.5 ms) to a statement timeout.
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers,
});

const rateLimitRefusals = new Counter({
  name: 'rate_limit_refusals_total',
  help: 'Requests refused by a rate limit (429), by limit: data, auth-signup, auth-login, auth-recovery',
  labelNames: ['limit'] as const,
  registers,
});

const webhookDeliveries = new Counter({
  name: 'webhook_delivery_outcomes_total',
  help: 'Webhook delivery steps by outcome: delivered; retrying (an attempt failed, another is queued); dead_letter (an attempt failed, none is left); deferred (the endpoint circuit is open, no attempt made)',
  labelNames: ['outcome'] as const,
  registers,
});

const codeJobRuns = new Counter({
  name: 'code_job_runs_total',
  help: 'Runs of the project\'s own jobs (docs/own-code.md "Jobs"), by job name and outcome: succeeded, failed (retried until its attempts are spent)',
  labelNames: ['job', 'outcome'] as const,
  registers,
});

const codeJobDuration = new Histogram({
  name: 'code_job_duration_seconds',
  help: "Time a run of the project's own job took, successful or not, by job name",
  labelNames: ['job'] as const,
  buckets: [0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 30, 120, 600],
  registers,
});

/** What a pg.Pool says about itself (`pg.Pool` has these counters). */
export interface PoolLike {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

const pools = new Map<PoolLike, string>();

function poolGauge(name: string, help: string, read: (pool: PoolLike) => number): void {
  new Gauge({
    name,
    help,
    labelNames: ['pool'] as const,
    registers,
    collect() {
      this.reset();
      for (const [pool, label] of pools) this.inc({ pool: label }, read(pool));
    },
  });
}
poolGauge('db_pool_connections', 'Connections the pool holds (busy and idle)', (p) => p.totalCount);
poolGauge('db_pool_idle_connections', 'Connections of the pool waiting for work', (p) => p.idleCount);
poolGauge(
  'db_pool_waiting_requests',
  'Queries waiting for a connection because every connection is busy',
  (p) => p.waitingCount,
);

/** What an expensive-read budget says about itself (runtime/db/admission.ts). */
export interface ReadBudgetLike {
  readonly running: number;
  readonly queued: number;
  /** Reads that may run at once now: fixed, or found from their latency. */
  readonly slots: number;
}

const readBudgets = new Set<ReadBudgetLike>();

new Gauge({
  name: 'db_expensive_reads',
  help: 'Expensive reads (aggregates, large pages, count=exact, unindexed filters, sorts and embeds) by state: running (holding a slot) or queued (waiting for one)',
  labelNames: ['state'] as const,
  registers,
  collect() {
    let running = 0;
    let queued = 0;
    for (const budget of readBudgets) {
      running += budget.running;
      queued += budget.queued;
    }
    this.set({ state: 'running' }, running);
    this.set({ state: 'queued' }, queued);
  },
});

new Gauge({
  name: 'db_expensive_read_limit',
  help: 'Expensive reads that may run at once: database.expensiveReadConcurrency when set, otherwise the limit found from their latency (it grows while the database keeps up and shrinks when reads slow down)',
  registers,
  collect() {
    let slots = 0;
    for (const budget of readBudgets) slots += budget.slots;
    this.set(slots);
  },
});

const expensiveReadRefusals = new Counter({
  name: 'db_expensive_read_refusals_total',
  help: 'Expensive reads that did not run, by reason: queue-full, wait-timeout (both answered 503 database-busy), client-gone (the client left while it waited), key-share (the caller held its share of the budget: 429 rate-limited)',
  labelNames: ['reason'] as const,
  registers,
});

export interface WebhookQueueDepth {
  /** Deliveries written by data statements, not yet moved into the job queue. */
  outbox: number;
  /** Deliveries waiting for an attempt (pending, retrying, deferred). */
  waiting: number;
}

let queueSource: (() => Promise<WebhookQueueDepth>) | undefined;

new Gauge({
  name: 'webhook_outbox_depth',
  help: 'Webhook deliveries written by data statements and not yet queued as jobs',
  registers,
  // Every worker of `serve --workers` reads the same database: one reading, not a sum.
  aggregator: 'max',
  async collect() {
    if (queueSource) this.set((await queueSource().catch(() => undefined))?.outbox ?? Number.NaN);
  },
});

new Gauge({
  name: 'webhook_deliveries_waiting',
  help: 'Webhook deliveries waiting for an attempt (pending, retrying, deferred)',
  registers,
  // Every worker of `serve --workers` reads the same database: one reading, not a sum.
  aggregator: 'max',
  async collect() {
    if (queueSource) this.set((await queueSource().catch(() => undefined))?.waiting ?? Number.NaN);
  },
});

/** What the real-time server holds now (docs/realtime.md). */
export interface RealtimeLike {
  readonly connections: number;
  readonly subscriptions: number;
}

const realtimeSources = new Set<RealtimeLike>();

new Gauge({
  name: 'realtime_connections',
  help: 'GraphQL subscription sockets (WebSocket) open in this process',
  registers,
  collect() {
    let n = 0;
    for (const source of realtimeSources) n += source.connections;
    this.set(n);
  },
});

new Gauge({
  name: 'realtime_subscriptions',
  help: 'GraphQL subscriptions live in this process',
  registers,
  collect() {
    let n = 0;
    for (const source of realtimeSources) n += source.subscriptions;
    this.set(n);
  },
});

const realtimeEvents = new Counter({
  name: 'realtime_events_total',
  help: 'Changes of the real-time channel, by direction: in (read from the database once per process), out (sent to one subscriber), dropped (a slow client was closed with 1013)',
  labelNames: ['direction'] as const,
  registers,
});

let defaultsCollected = false;

/** The recording side, used by the HTTP front, the rate limiter and the delivery agent. */
export const metrics = {
  request(route: string, method: string, status: number, seconds: number): void {
    httpRequests.inc({ route, method, status });
    httpDuration.observe({ route, method }, seconds);
  },
  rateLimitRefused(bucket: string): void {
    const colon = bucket.indexOf(':');
    rateLimitRefusals.inc({ limit: colon === -1 ? bucket : bucket.slice(0, colon) });
  },
  webhookOutcome(outcome: 'delivered' | 'retrying' | 'dead_letter' | 'deferred', count = 1): void {
    if (count > 0) webhookDeliveries.inc({ outcome }, count);
  },
  /** A run of the code's job `job` (a name the code defines: bounded). */
  codeJob(job: string, outcome: 'succeeded' | 'failed', seconds: number): void {
    codeJobRuns.inc({ job, outcome });
    codeJobDuration.observe({ job }, seconds);
  },
  expensiveReadRefused(reason: 'queue-full' | 'wait-timeout' | 'client-gone' | 'key-share'): void {
    expensiveReadRefusals.inc({ reason });
  },
  /** Reports an expensive-read budget's running and queued reads until the returned function is called. */
  watchReadBudget(budget: ReadBudgetLike): () => void {
    readBudgets.add(budget);
    return () => void readBudgets.delete(budget);
  },
  realtimeEvents(direction: 'in' | 'out' | 'dropped', count = 1): void {
    if (count > 0) realtimeEvents.inc({ direction }, count);
  },
  /** Reports the real-time server's sockets and subscriptions until the returned function is called. */
  watchRealtime(source: RealtimeLike): () => void {
    realtimeSources.add(source);
    return () => void realtimeSources.delete(source);
  },
  /** Reports a pool's connections until the returned function is called. */
  watchPool(pool: PoolLike, label: string): () => void {
    pools.set(pool, label);
    return () => void pools.delete(pool);
  },
  /** Reports the webhook queue's depth (queried at each scrape) until the returned function is called. */
  watchWebhookQueue(source: () => Promise<WebhookQueueDepth>): () => void {
    queueSource = source;
    return () => {
      if (queueSource === source) queueSource = undefined;
    };
  },
};

/** Starts the process metrics (CPU, memory, event-loop lag, GC) once; they cost a little, so only when /metrics is on. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: registry });
}

/** The Prometheus text exposition of every metric. */
export async function renderMetrics(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

export type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** Every metric with its values, for the primary of `serve --workers` to add up (runtime/observability/aggregate.ts). */
export function metricsAsJson(): Promise<MetricsJson> {
  return registry.getMetricsAsJSON();
}
