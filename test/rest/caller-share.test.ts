/**
 * A caller's share of the expensive-read budget (docs/config.md `database.expensiveReadsPerCaller`,
 * docs/api.md §6.2): one caller (API key or user) may hold at most that many of the budget's places,
 * running and waiting together; past it its expensive reads get 429 rate-limited at once, and the
 * places it cannot take stay for every other caller, whose expensive reads are admitted and
 * answered. Without the share, one caller's burst fills every slot and the whole queue, and other
 * callers' expensive reads get 503 database-busy (test/rest/fairness.test.ts shows the budget itself).
 *
 * Shown by order and counts, not by milliseconds: a lock on Order keeps the running reads from
 * finishing, so the budget stays exactly as the test filled it until the test unlocks it.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const METRICS_TOKEN = 'caller-share-metrics-token-7d2f4e1a';
const GRAPHQL = '/gw/api/graphql';
/** Expensive: a sort on a field no index covers (runtime/data/cost.ts). */
const EXPENSIVE_LIST = '/gw/api/rest/Order?sort=note';
/** A document whose two root fields are aggregates: expensive, taken one at a time (runtime/graphql/document-budget.ts). */
const AGGREGATES = '{ a: orderAggregate { count } b: orderAggregate(groupBy: [status]) { status count } }';
/** The advice of both the 503 and the 429 (runtime/data/context.ts). */
const CHEAPER =
  'make the read cheaper: a page of at most 100 records, no Prefer: count=exact, filters and sort on indexed fields (id)';
const shareDetail = (cost: string) =>
  `this read is expensive (${cost}), and each caller (API key or user) may have 3 expensive reads running or waiting at once (database.expensiveReadsPerCaller) so that one caller cannot take the budget every other caller needs; you have 3. ` +
  `Retry in 1 s, once one of them has finished, or ${CHEAPER}`;

