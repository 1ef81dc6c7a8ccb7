/**
 * How many expensive reads may run at once (docs/deployment.md "Sizing the pool"): either a fixed
 * number (database.expensiveReadConcurrency) or one found from the reads' own latency.
 *
 * The adaptive one is the Gradient2 algorithm of Netflix's concurrency-limits (no maintained Node
 * port exists). The idea: while the database keeps up, a read takes about as long as reads usually
 * do, so the limit may grow; once reads queue inside the database, they take longer than usual and
 * the limit shrinks in proportion. As with Netflix's WindowedLimit, reads are gathered into
 * windows (at least a second and 10 reads): "now" is a window's average latency, and "usual" a
 * long-term exponential moving average of those over some 600 windows (about ten minutes under
 * load, so an overload of a few minutes is not taken for the new normal). Per window:
 *
 *     gradient = clamp(tolerance × longRtt / shortRtt, 0.5, 1)   // 1: no queueing; at most halve
 *     newLimit = limit × gradient + probe                        // probe: room to grow into
 *     limit    = clamp(limit × (1 − smoothing) + newLimit × smoothing, min, max)
 *
 * The probe is max(1, log10(limit)), the queue size Netflix's Vegas limit allows, not Gradient2's
 * 4 or √limit: under sustained queueing (gradient 0.5) the limit settles where limit × 0.5 = probe,
 * i.e. at 2 × probe, which must stay well under a pool of 10 for the budget to protect anything
 * (√limit would hold it at 4 of the 7 it may take). The tolerance lets latency rise by half before
 * the limit shrinks (a read's cost varies with its rows). Two details keep it honest: the limit
 * does not grow while fewer than half its slots were used in the window (nothing was learned about
 * more concurrency), and when the long-term average is more than twice the window's latency, which
 * happens once an overload has passed, it decays by 5% per window so the limit can recover without
 * waiting for the slow average.
 */

export interface ConcurrencyLimit {
  /** Works that may run at once now (a whole number, at least 1). */
  readonly current: number;
  /** Reports a finished work: how long it ran and how many ran at once when it started (itself included). */
  sample(rttMs: number, inflight: number): void;
}

/** database.expensiveReadConcurrency set: the same number whatever happens. */
export class FixedLimit implements ConcurrencyLimit {
  constructor(readonly current: number) {}

  sample(): void {}
}

export interface GradientLimitOptions {
  initial: number;
  min: number;
  max: number;
  /** How much slower than usual a read may get before the limit shrinks (1.5: half as slow again). */
  tolerance?: number;
  /** Share of each new estimate taken into the limit: small values move it gently. */
  smoothing?: number;
  /** Windows the long-term latency average spans (an EMA of factor 2 / (longWindow + 1)). */
  longWindow?: number;
  /** The first windows are averaged plainly, so one early outlier does not set "usual". */
  warmup?: number;
  /** A window lasts at least this long ... (0 with windowSamples 1: every read is a window) */
  windowMs?: number;
  /** ... and holds at least this many reads. */
  windowSamples?: number;
  /** The clock windows are measured with (tests give their own). */
  now?: () => number;
  /** Called when the whole-number limit changes, with the figures that moved it. */
  onChange?: (change: LimitChange) => void;
}

export interface LimitChange {
  limit: number;
  previous: number;
  shortRttMs: number;
  longRttMs: number;
  gradient: number;
}

/** The long-term latency: a plain mean over the first `warmup` samples, then an exponential moving average. */
class ExponentialAverage {
  private count = 0;
  private sum = 0;
  value = 0;

  constructor(
    private readonly window: number,
    private readonly warmup: number,
  ) {}

  add(sample: number): number {
    if (this.count < this.warmup) {
      this.count++;
      this.sum += sample;
      this.value = this.sum / this.count;
    } else {
      const factor = 2 / (this.window + 1);
      this.value = this.value * (1 - factor) + sample * factor;
    }
    return this.value;
  }
}

/** The reads of the current window: how many, their summed latency, the most that ran at once. */
interface Window {
  startedAt: number;
  reads: number;
  rttSum: number;
  maxInflight: number;
}

export class GradientLimit implements ConcurrencyLimit {
  private estimate: number;
  private readonly longRtt: ExponentialAverage;
  private readonly tolerance: number;
  private readonly smoothing: number;
  private readonly windowMs: number;
  private readonly windowSamples: number;
  private readonly now: () => number;
  private window: Window | undefined;

  constructor(private readonly options: GradientLimitOptions) {
    if (!(options.min >= 1 && options.min <= options.max)) {
      throw new RangeError(`the limits must satisfy 1 <= min <= max (min ${options.min}, max ${options.max})`);
    }
    this.estimate = Math.min(options.max, Math.max(options.min, options.initial));
    this.longRtt = new ExponentialAverage(options.longWindow ?? 600, options.warmup ?? 10);
    this.tolerance = options.tolerance ?? 1.5;
    this.smoothing = options.smoothing ?? 0.2;
    this.windowMs = options.windowMs ?? 1000;
    this.windowSamples = options.windowSamples ?? 10;
    this.now = options.now ?? (() => performance.now());
  }

  get current(): number {
    return Math.floor(this.estimate);
  }

  sample(rttMs: number, inflight: number): void {
    const now = this.now();
    const window = (this.window ??= { startedAt: now, reads: 0, rttSum: 0, maxInflight: 0 });
    window.reads++;
    window.rttSum += rttMs;
    window.maxInflight = Math.max(window.maxInflight, inflight);
    if (now - window.startedAt < this.windowMs || window.reads < this.windowSamples) return;
    this.window = undefined;
    this.update(window.rttSum / window.reads, window.maxInflight);
  }

  /** One step of the algorithm, from a window's average latency and the most reads it saw at once. */
  private update(rttMs: number, inflight: number): void {
    // A read measured at 0 ms (timer resolution) would make every ratio infinite.
    const shortRtt = Math.max(rttMs, 0.001);
    const longRtt = this.longRtt.add(shortRtt);
    if (longRtt / shortRtt > 2) this.longRtt.value *= 0.95;
    if (inflight < this.estimate / 2) return;

    const gradient = Math.max(0.5, Math.min(1, (this.tolerance * longRtt) / shortRtt));
    const probed = this.estimate * gradient + Math.max(1, Math.log10(this.estimate));
    const smoothed = this.estimate * (1 - this.smoothing) + probed * this.smoothing;
    const previous = this.current;
    this.estimate = Math.max(this.options.min, Math.min(this.options.max, smoothed));
    if (this.current !== previous) {
      this.options.onChange?.({ limit: this.current, previous, shortRttMs: shortRtt, longRttMs: longRtt, gradient });
    }
  }
}
