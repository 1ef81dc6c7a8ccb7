/**
 * The live subscribers of one process and the changes they receive (docs/realtime.md). While the
 * process holds a subscriber for a table it keeps a row in svcgen.live_interest fresh, so every
 * process's writes to that table capture events and NOTIFY their ids (runtime/events/capture.ts).
 * Each notification names one statement's events; the hub reads them once (one query per
 * statement, not per subscriber) and hands every event to the local subscribers of its table, in
 * the order the notifications arrived: commit order.
 */
import { randomUUID } from 'node:crypto';
import type { Database, NotificationChannel, Queryable } from '../db/index.ts';
import { metrics } from '../observability/index.ts';
import { type Containment, containmentKey, MAX_CONTAINMENTS } from '../query/index.ts';
import { announceSubscriptionChange, eventsById, LIVE_TOPIC, type ChangeEvent } from '../events/index.ts';

/** An event as a live listener receives it: the captured event, whole (each listener removes what its caller may not read). */
export type LiveEvent = ChangeEvent;

export interface LiveListener {
  readonly environment: string;
  readonly table: string;
  /**
   * The rows it can want, as JSON objects (by column) a row contains one of (the listener's role
   * filter and `where` narrowed by containmentsOf, a superset); left out, every row. Only these are captured.
   */
  readonly interest?: readonly Containment[];
  deliver(event: LiveEvent): void;
  /** The channel to PostgreSQL dropped: changes may have been missed. */
  interrupted(): void;
}

/** How often a process refreshes its interest rows, and how long one lasts without refresh. */
export const INTEREST_REFRESH_MS = 10_000;
const INTEREST_TTL_SECONDS = 30;

const keyOf = (environment: string, table: string) => `${environment}\t${table}`;

/** The records a table's listeners can want: every record, or those containing one of `items` (by containmentKey). */
interface Interest {
  readonly all: boolean;
  readonly items: ReadonlyMap<string, Containment>;
}

const EVERY_RECORD: Interest = { all: true, items: new Map() };
const interests = new WeakMap<LiveListener, Interest>();

/** A listener's interest, keyed once. */
function interestOf(listener: LiveListener): Interest {
  let interest = interests.get(listener);
  if (!interest) {
    interest = listener.interest
      ? { all: false, items: new Map(listener.interest.map((c) => [containmentKey(c), c])) }
      : EVERY_RECORD;
    interests.set(listener, interest);
  }
  return interest;
}

/** Whether capturing `declared` captures every record `needed` asks for. */
const covers = (declared: Interest, needed: Interest) =>
  declared.all || (!needed.all && [...needed.items.keys()].every((k) => declared.items.has(k)));

