/**
 * The operator's test, as they ran it (docs/deployment.md "What survives what"): `svcgen serve
 * --workers 2` as a real process tree whose database is reached through the fault proxy, 12
 * clients sending keyed GraphQL mutations while the proxy cuts every socket without a word. No
 * worker process dies (none is replaced), cut requests answer 503 or DATABASE_UNAVAILABLE with
 * Retry-After, and the requests after the cuts are served.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupCli, freshDatabase, runCli, show, startCli, type RunningCli } from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { readResponse, SHOP, type TestResponse } from '../support/server.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';
import { until } from '../support/until.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:(\d+))$/m;
const WORKERS_LINE = /^ {2}workers {4}2 processes on one port \(pids (\d+), (\d+)\); worker 1 also delivers webhooks$/m;

let database: TestDatabase;
let proxy: TcpProxy;
let serve: RunningCli;
let url: string;
let pids: number[];
let key: string;

beforeAll(async () => {
  database = await freshDatabase();
  const target = new URL(database.url);
  proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  serve = startCli(
    ['serve', '--workers', '2', '--port', '0', '--project', SHOP, '--database-url', proxy.url(database.url)],
    {
      env: { SVCGEN_MANAGEMENT_TOKEN: 'fault-proxy-workers-token-51c7e2' },
    },
  );
  [, url] = (await serve.waitFor(LISTENING, { stream: 'stdout' })) as unknown as [string, string];
  const [, a, b] = await serve.waitFor(WORKERS_LINE, { stream: 'stderr' });
  pids = [Number(a), Number(b)];
  const created = await runCli(
    ['keys', 'create', '--env', 'master', '--name', 'cuts', '--prefix', 'ApiKey', '--role', 'admin', '--json'].concat([
      '--project',
      SHOP,
      '--database-url',
      database.url,
    ]),
  );
  expect(created.code, show(created)).toBe(0);
  key = JSON.parse(created.stdout).key;
}, 120_000);

afterAll(async () => {
  await cleanupCli();
  await proxy?.close();
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const mutate = async (n: number): Promise<TestResponse> =>
  readResponse(
    await fetch(`${url}/gw/api/graphql`, {
      method: 'POST',
      headers: {
        'x-project-id': 'shop',
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/graphql-response+json',
        'idempotency-key': `workers-cut-${n}`,
      },
      body: JSON.stringify({
        query: `mutation { createCity(data: { name: "workers-cut-${n}", country: "WK" }) { name } }`,
      }),
    }),
  );

describe('serve --workers 2 through the fault proxy', () => {
  it('12 clients sending keyed GraphQL mutations while every database socket is cut 4 times: both workers live on, none replaced, and requests are served again', async () => {
    const statuses = new Map<string, number>();
    let successes = 0;
    let stop = false;
    let n = 0;
    const loops = Array.from({ length: 12 }, async () => {
      while (!stop) {
        const res = await mutate(n++).catch(() => undefined);
        if (!res) {
          // The worker holding the connection died mid-request (what the cuts did before the fix).
          statuses.set('no answer', (statuses.get('no answer') ?? 0) + 1);
          continue;
        }
        const ok = res.status === 200 && res.body?.errors === undefined;
        if (ok) successes++;
        else {
          // 503 Problem, or the field's DATABASE_UNAVAILABLE / DATABASE_BUSY; Retry-After either way, never a 500.
          expect(res.headers.get('retry-after'), res.text).toBe('1');
          expect([200, 503], res.text).toContain(res.status);
        }
        const label = ok ? 'ok' : res.status === 503 ? res.body.type : res.body.errors[0].extensions.code;
        statuses.set(label, (statuses.get(label) ?? 0) + 1);
      }
    });
    try {
      const reach = (count: number, what: string) =>
        until(
          async () => successes,
          (s) => s >= count,
          30_000,
          what,
        );
      await reach(24, 'successes before the first cut');
      for (let cut = 1; cut <= 4; cut++) {
        expect(proxy.cut(), 'database connections cut').toBeGreaterThan(0);
        await reach(successes + 12, `successes after cut ${cut}`);
      }
    } finally {
      stop = true;
      await Promise.allSettled(loops);
    }
    await Promise.all(loops);
    expect(statuses.get('no answer'), 'requests left without an answer').toBeUndefined();
    expect(pids.map(alive), 'both workers alive').toEqual([true, true]);
    expect(serve.stderr, 'no worker replaced').not.toMatch(/exited .*starting a replacement/);
    expect(serve.stderr).not.toMatch(/Unhandled 'error' event|Connection terminated unexpectedly\n\s+at /);
    expect(serve.child.exitCode).toBeNull();
    expect(statuses.get('ok')).toBeGreaterThanOrEqual(24 + 4 * 12);
  }, 120_000);
});
