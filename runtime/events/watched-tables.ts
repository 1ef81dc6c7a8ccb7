/**
 * Which tables have an active webhook subscription or live subscribers (docs/realtime.md), per environment, cached in each process so that a
 * write to an unwatched table runs without the event capture CTEs. Every change to a subscription
 * notifies all processes in its own transaction; a write first makes sure the channel has heard
 * every change whose writer had returned before the request arrived (runtime/db/announcements.ts;
 * usually proven already for its authentication), so the cache it consults knows them all.
 * Whenever that cannot be shown (channel down, a change arriving mid-load), writes capture.
 */
import {
  FRESHNESS_MS,
  insideTransaction,
  notify,
  type Database,
  type NotificationChannel,
  type Queryable,
} from '../db/index.ts';

const TOPIC = 'webhooks-changed';

/** Tells every process that subscriptions changed; call inside the transaction that changes them. */
export function announceSubscriptionChange(db: Queryable): Promise<void> {
  return notify(db, TOPIC, '');
}

export class WatchedTables {
  private watched: Map<string, Set<string>> | undefined;
  private generation = 0;
  private loading: Promise<Map<string, Set<string>> | undefined> | undefined;
  private readonly unsubscribe: () => void;

  constructor(
    private readonly db: Database,
    private readonly channel: NotificationChannel,
  ) {
    const invalidate = () => {
      this.generation++;
      this.watched = undefined;
    };
    this.unsubscribe = channel.subscribe(TOPIC, { onMessage: invalidate, onGap: invalidate });
  }

  /**
   * Whether a write to `table` in `environment` must carry the capture CTEs, counting every
   * subscription change committed before `since` (the request's arrival); true when unsure.
   * `db` is the write's database: inside a transaction (a keyed or bulk write) the cache is not
   * waited for, since its load needs a second pool connection, and with as many such writes in
   * flight as the pool has connections (a cold cache: at start, after every gap of the channel)
   * each would wait for one of the others' until the pool wait timeout. They capture instead
   * (docs/deployment.md "Sizing the pool").
   */
  async watches(environment: string, table: string, since: number, db?: Queryable): Promise<boolean> {
    try {
      await this.channel.heardSince(since - FRESHNESS_MS);
    } catch {
      return true;
    }
    if (!this.watched && db && insideTransaction(db)) {
      this.load().catch(() => {});
      return true;
    }
    const watched = this.watched ?? (await this.load());
    return watched === undefined || (watched.get(environment)?.has(table) ?? false);
  }

  private load(): Promise<Map<string, Set<string>> | undefined> {
    this.loading ??= (async () => {
      const generation = this.generation;
      const epoch = this.channel.epoch;
      try {
        const rows = await this.db.query<{ environment: string; table_name: string }>(
          // Live interest counts even once expired: its holder refreshes it without announcing, and
          // the statement's own probe checks the expiry (svcgen.capture_events, ./capture.ts).
          `SELECT environment, table_name FROM svcgen.webhooks WHERE active
           UNION SELECT environment, table_name FROM svcgen.live_interest`,
        );
        const map = new Map<string, Set<string>>();
        for (const r of rows) {
          let set = map.get(r.environment);
          if (!set) map.set(r.environment, (set = new Set()));
          set.add(r.table_name);
        }
        // A change heard while loading may be missing from what was read: use it for nobody.
        if (generation !== this.generation || epoch !== this.channel.epoch || !this.channel.live) return undefined;
        this.watched = map;
        return map;
      } finally {
        this.loading = undefined;
      }
    })();
    return this.loading;
  }

  stop(): void {
    this.unsubscribe();
  }
}
