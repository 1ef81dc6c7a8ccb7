/**
 * A real PostgreSQL restart under load, where test/db/faults.test.ts only cuts a TCP proxy: our own
 * embedded server (never the shared test server) behind the real `svcgen serve`, ten clients reading
 * and creating, then a fast shutdown (sessions end with 57P01) and a start on the same port and data
 * directory. Every answer meanwhile is 2xx or a retryable 503, the server recovers by itself, nothing
 * acknowledged is lost, and the LISTEN connection and the webhook runner come back.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../runtime/db/embedded-postgres/index.ts';
import { openDatabase, type Database } from '../../runtime/db/index.ts';
import { createApiKey, revokeApiKey } from '../../runtime/keys/index.ts';
import { cleanupCli, copyExample, startCli, tempDir, type RunningCli } from '../support/cli.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { readResponse, type TestResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

const MANAGEMENT_TOKEN = 'restart-test-management-token-7d41a0';
const REST = '/gw/api/rest';
const CLIENTS = 10;
/** How long PostgreSQL stays down. */
const OUTAGE_MS = 1500;
/** From PostgreSQL accepting connections again to the API serving 2xx again (the listener's backoff is at most 5 s). */
const RECOVERY_BOUND_MS = 10_000;

describe('a real PostgreSQL restart under load', () => {
  let stateDir: string;
  let postgres: EmbeddedPostgres;
  let databaseUrl: string;
  let direct: Database;
  let serve: RunningCli;
  let base: string;
  let receiver: Receiver;
  let adminKey: string;

  beforeAll(async () => {
    stateDir = path.join(await tempDir('pg-restart'), '.svcgen');
    postgres = await startEmbeddedPostgres(stateDir);
    const admin = new pg.Client({ connectionString: postgres.url });
    await admin.connect();
    await admin.query('CREATE DATABASE restart_shop').finally(() => admin.end());
    const url = new URL(postgres.url);
    url.pathname = '/restart_shop';
    databaseUrl = url.toString();

    // The example with webhooks to loopback allowed and quick retries, so a delivery after the restart is seen at once.
    receiver = await startReceiver();
    const copy = await copyExample('pg-restart');
    const configPath = path.join(copy.dir, 'svcgen.config.json');
    const config = JSON.parse(await fs.readFile(configPath, 'utf8'));
    config.webhooks = {
      allowHttp: true,
      allowPrivateTargets: true,
      retryDelaysMs: [0, 200, 200, 200, 200],
      timeoutMs: 2000,
    };
    await fs.writeFile(configPath, JSON.stringify(config, null, 2));

    serve = startCli(['serve', '--project', copy.dir, '--database-url', databaseUrl, '--port', '0'], {
      env: { SVCGEN_MANAGEMENT_TOKEN: MANAGEMENT_TOKEN },
    });
    base = (
      await serve.waitFor(/^listening on (http:\/\/127\.0\.0\.1:\d+)$/m, { stream: 'stdout', timeoutMs: 30_000 })
    )[1]!;
    direct = openDatabase(databaseUrl, { max: 2 });
    adminKey = (
      await createApiKey(direct, {
        projectId: 'shop',
        environment: 'master',
        name: 'load',
        prefix: 'ApiKey',
        roles: ['admin'],
        context: {},
      })
    ).key;
  }, 60_000);

  afterAll(async () => {
    await serve?.stop('SIGTERM', 15_000).catch(() => {});
    await direct?.close().catch(() => {});
    await postgres?.stop();
    await receiver?.close();
    await cleanupCli();
  });

  const call = async (
    method: string,
    p: string,
    options: { body?: unknown; key?: string; headers?: Record<string, string> } = {},
  ): Promise<TestResponse> =>
    readResponse(
      await fetch(`${base}${p}`, {
        method,
        headers: {
          'x-project-id': 'shop',
          authorization: `Bearer ${options.key ?? adminKey}`,
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...options.headers,
        },
        body: options.body === undefined ? undefined : JSON.stringify(options.body),
      }),
    );
  const readyz = () => call('GET', '/readyz');

  it('answers 2xx or 503 database-unavailable throughout, recovers by itself, loses no acknowledged create', async () => {
    const subscribed = await call('POST', `${REST}/_webhooks`, {
      key: MANAGEMENT_TOKEN,
      headers: { environment: 'master' },
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Product',
        events: ['INSERT'],
        url: `${receiver.url}/restart`,
        secret: 's3cret',
      },
    });
    expect(subscribed.status, subscribed.text).toBe(201);

    const attempted = new Set<string>();
    const acknowledged = new Set<string>();
    /** Anything but 2xx or the retryable 503: wrong statuses, wrong bodies, reset sockets. */
    const violations: string[] = [];
    let unavailable = 0;
    let lastOkAt = 0;
    let stop = false;
    let n = 0;

    const record = (what: string, res: TestResponse, okStatus: number): boolean => {
      if (res.status === okStatus) {
        lastOkAt = performance.now();
        return true;
      }
      const retryable =
        res.status === 503 &&
        res.headers.get('content-type') === 'application/problem+json' &&
        res.body?.type === '/errors/database-unavailable' &&
        res.headers.get('retry-after') === '1';
      if (retryable) unavailable++;
      else violations.push(`${what} → ${res.status} ${res.text.slice(0, 300)}`);
      return false;
    };
    const client = async (c: number) => {
      let knownId: number | undefined;
      while (!stop) {
        const name = `restart-${c}-${n++}`;
        attempted.add(name);
        try {
          const created = await call('POST', `${REST}/City`, { body: { name, country: 'RS' } });
          if (record(`POST ${name}`, created, 201)) {
            acknowledged.add(name);
            knownId = created.body.data.id;
          }
          if (knownId !== undefined) {
            const read = await call('GET', `${REST}/City/${knownId}`);
            if (record(`GET ${knownId}`, read, 200) && read.body.data.id !== knownId)
              violations.push(`GET ${knownId} → another row`);
          }
        } catch (error) {
          violations.push(
            `${name}: ${(error as Error).message} ${String((error as { cause?: { code?: string } }).cause?.code ?? '')}`,
          );
        }
      }
    };
    const readiness: { at: number; status: number; checks: unknown }[] = [];
    const pollReadiness = async () => {
      while (!stop) {
        const res = await readyz().catch(() => undefined);
        if (res) readiness.push({ at: performance.now(), status: res.status, checks: res.body?.checks });
        else violations.push('/readyz: no answer');
        await new Promise((r) => setTimeout(r, 25));
      }
    };

    const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));
    const poller = pollReadiness();
    let stoppedAt = 0;
    let restartedAt = 0;
    try {
      await until(
        async () => acknowledged.size,
        (count) => count >= 50,
        15_000,
        'creates before the restart',
      );
      stoppedAt = performance.now();
      await postgres.stop(); // fast shutdown: open sessions end with 57P01
      await until(
        async () => unavailable,
        (count) => count >= CLIENTS,
        10_000,
        '503s while PostgreSQL is down',
      );
      await until(
        async () => performance.now() - stoppedAt,
        (ms) => ms >= OUTAGE_MS,
        OUTAGE_MS + 1000,
        'the outage lasting',
      );
      const port = postgres.port;
      postgres = await startEmbeddedPostgres(stateDir);
      restartedAt = performance.now();
      expect(postgres.port, 'the same port, so the URL the server has still works').toBe(port);
      const before = acknowledged.size;
      await until(
        async () => lastOkAt,
        (at) => at > restartedAt,
        RECOVERY_BOUND_MS,
        'a 2xx after the restart',
      );
      await until(
        async () => acknowledged.size,
        (count) => count >= before + 50,
        15_000,
        'creates after the restart',
      );
    } finally {
      stop = true;
      await Promise.allSettled([...clients, poller]);
    }

    expect(violations).toEqual([]);
    expect(unavailable).toBeGreaterThanOrEqual(CLIENTS);
    const duringOutage = readiness.filter((r) => r.at > stoppedAt && r.at < restartedAt);
    expect(
      duringOutage.some((r) => r.status === 503),
      JSON.stringify(duringOutage.slice(0, 5)),
    ).toBe(true);
    const ready = await until(readyz, (r) => r.status === 200, RECOVERY_BOUND_MS, '/readyz turns 200');
    expect(ready.body).toMatchObject({ status: 'ready', checks: { database: 'ok', migrations: 'ok', listener: 'ok' } });

    const rows = await direct.query<{ name: string }>(`SELECT name FROM env_master."City" WHERE country = 'RS'`);
    const stored = new Set(rows.map((r) => r.name));
    expect(rows.length, 'no name stored twice').toBe(stored.size);
    expect(
      [...acknowledged].filter((name) => !stored.has(name)),
      'acknowledged but missing',
    ).toEqual([]);
    expect(
      [...stored].filter((name) => !attempted.has(name)),
      'stored but never sent',
    ).toEqual([]);
    // A commit whose answer the shutdown cut can land unacknowledged; it is one of the 503s.
    expect(stored.size - acknowledged.size).toBeLessThanOrEqual(unavailable);

    expect(serve.child.exitCode, 'the server process is still running').toBeNull();
    expect(serve.stderr).not.toMatch(/unhandled|uncaught|TypeError|ReferenceError|RangeError/i);
  }, 60_000);

  it('the LISTEN connection is back: a key revoked after the restart is refused within a second', async () => {
    const [listening] = await direct.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'svcgen-listen'`,
    );
    expect(listening!.n).toBe(1);
    const key = await createApiKey(direct, {
      projectId: 'shop',
      environment: 'master',
      name: 'after',
      prefix: 'ApiKey',
      roles: ['admin'],
      context: {},
    });
    // Used twice: cached now (only with a live listener), so only the notification can end it before the cache's 60 s.
    for (let i = 0; i < 2; i++) expect((await call('GET', `${REST}/City?limit=1`, { key: key.key })).status).toBe(200);
    expect(await revokeApiKey(direct, 'shop', key.id)).toBeDefined();
    const refused = await until(
      () => call('GET', `${REST}/City?limit=1`, { key: key.key }),
      (r) => r.status === 401,
      1000,
      'the revoked key refused',
    );
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect(refused.body.type).toBe('/errors/unauthorized');
  });

  it('the webhook runner is back: a create after the restart is delivered', async () => {
    const created = await call('POST', `${REST}/Product`, {
      body: { sku: 'RESTART-1', title: 'After the restart', price: 9.5, tags: [] },
    });
    expect(created.status, created.text).toBe(201);
    const [delivery] = await receiver.waitFor('/restart', 1, 10_000);
    expect(delivery!.body.record).toMatchObject({ id: created.body.data.id, sku: 'RESTART-1' });
  });
});
