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
