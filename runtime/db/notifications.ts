/**
 * One LISTEN connection per server process, shared by every subsystem that must hear what other
 * processes did at once: API-key revocation, logout and session revocation, later webhook wake-ups.
 * Messages are `<topic>:<payload>` on one PostgreSQL channel. While the connection is down,
 * messages may be missed: subscribers hear of every gap and must not trust caches meanwhile
 * (`live` is false, `epoch` has moved).
 *
 * How fresh a cache is: see ./announcements.ts.
 */
import type pg from 'pg';
import { newClient } from './client.ts';
import { connectionConfig } from './connection.ts';
import { announcementSettled, FRESHNESS_MS, settlesOnCommit } from './announcements.ts';
import type { Queryable } from './pool.ts';

const CHANNEL = 'svcgen';
/** How the LISTEN connections show in pg_stat_activity (operators and tests find them by it). */
const LISTENER_APPLICATION_NAME = 'svcgen-listen';
const RECONNECT_FIRST_MS = 100;
const RECONNECT_MAX_MS = 5_000;
const CONNECT_TIMEOUT_MS = 5_000;
const RESOLVED = Promise.resolve();

export interface Subscriber {
  onMessage(payload: string): void;
  /**
   * Messages may have been missed: called when the connection drops and again when it is back
   * (with `epoch` moved each time), so a cache filled in between is dropped too.
   */
  onGap(): void;
}

/**
 * Sends a message to every process's channel; inside a transaction it is delivered on commit, and
 * the transaction returns ANNOUNCEMENT_SETTLE_MS after its commit (./announcements.ts); outside one this
 * waits as long itself.
 */
export async function notify(db: Queryable, topic: string, payload: string): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [CHANNEL, `${topic}:${payload}`]);
  if (!settlesOnCommit(db)) await announcementSettled();
}

export class NotificationChannel {
  private readonly subscribers = new Map<string, Set<Subscriber>>();
  private client: pg.Client | undefined;
  /** The round trip on the LISTEN connection now in flight, and the one queued behind it. */
  private pingInFlight: Promise<void> | undefined;
  /** performance.now() when the round trip in flight was sent. */
  private inFlightSentAt = -Infinity;
  private pingQueued: Promise<void> | undefined;
  private stopped = false;
  private everConnected = false;
  private retryMs = RECONNECT_FIRST_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  /** performance.now() when the latest round trip that completed in the current epoch was sent. */
  private provenAt = -Infinity;
  /** Moves on every gap: a lookup that started in an older epoch must not be cached. */
  epoch = 0;

  constructor(
    private readonly databaseUrl: string,
    private readonly log: (message: string) => void = () => {},
  ) {}

  get live(): boolean {
    return this.client !== undefined;
  }

  /** Connects once; a failure here fails the server start. Later drops reconnect by themselves. */
  async start(): Promise<void> {
    await this.connect();
  }

  /**
   * Resolves once this process has heard every message committed before the call. PostgreSQL
   * delivers pending notifications on a connection before it answers a query there, so a round trip
   * on the LISTEN connection that starts after the call is the proof. Concurrent callers share
   * round trips: a caller arriving while one is in flight waits for the next. Rejects when the
   * connection is down or drops meanwhile (the caller must then ask the database itself).
   */
  barrier(): Promise<void> {
    if (!this.client) return Promise.reject(new Error('the LISTEN connection is down'));
    if (!this.pingInFlight) return (this.pingInFlight = this.ping());
    this.pingQueued ??= this.pingInFlight.then(
      () => this.afterQueued(),
      () => this.afterQueued(),
    );
    return this.pingQueued;
  }

  /**
   * Resolves once this process has heard every message committed before `since` (a performance.now()
   * time): at once when a round trip sent after `since` has completed, else with the one in flight
   * if it was sent after `since`, otherwise by a barrier.
   */
  heardSince(since: number): Promise<void> {
    if (!this.client) return Promise.reject(new Error('the LISTEN connection is down'));
    this.refreshAhead();
    if (this.provenAt >= since) return RESOLVED;
    if (this.pingInFlight && this.inFlightSentAt >= since) return this.pingInFlight;
    return this.barrier();
  }

