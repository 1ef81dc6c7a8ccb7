/**
 * Schedules of a project's own code and config (docs/own-code.md "Schedules") on graphile-worker's
 * crontab: each runs once per crontab time and environment however many processes run workers
 * (known_crontabs), runs missed within backfillSeconds are made up for at start, and a bad schedule
 * stops the start naming it; `svcgen worker` runs jobs when serve does not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCode, defineJob } from '../../examples/shop/generated/code.ts';
import { openDatabase, type Database } from '../../runtime/db/index.ts';
import { loadService } from '../../cli/project.ts';
import { startWorkerProcess } from '../../runtime/index.ts';
import { CodeRegistry } from '../../runtime/usercode/index.ts';
import { installDeliveryQueue } from '../../runtime/webhooks/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { SHOP, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const tick = defineJob({
  name: 'tick',
  payload: z.object({ from: z.string() }),
  async run({ from }, ctx) {
    await ctx.sql`INSERT INTO public.ticks (source, environment, request_id) VALUES (${from}, ${ctx.environment}, ${ctx.requestId})`;
  },
});

const code = defineCode({
  jobs: [tick],
  schedules: [
    { name: 'everyMinute', cron: '* * * * *', job: 'tick', payload: { from: 'code' }, backfillSeconds: 3600 },
  ],
});

/** The config's schedule of the same job (code.schedules). */
const configSchedule = (raw: any) => {
  raw.code = {
    schedules: [
      { name: 'fromConfig', cron: '* * * * *', job: 'tick', payload: { from: 'config' }, backfillSeconds: 3600 },
    ],
  };
};

let database: TestDatabase;
let db: Database;
const servers: TestServer[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  db = openDatabase(database.url, { max: 2 });
  await db.query(
    'CREATE TABLE public.ticks (id bigserial PRIMARY KEY, source text, environment text, request_id text)',
  );
}, 60_000);

afterAll(async () => {
  for (const server of servers) await server.close();
  await db?.close();
  await database?.drop();
});

describe('schedules', () => {
  it('run once per crontab time and environment across two processes, making up for missed runs', async () => {
    await installDeliveryQueue(database.url, () => {});
    // Known for an hour, last run three minutes ago: both runners make up for the runs since.
    const identifiers = ['everyMinute', 'fromConfig'].flatMap((s) =>
      ['master', 'staging'].map((env) => `svcgen.code.${s}@${env}`),
    );
    await db.query(
      `INSERT INTO svcgen_worker._private_known_crontabs (identifier, known_since, last_execution)
       SELECT unnest($1::text[]), now() - interval '1 hour', date_trunc('minute', now()) - interval '3 minutes'`,
      [identifiers],
    );
    const [before] = await db.query<{ at: Date }>(
      `SELECT min(last_execution) AS at FROM svcgen_worker._private_known_crontabs`,
    );
    servers.push(
      ...(await Promise.all(
        [1, 2].map(() => startTestServer({ code, configPatch: configSchedule, databaseUrl: database.url })),
      )),
    );
    const count = () =>
      db.query<{ source: string; environment: string; n: number; expected: number }>(
        `SELECT k.identifier, s.source, s.environment,
           (SELECT count(*)::int FROM public.ticks t WHERE t.source = s.source AND t.environment = s.environment) AS n,
           (extract(epoch FROM k.last_execution - $1::timestamptz) / 60)::int AS expected
         FROM svcgen_worker._private_known_crontabs k
         CROSS JOIN LATERAL (SELECT CASE WHEN k.identifier LIKE '%everyMinute%' THEN 'code' ELSE 'config' END AS source,
           split_part(k.identifier, '@', 2) AS environment) s ORDER BY k.identifier`,
        [before!.at],
      );
    const settled = (rows: { n: number; expected: number }[]) =>
      rows.length === 4 && rows.every((r) => r.expected >= 3 && r.n === r.expected);
    await until(count, settled, 20_000, 'each schedule ran once per missed minute');
    // Both runners are up and have made up their runs: more jobs run through them, and the counts hold.
    for (const server of servers)
      await server.db.query(`SELECT svcgen_worker.add_job('svcgen.code.tick', $1::json)`, [
        JSON.stringify({ environment: 'master', payload: { from: 'probe' } }),
      ]);
    await until(
      () => db.query(`SELECT 1 FROM public.ticks WHERE source = 'probe'`),
      (r) => r.length === 2,
      10_000,
      'probes ran',
    );
    const rows = await count();
    expect(settled(rows)).toBe(true);
    const ids = await db.query<{ request_id: string }>('SELECT request_id FROM public.ticks');
    expect(new Set(ids.map((r) => r.request_id)).size).toBe(ids.length);
  });

  it('a cron time that is not one stops the start, naming the schedule', async () => {
    await expect(
      startTestServer({
        databaseUrl: database.url,
        code: defineCode({
          jobs: [tick],
          schedules: [{ name: 'broken', cron: '61 * * * *', job: 'tick', payload: { from: 'x' } }],
        }),
      }),
    ).rejects.toThrow(
      /^schedule broken: cron "61 \* \* \* \*" is not a crontab time \(minute hour day-of-month month day-of-week, e\.g\. "0 3 \* \* \*"\): /,
    );
  });

  it("a payload the job's schema refuses stops the start, naming the schedule and field", async () => {
    await expect(
      startTestServer({
        databaseUrl: database.url,
        code: defineCode({
          jobs: [tick],
          schedules: [{ name: 'wrong', cron: '0 3 * * *', job: 'tick', payload: { from: 3 } }],
        }),
      }),
    ).rejects.toThrow(
      "schedule wrong: its payload does not match job tick's payload schema: from: Invalid input: expected string, received number",
    );
  });

  it('a schedule name or backfillSeconds out of bounds stops the start', async () => {
    const start = (schedule: object) =>
      startTestServer({
        databaseUrl: database.url,
        code: defineCode({
          jobs: [tick],
          schedules: [{ cron: '0 3 * * *', job: 'tick', payload: { from: 'x' }, ...schedule } as never],
        }),
      });
    await expect(start({ name: 'no-dash' })).rejects.toThrow(
      'schedule name "no-dash" must start with a letter and hold only letters, digits and _ (at most 63)',
    );
    await expect(start({ name: 'late', backfillSeconds: -1 })).rejects.toThrow(
      'schedule late: backfillSeconds must be a whole number from 0 to 604800 (7 days)',
    );
  });

  it('a schedule of a job the code does not define stops the start', async () => {
    await expect(
      startTestServer({
        databaseUrl: database.url,
        code: defineCode({ jobs: [] }),
        configPatch: configSchedule,
      }),
    ).rejects.toThrow('schedule "fromConfig" queues job "tick", which the code does not define');
  });
});