export class LiveHub {
  /** This process, in svcgen.live_interest. */
  readonly instance = randomUUID();
  private readonly listeners = new Map<string, Set<LiveListener>>();
  /**
   * Interest rows being written (or written), with what they capture: a listener is live once a
   * row covering its interest is. Narrowed again (as listeners leave) at the next refresh.
   */
  private readonly interest = new Map<string, { readonly covers: Interest; readonly ready: Promise<void> }>();
  /** The interest row writes of each table, one after another (a removal must not overtake a re-declaration). */
  private readonly writes = new Map<string, Promise<unknown>>();
  /** Statements' events are handed out in the order their notifications came. */
  private tail: Promise<void> = Promise.resolve();
  /** Statements heard whose events are not read yet, and whether a read is running. */
  private readonly unread: { ids: readonly string[]; resolve: (events: LiveEvent[] | undefined) => void }[] = [];
  private reading = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly db: Database,
    private readonly channel: NotificationChannel,
    private readonly log: (message: string, error?: unknown) => void,
    /** Where the events are read: a connection of their own, not queued behind requests (db when left out). */
    private readonly reader: Queryable = db,
  ) {}

  start(): void {
    this.unsubscribe = this.channel.subscribe(LIVE_TOPIC, {
      onMessage: (payload) => this.heard(payload),
      onGap: () => {
        for (const set of this.listeners.values()) for (const listener of [...set]) listener.interrupted();
      },
    });
    this.timer = setInterval(() => void this.refresh(), INTEREST_REFRESH_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    if (this.timer) clearInterval(this.timer);
    this.listeners.clear();
    this.interest.clear();
    await this.db
      .query('DELETE FROM svcgen.live_interest WHERE instance = $1', [this.instance])
      .catch((error) => this.log('could not drop this process’s live interest', error));
  }

  /** Subscribers held, for metrics. */
  get size(): number {
    let n = 0;
    for (const set of this.listeners.values()) n += set.size;
    return n;
  }

  /**
   * Adds a listener; resolves once every write that starts afterwards captures its table's changes.
   * Returns the removal.
   */
  async add(listener: LiveListener): Promise<() => void> {
    const key = keyOf(listener.environment, listener.table);
    let set = this.listeners.get(key);
    if (!set) this.listeners.set(key, (set = new Set()));
    set.add(listener);
    let declared = this.interest.get(key);
    if (!declared || !covers(declared.covers, interestOf(listener)))
      declared = this.declare(listener.environment, listener.table, this.neededBy(set));
    const { ready } = declared;
    const remove = () => {
      if (!set.delete(listener) || set.size > 0) return;
      this.listeners.delete(key);
      this.interest.delete(key);
      this.serially(key, () =>
        this.db.query('DELETE FROM svcgen.live_interest WHERE environment = $1 AND table_name = $2 AND instance = $3', [
          listener.environment,
          listener.table,
          this.instance,
        ]),
      ).catch((error) => this.log('could not drop a live interest row', error));
    };
    try {
      await ready;
    } catch (error) {
      remove();
      throw error;
    }
    return remove;
  }

  /** What a table's listeners together can want. */
  private neededBy(listeners: ReadonlySet<LiveListener>): Interest {
    const items = new Map<string, Containment>();
    for (const listener of listeners) {
      const own = interestOf(listener);
      if (own.all) return own;
      for (const [k, c] of own.items) items.set(k, c);
      // Every record past this many: checking each written row against thousands costs more than it saves.
      if (items.size > MAX_CONTAINMENTS) return EVERY_RECORD;
    }
    return { all: false, items };
  }

  /**
   * Writes (or refreshes) this process's interest in a table. A new row is announced to every
   * process in the same transaction, so their caches of watched tables (WatchedTables) take it in.
   */
  private declare(environment: string, table: string, interest: Interest) {
    const key = keyOf(environment, table);
    const declared = { covers: interest, ready: this.serially(key, () => this.upsert(environment, table, interest)) };
    this.interest.set(key, declared);
    declared.ready.catch(() => {
      if (this.interest.get(key) === declared) this.interest.delete(key);
    });
    return declared;
  }

  /** Runs `write` after every interest write of `key` queued before it. */
  private serially<T>(key: string, write: () => Promise<T>): Promise<T> {
    const before = this.writes.get(key) ?? Promise.resolve();
    const done = before.catch(() => {}).then(write);
    this.writes.set(key, done);
    const settle = () => {
      if (this.writes.get(key) === done) this.writes.delete(key);
    };
    done.then(settle, settle);
    return done;
  }

  private upsert(environment: string, table: string, interest: Interest): Promise<void> {
    const filters = interest.all ? null : JSON.stringify([...interest.items.values()]);
    return this.db.transaction(async (tx) => {
      const rows = await tx.query<{ inserted: boolean }>(
        `INSERT INTO svcgen.live_interest (environment, table_name, instance, expires_at, filters)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4), $5::jsonb)
         ON CONFLICT (environment, table_name, instance)
           DO UPDATE SET expires_at = EXCLUDED.expires_at, filters = EXCLUDED.filters
         RETURNING (xmax = 0) AS inserted`,
        [environment, table, this.instance, INTEREST_TTL_SECONDS, filters],
      );
      if (rows[0]?.inserted) await announceSubscriptionChange(tx);
    });
  }

  private async refresh(): Promise<void> {
    for (const [key, listeners] of this.listeners) {
      const [environment, table] = key.split('\t') as [string, string];
      await this.declare(environment, table, this.neededBy(listeners)).ready.catch((error) =>
        this.log('could not refresh live interest', error),
      );
    }
    // Rows of processes that died without removing them.
    await this.db
      .query(`DELETE FROM svcgen.live_interest WHERE expires_at < now() - interval '1 minute'`)
      .catch(() => {});
  }

  private heard(payload: string): void {
    const [environment, table, list] = payload.split('\t');
    if (environment === undefined || table === undefined || !list) return;
    const key = keyOf(environment, table);
    if (!this.listeners.has(key)) return;
    const ids = list.split(',');
    // The read starts now (with the other statements heard meanwhile); the hand-out waits for the statements heard before.
    const events = this.readSoon(ids);
    this.tail = this.tail.then(async () => {
      const read = await events;
      if (read === undefined) {
        for (const listener of [...(this.listeners.get(key) ?? [])]) listener.interrupted();
        return;
      }
      metrics.realtimeEvents('in', read.length);
      for (const event of read) for (const listener of [...(this.listeners.get(key) ?? [])]) listener.deliver(event);
    });
  }

  /**
   * The events of one statement, read with those of every statement heard while the previous read
   * was running: under a steady write rate, one query for many statements instead of one each.
   */
  private readSoon(ids: readonly string[]): Promise<LiveEvent[] | undefined> {
    return new Promise((resolve) => {
      this.unread.push({ ids, resolve });
      if (!this.reading) void this.readUnread();
    });
  }

  private async readUnread(): Promise<void> {
    this.reading = true;
    while (this.unread.length) {
      const batch = this.unread.splice(0);
      const read = await this.read(batch.flatMap((b) => b.ids));
      for (const { ids, resolve } of batch) resolve(read && ids.flatMap((id) => (read.has(id) ? [read.get(id)!] : [])));
    }
    this.reading = false;
  }

  /** The events by id; undefined when the database could not answer. */
  private async read(ids: readonly string[]): Promise<Map<string, LiveEvent> | undefined> {
    try {
      return await eventsById(this.reader, ids);
    } catch (error) {
      this.log('could not read captured events for live subscribers', error);
      return undefined;
    }
  }
}
