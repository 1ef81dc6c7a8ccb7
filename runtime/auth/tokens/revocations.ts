/**
 * Which sessions and access tokens are revoked (logout, refresh-token reuse, password reset, and
 * the self-service changes of docs/api.md §3 "Your account").
 * The database is the record; every process also keeps the revocations it heard of on the shared
 * LISTEN channel, so a revocation made by any process is refused by every other one on its next
 * request without a query per request (the channel's barrier, one shared round trip, proves
 * nothing committed was missed). A token is checked against the database once per channel epoch
 * (the first time a process sees it, and again after the channel had a gap), and on every request
 * while the channel is down.
 */
import { notify, type NotificationChannel, type Queryable } from '../../db/index.ts';

export const SESSION_TOPIC = 'session-revoked';
export const TOKEN_TOPIC = 'token-revoked';

export interface TokenIdentity {
  readonly sessionId: string;
  readonly tokenId: string;
}

/** Ids heard of, each forgotten once no access token it could stop is still alive. */
class ExpiringSet {
  private readonly entries = new Map<string, number>();
  add(id: string, forgetAt: number): void {
    this.entries.set(id, forgetAt);
    if (this.entries.size % 1024 === 0) this.prune();
  }
  has(id: string): boolean {
    return this.entries.has(id);
  }
  private prune(): void {
    const now = Date.now();
    for (const [id, at] of this.entries) if (at < now) this.entries.delete(id);
  }
}

export class Revocations {
  private readonly sessions = new ExpiringSet();
  private readonly tokens = new ExpiringSet();
  private readonly unsubscribe: (() => void)[] = [];

  constructor(
    private readonly db: Queryable,
    private readonly channel: NotificationChannel,
    /** How long an access token lives: a heard-of session revocation is kept that long. */
    private readonly accessTokenTtlMs: number,
  ) {}

  start(): void {
    const heard = (set: ExpiringSet) => ({
      onMessage: (id: string) => set.add(id, Date.now() + this.accessTokenTtlMs),
      // What was heard stays true; what a gap hid, the verifier asks the database for (a new epoch).
      onGap: () => {},
    });
    this.unsubscribe.push(this.channel.subscribe(SESSION_TOPIC, heard(this.sessions)));
    this.unsubscribe.push(this.channel.subscribe(TOKEN_TOPIC, heard(this.tokens)));
  }

  stop(): void {
    for (const off of this.unsubscribe) off();
  }

  /** Revoked as far as this process has heard (no I/O). */
  heardRevoked(token: TokenIdentity): boolean {
    return this.sessions.has(token.sessionId) || this.tokens.has(token.tokenId);
  }

  /** Asks the database; remembers a revocation it finds. */
  async checkDatabase(token: TokenIdentity): Promise<boolean> {
    const rows = await this.db.query<{ session_live: boolean; denied: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM svcgen.sessions WHERE id = $1::uuid AND revoked_at IS NULL) AS session_live,
              EXISTS (SELECT 1 FROM svcgen.revoked_tokens WHERE jti = $2) AS denied`,
      [token.sessionId, token.tokenId],
    );
    const { session_live, denied } = rows[0]!;
    const forgetAt = Date.now() + this.accessTokenTtlMs;
    if (!session_live) this.sessions.add(token.sessionId, forgetAt);
    if (denied) this.tokens.add(token.tokenId, forgetAt);
    return !session_live || denied;
  }

  /**
   * Revokes sessions inside the caller's transaction: their refresh tokens stop, and every process
   * hears of it on commit. Returns the ids that were live.
   */
  static async revokeSessions(
    tx: Queryable,
    where: { sessionId?: string; userId?: string; exceptSessionId?: string },
  ): Promise<string[]> {
    // Every condition given must hold (a session of this user, but not that one); one is needed.
    // Only the conditions given are in the text: statements are prepared by name, and a generic
    // plan for "$1 IS NULL OR id = $1" would scan every session.
    if (where.sessionId === undefined && where.userId === undefined)
      throw new Error('revokeSessions needs a sessionId or a userId');
    const conditions = ['revoked_at IS NULL'];
    const values: string[] = [];
    const add = (condition: string, value: string | undefined) => {
      if (value === undefined) return;
      values.push(value);
      conditions.push(condition.replace('?', `$${values.length}::uuid`));
    };
    add('id = ?', where.sessionId);
    add('user_id = ?', where.userId);
    add('id <> ?', where.exceptSessionId);
    const rows = await tx.query<{ id: string }>(
      `UPDATE svcgen.sessions SET revoked_at = now() WHERE ${conditions.join(' AND ')} RETURNING id`,
      values,
    );
    for (const { id } of rows) await notify(tx, SESSION_TOPIC, id);
    return rows.map((r) => r.id);
  }

  /** Denies one access token until its natural expiry (logout). */
  static async denyToken(tx: Queryable, tokenId: string, expiresAtSeconds: number): Promise<void> {
    await tx.query(
      `INSERT INTO svcgen.revoked_tokens (jti, expires_at) VALUES ($1, to_timestamp($2)) ON CONFLICT (jti) DO NOTHING`,
      [tokenId, expiresAtSeconds],
    );
    await notify(tx, TOKEN_TOPIC, tokenId);
  }

  /** Local memory for revocations made by this process (it hears its own NOTIFY too, but later). */
  remember(token: Partial<TokenIdentity>): void {
    const forgetAt = Date.now() + this.accessTokenTtlMs;
    if (token.sessionId) this.sessions.add(token.sessionId, forgetAt);
    if (token.tokenId) this.tokens.add(token.tokenId, forgetAt);
  }
}
