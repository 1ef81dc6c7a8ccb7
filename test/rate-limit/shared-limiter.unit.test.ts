// The shared one-minute rate limits (runtime/rate-limit/shared-limiter.ts; docs/config.md
// `rateLimits`) against a stand-in for their PostgreSQL table: the two statements the limiter
// sends, applied to a Map as PostgreSQL would apply them. What is counted where, what is refused,
// and when several processes share one window. Against PostgreSQL: test/rate-limit/rate-limit.test.ts.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Database } from '../../runtime/db/index.ts';
import { RateLimitExceeded, SharedRateLimiter } from '../../runtime/rate-limit/index.ts';

const WINDOW = Date.UTC(2026, 0, 1, 12, 0); // a window start (a whole minute)

/** svcgen.rate_limits as a Map from "bucket@window" to hits, and the statements it was sent. */
function table() {
  const rows = new Map<string, number>();
  const statements: Array<{ kind: 'add' | 'addMany' | 'claim' | 'prune'; values: readonly unknown[] }> = [];
  let down = false;
  const db = {
    async query(text: string, values: readonly unknown[] = []) {
      if (down) throw new Error('connection refused');
      if (text.startsWith('DELETE')) {
        statements.push({ kind: 'prune', values });
        return [];
      }
      if (text.includes('unnest(')) {
        // add, for several buckets: their names, windows and hits already answered
        statements.push({ kind: 'addMany', values });
        const [buckets, windows, ns] = values as [string[], number[], number[]];
        return buckets.map((bucket, i) => {
          const key = `${bucket}@${windows[i]}`;
          rows.set(key, (rows.get(key) ?? 0) + ns[i]!);
          return { bucket, hits: rows.get(key)! };
        });
      }
      const [bucket, window, n] = values as [string, number, number];
      const key = `${bucket}@${window}`;
      const hits = rows.get(key) ?? 0;
      if (text.includes('WHERE r.hits < $3')) {
        // claim: one more hit only while the window has room (n is the limit)
        statements.push({ kind: 'claim', values });
        if (rows.has(key) && hits >= n) return [];
        rows.set(key, hits + 1);
        return [{ hits: hits + 1 }];
      }
      // add: n hits already answered
      statements.push({ kind: 'add', values });
      rows.set(key, hits + n);
      return [{ hits: hits + n }];
    },
  };
  return {
    db: db as unknown as Database,
    rows,
    statements,
    setDown: (value: boolean) => void (down = value),
    hitsOf: (bucket: string, window = WINDOW) => rows.get(`${bucket}@${window}`) ?? 0,
  };
}

