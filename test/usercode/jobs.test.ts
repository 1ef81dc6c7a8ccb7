/**
 * Jobs of a project's own code (docs/own-code.md "Jobs", "Failed jobs"): queued in the caller's
 * transaction, validated at enqueue and again at run, retried with graphile-worker's backoff,
 * de-duplicated by job key, run as the system in the environment they were queued in; failed jobs
 * listed and queued again by `svcgen jobs failed|retry`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCode, defineJob } from '../../examples/shop/generated/code.ts';
import { metricsAsJson } from '../../runtime/observability/index.ts';
import { cleanupCli, runCli } from '../support/cli.ts';
import { SHOP, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

interface Run {
  tag: string;
  job: string;
  environment: string;
  request_id: string;
  caller: string;
}

const record = defineJob({
  name: 'record',
  payload: z.object({ tag: z.string() }),
  async run({ tag }, ctx) {
    await ctx.sql`INSERT INTO public.job_runs (tag, job, environment, request_id, caller)
      VALUES (${tag}, 'record', ${ctx.environment}, ${ctx.requestId}, ${ctx.caller.kind})`;
  },
});

/** A Date does not survive JSON: z.date() refuses what would be queued. */
const dated = defineJob({ name: 'dated', payload: z.object({ at: z.date() }), async run() {} });

/** The run gets the schema's output of the queued JSON. */
const transformed = defineJob({
  name: 'transformed',
  payload: z.object({ n: z.string().transform(Number) }),
  async run({ n }, ctx) {
    await ctx.sql`INSERT INTO public.job_runs (tag, job, environment, request_id, caller)
      VALUES (${`n=${n + 1}`}, 'transformed', ${ctx.environment}, ${ctx.requestId}, ${ctx.caller.kind})`;
  },
});

/** Defined but not listed in the code's jobs: nothing would run it. */
const orphan = defineJob({ name: 'orphan', payload: z.object({}), async run() {} });

const mark = (ctx: Parameters<typeof record.run>[1], tag: string) =>
  ctx.sql`INSERT INTO public.job_runs (tag, job, environment, request_id, caller)
    VALUES (${tag}, 'start', ${ctx.environment}, ${ctx.requestId}, ${ctx.caller.kind})`;

/** Queues `record` as code in a hook or endpoint would, on the context it got. */
const start = defineJob({
  name: 'start',
  payload: z.object({
    mode: z.enum(['commit', 'rollback', 'invalid', 'unknown', 'dedupe', 'date', 'transform']),
    tag: z.string(),
  }),
  async run({ mode, tag }, ctx) {
    switch (mode) {
      case 'commit':
        await ctx.transaction((tx) => record.enqueue(tx, { tag }));
        break;
      case 'rollback':
        await ctx
          .transaction(async (tx) => {
            await record.enqueue(tx, { tag });
            throw new Error('undo');
          })
          .catch(() => {});
        break;
      case 'invalid':
        await record
          .enqueue(ctx, { tag: 42 as unknown as string })
          .catch((e: Error) => mark(ctx, `${e.name}: ${e.message}`));
        break;
      case 'unknown':
        await orphan.enqueue(ctx, {}).catch((e: Error) => mark(ctx, `${e.name}: ${e.message}`));
        break;
      case 'date':
        await dated.enqueue(ctx, { at: new Date() }).catch((e: Error) => mark(ctx, `${e.name}: ${e.message}`));
        break;
      case 'transform':
        await transformed.enqueue(ctx, { n: '41' });
        break;
      case 'dedupe': {
        const runAt = new Date(Date.now() + 1000);
        await record.enqueue(ctx, { tag: `${tag}-first` }, { jobKey: `key-${tag}`, runAt });
        await record.enqueue(ctx, { tag: `${tag}-second` }, { jobKey: `key-${tag}`, runAt });
        break;
      }
    }
    await mark(ctx, `${tag} done`);
  },
});

