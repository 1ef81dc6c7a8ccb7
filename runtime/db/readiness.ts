/**
 * What /readyz answers, kept as state so a load balancer polling it costs no query: a short periodic
 * probe through the pool says whether the database answers, the LISTEN channel says whether it is
 * connected, migrations are re-checked whenever the database comes back (it may have been
 * restored or replaced meanwhile), and a server that has begun to stop says so.
 */
import { databaseFault } from './faults.ts';

export type CheckState = 'ok' | 'unreachable' | 'pending' | 'down' | 'unknown' | 'draining';

export interface ReadinessReport {
  ready: boolean;
  checks: { database: CheckState; migrations: CheckState; listener: CheckState; server: CheckState };
  /** Why not ready, one sentence each; empty when ready. */
  reasons: string[];
}

export interface ReadinessOptions {
  /** One cheap round trip through the request pool. */
  probe: () => Promise<void>;
  /** Names what is not applied yet (e.g. "init in master"); empty when every migration is applied. */
  pendingMigrations: () => Promise<string[]>;
  listenerLive: () => boolean;
  /** Whether every pool connection is in use: a slow probe then says nothing about reachability. */
  poolBusy?: () => boolean;
  /** 500 ms, so a lost or regained database shows within about a second. */
  intervalMs?: number;
  /** A probe without an answer by then counts as unreachable (a vanished host does not refuse, it hangs). */
  probeTimeoutMs?: number;
}

export class Readiness {
  private database: CheckState = 'ok';
  private migrations: CheckState = 'ok';
  private pending: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private draining = false;

  constructor(private readonly options: ReadinessOptions) {}

  /** Starts probing; the server has just connected and migrated, so it starts out ready. */
  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.check().finally(() => (this.running = undefined));
    }, this.options.intervalMs ?? 500);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  /**
   * The server has begun to stop: not ready from now on, whatever the database says, so that a load
   * balancer still probing over an open connection sends nothing new while in-flight requests finish.
   */
  drain(): void {
    this.draining = true;
  }

  report(): ReadinessReport {
    const listener: CheckState = this.options.listenerLive() ? 'ok' : 'down';
    const reasons: string[] = [];
    if (this.draining) reasons.push('the server is stopping (finishing in-flight requests)');
    if (this.database !== 'ok') reasons.push('the database cannot be reached');
    if (this.migrations === 'pending') reasons.push(`migrations are pending: ${this.pending.join(', ')}`);
    if (this.migrations === 'unknown' && this.database === 'ok')
      reasons.push('whether migrations are pending is not known yet');
    if (listener !== 'ok') reasons.push('the LISTEN connection to the database is down (reconnecting)');
    return {
      ready: reasons.length === 0,
      checks: {
        database: this.database,
        migrations: this.migrations,
        listener,
        server: this.draining ? 'draining' : 'ok',
      },
      reasons,
    };
  }

  /** One probe now (also what the timer runs). */
  async check(): Promise<void> {
    const wasDown = this.database !== 'ok';
    const reachable = await this.probe();
    if (this.stopped) return;
    if (reachable === undefined) return;
    this.database = reachable ? 'ok' : 'unreachable';
    if (!reachable) {
      // What was applied cannot be known until the database answers again.
      if (this.migrations === 'ok') this.migrations = 'unknown';
      return;
    }
    if (wasDown || this.migrations !== 'ok') await this.checkMigrations();
  }

  /** true: answered; false: unreachable; undefined: no verdict (the pool was only busy). */
  private async probe(): Promise<boolean | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.options.probeTimeoutMs ?? 1000);
    });
    try {
      const busyAtStart = this.options.poolBusy?.() ?? false;
      const outcome = await Promise.race([this.options.probe().then(() => 'answered' as const), timeout]);
      if (outcome === 'answered') return true;
      return busyAtStart || this.options.poolBusy?.() ? undefined : false;
    } catch (error) {
      const fault = databaseFault(error);
      // Every connection busy with requests is load, not an outage: do not take the process out.
      if (fault?.kind === 'pool-timeout') return undefined;
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  private async checkMigrations(): Promise<void> {
    try {
      this.pending = await this.options.pendingMigrations();
      this.migrations = this.pending.length === 0 ? 'ok' : 'pending';
    } catch (error) {
      if (databaseFault(error)) {
        this.database = 'unreachable';
        this.migrations = 'unknown';
      } else {
        // A failed migration (refuseFailedMigrations) also leaves the schema unfit to serve.
        this.pending = [(error as Error).message];
        this.migrations = 'pending';
      }
    }
  }
}
