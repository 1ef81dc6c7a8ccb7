// How fresh the caches kept by the LISTEN channel are (runtime/db/announcements.ts, docs/deployment.md
// "Caches and revocation"): a writer that announces a change returns only once every process that
// answers its caller's next request knows of it, even when the notification travels slowly; and a
// reader under load proves that with a round trip now and then instead of one per request.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ANNOUNCEMENT_SETTLE_MS,
  ensureSystemSchema,
  NotificationChannel,
  notify,
  openDatabase,
  transactionDatabase,
  type Database,
} from '../../runtime/db/index.ts';
import { createApiKey, CredentialStore, revokeApiKey } from '../../runtime/keys/index.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

/** What the route from the database to process B adds to every notification and answer. */
const SLOW_ROUTE_MS = 15;

let database: TestDatabase;
let writer: Database;
let reader: Database;
let proxy: TcpProxy;
let channel: NotificationChannel;
let store: CredentialStore;

beforeAll(async () => {
  database = await createTestDatabase();
  writer = openDatabase(database.url, { max: 2 });
  await ensureSystemSchema(writer);
  reader = openDatabase(database.url, { max: 2 });
  const target = new URL(database.url);
  proxy = await startTcpProxy(target.hostname, Number(target.port || 5432), { downstreamDelayMs: SLOW_ROUTE_MS });
  // Process B: its LISTEN connection hears everything SLOW_ROUTE_MS late.
  channel = new NotificationChannel(proxy.url(database.url));
  await channel.start();
  store = new CredentialStore(reader, channel, undefined);
  store.start();
});

afterAll(async () => {
  await store?.stop();
  await channel?.stop();
  await proxy?.close();
  await writer?.close();
  await reader?.close();
  await database?.drop();
});

const newKey = () =>
  createApiKey(writer, {
    projectId: 'shop',
    environment: 'master',
    name: 'k',
    prefix: 'ApiKey',
    roles: [],
    context: {},
  });

describe('announcements', () => {
  it('a key revoked by process A is refused by a busy process B on the very next request, though B hears of it late', async () => {
    // B keeps serving another key meanwhile, so its proof of freshness is recent (a round trip
    // every few ms) and it answers from its cache without waiting: exactly when a revocation
    // still on its way would be missed if A returned at its commit.
    const busy = await newKey();
    let stop = false;
    let served = 0;
    const traffic = (async () => {
      while (!stop) {
        if (await store.resolveApiKey(busy.key)) served++;
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    try {
      for (let round = 0; round < 20; round++) {
        const key = await newKey();
        expect(await store.resolveApiKey(key.key), 'B knows the key').toBeDefined();
        const started = performance.now();
        expect(await revokeApiKey(writer, 'shop', key.id)).toBeDefined();
        expect(performance.now() - started).toBeGreaterThanOrEqual(ANNOUNCEMENT_SETTLE_MS - 1);
        expect(await store.resolveApiKey(key.key), `round ${round}: B still accepted the revoked key`).toBeUndefined();
      }
    } finally {
      stop = true;
      await traffic;
    }
    expect(served, 'B served the other key all along').toBeGreaterThan(20);
    expect(await store.resolveApiKey(busy.key)).toBeDefined();
  });

  it('B waits for a round trip when its proof is older than the window', async () => {
    const key = await newKey();
    await store.resolveApiKey(key.key);
    await new Promise((resolve) => setTimeout(resolve, 100)); // idle: the proof is stale
    expect(channel.isCurrent()).toBe(false);
    const stale = performance.now();
    expect(await store.resolveApiKey(key.key)).toBeDefined();
    expect(performance.now() - stale, 'waited for a round trip on the slow route').toBeGreaterThanOrEqual(
      SLOW_ROUTE_MS,
    );
  });

  it('an announcing transaction returns only after the settling time, also when the notification was sent through a database bound to it', async () => {
    const started = performance.now();
    await writer.transaction(async (tx) => {
      await notify(transactionDatabase(writer.pool, tx), 'test', 'nested');
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(ANNOUNCEMENT_SETTLE_MS - 1);
    const autocommit = performance.now();
    await notify(writer, 'test', 'autocommit');
    expect(performance.now() - autocommit).toBeGreaterThanOrEqual(ANNOUNCEMENT_SETTLE_MS - 1);
  });

  it('a transaction that rolls back announces nothing', async () => {
    const seen: string[] = [];
    const unsubscribe = channel.subscribe('rollback', { onMessage: (p) => seen.push(p), onGap: () => {} });
    await expect(
      writer.transaction(async (tx) => {
        await notify(tx, 'rollback', 'rolled-back');
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    await notify(writer, 'rollback', 'after');
    await channel.current();
    await channel.barrier();
    expect(seen).toEqual(['after']);
    unsubscribe();
  });
});