/** Fails its first attempt, succeeds its second. */
const flaky = defineJob({
  name: 'flaky',
  payload: z.object({ tag: z.string() }),
  maxAttempts: 3,
  async run({ tag }, ctx) {
    const [row] = await ctx.sql<{ n: number }>`SELECT count(*)::int AS n FROM public.job_runs WHERE tag = ${tag}`;
    await ctx.sql`INSERT INTO public.job_runs (tag, job, environment, request_id, caller)
      VALUES (${tag}, 'flaky', ${ctx.environment}, ${ctx.requestId}, ${ctx.caller.kind})`;
    if (row!.n === 0) throw new Error('flaky: not yet');
  },
});

/** Fails until the test lets it through (public.doomed_ok). */
const doomed = defineJob({
  name: 'doomed',
  payload: z.object({ order: z.number() }),
  maxAttempts: 1,
  async run({ order }, ctx) {
    const [ok] = await ctx.sql`SELECT 1 FROM public.doomed_ok`;
    if (!ok) throw new Error(`doomed: the receiver refused order ${order}`);
    await ctx.sql`INSERT INTO public.job_runs (tag, job, environment, request_id, caller)
      VALUES (${`doomed ${order}`}, 'doomed', ${ctx.environment}, ${ctx.requestId}, ${ctx.caller.kind})`;
  },
});

let s: TestServer;

const MAX_ATTEMPTS: Record<string, number> = { flaky: 3, doomed: 1 };

/** Queues a job as an operator's SQL would (the row enqueue writes), outside any code. */
async function queue(name: string, payload: unknown, environment = 'master'): Promise<string> {
  const [row] = await s.db.query<{ id: string }>(
    `SELECT id::text FROM svcgen_worker.add_job($1, $2::json, max_attempts => $3)`,
    [`svcgen.code.${name}`, JSON.stringify({ environment, payload }), MAX_ATTEMPTS[name] ?? 5],
  );
  return row!.id;
}

const runs = (tag: string) =>
  s.db.query<Run & Record<string, unknown>>(
    'SELECT tag, job, environment, request_id, caller FROM public.job_runs WHERE tag LIKE $1 ORDER BY id',
    [`${tag}%`],
  );

const jobRow = (id: string) =>
  s.db.query<{
    attempts: number;
    max_attempts: number;
    last_error: string | null;
    locked_at: Date | null;
    wait: number;
  }>(
    `SELECT attempts, max_attempts, last_error, locked_at, extract(epoch FROM run_at - now())::float8 AS wait
     FROM svcgen_worker._private_jobs WHERE id = $1`,
    [id],
  );

const failedFor = (id: string) =>
  until(
    () => jobRow(id),
    (rows) => rows.length === 1 && rows[0]!.attempts === rows[0]!.max_attempts && rows[0]!.locked_at === null,
    15_000,
    `job ${id} failed for good`,
  ).then((rows) => rows[0]!);

beforeAll(async () => {
  s = await startTestServer({
    code: defineCode({ jobs: [record, start, flaky, doomed, dated, transformed] }),
  });
  await s.db.query(`CREATE TABLE public.job_runs (id bigserial PRIMARY KEY, tag text NOT NULL, job text NOT NULL,
    environment text NOT NULL, request_id text NOT NULL, caller text NOT NULL)`);
  await s.db.query('CREATE TABLE public.doomed_ok (ok boolean)');
}, 60_000);

afterAll(async () => {
  await s?.close();
  await cleanupCli();
});

