// Ending subscriptions whose credential or roles ended (runtime/realtime/revocation.ts): what each
// message of the shared channel closes, with which code, and which access tokens it refuses after.
import { describe, expect, it } from 'vitest';
import type { RolePrincipal } from '../../runtime/principal/index.ts';
import { CLOSE, type LiveConnection } from '../../runtime/realtime/connection.ts';
import { revocationIds, Revocations } from '../../runtime/realtime/revocation.ts';

function connection(): LiveConnection & { closed: [number, string][] } {
  const closed: [number, string][] = [];
  return { closed, bufferedAmount: 0, close: (code, reason) => void closed.push([code, reason]) };
}

const user = (roles: string[]): RolePrincipal => ({
  kind: 'user',
  userId: 'u1',
  email: 'ann@example.com',
  environment: 'production',
  roles,
  sessionId: 's1',
  tokenId: 't1',
});

describe('Revocations', () => {
  it('a revoked id closes the connections watching it with 4401, and no other', () => {
    const revocations = new Revocations();
    const [a, b] = [connection(), connection()];
    revocations.watch(a, revocationIds(user(['reader']), 'token'));
    revocations.watch(b, ['other-session']);
    revocations.revoked('s1', 'the session ended');
    expect(a.closed).toEqual([[CLOSE.credentialEnded, 'the session ended']]);
    expect(b.closed).toEqual([]);
  });

  it('an unwatched connection is not closed', () => {
    const revocations = new Revocations();
    const a = connection();
    const ids = revocationIds(user(['reader']), 'token');
    revocations.watch(a, ids);
    revocations.unwatch(a, ids);
    revocations.revoked('t1', 'logout');
    expect(a.closed).toEqual([]);
  });

  it("a user's role change closes their connections with 4403 and refuses tokens with other roles until the TTL", () => {
    const revocations = new Revocations();
    const a = connection();
    revocations.watch(a, revocationIds(user(['reader']), 'token'));
    revocations.rolesChanged('u1\t["editor"]', 900);
    expect(a.closed.map(([code]) => code)).toEqual([CLOSE.rolesChanged]);
    expect(revocations.staleRoles(user(['reader']))).toBe(true);
    expect(revocations.staleRoles(user(['editor']))).toBe(false);
    revocations.rolesChanged('u1\t["editor"]', -1);
    expect(revocations.staleRoles(user(['reader']))).toBe(false);
  });

  it('an API key is revoked by its digest', () => {
    const key: RolePrincipal = { kind: 'apiKey', keyId: 'k1', environment: 'production', roles: [], context: {} };
    const ids = revocationIds(key, 'svk_secret');
    expect(ids).toHaveLength(1);
    expect(ids[0]).not.toContain('svk_secret');
  });
});
