/**
 * Inbound access tokens → user principals. Signature checks and JWE decryption are costly (RSA),
 * so a verified token is remembered by its exact text until it expires; revocation is never
 * cached away: every request consults what this process heard of after a barrier on the shared
 * channel, and the database whenever the channel cannot vouch for it (see revocations.ts).
 */
import type { NotificationChannel } from '../../db/index.ts';
import type { UserPrincipal } from '../../principal/index.ts';
import { audience, TokenRejected, verifyAccessToken, type AccessClaims } from './access-tokens.ts';
import type { Revocations } from './revocations.ts';
import type { EnvironmentKeys } from './signing-keys.ts';

const MAX_CACHED_TOKENS = 20_000;

export interface VerifiedToken {
  readonly claims: AccessClaims;
  readonly principal: UserPrincipal;
  /** The channel epoch in which the database last said this token was not revoked (-1: never). */
  checkedEpoch: number;
}

export class AccessTokenVerifier {
  private readonly verified = new Map<string, VerifiedToken>();

  constructor(
    private readonly projectId: string,
    private readonly keys: ReadonlyMap<string, EnvironmentKeys>,
    private readonly revocations: Revocations,
    private readonly channel: NotificationChannel,
  ) {}

  /** The principal and claims of a valid, unexpired, unrevoked token of `environment`; throws TokenRejected. */
  async verify(token: string, environment: string): Promise<VerifiedToken> {
    const entry = this.verified.get(token) ?? (await this.verifyNew(token, environment));
    const { claims } = entry;
    if (entry.principal.environment !== environment) throw new TokenRejected('invalid');
    if (claims.expiresAt * 1000 <= Date.now()) {
      this.verified.delete(token);
      throw new TokenRejected('expired');
    }
    if (this.revocations.heardRevoked(claims)) throw new TokenRejected('invalid');
    await this.checkRevocation(entry);
    if (this.revocations.heardRevoked(claims)) throw new TokenRejected('invalid');
    return entry;
  }

  /**
   * The first time in a channel epoch, the database says whether the token is revoked. After that
   * the channel proves this process has heard every revocation whose writer has returned
   * (runtime/db/announcements.ts), so what it heard is the whole truth. Without the channel, the
   * database answers.
   */
  private async checkRevocation(entry: VerifiedToken): Promise<void> {
    const epoch = this.channel.epoch;
    if (this.channel.live && entry.checkedEpoch === epoch) {
      if (this.channel.isCurrent()) return;
      try {
        await this.channel.current();
        return;
      } catch {
        // the channel dropped meanwhile: ask the database below
      }
    }
    const live = this.channel.live;
    if (await this.revocations.checkDatabase(entry.claims)) throw new TokenRejected('invalid');
    if (live && this.channel.live && epoch === this.channel.epoch) entry.checkedEpoch = epoch;
  }

  private async verifyNew(token: string, environment: string): Promise<VerifiedToken> {
    const keys = this.keys.get(environment);
    if (!keys) throw new TokenRejected('invalid');
    const claims = await verifyAccessToken(keys, audience(this.projectId, environment), token);
    const principal: UserPrincipal = {
      kind: 'user',
      userId: claims.userId,
      email: claims.email,
      environment,
      roles: claims.roles,
      sessionId: claims.sessionId,
      tokenId: claims.tokenId,
    };
    const entry: VerifiedToken = { claims, principal, checkedEpoch: -1 };
    if (this.verified.size >= MAX_CACHED_TOKENS) this.verified.clear();
    this.verified.set(token, entry);
    return entry;
  }
}
