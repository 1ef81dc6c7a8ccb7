// The default expensive-read limit a server builds (runtime/server/features/data.ts; docs/deployment.md
// "Sizing the pool"): its bounds for a pool size, and the debug line when it moves; a caller's share
// of the budget (docs/config.md `database.expensiveReadsPerCaller`). The algorithm:
// test/db/concurrency-limit.unit.test.ts; in a served shop: test/rest/adaptive-budget.test.ts.
import { Writable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../runtime/observability/index.ts';
import { expensiveReadLimit, expensiveReadsPerCaller } from '../../runtime/server/features/data.ts';

function debugLog() {
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: createLogger({ format: 'json', level: 'debug', destination }) };
}

/** Runs `seconds` windows of 10 reads of `rttMs`, each read started with every slot in use. */
function run(limit: ReturnType<typeof expensiveReadLimit>, seconds: number, rttMs: number): void {
  for (let s = 0; s < seconds; s++) {
    for (let i = 0; i < 10; i++) limit.sample(rttMs, limit.current);
    vi.advanceTimersByTime(1000);
  }
}

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['performance'] });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('expensiveReadLimit', () => {
  it.each([
    // pool, initial (half), ceiling (the pool less a quarter, rounded up)
    [1, 1, 1],
    [2, 1, 1],
    [4, 2, 3],
    [10, 5, 7],
    [20, 10, 15],
  ])('pool %i: starts at %i, rises to %i while reads stay fast, and no further', (pool, initial, ceiling) => {
    const limit = expensiveReadLimit(pool, debugLog().logger);
    expect(limit.current).toBe(initial);
    run(limit, 200, 20);
    expect(limit.current).toBe(ceiling);
  });

  it('logs each move of the limit at debug level, with the latencies that moved it', async () => {
    const { lines, logger } = debugLog();
    const limit = expensiveReadLimit(10, logger);
    run(limit, 30, 20);
    // A window opens with its first read and closes with the first read a second later: of these three
    // seconds, the first closes the last fast window (plus one slow read), the second a slow one.
    run(limit, 3, 100);
    logger.flush();
    await vi.waitFor(() => expect(lines).toHaveLength(3));
    expect(lines.map(({ level, msg, limit, previous, max }) => ({ level, msg, limit, previous, max }))).toEqual([
      { level: 'debug', msg: 'expensive-read limit changed', limit: 6, previous: 5, max: 7 },
      { level: 'debug', msg: 'expensive-read limit changed', limit: 7, previous: 6, max: 7 },
      { level: 'debug', msg: 'expensive-read limit changed', limit: 6, previous: 7, max: 7 },
    ]);
    expect(lines[2]).toMatchObject({ lastReadMs: 100, gradient: 0.5 });
    expect(lines[2]!.usualReadMs).toBeCloseTo(20, 0);
  });
});

describe('expensiveReadsPerCaller (docs/config.md `database.expensiveReadsPerCaller`)', () => {
  const database = { poolSize: 10, statementTimeoutMs: 5000, poolWaitTimeoutMs: 2000, expensiveReadQueue: 50 };

  it("is the setting, else half of the budget's most places (its most slots and its queue), at least 1", () => {
    // The adaptive limit's ceiling, 10 less a quarter (7), and the queue of 50: 57 / 2.
    expect(expensiveReadsPerCaller(database)).toBe(28);
    expect(expensiveReadsPerCaller({ ...database, expensiveReadConcurrency: 2, expensiveReadQueue: 4 })).toBe(3);
    expect(expensiveReadsPerCaller({ ...database, poolSize: 4, expensiveReadQueue: 0 })).toBe(1);
    expect(expensiveReadsPerCaller({ ...database, expensiveReadConcurrency: 1, expensiveReadQueue: 0 })).toBe(1);
    expect(expensiveReadsPerCaller({ ...database, expensiveReadsPerCaller: 5 })).toBe(5);
  });
});
