/**
 * Fixed one-minute rate limits with named buckets (the data API per project and environment and
 * per caller, failed data credentials per client address, signups and logins per IP, recovery per
 * e-mail), shared by every server process through one PostgreSQL row per bucket and window. Far
 * from the limit a process counts locally and adds its hits to the shared row in batches, so the
 * hot path does not wait on the database. A process's first request of a window, and every request
 * once the window is nearly used up, adds itself to the shared row before it is answered: the
 * processes together never pass the limit by more than the batches in flight while far from it,
 * and a batch holds at most batchLimit(limit) hits of a bucket (docs/api.md §5.18 "Across server
 * processes").
 */
import type { Database } from '../db/index.ts';
import { metrics } from '../observability/index.ts';

const WINDOW_MS = 60_000;
/**
 * The longest a hit counted locally waits to be written. Each batch is a committed write, with
 * its WAL flush, on a connection of the pool: at 10 ms (100 a second under load) they cost a GET by
 * id at saturation some 13 % of its throughput.
 */
const FLUSH_DELAY_MS = 100;

interface Bucket {
  window: number;
  /** The shared count as of the last write (includes this process's written hits). */
  synced: number;
  /** Hits being written now, and hits counted locally but not written yet. */
  inFlight: number;
  pending: number;
  seen: boolean;
  /** The flush that will write `pending` (shared by every bucket queued with it), while one is due. */
  timer: NodeJS.Timeout | undefined;
}

export interface RateDecision {
  readonly limit: number;
  readonly remaining: number;
  /** Seconds until the window ends. */
  readonly resetSeconds: number;
}

/** A bucket's window is used up. Neutral: each surface turns it into its own body (Problem, `{ error }`). */
export class RateLimitExceeded extends Error {
  constructor(
    readonly limit: number,
    readonly retryAfterSeconds: number,
  ) {
    super(`rate limit of ${limit} a minute reached; retry in ${retryAfterSeconds} s`);
    this.name = 'RateLimitExceeded';
  }
}

/**
 * Below this many remaining requests every hit is written before it is answered. Small limits
 * (the auth endpoints') are always exact across processes.
 */
function strictBelow(limit: number): number {
  return limit <= 100 ? limit : Math.max(10, Math.ceil(limit * 0.02));
}

/**
 * A batch is written at once when it holds this many hits of one bucket: a quarter of the margin
 * below which every hit is written first. However fast requests come, what one process has
 * answered without the others knowing stays well inside that margin.
 */
function batchLimit(limit: number): number {
  return Math.max(1, Math.floor(strictBelow(limit) / 4));
}

/** Seconds until the window starting at `window` ends, at least 1. */
function resetSeconds(window: number, now: number): number {
  return Math.max(1, Math.ceil((window + WINDOW_MS - now) / 1000));
}

