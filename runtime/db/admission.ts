/**
 * A per-process budget for expensive reads (docs/config.md `database.expensiveRead*`): a semaphore
 * whose size `limit` gives (fixed, or adapted to latency: ./concurrency-limit.ts) with a bounded
 * queue (first in first out, but a freed slot goes first to a key running fewer works). Expensive reads share the pool with everything else; without this, enough of them
 * hold every connection and a GET by id queues behind them for seconds. With it they can take at
 * most the limit's connections, and what does not fit the queue, or waits too long, is refused at
 * once instead of holding its request (and later its rows) in memory. With `perKey`, each key (a
 * caller, for the data API) may hold at most that many of its places, running and waiting together,
 * so that one key's burst cannot take every slot and queue place that the other keys need.
 */
import type { ConcurrencyLimit } from './concurrency-limit.ts';

export type AdmissionRefusal =
  /** `queue` requests already wait for a slot. */
  | 'queue-full'
  /** No slot came free within the wait bound. */
  | 'wait-timeout'
  /** The client went away while its work waited: its place goes to the next one. */
  | 'client-gone'
  /** The work's key holds `perKey` places already (running and waiting); the budget may have room for others. */
  | 'key-share';

export class AdmissionRefused extends Error {
  constructor(readonly reason: AdmissionRefusal) {
    super(
      reason === 'queue-full'
        ? 'the queue of expensive reads is full'
        : reason === 'wait-timeout'
          ? 'no expensive-read slot came free in time'
          : reason === 'key-share'
            ? "this key's share of the expensive-read budget is taken"
            : 'the client went away while its read waited',
    );
    this.name = 'AdmissionRefused';
  }
}

export interface AdmissionOptions {
  /** Works running at once: database.expensiveReadConcurrency, or found from their latency. */
  limit: ConcurrencyLimit;
  /** Works waiting at most; 0 refuses whatever does not get a slot at once (database.expensiveReadQueue). */
  queue: number;
  /** How long a work waits for a slot before it is refused (database.poolWaitTimeoutMs). */
  waitTimeoutMs: number;
  /**
   * Places (running and waiting together) one key may hold at once (database.expensiveReadsPerCaller);
   * a work past it is refused at once with 'key-share'. Unset: works of every key share all places.
   */
  perKey?: number;
  onRefused?: (reason: AdmissionRefusal) => void;
}

interface Waiter {
  /** The key the work counts against, if any. */
  readonly key: string | undefined;
  /** Starts the work, with `inflight` works running (itself included). */
  admit(inflight: number): void;
}

export class Admission {
  private active = 0;
  private readonly waiting: Waiter[] = [];
  /** Places held per key, running or waiting; a key holding none is not kept. */
  private readonly heldByKey = new Map<string, number>();
  /** Works running per key; a key running none is not kept. */
  private readonly runningByKey = new Map<string, number>();

  constructor(readonly options: AdmissionOptions) {}

  /** Works holding a slot. */
  get running(): number {
    return this.active;
  }

  /** Works waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Places `key` holds now: its works running or waiting. */
  held(key: string): number {
    return this.heldByKey.get(key) ?? 0;
  }

  /** Works that may run at once now. */
  get slots(): number {
    return this.options.limit.current;
  }

  /**
   * Runs `work` in a slot, waiting for one in turn; throws AdmissionRefused when it cannot get one.
   * `onGone` registers for the client's departure (ApiRequest.onClientGone): a waiter whose client
   * left is dropped, so a burst of abandoned requests does not fill the queue for the next ones.
   * `key` (with options.perKey) counts the work against its key's share from now until it ends,
   * whether it ran, was refused or its client went away.
   */
  async run<T>(work: () => Promise<T>, onGone?: (listener: () => void) => () => void, key?: string): Promise<T> {
    const { perKey } = this.options;
    if (key === undefined || perKey === undefined) return this.runInSlot(work, onGone, key);
    const held = this.held(key);
    // Checked before the queue: a key past its share is told so, even when the budget is full too.
    if (held >= perKey) throw this.refuse('key-share');
    this.heldByKey.set(key, held + 1);
    try {
      return await this.runInSlot(work, onGone, key);
    } finally {
      count(this.heldByKey, key, -1);
    }
  }

  private async runInSlot<T>(
    work: () => Promise<T>,
    onGone: ((listener: () => void) => () => void) | undefined,
    key: string | undefined,
  ): Promise<T> {
    // Counted as running by acquire (a free slot) or release (a waiter admitted), synchronously with its slot.
    const inflight = await this.acquire(onGone, key);
    const started = performance.now();
    try {
      return await work();
    } finally {
      // Every outcome is a sample: a read cancelled at the statement timeout is the clearest sign of overload.
      this.options.limit.sample(performance.now() - started, inflight);
      if (key !== undefined) count(this.runningByKey, key, -1);
      this.release();
    }
  }

  /** Resolves with the works running once this one got its slot, itself included. */
  private acquire(
    onGone: ((listener: () => void) => () => void) | undefined,
    key: string | undefined,
  ): Promise<number> {
    if (this.active < this.slots) {
      this.active++;
      if (key !== undefined) count(this.runningByKey, key, 1);
      return Promise.resolve(this.active);
    }
    if (this.waiting.length >= this.options.queue) return Promise.reject(this.refuse('queue-full'));
    return new Promise((resolve, reject) => {
      const leave = (reason: AdmissionRefusal) => {
        clearTimeout(timer);
        stopWatching?.();
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(this.refuse(reason));
      };
      const waiter: Waiter = {
        key,
        admit(inflight) {
          clearTimeout(timer);
          stopWatching?.();
          resolve(inflight);
        },
      };
      const timer = setTimeout(() => leave('wait-timeout'), this.options.waitTimeoutMs);
      const stopWatching = onGone?.(() => leave('client-gone'));
      this.waiting.push(waiter);
    });
  }

  private release(): void {
    this.active--;
    // Waiters are admitted here, synchronously, so a newcomer in the same turn finds the slot taken and
    // queues behind them. A limit that shrank admits none until enough runs end; one that grew, several.
    while (this.active < this.slots && this.waiting.length > 0) {
      this.active++;
      const [next] = this.waiting.splice(this.nextWaiter(), 1);
      if (next!.key !== undefined) count(this.runningByKey, next!.key, 1);
      next!.admit(this.active);
    }
  }

  /**
   * The waiter to admit: the first of those whose key runs the fewest works (docs/config.md
   * `database.expensiveReadsPerCaller`), so a caller with many reads waiting does not keep
   * another's single read waiting behind them all; among equals, first in first out. Works
   * without a key count as running none.
   */
  private nextWaiter(): number {
    let best = 0;
    let fewest = Number.POSITIVE_INFINITY;
    for (let i = 0; i < this.waiting.length && fewest > 0; i++) {
      const key = this.waiting[i]!.key;
      const running = key === undefined ? 0 : (this.runningByKey.get(key) ?? 0);
      if (running < fewest) {
        fewest = running;
        best = i;
      }
    }
    return best;
  }

  private refuse(reason: AdmissionRefusal): AdmissionRefused {
    this.options.onRefused?.(reason);
    return new AdmissionRefused(reason);
  }
}

/** Adds `delta` to `key`'s count, dropping a key whose count reaches 0. */
function count(counts: Map<string, number>, key: string, delta: number): void {
  const next = (counts.get(key) ?? 0) + delta;
  if (next > 0) counts.set(key, next);
  else counts.delete(key);
}
