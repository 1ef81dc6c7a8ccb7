/**
 * Webhook delivery across real `svcgen` processes (node bin/svcgen.js) on one database:
 * - a server killed (SIGKILL) after the write committed but before any delivery: `svcgen worker`,
 *   started later on the same database, delivers the event (once, with the recorded event id);
 * - a server killed mid-attempt (the receiver holds the request): once the attempt's lease has run
 *   out, the restarted server sends the same event again, and the delivery ends delivered;
 * - two `svcgen serve` (each with its worker) and one `svcgen worker` share 50 events: every event
 *   arrives exactly once, every delivery is delivered on its first attempt;
 * - the database goes away for a few seconds during an attempt: the server survives and delivers;
 * - `svcgen worker --help`, `svcgen serve --help`.
 */
import { createHmac } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupCli,
  copyExample,
  freshDatabase,
  runCli,
  show,
  startCli,
  type ProjectCopy,
  type RunningCli,
} from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { ISO_8601 } from '../support/expect.ts';
import { startReceiver, type ReceivedDelivery, type Receiver } from '../support/receiver.ts';
import { readResponse, type TestResponse } from '../support/server.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m;
// With the example's own jobs the worker runs them too (docs/own-code.md "Where jobs run").
const DELIVERING = /^delivering webhooks( and running jobs)?$/m;
const MANAGEMENT_TOKEN = 'webhooks-processes-management-token-4c1d9a';
const REST = '/gw/api/rest';
/** concurrency 4 (default 32) keeps the connections of the three processes of one test low beside the other test files. */
const WEBHOOKS = {
  allowHttp: true,
  allowPrivateTargets: true,
  retryDelaysMs: [0, 200, 200],
  timeoutMs: 1000,
  concurrency: 4,
};
/** The delivery lease: the attempt's timeout plus the 5 s margin of runtime/webhooks/delivery.ts. */
const LEASE_MS = WEBHOOKS.timeoutMs + 5_000;

let project: ProjectCopy;
let receiver: Receiver;
const pools: pg.Pool[] = [];

beforeAll(async () => {
  project = await copyExample('webhooks-proc');
  const configPath = path.join(project.dir, 'svcgen.config.json');
  const raw = JSON.parse(await fs.readFile(configPath, 'utf8'));
  raw.webhooks = WEBHOOKS;
  await fs.writeFile(configPath, `${JSON.stringify(raw, null, 2)}\n`);
  receiver = await startReceiver();
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
  await cleanupCli();
  await receiver?.close();
});

/** A pool on the test database, closed before the database is dropped. */
function poolOn(database: TestDatabase): pg.Pool {
  const pool = new pg.Pool({ connectionString: database.url, max: 2 });
  pool.on('error', () => {});
  pools.push(pool);
  return pool;
}

interface Proc {
  proc: RunningCli;
  /** the server's base URL (serve only) */
  url: string;
}

/** Processes started by the running test; stopped after it, so that their connections are not held for the next test. */
const started: RunningCli[] = [];

afterEach(async () => {
  const stopping = started
    .splice(0)
    .map((proc) => proc.stop('SIGTERM', 20_000).catch(() => proc.stop('SIGKILL', 5_000)));
  await Promise.all(stopping);
});

const dbArgs = (database: TestDatabase) => ['--project', project.dir, '--database-url', database.url];

async function startServe(database: TestDatabase, extra: string[] = []): Promise<Proc> {
  const proc = startCli(['serve', '--port', '0', ...extra, ...dbArgs(database)], {
    env: { SVCGEN_MANAGEMENT_TOKEN: MANAGEMENT_TOKEN },
  });
  started.push(proc);
  const match = await proc.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 30_000 });
  return { proc, url: match[1]! };
}

async function startWorker(database: TestDatabase): Promise<Proc> {
  const proc = startCli(['worker', ...dbArgs(database)]);
  started.push(proc);
  await proc.waitFor(DELIVERING, { stream: 'stdout', timeoutMs: 30_000 });
  return { proc, url: '' };
}

/** What the processes printed, for failure messages. */
function outputOf(procs: Record<string, Proc>): string {
  return Object.entries(procs)
    .map(([name, p]) => `--- ${name} stdout\n${p.proc.stdout}--- ${name} stderr\n${p.proc.stderr}`)
    .join('\n');
}