export class SharedRateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  /**
   * Buckets with hits to write at the next flush, by name. One flush (one statement) writes them
   * all: a data request counts in two buckets (the caller's and the project's), which would
   * otherwise take a statement each every FLUSH_DELAY_MS.
   */
  private readonly queued = new Map<string, Bucket>();
  private flushTimer: NodeJS.Timeout | undefined;
  /** The flush now due is the one a full batch asked for (flushSoon). */
  private flushingSoon = false;

  constructor(private readonly db: Database) {}

  private bucket(name: string, window: number): Bucket {
    let bucket = this.buckets.get(name);
    if (!bucket || bucket.window !== window) {
      // The hits of a window that ended are not written: nothing counts them any more.
      if (bucket?.timer) {
        bucket.timer = undefined;
        this.queued.delete(name);
      }
      bucket = { window, synced: 0, inFlight: 0, pending: 0, seen: false, timer: undefined };
      this.buckets.set(name, bucket);
    }
    return bucket;
  }

  /** Counts one hit in bucket `name`; throws RateLimitExceeded when its window is used up. */
  hit(name: string, limit: number, now = Date.now()): Promise<RateDecision> {
    const decided = this.hitNow(name, limit, now);
    return decided ? Promise.resolve(decided) : this.hitShared(name, limit, now);
  }

  /**
   * hit() when this process can decide it alone (far from the limit: the hit is counted locally and
   * written with the next batch), without a promise; undefined, with nothing counted, when the hit
   * must go to the shared row first (hit() does that).
   */
  hitNow(name: string, limit: number, now = Date.now()): RateDecision | undefined {
    const window = now - (now % WINDOW_MS);
    const bucket = this.bucket(name, window);
    const used = bucket.synced + bucket.inFlight + bucket.pending;
    // Not here: a window's first hit, and every hit once the window is nearly used up (then also
    // used >= limit, the refusal).
    if (!bucket.seen || limit - used <= strictBelow(limit)) return undefined;
    bucket.pending++;
    if (!bucket.timer) {
      this.flushTimer ??= setTimeout(() => void this.flush(), FLUSH_DELAY_MS);
      bucket.timer = this.flushTimer;
      this.queued.set(name, bucket);
    }
    if (bucket.pending >= batchLimit(limit)) this.flushSoon();
    return { limit, remaining: limit - used - 1, resetSeconds: resetSeconds(window, now) };
  }

  private async hitShared(name: string, limit: number, now: number): Promise<RateDecision> {
    const window = now - (now % WINDOW_MS);
    const bucket = this.bucket(name, window);
    bucket.seen = true;
    const used = await this.claim(name, bucket, limit);
    const reset = resetSeconds(window, now);
    if (used >= limit) {
      metrics.rateLimitRefused(name);
      throw new RateLimitExceeded(limit, reset);
    }
    return { limit, remaining: Math.max(0, limit - used - 1), resetSeconds: reset };
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
  private async claim(name: string, bucket: Bucket, limit: number): Promise<number> {
    if (bucket.pending > 0) await this.write(name, bucket);
    bucket.inFlight += 1;
    try {
      const rows = await this.db.query<{ hits: number }>(
        `INSERT INTO svcgen.rate_limits AS r (bucket, window_start, hits) VALUES ($1, to_timestamp($2::double precision / 1000), 1)
         ON CONFLICT (bucket, window_start) DO UPDATE SET hits = r.hits + 1 WHERE r.hits < $3
         RETURNING hits`,
        [name, bucket.window, limit],
      );
      if (rows.length === 0) {
        bucket.synced = Math.max(bucket.synced, limit);
        return limit;
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

  /** Writes every hit counted locally now (a stopping server: its last batch is not left unwritten). */
  flushPending(): Promise<void> {
    clearTimeout(this.flushTimer);
    return this.flush();
  }

  /** Moves the next flush to the next turn of the event loop (not in the request's own path). */
  private flushSoon(): void {
    if (this.flushingSoon) return;
    this.flushingSoon = true;
    clearTimeout(this.flushTimer);
    this.flushTimer = setTimeout(() => void this.flush(), 0);
    for (const bucket of this.queued.values()) bucket.timer = this.flushTimer;
  }

  /** Writes the pending hits of every queued bucket, in one statement when there are several. */
  private async flush(): Promise<void> {
    this.flushTimer = undefined;
    this.flushingSoon = false;
    const due: [string, Bucket][] = [];
    for (const [name, bucket] of this.queued) {
      bucket.timer = undefined;
      if (bucket.pending > 0) due.push([name, bucket]);
    }
    this.queued.clear();
    if (due.length === 1) await this.write(...due[0]!);
    // In name order: processes writing the same buckets lock their rows in the same order (no deadlock).
    else if (due.length > 1) await this.writeMany(due.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }

  /** write() for several buckets (distinct names) at once. */
  private async writeMany(due: readonly [string, Bucket][]): Promise<void> {
    const hits = due.map(([, bucket]) => bucket.pending);
    due.forEach(([, bucket], i) => {
      bucket.pending = 0;
      bucket.inFlight += hits[i]!;
    });
    try {
      const rows = await this.db.query<{ bucket: string; hits: number }>(
        `INSERT INTO svcgen.rate_limits (bucket, window_start, hits)
         SELECT b, to_timestamp(w / 1000), h FROM unnest($1::text[], $2::double precision[], $3::int[]) AS u(b, w, h)
         ON CONFLICT (bucket, window_start) DO UPDATE SET hits = svcgen.rate_limits.hits + EXCLUDED.hits
         RETURNING bucket, hits`,
        [due.map(([name]) => name), due.map(([, bucket]) => bucket.window), hits],
      );
      const written = new Map(rows.map((r) => [r.bucket, r.hits]));
      due.forEach(([name, bucket], i) => {
        const shared = written.get(name);
        bucket.synced = shared === undefined ? bucket.synced + hits[i]! : Math.max(bucket.synced, shared);
      });
    } catch {
      due.forEach(([, bucket], i) => {
        bucket.synced += hits[i]!; // keep counting locally while the database is away
      });
    } finally {
      due.forEach(([, bucket], i) => {
        bucket.inFlight -= hits[i]!;
      });
    }
  }

  /**
   * Drops windows older than the current one (called now and then, off the hot path): the shared
   * rows, and this process's buckets of past windows with nothing left to write (there is one per
   * caller and client address, so they would pile up).
   */
  async prune(now = Date.now()): Promise<void> {
    const current = now - (now % WINDOW_MS);
    for (const [name, bucket] of this.buckets) {
      if (bucket.window < current && bucket.pending === 0 && bucket.inFlight === 0 && bucket.timer === undefined)
        this.buckets.delete(name);
    }
    await this.db
      .query(`DELETE FROM svcgen.rate_limits WHERE window_start < now() - interval '2 minutes'`)
      .catch(() => {});
  }
}