  /**
   * Whether this process has heard every announcement whose writer has returned (./announcements.ts):
   * a round trip sent within FRESHNESS_MS has completed on a live connection.
   */
  isCurrent(): boolean {
    if (!this.client) return false;
    this.refreshAhead();
    return this.provenAt >= performance.now() - FRESHNESS_MS;
  }

  /** Resolves once isCurrent() held at some point after the call; rejects when the connection is down or drops meanwhile. */
  current(): Promise<void> {
    return this.heardSince(performance.now() - FRESHNESS_MS);
  }

  /** While requests keep asking, a round trip every FRESHNESS_MS / 2 keeps the proof fresh, so they seldom wait for one. */
  private refreshAhead(): void {
    if (!this.pingInFlight && performance.now() - this.provenAt > FRESHNESS_MS / 2) this.pingInFlight = this.ping();
  }

  private afterQueued(): Promise<void> {
    this.pingQueued = undefined;
    return this.barrier();
  }

  private ping(): Promise<void> {
    const client = this.client!;
    const epoch = this.epoch;
    const sentAt = performance.now();
    this.inFlightSentAt = sentAt;
    // An empty query is the cheapest round trip PostgreSQL answers (no parse, no plan). Before it
    // executes a command, a backend sends the notifications committed before it read that command.
    const done = client.query('').then(() => {
      if (epoch !== this.epoch) throw new Error('the LISTEN connection dropped');
      if (sentAt > this.provenAt) this.provenAt = sentAt;
    });
    const settle = () => {
      if (this.pingInFlight === done) this.pingInFlight = undefined;
    };
    done.then(settle, settle);
    return done;
  }

  subscribe(topic: string, subscriber: Subscriber): () => void {
    let set = this.subscribers.get(topic);
    if (!set) this.subscribers.set(topic, (set = new Set()));
    set.add(subscriber);
    return () => set.delete(subscriber);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  private async connect(): Promise<void> {
    const client = newClient({
      ...connectionConfig(this.databaseUrl),
      application_name: LISTENER_APPLICATION_NAME,
      // An attempt that hangs (a host that vanished drops packets instead of refusing) would
      // otherwise never settle, and no further attempt would ever be scheduled.
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // A half-open connection (peer gone without a FIN) must end in 'error', or the gap goes unheard.
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    client.on('notification', (message) => this.deliver(message.payload ?? ''));
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (error) {
      client.removeAllListeners('end');
      await client.end().catch(() => {});
      throw error;
    }
    if (this.stopped) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.retryMs = RECONNECT_FIRST_MS;
    if (this.everConnected) {
      // A lookup that read the database while the connection was down may finish only now; moving
      // the epoch again keeps it from caching what a missed notification has since made stale.
      this.epoch++;
      this.provenAt = -Infinity;
      this.gap();
    }
    this.everConnected = true;
  }

  private gap(): void {
    for (const set of this.subscribers.values()) for (const subscriber of set) subscriber.onGap();
  }

  private deliver(message: string): void {
    const colon = message.indexOf(':');
    if (colon === -1) return;
    const set = this.subscribers.get(message.slice(0, colon));
    if (!set) return;
    const payload = message.slice(colon + 1);
    for (const subscriber of set) subscriber.onMessage(payload);
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.epoch++;
    this.provenAt = -Infinity;
    client.end().catch(() => {});
    this.gap();
    if (!this.stopped) {
      this.log('the LISTEN connection to PostgreSQL dropped; reconnecting');
      this.scheduleReconnect();
    }
  }

  private scheduleReconnect(): void {
    this.retryTimer = setTimeout(() => {
      this.connect().then(
        () => {
          if (this.live) this.log('the LISTEN connection to PostgreSQL is back');
        },
        () => {
          this.retryMs = Math.min(this.retryMs * 2, RECONNECT_MAX_MS);
          if (!this.stopped) this.scheduleReconnect();
        },
      );
    }, this.retryMs);
    this.retryTimer.unref();
  }
}
