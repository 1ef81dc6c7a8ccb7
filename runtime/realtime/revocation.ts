/**
 * Ending subscriptions when what let them in ends (docs/realtime.md "Lifecycle and limits"): a
 * revoked API key, an ended session or token closes its connections with 4401; a user whose roles
 * changed has theirs closed with 4403, and an access token issued before the change is refused
 * until it would have expired. Heard on the shared channel, from any process
 * (runtime/server/features/realtime.ts subscribes).
 */
import { digestSecret } from '../keys/secrets.ts';
import type { RolePrincipal } from '../principal/index.ts';
import { CLOSE, type LiveConnection } from './connection.ts';

/** The revocation id of every connection of a user (`user:<id>`): ended when the user's roles change. */
export const USER_REVOCATION = 'user:';

/**
 * The channel topic of a role change (docs/realtime.md "Lifecycle and limits"): a trigger on svcgen.users
 * (svcgen.users_roles_changed) sends `<user id>\t<new roles as a JSON array>` on commit of any
 * UPDATE that changes a user's roles, whatever made it (an endpoint, SQL).
 */
export const ROLES_TOPIC = 'roles-changed';

const sameRoles = (a: readonly string[], b: readonly string[]) =>
  JSON.stringify([...new Set(a)].sort()) === JSON.stringify([...new Set(b)].sort());

/** What ends a credential: the API key's digest, or the user's session and token ids (and the user, for roles). */
export function revocationIds(principal: RolePrincipal, credential: string | undefined): string[] {
  return principal.kind === 'apiKey'
    ? [digestSecret(credential ?? '')]
    : [principal.sessionId, principal.tokenId, `${USER_REVOCATION}${principal.userId}`];
}

export class Revocations {
  /** Connections by what ends their credential (key digest, session id, token id, `user:<id>`). */
  private readonly byRevocation = new Map<string, Set<LiveConnection>>();
  /**
   * Users whose roles changed while this process ran: their roles now, and until when an access
   * token issued before the change may still be presented (it carries the old roles).
   */
  private readonly changedRoles = new Map<string, { roles: readonly string[]; until: number }>();

  /** Whether `principal` holds an access token issued before its user's roles changed. */
  staleRoles(principal: RolePrincipal): boolean {
    if (principal.kind !== 'user') return false;
    const changed = this.changedRoles.get(principal.userId);
    return changed !== undefined && changed.until >= Date.now() && !sameRoles(changed.roles, principal.roles);
  }

  /** `connection` ends when any of `ids` is revoked. */
  watch(connection: LiveConnection, ids: readonly string[]): void {
    for (const id of ids) {
      let set = this.byRevocation.get(id);
      if (!set) this.byRevocation.set(id, (set = new Set()));
      set.add(connection);
    }
  }

  /** Undoes watch() when the connection ends. */
  unwatch(connection: LiveConnection, ids: readonly string[]): void {
    for (const id of ids) {
      const set = this.byRevocation.get(id);
      set?.delete(connection);
      if (set?.size === 0) this.byRevocation.delete(id);
    }
  }

  /**
   * A user's roles changed (heard on ROLES_TOPIC from any process): their sockets and streams end
   * with 4403, and until `tokenTtlSeconds` have passed an access token carrying other roles is
   * refused (staleRoles; a refreshed token carries the new ones).
   */
  rolesChanged(message: string, tokenTtlSeconds: number): void {
    const tab = message.indexOf('\t');
    const userId = tab < 0 ? message : message.slice(0, tab);
    let roles: unknown;
    try {
      roles = JSON.parse(message.slice(tab + 1));
    } catch {
      roles = undefined;
    }
    const now = Date.now();
    for (const [id, entry] of this.changedRoles) if (entry.until < now) this.changedRoles.delete(id);
    if (Array.isArray(roles) && roles.every((r) => typeof r === 'string'))
      this.changedRoles.set(userId, { roles, until: now + tokenTtlSeconds * 1000 });
    for (const connection of this.byRevocation.get(`${USER_REVOCATION}${userId}`) ?? [])
      connection.close(CLOSE.rolesChanged, 'your roles changed; refresh the access token and connect again');
  }

  /** Closes the connections whose credential `id` names (a revoked key's digest, an ended session or token). */
  revoked(id: string, reason: string): void {
    for (const connection of this.byRevocation.get(id) ?? []) connection.close(CLOSE.credentialEnded, reason);
  }
}