/** The decision, or the refusal's limit and Retry-After. */
async function hit(limiter: SharedRateLimiter, bucket: string, limit: number, now = WINDOW): Promise<unknown> {
  try {
    return await limiter.hit(bucket, limit, now);
  } catch (error) {
    if (!(error instanceof RateLimitExceeded)) throw error;
    return { refused: error.limit, retryAfterSeconds: error.retryAfterSeconds };
  }
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('SharedRateLimiter', () => {
  it('counts a small limit in the shared row on every hit, refuses past it, and does not count the refusal', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await hit(limiter, 'login:1.2.3.4', 3, WINDOW + 15_500));
    expect(answers).toEqual([
      { limit: 3, remaining: 2, resetSeconds: 45 },
      { limit: 3, remaining: 1, resetSeconds: 45 },
      { limit: 3, remaining: 0, resetSeconds: 45 },
      { refused: 3, retryAfterSeconds: 45 },
    ]);
    expect(t.statements.map((s) => s.kind)).toEqual(['claim', 'claim', 'claim', 'claim']);
    expect(t.hitsOf('login:1.2.3.4')).toBe(3);
  });

  it('shares a window between processes: together they get exactly the limit', async () => {
    const t = table();
    const [a, b] = [new SharedRateLimiter(t.db), new SharedRateLimiter(t.db)];
    const answers = [];
    for (let i = 0; i < 4; i++) {
      answers.push(await hit(a, 'signup:ip', 5), await hit(b, 'signup:ip', 5));
    }
    expect(answers.filter((x) => 'remaining' in (x as object))).toHaveLength(5);
    expect(answers.slice(5)).toEqual(Array(3).fill({ refused: 5, retryAfterSeconds: 60 }));
    expect(t.hitsOf('signup:ip')).toBe(5);
  });

  it('starts again in the next window, and keeps buckets apart', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    await hit(limiter, 'a', 1);
    expect(await hit(limiter, 'a', 1, WINDOW + 59_999)).toEqual({ refused: 1, retryAfterSeconds: 1 });
    expect(await hit(limiter, 'b', 1, WINDOW + 59_999)).toEqual({ limit: 1, remaining: 0, resetSeconds: 1 });
    expect(await hit(limiter, 'a', 1, WINDOW + 60_000)).toEqual({ limit: 1, remaining: 0, resetSeconds: 60 });
    expect([t.hitsOf('a'), t.hitsOf('a', WINDOW + 60_000), t.hitsOf('b')]).toEqual([1, 1, 1]);
  });

  it('far from a large limit answers from local counts and writes them in one batch 100 ms later', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    // the first hit of a window claims in the shared row; the next 50 are only counted here
    expect(await hit(limiter, 'data:shop', 100_000)).toEqual({ limit: 100_000, remaining: 99_999, resetSeconds: 60 });
    for (let i = 0; i < 50; i++) await hit(limiter, 'data:shop', 100_000);
    expect(await hit(limiter, 'data:shop', 100_000)).toEqual({ limit: 100_000, remaining: 99_948, resetSeconds: 60 });
    expect(t.statements.map((s) => s.kind)).toEqual(['claim']);
    await vi.advanceTimersByTimeAsync(99);
    expect(t.statements).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.statements.map((s) => [s.kind, s.values[2]])).toEqual([
      ['claim', 100_000],
      ['add', 51],
    ]);
    expect(t.hitsOf('data:shop')).toBe(52);
  });

  it('writes a batch at once when it holds a quarter of the margin of its limit, whatever the time', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    // 1000: the margin is 20 (2 %), so a batch holds at most 5 hits
    await hit(limiter, 'data:shop', 1000);
    for (let i = 0; i < 4; i++) await hit(limiter, 'data:shop', 1000);
    await vi.advanceTimersByTimeAsync(0);
    expect(t.statements.map((s) => s.kind)).toEqual(['claim']);
    await hit(limiter, 'data:shop', 1000); // the fifth: written on the next turn, not 100 ms later
    await vi.advanceTimersByTimeAsync(0);
    expect(t.statements.map((s) => [s.kind, s.values[2]])).toEqual([
      ['claim', 1000],
      ['add', 5],
    ]);
    for (let i = 0; i < 3; i++) await hit(limiter, 'data:shop', 1000);
    await vi.advanceTimersByTimeAsync(99);
    expect(t.statements).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(t.statements.map((s) => [s.kind, s.values[2]])).toEqual([
      ['claim', 1000],
      ['add', 5],
      ['add', 3],
    ]);
    expect(t.hitsOf('data:shop')).toBe(9);
  });

  it('flushPending writes the hits counted locally at once, and the timer then finds nothing to write', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    await hit(limiter, 'data:shop', 100_000);
    for (let i = 0; i < 7; i++) await hit(limiter, 'data:shop', 100_000);
    await limiter.flushPending();
    expect(t.statements.map((s) => [s.kind, s.values[2]])).toEqual([
      ['claim', 100_000],
      ['add', 7],
    ]);
    await vi.advanceTimersByTimeAsync(100);
    expect(t.statements).toHaveLength(2);
  });

  it('hitNow decides a hit far from the limit at once and counts it; it leaves a first or near-limit hit, uncounted, to hit()', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    expect(limiter.hitNow('data:shop', 1000, WINDOW)).toBeUndefined(); // the window's first: the shared row decides
    expect(limiter.hitNow('data:shop', 3, WINDOW)).toBeUndefined(); // a small limit: always the shared row
    expect(await hit(limiter, 'data:shop', 1000)).toEqual({ limit: 1000, remaining: 999, resetSeconds: 60 });
    expect(limiter.hitNow('data:shop', 1000, WINDOW + 30_500)).toEqual({
      limit: 1000,
      remaining: 998,
      resetSeconds: 30,
    });
    expect(t.statements.map((s) => s.kind)).toEqual(['claim']);
    await vi.advanceTimersByTimeAsync(100);
    expect(t.hitsOf('data:shop')).toBe(2); // the claim and the local hit; the undefined answers counted nothing
    // 20 or fewer left (2 % of 1000): every hit goes to the shared row, which refuses past the limit
    t.rows.set(`data:shop@${WINDOW}`, 979);
    const other = new SharedRateLimiter(t.db);
    await hit(other, 'data:shop', 1000); // another process's first hit claims: 980, 20 left
    expect(other.hitNow('data:shop', 1000, WINDOW)).toBeUndefined();
    t.rows.set(`data:shop@${WINDOW}`, 1000);
    expect(await hit(other, 'data:shop', 1000)).toEqual({ refused: 1000, retryAfterSeconds: 60 });
    expect(t.hitsOf('data:shop')).toBe(1000);
  });

  it('writes the local counts of several buckets in one statement', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    await hit(limiter, 'data-caller:shop:key', 1000);
    await hit(limiter, 'data:shop', 1000);
    for (let i = 0; i < 3; i++) {
      await hit(limiter, 'data-caller:shop:key', 1000);
      await hit(limiter, 'data:shop', 1000);
    }
    await vi.advanceTimersByTimeAsync(100);
    expect(t.statements.map((s) => s.kind)).toEqual(['claim', 'claim', 'addMany']);
    expect(t.statements[2]!.values).toEqual([
      ['data-caller:shop:key', 'data:shop'],
      [WINDOW, WINDOW],
      [3, 3],
    ]);
    expect([t.hitsOf('data-caller:shop:key'), t.hitsOf('data:shop')]).toEqual([4, 4]);
    // the shared counts came back: the next answers count from them
    expect(await hit(limiter, 'data:shop', 1000)).toEqual({ limit: 1000, remaining: 995, resetSeconds: 60 });
  });

  it('near a large limit writes every hit before answering, so processes cannot overshoot it', async () => {
    const t = table();
    const [a, b] = [new SharedRateLimiter(t.db), new SharedRateLimiter(t.db)];
    // 2 % of 1000 is 20: with 20 or fewer left, each hit claims in the shared row
    t.rows.set(`data:shop@${WINDOW}`, 975);
    await hit(a, 'data:shop', 1000); // a's first hit claims: 976
    await hit(b, 'data:shop', 1000); // b's first hit claims: 977
    for (let i = 0; i < 2; i++) await hit(a, 'data:shop', 1000); // 23, then 22 left: counted locally
    expect(t.statements.map((s) => s.kind)).toEqual(['claim', 'claim']);
    const rest = [];
    for (let i = 0; i < 30; i++) rest.push(await hit(i % 2 ? a : b, 'data:shop', 1000));
    await vi.advanceTimersByTimeAsync(100);
    expect(t.hitsOf('data:shop')).toBe(1000);
    expect(rest.filter((x) => 'refused' in (x as object))).toHaveLength(30 - 21);
  });

  it('keeps counting locally while the database is away, and still refuses past the limit', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    t.setDown(true);
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await hit(limiter, 'recovery:a@b.c', 2));
    expect(answers).toEqual([
      { limit: 2, remaining: 1, resetSeconds: 60 },
      { limit: 2, remaining: 0, resetSeconds: 60 },
      { refused: 2, retryAfterSeconds: 60 },
    ]);
  });

  it('prune deletes old shared rows and forgets local buckets of past windows', async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    await hit(limiter, 'a', 1000);
    await hit(limiter, 'a', 1000); // counted locally: the bucket has seen its window
    await vi.advanceTimersByTimeAsync(100);
    await limiter.prune(WINDOW + 60_000);
    expect(t.statements.map((s) => s.kind)).toEqual(['claim', 'add', 'prune']);
    // The bucket of the old window is gone: a hit with that clock is the first again, so it claims.
    await hit(limiter, 'a', 1000);
    expect(t.statements.map((s) => s.kind)).toEqual(['claim', 'add', 'prune', 'claim']);
  });

  it("prune keeps the current window's buckets", async () => {
    const t = table();
    const limiter = new SharedRateLimiter(t.db);
    await hit(limiter, 'a', 1000);
    await limiter.prune(WINDOW + 30_000);
    await hit(limiter, 'a', 1000);
    expect(t.statements.map((s) => s.kind)).toEqual(['claim', 'prune']);
  });
});
