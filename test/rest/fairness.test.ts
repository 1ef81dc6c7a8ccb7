/**
 * Fairness (docs/config.md `database.expensiveRead*`, docs/api.md §6.2): expensive reads
 * (aggregates, large pages, count=exact, unindexed filters, sorts and embeds) wait in a budget of
 * their own, so a burst of them cannot take every pool connection while a cheap GET by id queues
 * behind them. Beyond the budget's queue, or past its wait bound, they get a fast 503
 * database-busy; every slot comes back, whatever the request did. By default the budget's size
 * follows the reads' latency (docs/deployment.md "Sizing the pool"): it starts at half the pool
 * and never takes more than the pool less a quarter, so the tests read it from
 * db_expensive_read_limit rather than assume 5.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, readResponse, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const METRICS_TOKEN = 'fairness-metrics-token-5c1e0a9b';
const ORDERS = 200_000;

// Which reads are expensive: test/data/cost.unit.test.ts; the budget alone: test/db/admission.unit.test.ts;
// a caller's share of it: test/rest/caller-share.test.ts;
// how its limit adapts: test/db/concurrency-limit.unit.test.ts, and rises in a served shop:
// test/rest/adaptive-budget.test.ts; its settings: test/config/schema.unit.test.ts.

/** Pool 10 less a quarter (rounded up) kept for cheap requests: the adaptive budget's ceiling. */
const MAX_LIMIT = 7;

