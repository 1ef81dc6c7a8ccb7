// The adaptive expensive-read limit (runtime/db/concurrency-limit.ts; docs/deployment.md "Sizing the
// pool"), fed synthetic latencies. The budget that obeys it: test/db/admission.unit.test.ts; in a
// served shop: test/rest/adaptive-budget.test.ts and test/rest/fairness.test.ts.
import { describe, expect, it } from 'vitest';
import { Admission, GradientLimit, type LimitChange } from '../../runtime/db/index.ts';

/** A promise the test settles (Promise.withResolvers is not in Node 20). */
function gate() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * Pool 10: starts at 5, between 1 and 7 (a quarter of the pool kept for cheap requests). Every read
 * is a window of its own here, so each sample is one step of the algorithm; windows: further down.
 */
function poolOfTen(onChange?: (change: LimitChange) => void) {
  return new GradientLimit({ initial: 5, min: 1, max: 7, onChange, windowMs: 0, windowSamples: 1 });
}

/** Reports `count` reads of `rttMs` each, every one started with the limit's slots all in use. */
function feed(limit: GradientLimit, count: number, rttMs: number): number[] {
  const seen: number[] = [];
  for (let i = 0; i < count; i++) {
    limit.sample(rttMs, limit.current);
    seen.push(limit.current);
  }
  return seen;
}

describe('GradientLimit', () => {
  it('starts at the initial limit and grows while latency stays flat, one step at a time, up to max', () => {
    const limit = poolOfTen();
    expect(limit.current).toBe(5);
    const seen = feed(limit, 30, 20);
    expect(seen.slice(0, 4)).toEqual([5, 5, 5, 5]); // + 0.2 × max(1, log10 5) a read: smoothed, no jump
    expect(seen.indexOf(6)).toBeGreaterThan(0);
    expect(seen.at(-1)).toBe(7);
    for (let i = 1; i < seen.length; i++) expect(seen[i]! - seen[i - 1]!).toBeGreaterThanOrEqual(0);
    expect(feed(limit, 200, 20).every((n) => n === 7)).toBe(true);
  });

  it('shrinks when reads take longer than usual, to twice the probe under sustained queueing', () => {
    const limit = poolOfTen();
    feed(limit, 100, 20);
    expect(limit.current).toBe(7);
    // The database falls behind: reads take 5 times as long. Each read takes a tenth off (gradient 0.5, smoothing 0.2).
    const seen = feed(limit, 60, 100);
    expect(seen.slice(0, 6)).toEqual([6, 6, 5, 5, 4, 4]);
    expect(seen.at(-1)).toBe(2);
    expect(feed(limit, 30, 1000).every((n) => n === 2)).toBe(true);
  });

  it('goes down to min and no further when the probe allows it', () => {
    const limit = new GradientLimit({ initial: 5, min: 3, max: 7, windowMs: 0, windowSamples: 1 });
    feed(limit, 20, 20);
    expect(feed(limit, 60, 200).at(-1)).toBe(3);
  });

  it('tolerates latency up to half as slow again before shrinking', () => {
    const limit = poolOfTen();
    feed(limit, 100, 20);
    expect(feed(limit, 50, 29).every((n) => n === 7)).toBe(true);
  });

  it('recovers once latency is back to normal', () => {
    const limit = poolOfTen();
    feed(limit, 100, 20);
    expect(feed(limit, 60, 100).at(-1)).toBe(2);
    const seen = feed(limit, 60, 20);
    expect(seen.slice(0, 4)).toEqual([2, 2, 2, 2]);
    expect(seen.indexOf(7)).toBeGreaterThan(20);
    expect(seen.at(-1)).toBe(7);
  });

  it('takes a lasting latency as the new usual, and after it drops, forgets it fast enough to notice the next slowdown', () => {
    const limit = poolOfTen();
    feed(limit, 100, 20);
    // Hours at 400 ms per read: the long-term average learns it, and the limit grows back to max.
    expect(feed(limit, 3000, 400).at(-1)).toBe(7);
    // Back to 20 ms: the average, 20 times the latest read, decays by 5% a read instead of over hundreds.
    expect(feed(limit, 100, 20).at(-1)).toBe(7);
    // So a slowdown to 100 ms is seen as one: without the decay 1.5 × ~260 / 100 would still read as "no queueing".
    expect(feed(limit, 40, 100).at(-1)).toBe(2);
  });

  it('does not grow while fewer than half its slots are in use: idle slots say nothing about more', () => {
    const limit = poolOfTen();
    for (let i = 0; i < 100; i++) limit.sample(20, 2);
    expect(limit.current).toBe(5);
    for (let i = 0; i < 100; i++) limit.sample(20, 3);
    expect(limit.current).toBe(6);
    for (let i = 0; i < 100; i++) limit.sample(20, 4);
    expect(limit.current).toBe(7);
  });

  it('stays within [min, max] whatever the latencies, including 0 ms readings', () => {
    const limit = new GradientLimit({ initial: 2, min: 2, max: 3, windowMs: 0, windowSamples: 1 });
    const rtts = [0, 0, 5, 500, 0.01, 10_000, 3, 0, 7, 80];
    for (let i = 0; i < 500; i++) {
      limit.sample(rtts[i % rtts.length]!, 3);
      expect(limit.current).toBeGreaterThanOrEqual(2);
      expect(limit.current).toBeLessThanOrEqual(3);
    }
  });

  it('keeps the initial limit inside [min, max] and refuses min above max', () => {
    expect(new GradientLimit({ initial: 5, min: 1, max: 1 }).current).toBe(1);
    expect(new GradientLimit({ initial: 0, min: 1, max: 4 }).current).toBe(1);
    expect(() => new GradientLimit({ initial: 1, min: 3, max: 2 })).toThrow(
      'the limits must satisfy 1 <= min <= max (min 3, max 2)',
    );
  });

  it('reports each change of the whole-number limit with the latencies that moved it', () => {
    const changes: LimitChange[] = [];
    const limit = poolOfTen((change) => changes.push(change));
    feed(limit, 30, 20);
    expect(changes.map((c) => [c.previous, c.limit])).toEqual([
      [5, 6],
      [6, 7],
    ]);
    expect(changes[0]).toMatchObject({ shortRttMs: 20, longRttMs: 20, gradient: 1 });
    changes.length = 0;
    feed(limit, 1, 100);
    expect(changes).toEqual([{ previous: 7, limit: 6, shortRttMs: 100, longRttMs: expect.any(Number), gradient: 0.5 }]);
  });
});

