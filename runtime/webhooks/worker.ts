/**
 * The delivery worker: a graphile-worker runner whose one task makes a delivery attempt, plus the
 * housekeeping graphile-worker cannot know about. A worker process that dies mid-attempt leaves
 * its job locked (graphile-worker frees it after 4 hours) and the delivery's lease running out;
 * the sweep queues such deliveries again at once, and the lease makes any duplicate job a no-op.
 */
import { Logger, run, runMigrations } from 'graphile-worker';
import { superviseRunner, type SupervisedRunner } from '../db/supervised-runner.ts';
import type pg from 'pg';
import type { Config } from '../config/index.ts';
import { connectionConfig, newClient, newPool, openDatabase, QUEUE_SCHEMA, type Database } from '../db/index.ts';
import { OUTBOX_DEPTH, OUTBOX_EVENTS } from '../events/index.ts';
import type { SecretBox } from '../secrets/index.ts';
import { DeliveryAgent } from './delivery.ts';
import { DELIVER_TASK, DRAIN_OUTBOX, enqueueSql, queueDeliveries } from './queue.ts';

/** A delivery whose job should have run this long ago and holds no lease has lost its job. */
const LOST_JOB_AFTER = "interval '2 minutes'";
const SWEEP_INTERVAL_MS = 5_000;
/** How often an idle worker looks for new deliveries in the outbox (the commit → job latency). */
const DRAIN_INTERVAL_MS = 50;
/**
 * How often it looks while no webhook is active anywhere: no write captures events then, and the
 * outbox only holds what a write that began before the last subscription went away commits late.
 */
const QUIET_DRAIN_INTERVAL_MS = 1_000;
const DRAIN_BATCH = 500;
const PRUNE_INTERVAL_MS = 10 * 60_000;
/**
 * A connection attempt unanswered this long fails: a black-holed database (host gone, route cut)
 * accepts nothing and refuses nothing, and without a bound the runner's start, the outbox drain and
 * the pools' end() at shutdown would wait for it forever.
 */
const CONNECT_TIMEOUT_MS = 5_000;

/** When to look at the outbox next, after a drain that answered `row` (docs/api.md "Delivery records"). */
export function nextDrainDelay(row: { more: boolean; watched: boolean } | undefined): number {
  if (row?.more) return 0;
  return row && !row.watched ? QUIET_DRAIN_INTERVAL_MS : DRAIN_INTERVAL_MS;
}

/** A pool of ours rather than graphile-worker's connectionString: pg alone would read sslmode its own way. */
function queuePool(url: string, max: number): pg.Pool {
  // Dropped connections are graphile-worker's to notice (the runner restarts); newPool's clients
  // cannot crash the process, also while graphile-worker holds them.
  return newPool({ ...connectionConfig(url), max, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true });
}

function quietLogger(log: (message: string) => void): Logger {
  return new Logger(() => (level, message) => {
    // Attempts run on the worker's own connections; graphile-worker's pool only fetches and completes jobs.
    if (message.includes('smaller than concurrency')) return;
    if (level === 'error' || level === 'warning') log(`webhook worker: ${message}`);
  });
}

/** Serialises the queue's schema migrations across processes starting at once on one database. */
const QUEUE_MIGRATION_LOCK_KEY = 72707370;

/** Creates or upgrades the job queue's schema; data statements queue jobs, so it precedes serving. */
export async function installDeliveryQueue(databaseUrl: string, log: (message: string) => void): Promise<void> {
  const lock = newClient({
    ...connectionConfig(databaseUrl),
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
  });
  const pgPool = queuePool(databaseUrl, 1);
  try {
    await lock.connect();
    await lock.query('SELECT pg_advisory_lock($1)', [QUEUE_MIGRATION_LOCK_KEY]);
    await runMigrations({ pgPool, schema: QUEUE_SCHEMA, logger: quietLogger(log) });
  } finally {
    await lock.end().catch(() => {});
    await pgPool.end().catch(() => {});
  }
}

/** Queues again the deliveries whose worker died mid-attempt or whose job was lost. */
export async function sweepStalledDeliveries(db: Database): Promise<number> {
  const row = await queueDeliveries<{ count: number }>(
    db,
    `WITH stalled AS (
       SELECT d.id FROM svcgen.webhook_deliveries d JOIN svcgen.webhooks w ON w.id = d.webhook_id AND w.active
       WHERE d.status IN ('pending', 'retrying', 'deferred')
         AND (d.lease_until < now() OR (d.lease_until IS NULL AND d.next_attempt_at < now() - ${LOST_JOB_AFTER}))
       ORDER BY d.next_attempt_at LIMIT 1000 FOR UPDATE OF d SKIP LOCKED),
     released AS (UPDATE svcgen.webhook_deliveries x SET lease_until = NULL FROM stalled WHERE x.id = stalled.id RETURNING x.id),
     queued AS (${enqueueSql('ARRAY(SELECT id FROM released)')})
     SELECT (SELECT count(*) FROM released)::int AS count, (SELECT missed FROM queued) AS missed`,
  );
  return row?.count ?? 0;
}

