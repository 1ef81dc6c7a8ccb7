/**
 * Data API rate limit per project and environment (CONTRACT §4, §6), shared by every server
 * process through one PostgreSQL row per window. Far from the limit a process counts locally and
 * adds its hits to the shared row in batches (every few milliseconds), so the hot path does not
 * wait on the database. A process's first request of a window, and every request once the window
 * is nearly used up, adds itself to the shared row before it is answered: the processes together
 * never pass the limit by more than the batches in flight while far from it.
 */
import type { Database } from '../db/index.ts';
import { Problem } from '../http/index.ts';

const WINDOW_MS = 60_000;
const FLUSH_DELAY_MS = 10;

interface Bucket {
  window: number;
  /** The shared count as of the last write (includes this process's written hits). */
  synced: number;
  /** Hits being written now, and hits counted locally but not written yet. */
  inFlight: number;
  pending: number;
  seen: boolean;
  timer: NodeJS.Timeout | undefined;
}

export interface RateDecision {
  headers: Record<string, string>;
}

export class SharedRateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  /** Below this many remaining requests every hit is written before it is answered. */
  private readonly strictBelow: number;

  constructor(
    private readonly db: Database,
    private readonly limit: number,
  ) {
    this.strictBelow = Math.max(10, Math.ceil(limit * 0.02));
  }

  private bucket(name: string, window: number): Bucket {
    let bucket = this.buckets.get(name);
    if (!bucket || bucket.window !== window) {
      if (bucket?.timer) clearTimeout(bucket.timer);
      bucket = { window, synced: 0, inFlight: 0, pending: 0, seen: false, timer: undefined };
      this.buckets.set(name, bucket);
    }
    return bucket;
  }

  /** Counts one hit; throws the 429 Problem when the window is used up. */
  async hit(name: string, now = Date.now()): Promise<RateDecision> {
    const window = now - (now % WINDOW_MS);
    const bucket = this.bucket(name, window);
    const reset = Math.max(1, Math.ceil((window + WINDOW_MS - now) / 1000));
    let used = bucket.synced + bucket.inFlight + bucket.pending;
    if (!bucket.seen || this.limit - used <= this.strictBelow) {
      bucket.seen = true;
      used = await this.claim(name, bucket);
    } else if (used < this.limit) {
      bucket.pending++;
      bucket.timer ??= setTimeout(() => void this.flush(name, bucket), FLUSH_DELAY_MS);
    }
    if (used >= this.limit) {
      throw new Problem('rate-limited', `this project and environment may make ${this.limit} data requests a minute; retry in ${reset} s`, [], {
        'retry-after': String(reset),
        'ratelimit-limit': String(this.limit),
        'ratelimit-remaining': '0',
        'ratelimit-reset': String(reset),
      });
    }
    return {
      headers: {
        'ratelimit-limit': String(this.limit),
        'ratelimit-remaining': String(Math.max(0, this.limit - used - 1)),
        'ratelimit-reset': String(reset),
      },
    };
  }

  /** Adds the pending (already answered) hits to the shared row. */
  private async write(name: string, bucket: Bucket): Promise<void> {
    const hits = bucket.pending;
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

  /**
   * Writes the pending hits, then takes one more hit from the shared row only if the window has
   * room (a refused request is not counted). Returns the shared count before this request.
   */
  private async claim(name: string, bucket: Bucket): Promise<number> {
    if (bucket.pending > 0) await this.write(name, bucket);
    bucket.inFlight += 1;
    try {
      const rows = await this.db.query<{ hits: number }>(
        `INSERT INTO svcgen.rate_limits AS r (bucket, window_start, hits) VALUES ($1, to_timestamp($2::double precision / 1000), 1)
         ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1 WHERE r.hits < $3
         RETURNING hits`,
        [name, bucket.window, this.limit],
      );
      if (rows.length === 0) {
        bucket.synced = Math.max(bucket.synced, this.limit);
        return this.limit;
      }
      bucket.synced = Math.max(bucket.synced, rows[0]!.hits);
      return rows[0]!.hits - 1;
    } catch {
      bucket.synced += 1; // keep counting locally while the database is away
      return bucket.synced - 1;
    } finally {
      bucket.inFlight -= 1;
    }
  }

  private async flush(name: string, bucket: Bucket): Promise<void> {
    bucket.timer = undefined;
    if (bucket.pending > 0) await this.write(name, bucket);
  }

  /** Drops windows older than the current one (called now and then, off the hot path). */
  async prune(): Promise<void> {
    await this.db.query(`DELETE FROM svcgen.rate_limits WHERE window_start < now() - interval '2 minutes'`).catch(() => {});
  }
}