describe('svcgen worker', () => {
  it('runs the code jobs that a server without a worker queued', async () => {
    const separate = await createTestDatabase();
    const plain = defineCode({ jobs: [tick] });
    const server = await startTestServer({ code: plain, worker: false, databaseUrl: separate.url });
    let worker: { stop(): Promise<void> } | undefined;
    try {
      await server.db.query(
        'CREATE TABLE public.ticks (id bigserial PRIMARY KEY, source text, environment text, request_id text)',
      );
      await server.db.query(`SELECT svcgen_worker.add_job('svcgen.code.tick', $1::json)`, [
        JSON.stringify({ environment: 'staging', payload: { from: 'queued' } }),
      ]);
      const { service, config } = await loadService(SHOP);
      worker = await startWorkerProcess({
        config,
        service,
        projectDir: SHOP,
        code: new CodeRegistry(plain, Object.keys(service.tables)),
        databaseUrl: separate.url,
        log: () => {},
      });
      const [row] = await until(
        () => server.db.query<{ source: string; environment: string }>('SELECT source, environment FROM public.ticks'),
        (r) => r.length === 1,
        10_000,
        'the worker ran the job',
      );
      expect(row).toEqual({ source: 'queued', environment: 'staging' });
    } finally {
      await worker?.stop();
      await server.close();
      await separate.drop();
    }
  });
});

describe('cost', () => {
  /** graphile-worker runners of the database: each holds one session LISTENing for new jobs. */
  const runners = (server: TestServer) =>
    server.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
       WHERE datname = current_database() AND query = 'LISTEN "jobs:insert"; LISTEN "worker:migrate";'`,
    );

  it('a server whose code has no jobs starts no job runner; one with jobs starts one more', async () => {
    const bare = await startTestServer({ code: defineCode({}) });
    let withJobs: TestServer | undefined;
    try {
      // svcgen's own: the webhook delivery worker and the storage removal worker.
      const own = 2;
      await until(
        () => runners(bare),
        (r) => r[0]!.n === own,
        10_000,
        "svcgen's own runners listen",
      );
      withJobs = await startTestServer({ code: defineCode({ jobs: [tick] }) });
      await until(
        () => runners(withJobs!),
        (r) => r[0]!.n === own + 1,
        10_000,
        'the code job runner listens',
      );
      expect((await runners(bare))[0]!.n).toBe(own);
    } finally {
      await withJobs?.close();
      await bare.close();
    }
  });
});
