// The expensive-read budget (runtime/db/admission.ts; docs/config.md `database.expensiveRead*`):
// a semaphore with a bounded FIFO queue and a wait bound, without a database. Timers are faked, so
// "past the wait bound" is a step of the test, not a wait. The budget in a served shop:
// test/rest/fairness.test.ts.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Admission, AdmissionRefused, FixedLimit, type AdmissionRefusal } from '../../runtime/db/index.ts';

/** A work that runs until the test opens its gate. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

/** Runs microtasks until promises settled by the last step have had their effects. */
const settle = () => vi.advanceTimersByTimeAsync(0);

function budget({ slots, ...options }: { slots: number; queue: number; waitTimeoutMs?: number }) {
  const refusals: AdmissionRefusal[] = [];
  const admission = new Admission({
    waitTimeoutMs: 1000,
    ...options,
    limit: new FixedLimit(slots),
    onRefused: (reason) => refusals.push(reason),
  });
  return { admission, refusals, state: () => [admission.running, admission.queued] };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Admission', () => {
  it('runs at most `slots` works, admits waiters first in first out, refuses beyond the queue at once', async () => {
    const { admission, refusals, state } = budget({ slots: 2, queue: 2 });
    const gates = Array.from({ length: 4 }, gate);
    const started: number[] = [];
    const runs = gates.map((g, i) => admission.run(async () => (started.push(i), await g.opened, i)));
    await settle();
    expect(started).toEqual([0, 1]);
    expect(state()).toEqual([2, 2]);
    await expect(admission.run(async () => 'late')).rejects.toMatchObject({
      reason: 'queue-full',
      message: 'the queue of expensive reads is full',
    });
    expect(refusals).toEqual(['queue-full']);
    gates[1]!.open();
    await settle();
    expect(started).toEqual([0, 1, 2]);
    expect(state()).toEqual([2, 1]);
    gates[0]!.open();
    await settle();
    expect(started).toEqual([0, 1, 2, 3]);
    gates[2]!.open();
    gates[3]!.open();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3]);
    expect(state()).toEqual([0, 0]);
  });

  it('hands a freed slot straight to the first waiter: a newcomer in the same turn queues behind it', async () => {
    const { admission, state } = budget({ slots: 1, queue: 5 });
    const [holder, waiterGate] = [gate(), gate()];
    const order: string[] = [];
    const first = admission.run(() => holder.opened);
    const waiter = admission.run(async () => (order.push('waiter'), await waiterGate.opened));
    holder.open();
    await first;
    const newcomer = admission.run(async () => void order.push('newcomer'));
    expect(state()).toEqual([1, 1]);
    await settle();
    expect(order).toEqual(['waiter']);
    waiterGate.open();
    await Promise.all([waiter, newcomer]);
    expect(order).toEqual(['waiter', 'newcomer']);
    expect(state()).toEqual([0, 0]);
  });

  it('with a queue of 0 refuses whatever does not get a slot at once', async () => {
    const { admission, refusals, state } = budget({ slots: 1, queue: 0 });
    const g = gate();
    const holder = admission.run(() => g.opened);
    await expect(admission.run(async () => 'second')).rejects.toMatchObject({ reason: 'queue-full' });
    expect(refusals).toEqual(['queue-full']);
    expect(state()).toEqual([1, 0]);
    g.open();
    await holder;
    expect(await admission.run(async () => 'again')).toBe('again');
  });

  it('refuses a waiter at the wait bound, not before, and gives its place back', async () => {
    const { admission, refusals, state } = budget({ slots: 1, queue: 5, waitTimeoutMs: 1000 });
    const g = gate();
    const holder = admission.run(() => g.opened);
    let outcome: unknown;
    const waited = admission.run(async () => 'never').catch((error: unknown) => (outcome = error));
    await vi.advanceTimersByTimeAsync(999);
    expect(outcome).toBeUndefined();
    expect(state()).toEqual([1, 1]);
    await vi.advanceTimersByTimeAsync(1);
    await waited;
    expect(outcome).toBeInstanceOf(AdmissionRefused);
    expect(outcome).toMatchObject({ reason: 'wait-timeout', message: 'no expensive-read slot came free in time' });
    expect(refusals).toEqual(['wait-timeout']);
    expect(state()).toEqual([1, 0]);
    g.open();
    await holder;
    expect(state()).toEqual([0, 0]);
  });

  it('drops a waiter whose client went away, at once, and stops watching the client once admitted', async () => {
    const { admission, refusals, state } = budget({ slots: 1, queue: 5 });
    const g = gate();
    const _holder = admission.run(() => g.opened);
    const listeners: Array<() => void> = [];
    let unwatched = 0;
    const onGone = (listener: () => void) => {
      listeners.push(listener);
      return () => void unwatched++;
    };
    const gone = admission.run(async () => 'gone', onGone);
    const stays = admission.run(async () => 'stays', onGone);
    expect(state()).toEqual([1, 2]);
    listeners[0]!(); // the first waiter's client disconnects
    await expect(gone).rejects.toMatchObject({
      reason: 'client-gone',
      message: 'the client went away while its read waited',
    });
    expect(refusals).toEqual(['client-gone']);
    expect(state()).toEqual([1, 1]);
    g.open();
    expect(await stays).toBe('stays');
    expect(unwatched).toBe(2); // both waiters stopped watching: one refused, one admitted
    expect(state()).toEqual([0, 0]);
  });

  it('frees the slot of a work that throws, and passes the error on', async () => {
    const { admission, state } = budget({ slots: 1, queue: 1 });
    await expect(admission.run(async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(state()).toEqual([0, 0]);
    expect(await admission.run(async () => 'again')).toBe('again');
  });
});

