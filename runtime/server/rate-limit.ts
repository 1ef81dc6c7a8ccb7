/**
 * Data API rate limit per project and environment (CONTRACT §4, §6), shared by every server
 * process through PostgreSQL. Each process counts locally and adds its hits to the shared
 * per-minute window in small batches (every few milliseconds), so the hot path never waits on the
 * database and the processes together overshoot by at most one batch each.
 */
import type { Database } from '../db/index.ts';
import { Problem } from '../http/index.ts';

const WINDOW_MS = 60_000;
const FLUSH_DELAY_MS = 10;

interface Bucket {
  window: number;
  /** The shared count as of the last flush (includes this process's flushed hits). */
  synced: number;
  inFlight: number;
  pending: number;
  timer: NodeJS.Timeout | undefined;
}

export interface RateDecision {
  headers: Record<string, string>;
}

export class SharedRateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly db: Database,
    private readonly limit: number,
  ) {}

  /** Counts one hit; throws the 429 Problem when the window is used up. */
  hit(name: string, now = Date.now()): RateDecision {
    const window = now - (now % WINDOW_MS);
    let bucket = this.buckets.get(name);
    if (!bucket || bucket.window !== window) {
      if (bucket?.timer) clearTimeout(bucket.timer);
      bucket = { window, synced: 0, inFlight: 0, pending: 0, timer: undefined };
      this.buckets.set(name, bucket);
    }
    const used = bucket.synced + bucket.inFlight + bucket.pending;
    const reset = Math.max(1, Math.ceil((window + WINDOW_MS - now) / 1000));
    if (used >= this.limit) {
      throw new Problem('rate-limited', `this project and environment may make ${this.limit} data requests a minute; retry in ${reset} s`, [], {
        'retry-after': String(reset),
        'ratelimit-limit': String(this.limit),
        'ratelimit-remaining': '0',
        'ratelimit-reset': String(reset),
      });
    }
    bucket.pending++;
    if (!bucket.timer) bucket.timer = setTimeout(() => void this.flush(name, bucket!), FLUSH_DELAY_MS);
    return {
      headers: {
        'ratelimit-limit': String(this.limit),
        'ratelimit-remaining': String(Math.max(0, this.limit - used - 1)),
        'ratelimit-reset': String(reset),
      },
    };
  }

  private async flush(name: string, bucket: Bucket): Promise<void> {
    bucket.timer = undefined;
    const hits = bucket.pending;
    if (hits === 0) return;
    bucket.pending = 0;
    bucket.inFlight += hits;
    try {
      const rows = await this.db.query<{ hits: number }>(
        `INSERT INTO svcgen.rate_limits (bucket, window_start, hits) VALUES ($1, to_timestamp($2::double precision / 1000), $3)
         ON CONFLICT (bucket, window_start) DO UPDATE SET hits = svcgen.rate_limits.hits + EXCLUDED.hits
         RETURNING hits`,
        [name, bucket.window, hits],
      );
      bucket.synced = Math.max(bucket.synced, rows[0]!.hits);
    } catch {
      bucket.synced += hits; // keep counting locally while the database is away
    } finally {
      bucket.inFlight -= hits;
    }
  }

  /** Drops windows older than the current one (called now and then, off the hot path). */
  async prune(): Promise<void> {
    await this.db.query(`DELETE FROM svcgen.rate_limits WHERE window_start < now() - interval '2 minutes'`).catch(() => {});
  }
}
