/**
 * Jobs and schedules of a project's code (docs/own-code.md "Jobs", "Schedules") on graphile-worker's
 * queue (runtime/db/job-queue.ts): queued with `add_job` in the caller's transaction, run by a
 * runner of their own whose tasks are `svcgen.code.<name>` (svcgen's own tasks never contain a dot),
 * each run with a CodeContext of the system in the environment the job was queued in.
 */
import {
  Logger as WorkerLogger,
  parseCronItems,
  run,
  type CronItem,
  type ParsedCronItem,
  type Task,
} from 'graphile-worker';
import { connectionConfig, newPool, QUEUE_SCHEMA, type Database, type Queryable } from '../db/index.ts';
import { superviseRunner, type SupervisedRunner } from '../db/supervised-runner.ts';
import { metrics } from '../observability/index.ts';
import { codeContext, type CodeServices } from './context.ts';
import { CodeDefinitionError } from './define.ts';
import type { Anything, JobDefinition, JobOptions } from './definitions.ts';
import { describeIssues } from './job-payload.ts';
import type { CodeRegistry } from './registry.ts';

/** The prefix of code jobs' task names: `svcgen.code.sendReceipt`. */
export const CODE_TASK_PREFIX = 'svcgen.code.';
/** A job's attempts when neither its definition nor the enqueue says (docs/own-code.md "Jobs"). */
export const DEFAULT_MAX_ATTEMPTS = 5;
/** The bounds of maxAttempts (graphile-worker keeps it in a smallint). */
export const MAX_ATTEMPTS_LIMIT = 100;
/** Jobs of the code one process runs at once (docs/own-code.md "Jobs"). */
export const CODE_JOB_CONCURRENCY = 4;
const CONNECT_TIMEOUT_MS = 5_000;

export function taskOf(job: string): string {
  return `${CODE_TASK_PREFIX}${job}`;
}

/** What a code job's row holds: the environment it acts in and the payload as validated at enqueue. */
export interface JobEnvelope {
  readonly environment: string;
  readonly payload: unknown;
}

/** Options of an enqueue as graphile-worker takes them; a bad option is the code's mistake, named. */
function checkedOptions(job: JobDefinition<Anything, Anything>, options: JobOptions) {
  const maxAttempts = options.maxAttempts ?? job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > MAX_ATTEMPTS_LIMIT)
    throw new TypeError(`job ${job.name}: maxAttempts must be a whole number from 1 to ${MAX_ATTEMPTS_LIMIT}`);
  if (options.runAt !== undefined && (!(options.runAt instanceof Date) || Number.isNaN(+options.runAt)))
    throw new TypeError(`job ${job.name}: runAt must be a valid Date`);
  if (options.jobKey !== undefined && (typeof options.jobKey !== 'string' || options.jobKey.length === 0))
    throw new TypeError(`job ${job.name}: jobKey must be a non-empty string`);
  return { maxAttempts, runAt: options.runAt ?? null, jobKey: options.jobKey ?? null };
}

/**
 * Queues `name` with its validated payload on `db`, the context's connection or transaction: a
 * rollback queues nothing. A job the code does not define (in defineCode's `jobs`) is refused, since
 * nothing would ever run it.
 */
export async function enqueueCodeJob(
  db: Queryable,
  code: CodeRegistry,
  environment: string,
  name: string,
  payload: unknown,
  options: JobOptions,
): Promise<void> {
  const job = code.jobs.get(name);
  if (!job)
    throw new TypeError(
      `job ${name} is not among your code's jobs: list it in defineCode({ jobs: [...] }) so that a worker runs it`,
    );
  const { maxAttempts, runAt, jobKey } = checkedOptions(job, options);
  const envelope: JobEnvelope = { environment, payload };
  await db.query(`SELECT FROM ${QUEUE_SCHEMA}.add_job($1, $2::json, run_at => $3, max_attempts => $4, job_key => $5)`, [
    taskOf(name),
    JSON.stringify(envelope),
    runAt,
    maxAttempts,
    jobKey,
  ]);
}

const SCHEDULE_NAME = /^[A-Za-z][A-Za-z0-9_]{0,62}$/;
/** The longest backfill of a schedule, as the config allows it (runtime/config/schema.ts). */
const MAX_BACKFILL_SECONDS = 7 * 24 * 3600;

/** A schedule's crontab entry per environment: its identifier in graphile-worker's known_crontabs. */
export function cronIdentifier(schedule: string, environment: string): string {
  return `${CODE_TASK_PREFIX}${schedule}@${environment}`;
}

/**
 * The crontab of the code's schedules, one entry per schedule and environment; checked at start so
 * that a bad cron time or a payload its job refuses stops `svcgen serve` naming the schedule.
 */
