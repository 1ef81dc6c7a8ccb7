// The in-process cache of API keys (runtime/keys/store.ts) under concurrent requests, with the
// database and the LISTEN channel replaced by fakes whose answers the test releases.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Database, NotificationChannel } from '../../runtime/db/index.ts';
import type { ApiRequest } from '../../runtime/http/index.ts';
import { CredentialStore } from '../../runtime/keys/index.ts';
import { authenticate, type Credential } from '../../runtime/principal/index.ts';
import type { Tenant } from '../../runtime/tenancy/index.ts';

const KEY = `svk_${'k'.repeat(43)}`;
const ROW = {
  id: 'key_1',
  project_id: 'shop',
  name: 'k',
  prefix: 'ApiKey',
  environment: 'master',
  roles: ['admin'],
  context: {},
  created_at: new Date(),
  last_used_at: null,
};

const BEARER: Credential = { scheme: 'Bearer', token: KEY, bearer: true };
const TENANT: Tenant = { projectId: 'shop', environment: 'master' };

function requestWith(authorization: string): ApiRequest {
  return { headers: { authorization }, params: {}, method: 'GET', path: '/' } as unknown as ApiRequest;
}

function deferred() {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => (release = resolve));
  return { promise, release };
}

function harness({ current = false } = {}) {
  let lookups = 0;
  const barriers: Array<() => void> = [];
  const db = {
    query: async (text: string) => {
      if (text.includes('FROM svcgen.api_keys WHERE key_hash')) lookups++;
      return [ROW];
    },
  } as unknown as Database;
  const channel = {
    live: true,
    epoch: 0,
    subscribe: () => () => {},
    isCurrent: () => current,
    current: () => {
      const d = deferred();
      barriers.push(d.release);
      return d.promise;
    },
  } as unknown as NotificationChannel;
  const store = new CredentialStore(db, channel, undefined);
  return { store, lookups: () => lookups, releaseBarriers: () => barriers.splice(0).forEach((r) => r()) };
}

afterEach(() => vi.useRealTimers());

describe('API key cache', () => {
  it('a request waiting for the revocation barrier keeps the cached key when another request refreshed the entry meanwhile (it looked the key up again, and under load those lookups fed themselves: 0.16 per request)', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const h = harness();
    await h.store.resolveApiKey(KEY); // looked up and cached
    expect(h.lookups()).toBe(1);

    const waiting = h.store.resolveApiKey(KEY); // cached: waits for the barrier
    vi.setSystemTime(Date.now() + 61_000); // the entry expires meanwhile
    const refreshing = await h.store.resolveApiKey(KEY); // expired: looked up, a fresh entry replaces the old one
    expect(refreshing?.principal.keyId).toBe('key_1');
    expect(h.lookups()).toBe(2);

    h.releaseBarriers();
    expect((await waiting)?.principal.keyId).toBe('key_1');
    expect(h.lookups(), 'the waiting request used its cached key').toBe(2);
  });

  it('a request waiting for the barrier looks the key up again when a revocation removed it meanwhile', async () => {
    const h = harness();
    let onRevoked!: (hash: string) => void;
    (h.store as unknown as { channel: { subscribe: unknown } }).channel.subscribe = (
      _topic: string,
      s: { onMessage: (p: string) => void },
    ) => {
      onRevoked = s.onMessage;
      return () => {};
    };
    h.store.start();
    await h.store.resolveApiKey(KEY);
    const waiting = h.store.resolveApiKey(KEY);
    const { digestSecret } = await import('../../runtime/keys/secrets.ts');
    onRevoked(digestSecret(KEY)); // heard during the barrier
    h.releaseBarriers();
    await waiting;
    expect(h.lookups(), 'asked the database again').toBe(2);
    await h.store.stop();
  });

  it('a cached key with a fresh revocation proof is resolved at once: no promise, no database, no wait (the common request)', async () => {
    const h = harness({ current: true });
    await h.store.resolve(BEARER, TENANT); // looked up and cached
    const again = h.store.resolve(BEARER, TENANT);
    expect(again).not.toBeInstanceOf(Promise);
    expect(again).toMatchObject({ kind: 'apiKey', keyId: 'key_1' });
    const found = authenticate(requestWith(`Bearer ${KEY}`), TENANT, [{ resolve: () => undefined }, h.store]);
    expect(found).not.toBeInstanceOf(Promise);
    expect(found).toMatchObject({ kind: 'apiKey', keyId: 'key_1' });
    expect(h.lookups()).toBe(1);
  });

  it('a cached key is still refused at once for another environment or scheme, and looked up again once the proof is stale', async () => {
    const h = harness({ current: true });
    await h.store.resolve(BEARER, TENANT);
    expect(() => h.store.resolve(BEARER, { ...TENANT, environment: 'staging' })).toThrow(
      'this API key belongs to environment "master", not "staging"',
    );
    expect(() => h.store.resolve({ scheme: 'Token', token: KEY, bearer: false }, TENANT)).toThrow(
      'this API key is sent as "ApiKey <key>" or "Bearer <key>"',
    );
    const stale = harness();
    await stale.store.resolve(BEARER, TENANT);
    const waiting = stale.store.resolve(BEARER, TENANT);
    expect(waiting, 'waits for the round trip').toBeInstanceOf(Promise);
    stale.releaseBarriers();
    expect(await waiting).toMatchObject({ keyId: 'key_1' });
  });
});
