/**
 * Uploads and downloads in progress per caller, in this server process (docs/storage.md "Limits
 * and quotas"): storage.limits.concurrentUploadsPerCaller and concurrentDownloadsPerCaller. Each
 * one holds a connection for as long as its bytes flow, so without a cap one caller could hold
 * every connection of http.maxConnections with slow uploads or downloads that are never read. The
 * counts are in memory, like the real-time sockets per caller: a connection belongs to one process.
 */
import { Problem } from '../http/index.ts';

/** How long a caller over its cap is told to wait: a slot frees as soon as one of its transfers ends. */
export const IN_FLIGHT_RETRY_SECONDS = 1;

export class InFlight {
  private readonly counts = new Map<string, number>();

  constructor(
    /** At most this many at once per caller; null: no cap. */
    private readonly cap: number | null,
    /** What is counted, for the refusal: "uploads" or "downloads". */
    private readonly what: string,
    /** The config key of the cap, named in the refusal. */
    private readonly key: string,
  ) {}

  /** In progress now for `caller` (tests and metrics). */
  count(caller: string): number {
    return this.counts.get(caller) ?? 0;
  }

  /**
   * Takes a slot for `caller` (the key of a caller or client address, per project and environment),
   * or throws the 429 when it has `cap` already. The returned function gives the slot back; calling
   * it again does nothing.
   */
  take(caller: string): () => void {
    const held = this.count(caller);
    if (this.cap !== null && held >= this.cap) {
      const retry = String(IN_FLIGHT_RETRY_SECONDS);
      // RateLimit-* of this cap, so that they do not say the data budget's remaining requests with this 429.
      throw new Problem(
        'rate-limited',
        `each caller may have ${this.cap} ${this.what} in progress at once (${this.key}), and you have ${held}; retry in ${retry} s, once one of them has finished`,
        [],
        {
          'retry-after': retry,
          'ratelimit-limit': String(this.cap),
          'ratelimit-remaining': '0',
          'ratelimit-reset': retry,
        },
      );
    }
    this.counts.set(caller, held + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      const left = this.count(caller) - 1;
      if (left > 0) this.counts.set(caller, left);
      else this.counts.delete(caller);
    };
  }
}