describe('GradientLimit windows (by default at least 1 s and 10 reads)', () => {
  function clocked() {
    const clock = { ms: 0 };
    const changes: LimitChange[] = [];
    const limit = new GradientLimit({
      initial: 5,
      min: 1,
      max: 7,
      now: () => clock.ms,
      onChange: (change) => changes.push(change),
    });
    return { clock, changes, limit };
  }

  it('moves the limit once per window, from the average latency of its reads', () => {
    const { clock, changes, limit } = clocked();
    // 10 reads every 100 ms: a window closes only once a second has passed, with 100 reads in it.
    for (let i = 0; i < 200; i++) {
      limit.sample(20, limit.current);
      if (i % 10 === 9) clock.ms += 100;
    }
    expect(limit.current).toBe(5);
    for (let w = 0; w < 20; w++) {
      clock.ms += 1000;
      for (let i = 0; i < 10; i++) limit.sample(20, limit.current);
    }
    expect(changes.map((c) => c.limit)).toEqual([6, 7]);
    // A window opens with its first read and closes with the first read a second later (the 10th or more).
    // One slow read among nine fast ones: the window's average (38 ms) is within the tolerance of 20 ms.
    changes.length = 0;
    for (let i = 0; i < 9; i++) limit.sample(20, 7);
    clock.ms += 1000;
    limit.sample(200, 7);
    expect(changes).toEqual([]);
    // A window of slow reads does move it.
    for (let i = 0; i < 9; i++) limit.sample(100, 7);
    clock.ms += 1000;
    limit.sample(100, 7);
    expect(changes).toEqual([{ previous: 7, limit: 6, shortRttMs: 100, longRttMs: expect.any(Number), gradient: 0.5 }]);
  });

  it('needs 10 reads, however long the window: a few slow reads in a quiet minute move nothing', () => {
    const { clock, limit } = clocked();
    for (let w = 0; w < 5; w++) {
      for (let i = 0; i < 10; i++) limit.sample(20, 5);
      clock.ms += 1000;
    }
    for (let i = 0; i < 9; i++) {
      clock.ms += 60_000;
      limit.sample(5000, 5);
    }
    expect(limit.current).toBe(5);
  });
});

describe('Admission with a limit that moves', () => {
  it('admits more waiters at once when the limit grows and none while running reads exceed a shrunk limit', async () => {
    let current = 1;
    const limit = {
      get current() {
        return current;
      },
      sample() {},
    };
    const admission = new Admission({ limit, queue: 10, waitTimeoutMs: 60_000 });
    const gates = Array.from({ length: 5 }, gate);
    const started: number[] = [];
    const runs = gates.map((g, i) => admission.run(async () => void (started.push(i), await g.promise)));
    await Promise.resolve();
    expect([admission.running, admission.queued]).toEqual([1, 4]);
    current = 3;
    gates[0]!.resolve();
    await runs[0];
    expect(started).toEqual([0, 1, 2, 3]);
    expect([admission.running, admission.queued]).toEqual([3, 1]);
    current = 1;
    gates[1]!.resolve();
    await runs[1];
    expect([admission.running, admission.queued]).toEqual([2, 1]);
    gates[2]!.resolve();
    await runs[2];
    expect([admission.running, admission.queued]).toEqual([1, 1]);
    gates[3]!.resolve();
    await runs[3];
    expect(started).toEqual([0, 1, 2, 3, 4]);
    gates[4]!.resolve();
    await Promise.all(runs);
    expect([admission.running, admission.queued]).toEqual([0, 0]);
  });

  it('samples every read that ran, with how many ran at its start, whether it succeeded or threw', async () => {
    const samples: Array<[number, number]> = [];
    const limit = { current: 2, sample: (rttMs: number, inflight: number) => void samples.push([rttMs, inflight]) };
    const admission = new Admission({ limit, queue: 0, waitTimeoutMs: 1000 });
    const slow = gate();
    const first = admission.run(() => slow.promise);
    await expect(admission.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    slow.resolve();
    await first;
    expect(samples.map(([, inflight]) => inflight)).toEqual([2, 1]);
    for (const [rtt] of samples) expect(rtt).toBeGreaterThanOrEqual(0);
  });
});