describe('Admission with a share per key (database.expensiveReadsPerCaller)', () => {
  function shared(options: { slots: number; queue: number; perKey?: number; waitTimeoutMs?: number }) {
    const refusals: AdmissionRefusal[] = [];
    const admission = new Admission({
      waitTimeoutMs: options.waitTimeoutMs ?? 1000,
      queue: options.queue,
      limit: new FixedLimit(options.slots),
      ...(options.perKey === undefined ? {} : { perKey: options.perKey }),
      onRefused: (reason) => refusals.push(reason),
    });
    const held = (...keys: string[]) => keys.map((key) => admission.held(key));
    return { admission, refusals, held, state: () => [admission.running, admission.queued] };
  }

  it("holds each key to `perKey` places, running and waiting together, refusing past it at once, while other keys take the budget's other places", async () => {
    const { admission, refusals, held, state } = shared({ slots: 2, queue: 4, perKey: 3 });
    const gates = new Map<string, ReturnType<typeof gate>>();
    const started: string[] = [];
    const run = (key: string, name: string) => {
      const g = gate();
      gates.set(name, g);
      return admission.run(async () => (started.push(name), await g.opened, name), undefined, key);
    };
    // Key a floods with 5: 2 run, 1 waits, the other 2 are refused before anything has ended.
    const a = ['a0', 'a1', 'a2'].map((name) => run('a', name));
    await expect(run('a', 'a3')).rejects.toMatchObject({
      reason: 'key-share',
      message: "this key's share of the expensive-read budget is taken",
    });
    await expect(run('a', 'a4')).rejects.toBeInstanceOf(AdmissionRefused);
    expect(refusals).toEqual(['key-share', 'key-share']);
    expect(state()).toEqual([2, 1]);
    // Keys b and c still find places, in turn behind a's waiter, until the budget's own queue is full.
    const others = [run('b', 'b0'), run('b', 'b1'), run('c', 'c0')];
    expect(state()).toEqual([2, 4]);
    expect(held('a', 'b', 'c')).toEqual([3, 2, 1]);
    // The budget's bound is as it was: c, within its share, is refused for the full queue.
    await expect(run('c', 'c1')).rejects.toMatchObject({ reason: 'queue-full' });
    expect(refusals).toEqual(['key-share', 'key-share', 'queue-full']);
    expect(held('c')).toEqual([1]);
    await settle();
    expect(started).toEqual(['a0', 'a1']);
    // a0's slot goes to b0, not to a2 that waited longer: a still runs a1, b runs none (the fewest
    // running first). a then holds 2 of its 3 places and may take one more.
    gates.get('a0')!.open();
    await settle();
    expect(started).toEqual(['a0', 'a1', 'b0']);
    expect(held('a', 'b', 'c')).toEqual([2, 2, 1]);
    for (const name of ['a1', 'a2', 'b0', 'b1', 'c0']) {
      gates.get(name)!.open();
      await settle();
    }
    expect(await Promise.all([...a, ...others])).toEqual(['a0', 'a1', 'a2', 'b0', 'b1', 'c0']);
    // a1's slot: a2 (a runs none now, first of the keys running none); a2's: c0 (c runs none, b one).
    expect(started).toEqual(['a0', 'a1', 'b0', 'a2', 'c0', 'b1']);
    expect(state()).toEqual([0, 0]);
    expect(held('a', 'b', 'c')).toEqual([0, 0, 0]);
  });

  it("admits the waiter of the key running the fewest works first: one key's many waiters do not keep another key's one waiting behind them", async () => {
    const { admission } = shared({ slots: 2, queue: 10, perKey: 10 });
    const gates = new Map<string, ReturnType<typeof gate>>();
    const started: string[] = [];
    const run = (key: string, name: string) => {
      const g = gate();
      gates.set(name, g);
      return admission.run(async () => (started.push(name), await g.opened, name), undefined, key);
    };
    // The flooder takes both slots and queues 5 more; then another caller's one read, and a work without a key.
    const runs = ['f0', 'f1', 'f2', 'f3', 'f4', 'f5', 'f6'].map((name) => run('flooder', name));
    runs.push(run('other', 'o0'));
    await settle();
    expect(started).toEqual(['f0', 'f1']);
    gates.get('f0')!.open();
    await settle();
    // FIFO would have started f2; the other caller runs none, the flooder one.
    expect(started).toEqual(['f0', 'f1', 'o0']);
    // Among waiters whose keys run as many, first in first out.
    for (const name of ['f1', 'o0', 'f2', 'f3', 'f4', 'f5', 'f6']) {
      gates.get(name)!.open();
      await settle();
    }
    expect(await Promise.all(runs)).toEqual(['f0', 'f1', 'f2', 'f3', 'f4', 'f5', 'f6', 'o0']);
    expect(started).toEqual(['f0', 'f1', 'o0', 'f2', 'f3', 'f4', 'f5', 'f6']);
  });

  it('gives a key its place back whatever became of the work: waited out, client gone, refused for the queue, thrown, done', async () => {
    const { admission, refusals, held, state } = shared({ slots: 1, queue: 1, perKey: 1, waitTimeoutMs: 1000 });
    const g = gate();
    const holder = admission.run(() => g.opened, undefined, 'a');
    // Waited out.
    const waited = admission.run(async () => 'never', undefined, 'b').catch((error: unknown) => error);
    expect(held('a', 'b')).toEqual([1, 1]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(await waited).toMatchObject({ reason: 'wait-timeout' });
    expect(held('b')).toEqual([0]);
    // Client gone while waiting.
    let leave!: () => void;
    const gone = admission
      .run(
        async () => 'never',
        (listener) => ((leave = listener), () => {}),
        'b',
      )
      .catch((error: unknown) => error);
    expect(held('b')).toEqual([1]);
    // Refused for the full queue (b's waiter fills it): c's place is given back too.
    await expect(admission.run(async () => 'never', undefined, 'c')).rejects.toMatchObject({ reason: 'queue-full' });
    expect(held('c')).toEqual([0]);
    leave();
    expect(await gone).toMatchObject({ reason: 'client-gone' });
    expect(held('b')).toEqual([0]);
    // a's share is taken all along: a second read of a is refused, however the others fared.
    await expect(admission.run(async () => 'never', undefined, 'a')).rejects.toMatchObject({ reason: 'key-share' });
    expect(refusals).toEqual(['wait-timeout', 'queue-full', 'client-gone', 'key-share']);
    g.open();
    await holder;
    expect(held('a')).toEqual([0]);
    // Thrown, then done: each frees the key's one place for its next work.
    await expect(admission.run(async () => Promise.reject(new Error('boom')), undefined, 'a')).rejects.toThrow('boom');
    expect(await admission.run(async () => 'again', undefined, 'a')).toBe('again');
    expect(held('a')).toEqual([0]);
    expect(state()).toEqual([0, 0]);
  });

  it('without `perKey`, or for a work without a key, holds no share: one key may take every place', async () => {
    for (const [perKey, key] of [
      [undefined, 'a'],
      [1, undefined],
    ] as const) {
      const { admission, refusals, held, state } = shared({ slots: 1, queue: 2, perKey });
      const g = gate();
      const runs = [0, 1, 2].map((i) => admission.run(async () => (await g.opened, i), undefined, key));
      expect(state()).toEqual([1, 2]);
      expect(held('a')).toEqual([0]);
      g.open();
      expect(await Promise.all(runs)).toEqual([0, 1, 2]);
      expect(refusals).toEqual([]);
    }
  });
});