/** Drops finished deliveries older than the retention, then events no delivery or outbox row refers to. */
export async function pruneDeliveryHistory(db: Database, retentionSeconds: number): Promise<void> {
  await db.query(
    `DELETE FROM svcgen.webhook_deliveries WHERE status IN ('delivered', 'dead_letter') AND updated_at < now() - make_interval(secs => $1)`,
    [retentionSeconds],
  );
  await db.query(
    `WITH waiting AS (${OUTBOX_EVENTS})
     DELETE FROM svcgen.webhook_events e WHERE e.created_at < now() - make_interval(secs => $1)
       AND NOT EXISTS (SELECT 1 FROM svcgen.webhook_deliveries d WHERE d.event_id = e.id)
       AND NOT EXISTS (SELECT 1 FROM waiting WHERE waiting.id = e.id)`,
    [retentionSeconds],
  );
}

/** For /metrics: deliveries in the outbox (not yet jobs), and deliveries waiting for an attempt. */
export async function webhookQueueDepth(db: Database): Promise<{ outbox: number; waiting: number }> {
  const [row] = await db.query<{ outbox: number; waiting: number }>(
    `SELECT (${OUTBOX_DEPTH}) AS outbox,
       (SELECT count(*) FROM svcgen.webhook_deliveries WHERE status IN ('pending', 'retrying', 'deferred'))::int AS waiting`,
  );
  return row!;
}

export interface DeliveryWorker {
  stop(): Promise<void>;
}

export interface DeliveryWorkerOptions {
  databaseUrl: string;
  /**
   * A session connection (DIRECT_DATABASE_URL) for graphile-worker's runner, which LISTENs and
   * holds session state; when it differs from databaseUrl, that one is a transaction pooler's.
   */
  directDatabaseUrl?: string;
  box: SecretBox;
  config: Config;
  log: (message: string) => void;
}

export async function startDeliveryWorker(options: DeliveryWorkerOptions): Promise<DeliveryWorker> {
  const settings = options.config.webhooks;
  // Its own few connections: attempts hold none while they wait on a receiver, and deliveries
  // neither wait behind API requests nor take their connections.
  const directUrl = options.directDatabaseUrl ?? options.databaseUrl;
  const db = openDatabase(options.databaseUrl, {
    max: 5,
    transactionPooler: directUrl !== options.databaseUrl,
    poolWaitTimeoutMs: CONNECT_TIMEOUT_MS,
  });
  const runnerPool = queuePool(directUrl, 4);
  const agent = new DeliveryAgent(db, options.box, settings);
  const failed = (what: string) => (error: unknown) =>
    options.log(`webhook ${what} failed: ${error instanceof Error ? error.message : String(error)}`);
  const start = () =>
    run({
      pgPool: runnerPool,
      schema: QUEUE_SCHEMA,
      concurrency: settings.concurrency,
      // Retry delays can be a second or less: look for due jobs often enough to keep them.
      pollInterval: 250,
      noHandleSignals: true,
      logger: quietLogger(options.log),
      preset: {
        worker: {
          localQueue: { size: Math.max(2, settings.concurrency) },
          // Batched completions are fewer statements, and a batch that cannot be written (the
          // database gone) stops the runner, which is started again, instead of an unhandled rejection.
          completeJobBatchDelay: 0,
          failJobBatchDelay: 0,
        },
      },
      taskList: {
        [DELIVER_TASK]: async (payload) => {
          const { id, ids } = payload as { id?: string; ids?: string[] };
          // A failure here is the database's, not a receiver's: graphile-worker retries the job, and
          // the deliveries of it that were recorded are skipped then.
          await agent.deliver(ids ?? [id!]);
        },
      },
    });
  let stopping = false;
  let runner: SupervisedRunner;
  try {
    runner = await superviseRunner(start, {
      ended: failed('runner'),
      restartFailed: failed('runner restart'),
      restarted: () => options.log('webhook worker: running again'),
    });
  } catch (error) {
    await agent.close();
    await db.close();
    await runnerPool.end().catch(() => {});
    throw error;
  }
  // The outbox drain: new deliveries into the job queue, many per statement.
  let draining: Promise<void> | undefined;
  let drainTimer: NodeJS.Timeout | undefined;
  const drain = async () => {
    drainTimer = undefined;
    let delay: number;
    try {
      const [row] = await db.query<{ more: boolean; watched: boolean }>(DRAIN_OUTBOX, [DRAIN_BATCH]);
      delay = nextDrainDelay(row);
    } catch (error) {
      failed('outbox drain')(error);
      delay = 1_000;
    }
    if (!stopping) drainTimer = setTimeout(() => void (draining = drain()), delay);
  };
  draining = drain();
  const sweep = setInterval(() => void sweepStalledDeliveries(db).catch(failed('sweep')), SWEEP_INTERVAL_MS);
  const prune = setInterval(
    () => void pruneDeliveryHistory(db, settings.historyRetention).catch(failed('history pruning')),
    PRUNE_INTERVAL_MS,
  );
  sweep.unref();
  prune.unref();
  void sweepStalledDeliveries(db).catch(failed('sweep'));
  return {
    async stop() {
      stopping = true;
      if (drainTimer) clearTimeout(drainTimer);
      clearInterval(sweep);
      clearInterval(prune);
      // Together: a drain statement and the runner's stop can each wait out a connect timeout.
      await Promise.all([draining, runner.stop().catch(failed('runner stop'))]);
      await agent.close();
      await db.close();
      await runnerPool.end().catch(() => {});
    },
  };
}
