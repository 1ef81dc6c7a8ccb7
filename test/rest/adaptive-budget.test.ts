/**
 * The adaptive expensive-read budget in a served shop (docs/deployment.md "Sizing the pool"): with
 * `database.expensiveReadConcurrency` unset, the limit starts at half the pool, rises while the
 * database keeps up, and never passes the pool less a quarter, so cheap reads and writes find a
 * connection even at its highest. A file of its own: the servers of one process share their
 * metrics, and this one's limit must be read alone. Fairness under a flood of expensive reads:
 * test/rest/fairness.test.ts; the algorithm: test/db/concurrency-limit.unit.test.ts.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const METRICS_TOKEN = 'adaptive-budget-metrics-token-8d2f41c7';
/** Pool 10 less a quarter (rounded up) kept for cheap requests. */
const MAX_LIMIT = 7;

describe('the adaptive expensive-read budget (pool 10, expensiveReadConcurrency unset)', { timeout: 120_000 }, () => {
  let t: TestServer;
  let locker: pg.Client;

  beforeAll(async () => {
    t = await startTestServer({
      configPatch: (raw) => {
        raw.metrics = { enabled: true, token: METRICS_TOKEN };
        raw.rateLimits = { dataPerMinutePerProject: 1_000_000 };
      },
    });
    await t.db.exec(`
      INSERT INTO env_master."City" (name, country, "updatedAt") SELECT 'City ' || i, 'DE', now() FROM generate_series(1, 20) AS i;
    `);
    locker = new pg.Client({ connectionString: t.database.url });
    locker.on('error', () => {});
    await locker.connect();
  });

  afterAll(async () => {
    await locker?.end().catch(() => {});
    await t?.close();
  });

  const budgetState = async () => {
    const text = (
      await t.request('GET', '/metrics', {
        key: false,
        project: false,
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      })
    ).text;
    const sample = (series: string) =>
      Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    return {
      running: sample('db_expensive_reads{state="running"}'),
      queued: sample('db_expensive_reads{state="queued"}'),
      limit: sample('db_expensive_read_limit'),
    };
  };
  const settled = () =>
    until(budgetState, (s) => s.running === 0 && s.queued === 0, 20_000, 'the budget back to 0 running, 0 queued');
  const blockedReads = async () =>
    (
      await t.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      )
    )[0]!.n;

  it('raises the limit from half the pool to the pool less a quarter while reads stay fast', async () => {
    expect(await budgetState()).toEqual({ running: 0, queued: 0, limit: 5 });
    // Aggregates of 20 cities: expensive by rule (every aggregate), fast in fact, so latency stays flat.
    let stop = false;
    const unexpected: string[] = [];
    const worker = async () => {
      while (!stop) {
        const res = await t.request('GET', '/gw/api/rest/City/_aggregate?fn=count,max:name');
        if (res.status !== 200) unexpected.push(res.text);
      }
    };
    const workers = Array.from({ length: 12 }, worker);
    try {
      await until(budgetState, (s) => s.limit > 5, 60_000, 'the limit above its initial 5');
      await until(budgetState, (s) => s.limit === MAX_LIMIT, 60_000, `the limit at its ceiling, ${MAX_LIMIT}`);
    } finally {
      stop = true;
      await Promise.all(workers);
    }
    expect(unexpected).toEqual([]);
    await settled();
    expect((await budgetState()).limit).toBe(MAX_LIMIT);
  });

  it('at its ceiling, cheap reads and writes still find a connection while that many expensive reads hold theirs', async () => {
    const { limit } = await budgetState();
    expect(limit).toBe(MAX_LIMIT);
    // The lock keeps the running reads from finishing: they hold their connections, and the limit cannot move.
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE env_master."Order" IN ACCESS EXCLUSIVE MODE');
    let burst: Array<Promise<TestResponse>> = [];
    try {
      burst = Array.from({ length: 20 }, () => t.request('GET', '/gw/api/rest/Order/_aggregate?fn=count'));
      await until(
        budgetState,
        (s) => s.running === limit && s.queued === 20 - limit && s.limit === limit,
        10_000,
        `the burst filling the budget: ${limit} running, ${20 - limit} queued`,
      );
      await until(blockedReads, (n) => n === limit, 5000, `the ${limit} running reads blocked on the lock`);
      for (let i = 0; i < 5; i++) {
        const read = await t.request('GET', '/gw/api/rest/City/1');
        expect(read.status, read.text).toBe(200);
        const write = await t.request('POST', '/gw/api/rest/City', { body: { name: `Adaptive ${i}`, country: 'FR' } });
        expect(write.status, write.text).toBe(201);
      }
      expect(await blockedReads()).toBe(limit);
      await locker.query('ROLLBACK');
      for (const res of await Promise.all(burst)) {
        // A waiter may pass the 2000 ms wait bound on a slow machine: refused, never failed.
        if (res.status === 200) expect(res.body).toEqual({ data: { aggregates: [{ count: 0 }] } });
        else expectProblem(res, 503, 'database-busy');
      }
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await Promise.allSettled(burst);
    }
    await settled();
  });
});