/** Waits for `count` requests at `p`; on timeout the error carries the processes' output. */
async function received(
  p: string,
  count: number,
  timeoutMs: number,
  procs: Record<string, Proc>,
): Promise<ReceivedDelivery[]> {
  try {
    return await receiver.waitFor(p, count, timeoutMs);
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${outputOf(procs)}`);
  }
}

/** A request whose failure (no HTTP answer at all) carries the processes' output and the target. */
async function explained<T>(what: string, work: Promise<T>, procs: Record<string, Proc>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    const e = error as Error & { cause?: unknown };
    throw new Error(`${what}: ${e.message} (${String(e.cause)})\n${outputOf(procs)}`, { cause: error });
  }
}

interface Call {
  body?: unknown;
  /** full Authorization header value */
  authorization?: string;
  environment?: string;
}

async function call(base: string, method: string, p: string, o: Call = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { 'x-project-id': 'shop' };
  if (o.authorization) headers.authorization = o.authorization;
  if (o.environment) headers.environment = o.environment;
  let body: string | undefined;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] = 'application/json';
  }
  return readResponse(await fetch(`${base}${p}`, { method, headers, body }));
}

const asManager: Call = { authorization: `Bearer ${MANAGEMENT_TOKEN}`, environment: 'master' };

/** An admin API key of master made through the server's /_apikeys: its Authorization header value. */
async function apiKeyVia(base: string): Promise<string> {
  const res = await call(base, 'POST', `${REST}/_apikeys`, {
    ...asManager,
    body: { name: 'proc', prefix: 'ApiKey', roles: ['admin'], environment: 'master' },
  });
  expect(res.status, res.text).toBe(201);
  return `ApiKey ${res.body.data.key}`;
}

/** A Customer INSERT subscription to the receiver at `receiverPath`. */
async function subscribe(base: string, receiverPath: string, secret: string): Promise<{ id: string }> {
  const res = await call(base, 'POST', `${REST}/_webhooks`, {
    ...asManager,
    body: {
      projectId: 'shop',
      environment: 'master',
      table: 'Customer',
      events: ['INSERT'],
      url: `${receiver.url}${receiverPath}`,
      secret,
    },
  });
  expect(res.status, res.text).toBe(201);
  expect(res.body.id).toMatch(/^wh_/);
  return res.body;
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_id: string;
  status: string;
  http_status: number | null;
  attempts: number;
  last_error: string | null;
  leased: boolean;
}

async function deliveriesOf(db: pg.Pool, webhookId: string): Promise<DeliveryRow[]> {
  const { rows } = await db.query<DeliveryRow>(
    `select id, webhook_id, event_id, status, http_status, attempts, last_error, lease_until > now() as leased
       from svcgen.webhook_deliveries where webhook_id = $1 order by id`,
    [webhookId],
  );
  return rows;
}

/** Lines of a process's stderr where the delivery worker complains (failed sweep, failed task, graphile-worker warning). */
const workerComplaints = (stderr: string) =>
  stderr.split('\n').filter((l) => /webhook .*failed|webhook worker:/.test(l));

const hmac = (secret: string, body: string) => createHmac('sha256', secret).update(body).digest('hex');

/** The exact payload and headers of an INSERT of `record` signed with `secret`. */
function expectInsertEvent(
  got: ReceivedDelivery,
  eventId: string,
  eventAt: Date,
  record: Record<string, unknown>,
  secret: string,
): void {
  expect(got.body, got.raw).toEqual({
    id: eventId,
    timestamp: eventAt.toISOString(),
    project_id: 'shop',
    environment: 'master',
    table: 'Customer',
    event: 'INSERT',
    record,
    data: record,
    changed_fields: [],
  });
  expect(Object.keys(got.body)).toEqual([
    'id',
    'timestamp',
    'project_id',
    'environment',
    'table',
    'event',
    'record',
    'data',
    'changed_fields',
  ]);
  expect(got.headers['content-type']).toBe('application/json');
  expect(got.headers['x-service-event']).toBe('INSERT');
  expect(got.headers['x-service-delivery']).toBe(eventId);
  expect(got.headers['x-service-signature']).toBe(`sha256=${hmac(secret, got.raw)}`);
  expect(got.headers['x-webhook-signature']).toBe(hmac(secret, got.raw));
}

describe('webhook delivery across svcgen processes', { timeout: 60_000 }, () => {
  it('kill -9 after the commit, before any delivery: `svcgen worker` on the same database delivers the event once', async () => {
    const database = await freshDatabase();
    const db = poolOn(database);
    const a = await startServe(database, ['--no-worker']);
    const procs: Record<string, Proc> = { serve: a };

    // an API key made by the CLI against the running server's database
    const made = await runCli([
      'keys',
      'create',
      '--env',
      'master',
      '--name',
      'proc',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
      '--json',
      ...dbArgs(database),
    ]);
    expect(made.code, show(made)).toBe(0);
    const authorization = `ApiKey ${JSON.parse(made.stdout).key}`;

    const secret = 'kill-before-delivery-secret';
    const sub = await subscribe(a.url, '/killed-before', secret);
    const created = await call(a.url, 'POST', `${REST}/Customer`, {
      authorization,
      body: { email: 'killed-before@example.com', name: 'Before' },
    });
    expect(created.status, created.text).toBe(201); // committed
    const record = created.body.data;

    // committed with the write: the event
    const events = (
      await db.query<{
        id: string;
        environment: string;
        table_name: string;
        operation: string;
        created_at: Date;
        record_id: string;
      }>(
        `select id, environment, table_name, operation, created_at, record::jsonb->>'id' as record_id from svcgen.webhook_events`,
      )
    ).rows;
    expect(events).toEqual([
      {
        id: expect.stringMatching(/^evt_/),
        environment: 'master',
        table_name: 'Customer',
        operation: 'INSERT',
        created_at: expect.any(Date),
        record_id: record.id,
      },
    ]);
    const event = events[0]!;
    // committed with the write: the event's outbox row (no worker runs to record its delivery and queue it)
    const outbox = (await db.query(`select event_ids, webhook_ids from svcgen.webhook_event_outbox`)).rows;
    expect(outbox).toEqual([{ event_ids: [event.id], webhook_ids: [sub.id] }]);
    expect(await deliveriesOf(db, sub.id)).toEqual([]);
    expect((await db.query(`select 1 from svcgen_worker.jobs`)).rows).toEqual([]);

    const killed = await a.proc.stop('SIGKILL');
    expect(killed.signal, show(killed)).toBe('SIGKILL');
    // the server had no worker: nothing was sent
    expect(receiver.at('/killed-before')).toEqual([]);

    const w = await startWorker(database);
    procs.worker = w;
    const [got] = await received('/killed-before', 1, 20_000, procs);
    expectInsertEvent(got!, event.id, event.created_at, record, secret);

    await expect
      .poll(() => deliveriesOf(db, sub.id), { timeout: 10_000, interval: 100 })
      .toEqual([
        {
          id: expect.stringMatching(/^del_[0-9a-f]{32}$/),
          webhook_id: sub.id,
          event_id: event.id,
          status: 'delivered',
          http_status: 200,
          attempts: 1,
          last_error: null,
          leased: null,
        },
      ]);
    // delivered is final: the one request is all the receiver gets
    expect(receiver.at('/killed-before')).toHaveLength(1);

    const stopped = await w.proc.stop('SIGTERM', 20_000);
    expect(stopped.code, show(stopped)).toBe(0);
    expect(stopped.stderr, show(stopped)).toMatch(/^stopped$/m);
    expect(workerComplaints(stopped.stderr), show(stopped)).toEqual([]);
  });

  it('kill -9 mid-attempt: after the lease runs out the restarted server sends the same event again, and it ends delivered', async () => {
    const database = await freshDatabase();
    const db = poolOn(database);
    const a = await startServe(database);
    const procs: Record<string, Proc> = { first: a };
    const authorization = await apiKeyVia(a.url);

    const secret = 'kill-mid-attempt-secret';
    receiver.plan('/killed-mid', ['hang']); // then 200
    const sub = await subscribe(a.url, '/killed-mid', secret);
    const created = await call(a.url, 'POST', `${REST}/Customer`, {
      authorization,
      body: { email: 'killed-mid@example.com', name: 'Mid' },
    });
    expect(created.status, created.text).toBe(201);

    const [first] = await received('/killed-mid', 1, 10_000, procs);
    const killed = await a.proc.stop('SIGKILL');
    expect(killed.signal, show(killed)).toBe('SIGKILL');

    // the attempt was under way: claimed (lease running), no outcome recorded
    const [event] = (
      await db.query<{ id: string; created_at: Date }>(`select id, created_at from svcgen.webhook_events`)
    ).rows;
    const during = await deliveriesOf(db, sub.id);
    expect(during).toEqual([
      {
        id: expect.stringMatching(/^del_/),
        webhook_id: sub.id,
        event_id: event!.id,
        status: 'pending',
        http_status: null,
        attempts: 0,
        last_error: null,
        leased: true,
      },
    ]);
    expectInsertEvent(first!, event!.id, event!.created_at, created.body.data, secret);

    const b = await startServe(database);
    procs.second = b;
    // lease (timeoutMs + 5 s) runs out, then the sweep (every 5 s) queues the delivery again
    const [, second] = await received('/killed-mid', 2, 20_000, procs);
    expect(second!.body.id).toBe(event!.id);
    expect(second!.headers['x-service-delivery']).toBe(event!.id);
    expect(second!.raw).toBe(first!.raw); // the same bytes, the same signature
    expect(second!.headers['x-service-signature']).toBe(first!.headers['x-service-signature']);
    // not sent again while the dead process's lease was running (claimed just before `first` arrived)
    expect(second!.at - first!.at, 'ms between the two requests').toBeGreaterThanOrEqual(LEASE_MS - 1_000);

    await expect
      .poll(() => deliveriesOf(db, sub.id), { timeout: 10_000, interval: 100 })
      .toEqual([
        // the killed attempt left no outcome, so it is not counted
        { ...during[0], status: 'delivered', http_status: 200, attempts: 1, leased: null },
      ]);
    const detail = await call(b.url, 'GET', `${REST}/_webhooks/${sub.id}`, asManager);
    expect(detail.status, detail.text).toBe(200);
    expect(detail.body.deliveries).toEqual([
      expect.objectContaining({
        id: during[0]!.id,
        eventId: event!.id,
        status: 'delivered',
        httpStatus: 200,
        attempts: 1,
        lastError: null,
        createdAt: expect.stringMatching(ISO_8601),
      }),
    ]);
    expect(receiver.at('/killed-mid')).toHaveLength(2);
    expect(workerComplaints(b.proc.stderr), outputOf(procs)).toEqual([]);
  });

  it('two servers (each with its worker) and `svcgen worker` on one database: 50 events, each delivered exactly once on the first attempt', async () => {
    const database = await freshDatabase();
    const db = poolOn(database);
    // the first applies the migrations; then the other two side by side
    const a = await startServe(database);
    const [b, w] = await Promise.all([startServe(database), startWorker(database)]);
    const procs: Record<string, Proc> = { a, b, worker: w };
    const authorization = await apiKeyVia(a.url);

    const secret = 'three-processes-secret';
    const sub = await subscribe(a.url, '/three', secret);
    // spread over both servers (B learns of A's subscription through the shared channel), 10 at a time
    const writes: TestResponse[] = [];
    for (let wave = 0; wave < 5; wave++) {
      const responses = await Promise.all(
        Array.from({ length: 10 }, (_, j) => {
          const i = wave * 10 + j;
          const base = i % 2 === 0 ? a.url : b.url;
          const body = { email: `three-${i}@example.com`, name: `Three ${i}` };
          return explained(
            `POST ${base}${REST}/Customer #${i}`,
            call(base, 'POST', `${REST}/Customer`, { authorization, body }),
            procs,
          );
        }),
      );
      writes.push(...responses);
    }
    for (const res of writes) expect(res.status, res.text).toBe(201);
    const records = new Map<string, Record<string, unknown>>(writes.map((r) => [r.body.data.id, r.body.data]));
    expect(records.size).toBe(50);

    const events = (
      await db.query<{ id: string; created_at: Date; record_id: string }>(
        `select id, created_at, record::jsonb->>'id' as record_id from svcgen.webhook_events where table_name = 'Customer' and operation = 'INSERT'`,
      )
    ).rows;
    expect(events).toHaveLength(50);
    expect(new Set(events.map((e) => e.record_id))).toEqual(new Set(records.keys()));

    await received('/three', 50, 30_000, procs);
    await expect
      .poll(async () => (await deliveriesOf(db, sub.id)).filter((d) => d.status === 'delivered').length, {
        timeout: 15_000,
        interval: 100,
      })
      .toBe(50);
    const deliveries = await deliveriesOf(db, sub.id);
    expect(deliveries).toHaveLength(50);
    for (const d of deliveries)
      expect(d, JSON.stringify(d)).toMatchObject({
        status: 'delivered',
        http_status: 200,
        attempts: 1,
        last_error: null,
        leased: null,
      });
    expect(new Set(deliveries.map((d) => d.event_id))).toEqual(new Set(events.map((e) => e.id)));

    // every delivery is final: what the receiver has now is all it gets
    const got = receiver.at('/three');
    const ids = got.map((g) => g.body.id as string);
    const duplicates = ids.filter((id, i) => ids.indexOf(id) !== i);
    expect(duplicates, 'event ids received more than once').toEqual([]);
    expect(got).toHaveLength(50);
    const byId = new Map(events.map((e) => [e.id, e]));
    for (const g of got) {
      const event = byId.get(g.body.id);
      expect(event, `unknown event id ${g.body.id}`).toBeDefined();
      expectInsertEvent(g, event!.id, event!.created_at, records.get(event!.record_id)!, secret);
    }
    // all three stop cleanly on SIGTERM, and none of them complained about a delivery
    const stopped = await Promise.all(Object.values(procs).map((p) => p.proc.stop('SIGTERM', 20_000)));
    for (const [i, name] of Object.keys(procs).entries()) {
      expect(stopped[i]!.code, `${name}: ${show(stopped[i]!)}`).toBe(0);
      expect(workerComplaints(stopped[i]!.stderr), `${name}: ${show(stopped[i]!)}`).toEqual([]);
    }
  });

  it('a database outage during an attempt: the server keeps serving, and once the database is back the event is delivered', async () => {
    const database = await freshDatabase();
    const a = await startServe(database);
    const procs: Record<string, Proc> = { serve: a };
    const authorization = await apiKeyVia(a.url);
    receiver.plan('/outage', ['hang']); // then 200
    await subscribe(a.url, '/outage', 'outage-secret');
    const created = await call(a.url, 'POST', `${REST}/Customer`, {
      authorization,
      body: { email: 'outage@example.com', name: 'Outage' },
    });
    expect(created.status, created.text).toBe(201);
    await received('/outage', 1, 10_000, procs);

    // The attempt is waiting on the receiver: take the database away from every connection for 3 s.
    const admin = new pg.Client({ connectionString: database.url.replace(/\/[^/?]+(\?|$)/, '/postgres$1') });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE "${database.name}" ALLOW_CONNECTIONS false`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [database.name]);
      await new Promise((resolve) => setTimeout(resolve, 3_000)); // the outage itself: nothing to await
      await admin.query(`ALTER DATABASE "${database.name}" ALLOW_CONNECTIONS true`);
    } finally {
      await admin.end();
    }
    expect(a.proc.child.exitCode, outputOf(procs)).toBe(null);
    await expect.poll(async () => (await fetch(`${a.url}/readyz`)).status, { timeout: 15_000 }).toBe(200);
    // the hung attempt timed out or its outcome was lost with the database; the retry (or the sweep) delivers
    const [first, second] = await received('/outage', 2, 30_000, procs);
    expect(second!.body.id).toBe(first!.body.id);
    const db = poolOn(database);
    await expect
      .poll(async () => (await db.query('SELECT status FROM svcgen.webhook_deliveries')).rows.map((r) => r.status), {
        timeout: 15_000,
      })
      .toEqual(['delivered']);
    expect(a.proc.child.exitCode, outputOf(procs)).toBe(null);
  });

  it('`svcgen worker --help` exits 0 and is about webhooks; `svcgen serve --help` lists --no-worker', async () => {
    const [worker, serve] = await Promise.all([runCli(['worker', '--help']), runCli(['serve', '--help'])]);
    expect(worker.code, show(worker)).toBe(0);
    expect(worker.stdout, show(worker)).toMatch(/^Usage: svcgen worker/m);
    expect(worker.stdout, show(worker)).toMatch(/webhooks/);
    expect(worker.stdout, show(worker)).toMatch(/--database-url <url>/);
    expect(serve.code, show(serve)).toBe(0);
    expect(serve.stdout, show(serve)).toMatch(/^Usage: svcgen serve/m);
    expect(serve.stdout, show(serve)).toMatch(/^\s+--no-worker\s+do not deliver webhooks/m);
  });
});