describe("a caller's share of the expensive-read budget: 2 slots, a queue of 4, so 3 places per caller by default", () => {
  let t: TestServer;
  let locker: pg.Client;
  let a: string;
  let b: string;
  let c: string;

  beforeAll(async () => {
    t = await startTestServer({
      configPatch: (raw) => {
        raw.metrics = { enabled: true, token: METRICS_TOKEN };
        raw.rateLimits = { dataPerMinutePerProject: 1_000_000, dataPerMinutePerCaller: 1_000_000 };
        // expensiveReadsPerCaller unset: half of 2 slots + 4 waiting. A long wait bound: no waiter
        // is refused for time while the lock holds, however slow the machine.
        raw.database = {
          poolSize: 6,
          expensiveReadConcurrency: 2,
          expensiveReadQueue: 4,
          poolWaitTimeoutMs: 60_000,
          statementTimeoutMs: 0,
        };
      },
    });
    await t.db.exec(`
      INSERT INTO env_master."City" (name, country, "updatedAt") VALUES ('Lyon', 'FR', now());
      INSERT INTO env_master."Customer" (id, email, name, "cityId", "updatedAt")
      VALUES (gen_random_uuid(), 'share@example.com', 'Share', 1, now());
      INSERT INTO env_master."Order" (status, total, note, "customerId", "updatedAt")
      SELECT (ARRAY['open', 'paid']::env_master."OrderStatus"[])[1 + i % 2], i, 'note ' || i, c.id, now()
      FROM generate_series(1, 4) AS i, env_master."Customer" AS c;
    `);
    [a, b, c] = [
      (await t.createKey(['admin'])).key,
      (await t.createKey(['admin'])).key,
      (await t.createKey(['admin'])).key,
    ];
    locker = new pg.Client({ connectionString: t.database.url });
    locker.on('error', () => {});
    await locker.connect();
  });

  afterAll(async () => {
    await locker?.end().catch(() => {});
    await t?.close();
  });

  /** Blocks every read of Order until the returned function runs. */
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

  const budgetState = async () => {
    const text = (
      await t.request('GET', '/metrics', {
        key: false,
        project: false,
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      })
    ).text;
    const sample = (labels: string) =>
      Number(new RegExp(`^db_expensive_reads\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    return { running: sample('state="running"'), queued: sample('state="queued"') };
  };
  const budgetIs = (running: number, queued: number) =>
    until(
      budgetState,
      (s) => s.running === running && s.queued === queued,
      10_000,
      `${running} expensive reads running, ${queued} queued`,
    );

  const graphql = (key: string) =>
    t.request('POST', GRAPHQL, { key, body: { query: AGGREGATES }, headers: { accept: 'application/json' } });

  /** What became of a request, for the order of events: served (200 with data, no errors), else its status or "refused". */
  const outcome = (res: TestResponse) =>
    res.headers.get('content-type')?.startsWith('application/json')
      ? res.body.errors
        ? 'refused'
        : 'served'
      : String(res.status);

  /** Sends `count` requests at once; `events` gets "<who> <outcome>" as each is answered. */
  function flood(count: number, who: string, send: () => Promise<TestResponse>, events: string[]) {
    return Array.from({ length: count }, async () => {
      const res = await send();
      events.push(`${who} ${outcome(res)}`);
      return res;
    });
  }

  it("caller A's burst of 10 gets 3 places and 7 fast 429s; caller B's expensive reads, sent one by one meanwhile, are all admitted and answered", async () => {
    const events: string[] = [];
    const unlock = await lockOrders();
    let burst: Array<Promise<TestResponse>> = [];
    const paced: Array<Promise<TestResponse>> = [];
    try {
      burst = flood(10, 'A', () => t.request('GET', EXPENSIVE_LIST, { key: a }), events);
      // A's extras are refused before any read could end: the lock holds A's 2 running reads.
      await until(
        async () => events.length,
        (n) => n === 7,
        10_000,
        "A's 7 reads past its share answered",
      );
      await budgetIs(2, 1);
      await until(blockedReads, (n) => n === 2, 5000, "A's 2 running reads blocked on the lock");
      // B sends its reads one at a time, each waiting in the budget before the next is sent.
      for (let i = 0; i < 3; i++) {
        paced.push(t.request('GET', EXPENSIVE_LIST, { key: b }).then((res) => (events.push(`B ${outcome(res)}`), res)));
        await budgetIs(2, 2 + i);
      }
      // A is still past its share; a third caller, within its own, finds the budget's queue full:
      // the project's budget refuses as before (503), a caller's share with 429.
      const again = await t.request('GET', EXPENSIVE_LIST, { key: a });
      const full = await t.request('GET', EXPENSIVE_LIST, { key: c });
      events.push(`A ${outcome(again)}`, `C ${outcome(full)}`);
      expect(full.status, full.text).toBe(503);
      expect(full.body.type).toBe('/errors/database-busy');
      expect(full.body.detail).toBe(
        'this read is expensive (a sort on note, which no index covers), and expensive reads wait in a budget of their own so that they cannot crowd out cheap ones; ' +
          `the queue of expensive reads is full (4 waiting for 2 slots). Retry later, or ${CHEAPER}`,
      );
      expect(await budgetState()).toEqual({ running: 2, queued: 4 });
      events.push('unlock');
      await unlock();
      const answers = await Promise.all([...burst, ...paced]);
      const refused = answers.filter((res) => res.status === 429);
      expect(refused).toHaveLength(7);
      for (const res of [...refused, again]) {
        expect(res.status).toBe(429);
        expect(res.headers.get('content-type')).toBe('application/problem+json');
        expect(res.headers.get('retry-after')).toBe('1');
        // RateLimit-* say the share, not the data rate limit's requests per minute.
        expect(res.headers.get('ratelimit-limit')).toBe('3');
        expect(res.headers.get('ratelimit-remaining')).toBe('0');
        expect(res.headers.get('ratelimit-reset')).toBe('1');
        expect(res.body).toEqual({
          type: '/errors/rate-limited',
          title: 'Too Many Requests',
          status: 429,
          detail: shareDetail('a sort on note, which no index covers'),
          instance: '/gw/api/rest/Order',
          errors: [],
        });
      }
      for (const res of answers.filter((r) => r.status !== 429)) {
        expect(res.status, res.text).toBe(200);
        expect(res.body.data.map((o: { note: string }) => o.note)).toEqual(['note 1', 'note 2', 'note 3', 'note 4']);
      }
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await Promise.allSettled([...burst, ...paced]);
    }
    // Every refusal came before the unlock, every read admitted (A's 3, B's 3) was answered 200 after it.
    expect(events).toEqual([
      ...Array(7).fill('A 429'),
      'A 429',
      'C 503',
      'unlock',
      ...Array(6).fill(expect.stringMatching(/^[AB] served$/)),
    ]);
    expect(events.filter((e) => e === 'B served')).toHaveLength(3);
    expect(events.filter((e) => e === 'A served')).toHaveLength(3);
    await budgetIs(0, 0);
    // The share came back with the reads: A's next expensive read runs.
    expect((await t.request('GET', EXPENSIVE_LIST, { key: a })).status).toBe(200);
  });

  it("GraphQL takes the same share: A's 10 documents of aggregates get 3 places, B's documents are all served", async () => {
    const events: string[] = [];
    const unlock = await lockOrders();
    let burst: Array<Promise<TestResponse>> = [];
    const paced: Array<Promise<TestResponse>> = [];
    try {
      burst = flood(10, 'A', () => graphql(a), events);
      await until(
        async () => events.length,
        (n) => n === 7,
        10_000,
        "A's 7 documents past its share answered",
      );
      // One place per document: its second aggregate waits for its first.
      await budgetIs(2, 1);
      for (let i = 0; i < 3; i++) {
        paced.push(graphql(b).then((res) => (events.push(`B ${outcome(res)}`), res)));
        await budgetIs(2, 2 + i);
      }
      events.push('unlock');
      await unlock();
      const answers = await Promise.all([...burst, ...paced]);
      const refused = answers.filter((res) => res.body.errors !== undefined);
      expect(refused).toHaveLength(7);
      for (const res of refused) {
        // Both root fields are refused: the share is held all along by A's 3 admitted documents.
        expect(res.status, res.text).toBe(200);
        expect(res.headers.get('retry-after')).toBe('1');
        const error = (path: string, line: number, column: number) => ({
          message: shareDetail('an aggregate'),
          locations: [{ line, column }],
          path: [path],
          extensions: { code: 'RATE_LIMITED', type: '/errors/rate-limited', status: 429, retryAfter: 1 },
        });
        expect(res.body).toEqual({ data: { a: null, b: null }, errors: [error('a', 1, 3), error('b', 1, 31)] });
      }
      for (const res of answers.filter((r) => r.body.errors === undefined)) {
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual({
          data: {
            a: [{ count: 4 }],
            b: [
              { status: 'open', count: 2 },
              { status: 'paid', count: 2 },
            ],
          },
        });
      }
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await Promise.allSettled([...burst, ...paced]);
    }
    expect(events).toEqual([
      ...Array(7).fill('A refused'),
      'unlock',
      ...Array(6).fill(expect.stringMatching(/^[AB] served$/)),
    ]);
    expect(events.filter((e) => e === 'B served')).toHaveLength(3);
    expect(events.filter((e) => e === 'A served')).toHaveLength(3);
    await budgetIs(0, 0);
  });
});