describe('enqueue in the caller transaction', () => {
  it('a transaction that commits queues the job: it runs once, as the system, in its environment', async () => {
    await queue('start', { mode: 'commit', tag: 'committed' });
    const rows = await until(
      () => runs('committed'),
      (r) => r.some((x) => x.job === 'record'),
      10_000,
      'record ran',
    );
    const run = rows.find((r) => r.job === 'record');
    expect(run).toMatchObject({ tag: 'committed', job: 'record', environment: 'master', caller: 'system' });
    expect(run!.request_id).toMatch(/^job:\d+$/);
    expect((await runs('committed')).filter((x) => x.job === 'record')).toHaveLength(1);
  });

  it('a transaction that rolls back queues nothing', async () => {
    await queue('start', { mode: 'rollback', tag: 'rolled' });
    await until(
      () => runs('rolled done'),
      (r) => r.length === 1,
      10_000,
      'start ran',
    );
    const queued = await s.db.query(
      `SELECT 1 FROM svcgen_worker._private_jobs j JOIN svcgen_worker._private_tasks t ON t.id = j.task_id
       WHERE t.identifier = 'svcgen.code.record' AND j.payload->'payload'->>'tag' = 'rolled'`,
    );
    expect(queued).toEqual([]);
    expect((await runs('rolled')).map((r) => r.tag)).toEqual(['rolled done']);
  });

  it('a job queued in another environment runs there', async () => {
    await queue('start', { mode: 'commit', tag: 'staged' }, 'staging');
    const rows = await until(
      () => runs('staged'),
      (r) => r.some((x) => x.job === 'record'),
      10_000,
      'record ran',
    );
    expect(rows.map((r) => [r.job, r.environment])).toEqual(
      expect.arrayContaining([
        ['start', 'staging'],
        ['record', 'staging'],
      ]),
    );
  });

  it('an invalid payload is refused at enqueue with a JobPayloadError naming the field', async () => {
    await queue('start', { mode: 'invalid', tag: 'invalid' });
    await until(
      () => runs('invalid done'),
      (r) => r.length === 1,
      10_000,
      'start ran',
    );
    const [refused] = await runs('JobPayloadError');
    expect(refused!.tag).toBe(
      "JobPayloadError: job record: the payload does not match the job's payload schema: tag: Invalid input: expected string, received number",
    );
  });

  it('the JSON form of the payload is what is checked, and the run gets the schema output of it', async () => {
    await queue('start', { mode: 'date', tag: 'date' });
    await until(
      () => runs('date done'),
      (r) => r.length === 1,
      10_000,
      'start ran',
    );
    const [refused] = await runs('JobPayloadError: job dated');
    expect(refused!.tag).toBe(
      "JobPayloadError: job dated: the payload does not match the job's payload schema: at: Invalid input: expected date, received string",
    );
    await queue('start', { mode: 'transform', tag: 'transform' });
    await until(
      () => runs('n='),
      (r) => r.length === 1,
      10_000,
      'transformed ran',
    );
    expect((await runs('n='))[0]!.tag).toBe('n=42');
  });

  it('a job the code does not list is refused at enqueue', async () => {
    await queue('start', { mode: 'unknown', tag: 'unknown' });
    await until(
      () => runs('unknown done'),
      (r) => r.length === 1,
      10_000,
      'start ran',
    );
    const [refused] = await runs('TypeError');
    expect(refused!.tag).toBe(
      "TypeError: job orphan is not among your code's jobs: list it in defineCode({ jobs: [...] }) so that a worker runs it",
    );
  });

  it('a job key keeps one pending job: the later enqueue replaces the earlier', async () => {
    await queue('start', { mode: 'dedupe', tag: 'keyed' });
    await until(
      () => runs('keyed-second'),
      (r) => r.length === 1,
      10_000,
      'the second ran',
    );
    await until(
      () => s.db.query(`SELECT 1 FROM svcgen_worker._private_jobs WHERE key = 'key-keyed'`),
      (r) => r.length === 0,
      10_000,
      'the keyed job completed',
    );
    expect((await runs('keyed-')).map((r) => r.tag)).toEqual(['keyed-second']);
  });
});