describe('expensive reads against a served shop of 200k orders', { timeout: 120_000 }, () => {
  let t: TestServer;
  let locker: pg.Client;
  const metricsConfig = (raw: any) => {
    raw.metrics = { enabled: true, token: METRICS_TOKEN };
    raw.rateLimits = { dataPerMinutePerProject: 1_000_000 };
  };
  /**
   * These tests are about the budget every caller shares; one key stands for many callers, so its
   * share of the budget (database.expensiveReadsPerCaller) is every place. The share itself:
   * test/rest/caller-share.test.ts.
   */
  const ALL_PLACES = 100_000;

  beforeAll(async () => {
    // Pool 10: an adaptive budget starting at 5 slots (at most 7) and a queue of 50 (the defaults), wait bound 2000 ms.
    t = await startTestServer({
      configPatch: (raw) => {
        metricsConfig(raw);
        raw.database = { expensiveReadsPerCaller: ALL_PLACES };
      },
    });
    await t.db.exec(`
      INSERT INTO env_master."City" (name, country, "updatedAt") SELECT 'City ' || i, 'DE', now() FROM generate_series(1, 20) AS i;
      INSERT INTO env_master."Customer" (id, email, name, "cityId", "updatedAt")
      SELECT gen_random_uuid(), 'customer' || i || '@example.com', 'Customer ' || i, 1 + i % 20, now() FROM generate_series(1, 1000) AS i;
      INSERT INTO env_master."Order" (status, total, note, "customerId", "updatedAt")
      SELECT (ARRAY['open', 'paid', 'shipped', 'cancelled']::env_master."OrderStatus"[])[1 + i % 4], (i % 50000) / 100.0,
             CASE WHEN i % 3 = 0 THEN 'gift wrap, order ' || i END, c.id, now() - i * interval '1 second'
      FROM generate_series(1, ${ORDERS}) AS i
      JOIN (SELECT id, row_number() OVER (ORDER BY email) - 1 AS n FROM env_master."Customer") AS c ON c.n = i % 1000;
    `);
    await t.db.exec('VACUUM ANALYZE');
    locker = new pg.Client({ connectionString: t.database.url });
    locker.on('error', () => {});
    await locker.connect();
  }, 120_000);

  afterAll(async () => {
    await locker?.end().catch(() => {});
    await t?.close();
  });

  /** Blocks every read of Order until the returned function runs (or the locker rolls back). */
  async function lockOrders(): Promise<() => Promise<void>> {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE env_master."Order" IN ACCESS EXCLUSIVE MODE');
    return async () => void (await locker.query('ROLLBACK'));
  }

  const blockedReads = async () =>
    (
      await t.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      )
    )[0]!.n;

  const scrape = async () =>
    (
      await t.request('GET', '/metrics', {
        key: false,
        project: false,
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      })
    ).text;
  const sample = (text: string, name: string, labels?: string) =>
    Number(new RegExp(`^${name}${labels ? `\\{${labels}\\}` : ''} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  // Servers of one process share the metrics: the small one below adds its own while t is idle.
  const budgetState = async () => {
    const text = await scrape();
    return {
      running: sample(text, 'db_expensive_reads', 'state="running"'),
      queued: sample(text, 'db_expensive_reads', 'state="queued"'),
      limit: sample(text, 'db_expensive_read_limit'),
    };
  };
  const settled = () =>
    until(budgetState, (s) => s.running === 0 && s.queued === 0, 20_000, 'the budget back to 0 running, 0 queued');

  /** Heavy reads of every kind the budget takes: aggregates over all orders, large pages, exact counts, unindexed sorts. */
  const EXPENSIVE: Array<[string, string, Record<string, string>?]> = [
    ['GET', '/gw/api/rest/Order/_aggregate?fn=count,sum:total,avg:total,count_distinct:customerId&groupBy=status'],
    ['GET', '/gw/api/rest/Order?limit=1000&sort=-total'],
    ['GET', '/gw/api/rest/Order?limit=10&note=contains.nothing-matches', { prefer: 'count=exact' }],
    ['GET', '/gw/api/rest/Order/_aggregate?fn=count_distinct:note'],
  ];

  function expectBusy(res: TestResponse): void {
    expectProblem(res, 503, 'database-busy');
    expect(res.headers.get('retry-after')).toBe('1');
  }

  // Fairness shown by order, not by milliseconds: while the Order lock keeps the running expensive
  // reads from finishing, they hold their connections for as long as the test likes (and, none
  // finishing, the limit cannot move). With the budget, 5 of the pool's 10 are held and cheap
  // requests get the others; without it (10 slots, the whole pool) all 10 would be held, and the
  // cheap GET below would wait poolWaitTimeoutMs for a connection and get a 503 instead of its 200.
  it('answers cheap reads and writes while 40 expensive reads fill the budget and hold their connections', async () => {
    const customer = (
      await t.db.query<{ id: string }>('SELECT id FROM env_master."Customer" ORDER BY email LIMIT 1')
    )[0]!.id;
    // No expensive read has run yet: the adaptive limit is where it starts, half the pool.
    expect(await budgetState()).toEqual({ running: 0, queued: 0, limit: 5 });
    const statuses = new Map<number, number>();
    const unexpected: string[] = [];
    const count = (res: TestResponse) => {
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      if (res.status !== 200 && res.body?.type !== '/errors/database-busy') unexpected.push(res.text);
    };
    const unlock = await lockOrders();
    let burst: Array<Promise<void>> = [];
    try {
      burst = Array.from({ length: 40 }, async (_, i) => {
        const [method, path, headers] = EXPENSIVE[i % EXPENSIVE.length]!;
        count(await t.request(method, path, { headers }));
      });
      await until(
        budgetState,
        (s) => s.running === 5 && s.queued === 35 && s.limit === 5,
        10_000,
        'the burst filling the budget: 5 running, 35 queued',
      );
      await until(
        blockedReads,
        (n) => n === 5,
        5000,
        'the 5 running reads blocked on the lock, each holding a connection',
      );
      for (let i = 0; i < 10; i++) {
        const read = await t.request('GET', `/gw/api/rest/Customer/${customer}`);
        expect(read.status, read.text).toBe(200);
        const write = await t.request('POST', '/gw/api/rest/City', { body: { name: `Fair ${i}`, country: 'FR' } });
        expect(write.status, write.text).toBe(201);
      }
      // Still the same burst: the cheap requests did not wait for any of it.
      expect(await budgetState()).toEqual({ running: 5, queued: 35, limit: 5 });
      expect(await blockedReads()).toBe(5);
      await unlock();
      await Promise.all(burst);
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await Promise.allSettled(burst);
    }
    // Queued reads may have waited past the 2000 ms bound meanwhile: those are refused, never failed.
    expect(unexpected).toEqual([]);
    expect([...statuses.values()].reduce((a, b) => a + b, 0)).toBe(40);
    expect(statuses.get(200)).toBeGreaterThanOrEqual(5);
    await settled();
  });

  it('answers cheap GETs by id on the same table while expensive reads of it keep running', async () => {
    let stop = false;
    const unexpected: string[] = [];
    let answered = 0;
    const worker = async (n: number) => {
      for (let i = n; !stop; i++) {
        const [method, path, headers] = EXPENSIVE[i % EXPENSIVE.length]!;
        const res = await t.request(method, path, { headers });
        answered++;
        if (res.status !== 200 && res.body?.type !== '/errors/database-busy') unexpected.push(res.text);
      }
    };
    const workers = Array.from({ length: 40 }, (_, n) => worker(n));
    try {
      // The limit moves as reads finish (up while the database keeps up, down as they slow): full is at or above it.
      await until(budgetState, (s) => s.running >= s.limit && s.queued > 20, 10_000, 'the burst filling the budget');
      for (let i = 0; i < 30; i++) {
        const res = await t.request('GET', '/gw/api/rest/Order/4242');
        expect(res.status, res.text).toBe(200);
        expect(res.body.data.id).toBe(4242);
      }
    } finally {
      stop = true;
      await Promise.all(workers);
    }
    expect(unexpected).toEqual([]);
    expect(answered).toBeGreaterThanOrEqual(40);
    const { limit } = await budgetState();
    expect(limit).toBeGreaterThanOrEqual(1);
    expect(limit).toBeLessThanOrEqual(MAX_LIMIT);
    await settled();
  });

  it('answers 80 expensive reads beyond slots and queue with a fast 503, not by holding them in memory', async () => {
    const rssBefore = process.memoryUsage().rss;
    // Wherever the earlier tests left the limit, it holds while the lock keeps the running reads from
    // finishing: exactly `limit` run, 50 wait and the rest are refused.
    const { limit } = await budgetState();
    expect(limit).toBeLessThanOrEqual(MAX_LIMIT);
    const unlock = await lockOrders();
    const started = performance.now();
    let answers: Array<{ res: TestResponse; ms: number }>;
    try {
      const pending = Array.from({ length: 80 }, async () => {
        const res = await t.request('GET', '/gw/api/rest/Order?limit=1000&sort=-total');
        return { res, ms: performance.now() - started };
      });
      await until(
        budgetState,
        (s) => s.running === limit && s.queued === 50 && s.limit === limit,
        10_000,
        `${limit} running, 50 queued`,
      );
      await until(blockedReads, (n) => n === limit, 5000, `the ${limit} running reads blocked on the lock`);
      const unlockedAt = performance.now() - started;
      await unlock();
      answers = await Promise.all(pending);
      const refused = answers.filter((a) => a.res.status !== 200);
      for (const a of refused) {
        expectBusy(a.res);
        expect(a.res.body.detail).toContain('(a page of 1000 (more than 100))');
      }
      const full = refused.filter((a) =>
        a.res.body.detail.includes(
          `the queue of expensive reads is full (50 waiting for ${limit} slot${limit === 1 ? '' : 's'})`,
        ),
      );
      expect(full.length).toBe(30 - limit);
      expect(Math.max(...full.map((a) => a.ms)), 'refused before any read could finish').toBeLessThan(unlockedAt);
      // The 50 + limit admitted run once the lock goes; on a slow machine a waiter may time out instead (2000 ms).
      const ok = answers.filter((a) => a.res.status === 200);
      expect(ok.length + (refused.length - full.length)).toBe(50 + limit);
      for (const a of ok) expect(a.res.body.data).toHaveLength(1000);
      const grownMb = (process.memoryUsage().rss - rssBefore) / 1e6;
      console.log(
        `fairness: 80 large pages: ${ok.length} answered, ${full.length} refused at once (queue full), ${refused.length - full.length} after waiting; RSS grew ${grownMb.toFixed(0)} MB`,
      );
      // 55 pages of 1000 records held at once cost about 40 MB here; the operator saw 200 MB with no bound.
      expect(grownMb).toBeLessThan(150);
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
    }
    await settled();
  });

  describe('with 1 slot and a queue of 2, while a lock holds the running read', () => {
    let small: TestServer;

    beforeAll(async () => {
      small = await startTestServer({
        databaseUrl: t.database.url,
        configPatch: (raw) => {
          metricsConfig(raw);
          raw.database = {
            poolSize: 4,
            expensiveReadConcurrency: 1,
            expensiveReadQueue: 2,
            poolWaitTimeoutMs: 800,
            statementTimeoutMs: 0,
            expensiveReadsPerCaller: ALL_PLACES,
          };
        },
      });
    });

    afterAll(async () => {
      await small?.close();
    });

    it('refuses beyond the queue at once and a waiter past poolWaitTimeoutMs, with 503 database-busy and a detail that says how to make the read cheaper', async () => {
      const unlock = await lockOrders();
      try {
        const running = small.request('GET', '/gw/api/rest/Order/_aggregate?fn=count');
        await until(blockedReads, (n) => n === 1, 5000, 'the first aggregate running (blocked on the lock)');
        const waiting = [
          small.request('GET', '/gw/api/rest/Order/_aggregate?fn=count'),
          small.request('GET', '/gw/api/rest/Order?limit=500'),
        ];
        await until(budgetState, (s) => s.queued === 2, 5000, 'two reads queued');
        const full = await small.request('GET', '/gw/api/rest/Order?sort=total');
        expect(full.status).toBe(503);
        expect(full.headers.get('retry-after')).toBe('1');
        expect(full.headers.get('content-type')).toBe('application/problem+json');
        expect(full.body).toEqual({
          type: '/errors/database-busy',
          title: 'Database busy',
          status: 503,
          detail:
            'this read is expensive (a sort on total, which no index covers), and expensive reads wait in a budget of their own so that they cannot crowd out cheap ones; ' +
            'the queue of expensive reads is full (2 waiting for 1 slot). ' +
            'Retry later, or make the read cheaper: a page of at most 100 records, no Prefer: count=exact, filters and sort on indexed fields (id)',
          instance: '/gw/api/rest/Order',
          errors: [],
        });
        const [aggregate, page] = await Promise.all(waiting);
        expectBusy(aggregate!);
        expect(aggregate!.body.detail).toContain('this read is expensive (an aggregate)');
        expect(aggregate!.body.detail).toContain('; it waited 800 ms without getting one of the 1 slot.');
        expectBusy(page!);
        expect(page!.body.detail).toContain('this read is expensive (a page of 500 (more than 100))');
        // A cheap read of another table and a write never wait on the budget.
        expect((await small.request('GET', '/gw/api/rest/City/1')).status).toBe(200);
        expect(
          (await small.request('POST', '/gw/api/rest/City', { body: { name: 'Fair', country: 'FR' } })).status,
        ).toBe(201);
        await unlock();
        const first = await running;
        expect(first.status, first.text).toBe(200);
        expect(first.body).toEqual({ data: { aggregates: [{ count: ORDERS }] } });
      } finally {
        await locker.query('ROLLBACK').catch(() => {});
      }
      const refusals = await scrape();
      expect(sample(refusals, 'db_expensive_read_refusals_total', 'reason="queue-full"')).toBeGreaterThanOrEqual(1);
      expect(sample(refusals, 'db_expensive_read_refusals_total', 'reason="wait-timeout"')).toBeGreaterThanOrEqual(2);
      await settled();
    });

    it('gives the slot back when the read fails with a 4xx after taking it', async () => {
      for (let i = 0; i < 4; i++) {
        const res = await small.request('GET', '/gw/api/rest/Order?limit=500&after=not-a-cursor');
        expectProblem(res, 400, 'invalid-parameter', 'after');
      }
      // With the 1 slot leaked, this would wait 800 ms and be refused.
      expect((await small.request('GET', '/gw/api/rest/Order/_aggregate?fn=count')).status).toBe(200);
      await settled();
    });

    it('gives the slot and the queue place back when clients disconnect while running or queued (queued ones leave at once: a burst of abandoned requests filled the queue for the next clients)', async () => {
      const unlock = await lockOrders();
      const controllers = [new AbortController(), new AbortController(), new AbortController()];
      try {
        const gone = controllers.map((c) =>
          fetch(`${small.url}/gw/api/rest/Order/_aggregate?fn=count`, {
            headers: { authorization: `Bearer ${small.adminKey}`, 'x-project-id': 'shop' },
            signal: c.signal,
          }).then(readResponse, (error: Error) => error.name),
        );
        await until(budgetState, (s) => s.running === 1 && s.queued === 2, 5000, 'one running, two queued');
        for (const c of controllers) c.abort();
        expect(await Promise.all(gone)).toEqual(['AbortError', 'AbortError', 'AbortError']);
        // The running read still waits on the lock; the queued two left when their clients did.
        await until(budgetState, (s) => s.running === 1 && s.queued === 0, 5000, 'the queued reads dropped');
        expect(
          sample(await scrape(), 'db_expensive_read_refusals_total', 'reason="client-gone"'),
        ).toBeGreaterThanOrEqual(2);
        await unlock();
      } finally {
        await locker.query('ROLLBACK').catch(() => {});
      }
      await settled();
      expect((await small.request('GET', '/gw/api/rest/Order/_aggregate?fn=count')).status).toBe(200);
    });
  });
});