export function codeCrontab(code: CodeRegistry, environments: readonly string[]): ParsedCronItem[] {
  const items: ParsedCronItem[] = [];
  for (const schedule of code.schedules) {
    if (!SCHEDULE_NAME.test(schedule.name))
      throw new CodeDefinitionError(
        `schedule name ${JSON.stringify(schedule.name)} must start with a letter and hold only letters, digits and _ (at most 63)`,
      );
    const backfill = schedule.backfillSeconds ?? 0;
    if (!Number.isInteger(backfill) || backfill < 0 || backfill > MAX_BACKFILL_SECONDS)
      throw new CodeDefinitionError(
        `schedule ${schedule.name}: backfillSeconds must be a whole number from 0 to ${MAX_BACKFILL_SECONDS} (7 days)`,
      );
    const job = code.jobs.get(schedule.job)!;
    const parsed = job.payload.safeParse(schedule.payload ?? {});
    if (!parsed.success)
      throw new CodeDefinitionError(
        `schedule ${schedule.name}: its payload does not match job ${job.name}'s payload schema: ${describeIssues(parsed.error)}`,
      );
    for (const environment of environments) {
      const item: CronItem = {
        task: taskOf(schedule.job),
        match: schedule.cron,
        identifier: cronIdentifier(schedule.name, environment),
        payload: { environment, payload: parsed.data } satisfies JobEnvelope as unknown as Record<string, unknown>,
        options: {
          backfillPeriod: backfill * 1000,
          maxAttempts: job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        },
      };
      try {
        items.push(...parseCronItems([item]));
      } catch (error) {
        throw new CodeDefinitionError(
          `schedule ${schedule.name}: cron ${JSON.stringify(schedule.cron)} is not a crontab time (minute hour day-of-month month day-of-week, e.g. "0 3 * * *"): ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
  }
  return items;
}

export interface CodeJobRunnerOptions {
  code: CodeRegistry;
  /** The contexts' services (the data API, the job queue, the logger). */
  services: CodeServices;
  /** Where a job's statements run: the server's pool (each statement commits unless ctx.transaction()). */
  db: Database;
  /** A session connection for graphile-worker's runner (DIRECT_DATABASE_URL). */
  directUrl: string;
  /** The config's environments: a job queued for another one fails permanently. */
  environments: readonly string[];
  crontab: ParsedCronItem[];
  log: (message: string) => void;
}

export interface CodeJobRunner {
  stop(): Promise<void>;
}

/**
 * The task of one job: validates the payload again (a deploy may have changed the schema: such a
 * job fails for good, not retried), then runs the job as the system in its environment. A throw
 * is graphile-worker's failure: retried with its exponential backoff until maxAttempts.
 */
function jobTask(job: JobDefinition<Anything, Anything>, options: CodeJobRunnerOptions): Task {
  const { services, db, environments } = options;
  return async (raw, helpers) => {
    const started = performance.now();
    const id = String(helpers.job.id);
    const logger = services.logger.child({ requestId: `job:${id}`, code: `job ${job.name}` });
    const permanently = async (reason: string) => {
      // The attempt under way is its last: graphile-worker's failure then leaves it failed for good.
      await db.query(`UPDATE ${QUEUE_SCHEMA}._private_jobs SET max_attempts = attempts WHERE id = $1`, [id]);
      logger.error({ job: job.name, jobId: id, attempt: helpers.job.attempts }, `job failed for good: ${reason}`);
      metrics.codeJob(job.name, 'failed', (performance.now() - started) / 1000);
      return new Error(reason);
    };
    const envelope = raw as Partial<JobEnvelope> | null;
    const environment = envelope?.environment;
    if (typeof environment !== 'string' || !environments.includes(environment))
      throw await permanently(
        `queued for environment ${JSON.stringify(environment)}, which the config does not list (environments: ${environments.join(', ')}); not retried`,
      );
    const parsed = job.payload.safeParse(envelope!.payload);
    if (!parsed.success)
      throw await permanently(
        `the payload no longer matches the job's payload schema (changed since it was queued?): ${describeIssues(parsed.error)}; not retried`,
      );
    const ctx = codeContext(services, {
      environment,
      db,
      requestId: `job:${id}`,
      origin: `job ${job.name}`,
    });
    try {
      await job.run(parsed.data, ctx);
    } catch (error) {
      const seconds = (performance.now() - started) / 1000;
      metrics.codeJob(job.name, 'failed', seconds);
      const last = helpers.job.attempts >= helpers.job.max_attempts;
      logger.error(
        { job: job.name, jobId: id, attempt: helpers.job.attempts, maxAttempts: helpers.job.max_attempts, err: error },
        last ? 'job failed, no attempt left' : 'job failed, retrying later',
      );
      throw error;
    }
    const seconds = (performance.now() - started) / 1000;
    metrics.codeJob(job.name, 'succeeded', seconds);
    logger.info(
      { job: job.name, jobId: id, attempt: helpers.job.attempts, durationMs: Math.round(seconds * 1000) },
      'job succeeded',
    );
  };
}

/** graphile-worker's own lines: problems only, prefixed so that an operator knows whose they are. */
function workerLogger(log: (message: string) => void): WorkerLogger {
  return new WorkerLogger(() => (level, message) => {
    if (message.includes('smaller than concurrency')) return;
    // A task's throw is logged by the task itself (with the job's request id), not twice.
    if (message.startsWith('Failed task')) return;
    if (level === 'error' || level === 'warning') log(`code job runner: ${message}`);
  });
}

/** Runs the code's jobs and schedules until stop(); started again (with backoff) when the database goes away. */
export async function startCodeJobRunner(options: CodeJobRunnerOptions): Promise<CodeJobRunner> {
  const pgPool = newPool({
    ...connectionConfig(options.directUrl),
    max: 3,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
  });
  const taskList = Object.fromEntries(
    [...options.code.jobs.values()].map((job) => [taskOf(job.name), jobTask(job, options)]),
  );
  const start = () =>
    run({
      pgPool,
      schema: QUEUE_SCHEMA,
      concurrency: CODE_JOB_CONCURRENCY,
      // Short retry delays (e^1 ≈ 2.7 s) and runAt stay accurate.
      pollInterval: 250,
      noHandleSignals: true,
      logger: workerLogger(options.log),
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      taskList,
      parsedCronItems: options.crontab,
    });
  const failed = (what: string) => (error: unknown) =>
    options.log(`code job runner ${what}: ${error instanceof Error ? error.message : String(error)}`);
  let runner: SupervisedRunner;
  try {
    runner = await superviseRunner(start, {
      ended: failed('stopped'),
      restartFailed: failed('restart failed'),
      restarted: () => options.log('code job runner: running again'),
    });
  } catch (error) {
    await pgPool.end().catch(() => {});
    throw error;
  }
  return {
    async stop() {
      await runner.stop().catch(failed('stop failed'));
      await pgPool.end().catch(() => {});
    },
  };
}

/** A job whose attempts are spent, for operators (`svcgen jobs failed`, docs/own-code.md "Failed jobs"). */
export interface FailedJob {
  readonly id: string;
  readonly name: string;
  readonly environment: string | null;
  readonly payload: unknown;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly lastError: string | null;
  /** When its last attempt failed. */
  readonly failedAt: string;
}

const FAILED_JOBS = `SELECT j.id::text AS id, substr(t.identifier, ${CODE_TASK_PREFIX.length + 1}) AS name,
    j.payload->>'environment' AS environment, j.payload->'payload' AS payload, j.attempts, j.max_attempts AS "maxAttempts",
    j.last_error AS "lastError", to_char(j.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS "failedAt"
  FROM ${QUEUE_SCHEMA}._private_jobs j JOIN ${QUEUE_SCHEMA}._private_tasks t ON t.id = j.task_id
  WHERE starts_with(t.identifier, '${CODE_TASK_PREFIX}') AND j.attempts >= j.max_attempts AND j.locked_at IS NULL`;

/** The queue's tables exist once a server or worker has started on the database. */
async function queueInstalled(db: Queryable): Promise<boolean> {
  const [row] = await db.query<{ installed: boolean }>(
    `SELECT to_regclass('${QUEUE_SCHEMA}._private_jobs') IS NOT NULL AS installed`,
  );
  return row!.installed;
}

/** The code's jobs whose attempts are spent, oldest first (graphile-worker keeps them until retried or removed). */
export async function listFailedJobs(db: Queryable): Promise<FailedJob[]> {
  if (!(await queueInstalled(db))) return [];
  return db.query<FailedJob & Record<string, unknown>>(`${FAILED_JOBS} ORDER BY j.id`);
}

/**
 * Queues failed jobs again (`ids`, or every failed one when undefined): each runs at once with its
 * attempts from zero. Answers the ids queued again; an id that is not a failed job of the code is
 * left out.
 */
export async function retryFailedJobs(db: Queryable, ids?: readonly string[]): Promise<string[]> {
  if (!(await queueInstalled(db))) return [];
  const rows = await db.query<{ id: string }>(
    `SELECT r.id::text AS id FROM ${QUEUE_SCHEMA}.reschedule_jobs(
       ARRAY(SELECT f.id::bigint FROM (${FAILED_JOBS}) f WHERE $1::text[] IS NULL OR f.id = ANY($1::text[])),
       run_at => now(), attempts => 0) r ORDER BY r.id`,
    [ids ?? null],
  );
  return rows.map((r) => r.id);
}