describe('running', () => {
  it('a failed run is retried after graphile-worker backoff (e^attempts seconds) until it succeeds', async () => {
    const id = await queue('flaky', { tag: 'flaky' });
    const [failed] = await until(
      () => jobRow(id),
      (r) => r[0]?.attempts === 1 && r[0].locked_at === null,
      10_000,
      'first attempt failed',
    );
    expect(failed!.last_error).toBe('flaky: not yet');
    // e^1 ≈ 2.72 s after the failure.
    expect(failed!.wait).toBeGreaterThan(1.5);
    expect(failed!.wait).toBeLessThan(2.8);
    await until(
      () => jobRow(id),
      (r) => r.length === 0,
      10_000,
      'second attempt succeeded',
    );
    expect((await runs('flaky')).map((r) => r.job)).toEqual(['flaky', 'flaky']);
    const json = await metricsAsJson();
    const counts = json.find((m) => m.name === 'code_job_runs_total')!.values;
    expect(counts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ labels: { job: 'flaky', outcome: 'failed' }, value: 1 }),
        expect.objectContaining({ labels: { job: 'flaky', outcome: 'succeeded' }, value: 1 }),
      ]),
    );
    expect(json.find((m) => m.name === 'code_job_duration_seconds')).toBeDefined();
  });

  it('a payload that no longer matches the schema fails the job for good, without retries', async () => {
    const id = await queue('record', { tag: 5 });
    const row = await failedFor(id);
    expect(row).toMatchObject({ attempts: 1, max_attempts: 1 });
    expect(row.last_error).toBe(
      "the payload no longer matches the job's payload schema (changed since it was queued?): tag: Invalid input: expected string, received number; not retried",
    );
  });

  it('a job queued for an environment the config does not list fails for good', async () => {
    const id = await queue('record', { tag: 'nowhere' }, 'nope');
    const row = await failedFor(id);
    expect(row.last_error).toBe(
      'queued for environment "nope", which the config does not list (environments: master, staging); not retried',
    );
  });
});

describe('svcgen jobs failed | retry', () => {
  const cli = (...args: string[]) => runCli(['jobs', ...args, '--project', SHOP, '--database-url', s.database.url]);

  it('lists a job whose attempts are spent and queues it again', async () => {
    const id = await queue('doomed', { order: 7 });
    await failedFor(id);
    const listed = await cli('failed');
    expect(listed.code).toBe(0);
    const line = listed.stdout.split('\n').find((l) => l.startsWith(`${id}\t`));
    expect(line).toMatch(
      new RegExp(
        `^${id}\\tdoomed\\tmaster\\tattempts 1/1\\t\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ\\t\\{"order":7\\}\\tdoomed: the receiver refused order 7$`,
      ),
    );
    const json = await cli('failed', '--json');
    expect(JSON.parse(json.stdout)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          id,
          name: 'doomed',
          environment: 'master',
          payload: { order: 7 },
          attempts: 1,
          maxAttempts: 1,
          lastError: 'doomed: the receiver refused order 7',
        }),
      ]),
    );

    await s.db.query('INSERT INTO public.doomed_ok VALUES (true)');
    const retried = await cli('retry', id);
    expect(retried).toMatchObject({ code: 0, stdout: `queued ${id} again\n` });
    await until(
      () => runs('doomed 7'),
      (r) => r.length === 1,
      10_000,
      'the retried job ran',
    );
    expect((await cli('failed', '--json')).stdout).not.toContain(`"id":"${id}"`);
  });

  it('retry --all queues every failed job again', async () => {
    await s.db.query('DELETE FROM public.doomed_ok');
    const ids = [await queue('doomed', { order: 8 }), await queue('doomed', { order: 9 })];
    for (const id of ids) await failedFor(id);
    await s.db.query('INSERT INTO public.doomed_ok VALUES (true)');
    const retried = await cli('retry', '--all');
    expect(retried.code).toBe(0);
    for (const id of ids) expect(retried.stdout).toContain(`queued ${id} again\n`);
    await until(
      () => runs('doomed '),
      (r) => r.length === 3,
      10_000,
      'both retried jobs ran',
    );
  });

  it('retry of an id that is not a failed job says so and exits 1', async () => {
    const r = await cli('retry', '999999');
    expect(r).toMatchObject({ code: 1, stdout: '', stderr: 'no failed job with id 999999\n' });
  });

  it('retry without ids nor --all is a usage error', async () => {
    const r = await cli('retry');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('name the failed jobs to retry by id, or pass --all (not both)');
    const bad = await cli('retry', 'abc');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('a job id is a number (see `svcgen jobs failed`): abc');
  });
});
