// Delivery outcomes (docs/api.md §8.4 retries and circuit breaker, §8.5 targets, §8.1 redelivery):
// retries with the same event id and bytes, dead letter and redelivery, what counts as a failed
// attempt, the circuit, and the address policy at delivery time.
//
// Three servers (own databases): `loose` for retry outcomes (a circuit threshold no test reaches),
// `circuit` with a small threshold and cooldown, `strict` with allowPrivateTargets false. The circuit
// is per URL origin, so every test that makes an endpoint fail has a receiver (a port) of its own.
// Subscriptions filter on a customer name of their own, so the tests run concurrently (each with
// its context's `expect`, which expect.poll needs in concurrent tests).
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, it, type TestContext } from 'vitest';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';
import { waitingForLock } from '../support/until.ts';
import type { DeliveryRecord } from '../../runtime/webhooks/subscriptions.ts';

const BASE = '/gw/api/rest';
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const RETRY_DELAYS = [0, 200, 200];
const TIMEOUT_MS = 1000;
const COOLDOWN_MS = 4000; // long enough for the checks made during a cooldown on a busy CI machine

let loose: TestServer;
let circuit: TestServer;
let strict: TestServer;

beforeAll(async () => {
  [loose, circuit, strict] = await Promise.all([
    startTestServer({
      configPatch: (raw) => {
        raw.webhooks = {
          allowHttp: true,
          allowPrivateTargets: true,
          retryDelaysMs: RETRY_DELAYS,
          timeoutMs: TIMEOUT_MS,
          circuit: { failureThreshold: 1000, cooldownMs: 60_000 },
        };
      },
    }),
    startTestServer({
      configPatch: (raw) => {
        raw.webhooks = {
          allowHttp: true,
          allowPrivateTargets: true,
          retryDelaysMs: [0, 200, 200, 200, 200],
          timeoutMs: TIMEOUT_MS,
          circuit: { failureThreshold: 3, cooldownMs: COOLDOWN_MS },
        };
      },
    }),
    startTestServer({
      configPatch: (raw) => {
        raw.webhooks = {
          allowHttp: true,
          allowPrivateTargets: false,
          retryDelaysMs: RETRY_DELAYS,
          timeoutMs: TIMEOUT_MS,
        };
      },
    }),
  ]);
});
afterAll(async () => {
  await Promise.all([loose?.close(), circuit?.close(), strict?.close()]);
});

/** A receiver of its own (its own origin, so its own circuit), closed when the test ends. */
async function receiver(ctx: TestContext): Promise<Receiver> {
  const r = await startReceiver();
  ctx.onTestFinished(() => r.close());
  return r;
}

const manage = (t: TestServer, method: string, path: string, body?: unknown) =>
  t.request(method, `${BASE}/_webhooks${path}`, { body, key: MANAGEMENT_TOKEN, environment: 'master' });

/**
 * A Customer INSERT subscription to `url` that only matches customers named `tag`, so that other
 * tests' writes on the same server never reach it; removed after the test.
 */
async function subscribe(ctx: TestContext, t: TestServer, url: string, tag: string): Promise<string> {
  const res = await manage(t, 'POST', '', {
    projectId: 'shop',
    environment: 'master',
    table: 'Customer',
    events: ['INSERT'],
    url,
    secret: 'retry-secret',
    filter: { name: tag },
  });
  ctx.expect(res.status, res.text).toBe(201);
  ctx.onTestFinished(async () => {
    ctx.expect((await manage(t, 'DELETE', `/${res.body.id}`)).status).toBe(204);
  });
  return res.body.id;
}

async function insert(ctx: TestContext, t: TestServer, tag: string): Promise<string> {
  const res = await t.request('POST', `${BASE}/Customer`, {
    body: { email: `${tag}-${randomUUID()}@example.com`, name: tag },
  });
  ctx.expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

/** A delivery as GET /_webhooks/{id} lists it. */
type Delivery = DeliveryRecord;

async function history(t: TestServer, webhookId: string): Promise<Delivery[]> {
  const res = await manage(t, 'GET', `/${webhookId}`);
  if (res.status !== 200) throw new Error(`GET /_webhooks/${webhookId}: ${res.status} ${res.text}`);
  return res.body.deliveries;
}

/** Waits until every delivery of the subscription has one of `statuses` (and there are `count`). */
async function settled(
  ctx: TestContext,
  t: TestServer,
  webhookId: string,
  count: number,
  statuses: string[],
  timeout = 15_000,
): Promise<Delivery[]> {
  await ctx.expect
    .poll(async () => (await history(t, webhookId)).map((d) => statuses.includes(d.status)), { timeout, interval: 50 })
    .toEqual(Array(count).fill(true));
  return history(t, webhookId);
}

/**
 * Jobs for a delivery in graphile-worker (the only way an attempt can happen). The job that made
 * the last attempt is removed just after the task returns, so callers wait for 0 with expect.poll.
 */
async function queuedJobs(t: TestServer, deliveryId: string): Promise<number> {
  const [{ n }] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM svcgen_worker.jobs WHERE key = $1`, [
    deliveryId,
  ]);
  return n;
}

const tag = (what: string) => `${what}-${randomUUID().slice(0, 8)}`;

describe.concurrent('retries', () => {
  it('500, 503, then 200 → delivered after 3 attempts; every attempt carries the same event id and the same bytes', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('flaky');
    r.plan('/flaky', [500, 503]);
    const hook = await subscribe(ctx, loose, `${r.url}/flaky`, name);
    const customerId = await insert(ctx, loose, name);
    const got = await r.waitFor('/flaky', 3);
    const [delivery] = await settled(ctx, loose, hook, 1, ['delivered']);
    expect(delivery).toEqual({
      id: expect.stringMatching(/^del_/),
      eventId: got[0]!.body.id,
      event: 'INSERT',
      status: 'delivered',
      httpStatus: 200,
      attempts: 3,
      lastError: null,
      nextAttemptAt: null,
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    expect(got[0]!.body.record.id).toBe(customerId);
    for (const req of got) {
      expect(req.headers['x-service-delivery']).toBe(delivery!.eventId);
      expect(req.raw).toBe(got[0]!.raw);
      expect(req.headers['x-service-signature']).toBe(got[0]!.headers['x-service-signature']);
    }
    // the retry schedule: attempt 2 and 3 wait retryDelaysMs[1] and [2] after the failure
    expect(got[1]!.at - got[0]!.at).toBeGreaterThanOrEqual(RETRY_DELAYS[1]! - 10);
    expect(got[2]!.at - got[1]!.at).toBeGreaterThanOrEqual(RETRY_DELAYS[2]! - 10);
    // nothing after the success: no job is left for the delivery (the finished job's row goes right after the task)
    await expect.poll(() => queuedJobs(loose, delivery!.id), { timeout: 2_000, interval: 20 }).toBe(0);
    expect(r.received).toHaveLength(3);
  });

  it('any 2xx is a success (204 after one attempt)', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('nocontent');
    r.always('/204', 204);
    const hook = await subscribe(ctx, loose, `${r.url}/204`, name);
    await insert(ctx, loose, name);
    const [delivery] = await settled(ctx, loose, hook, 1, ['delivered']);
    expect(delivery).toMatchObject({ status: 'delivered', httpStatus: 204, attempts: 1, lastError: null });
    expect(r.received).toHaveLength(1);
  });
});

describe.concurrent('dead letter and redelivery', () => {
  it('always 500 → dead_letter after retryDelaysMs.length attempts, nothing more is sent; redeliver sends the same event again', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('dead');
    r.always('/dead', 500);
    const hook = await subscribe(ctx, loose, `${r.url}/dead`, name);
    await insert(ctx, loose, name);
    const tries = await r.waitFor('/dead', RETRY_DELAYS.length);
    const [dead] = await settled(ctx, loose, hook, 1, ['dead_letter']);
    expect(dead).toEqual({
      id: expect.stringMatching(/^del_/),
      eventId: tries[0]!.body.id,
      event: 'INSERT',
      status: 'dead_letter',
      httpStatus: 500,
      attempts: RETRY_DELAYS.length,
      lastError: 'the receiver answered 500',
      nextAttemptAt: null,
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    // No further request can come: dead_letter is terminal for the worker (its claim takes only
    // pending/retrying/deferred) and no job is queued for the delivery. As an ordering barrier, a
    // later event to the same URL is delivered while the dead one gets no fourth request.
    await expect.poll(() => queuedJobs(loose, dead!.id), { timeout: 2_000, interval: 20 }).toBe(0);
    r.always('/dead', 200);
    await insert(ctx, loose, name);
    const withBarrier = await r.waitFor('/dead', RETRY_DELAYS.length + 1);
    expect(withBarrier[RETRY_DELAYS.length]!.body.id).not.toBe(dead!.eventId);
    await settled(ctx, loose, hook, 2, ['delivered', 'dead_letter']);
    expect(r.at('/dead').filter((req) => req.body.id === dead!.eventId)).toHaveLength(RETRY_DELAYS.length);
    expect((await history(loose, hook)).find((d) => d.id === dead!.id)).toEqual(dead);

    // redelivery: 202, back to pending with a fresh schedule and the same event
    const again = await manage(loose, 'POST', `/${hook}/deliveries/${dead!.id}/redeliver`);
    expect(again.status, again.text).toBe(202);
    expect(again.body).toEqual({
      data: {
        id: dead!.id,
        eventId: dead!.eventId,
        event: 'INSERT',
        status: 'pending',
        httpStatus: null,
        attempts: 0,
        lastError: null,
        nextAttemptAt: expect.stringMatching(ISO),
        createdAt: dead!.createdAt,
        updatedAt: expect.stringMatching(ISO),
      },
    });
    const all = await r.waitFor('/dead', RETRY_DELAYS.length + 2);
    const resent = all[RETRY_DELAYS.length + 1]!;
    expect(resent.headers['x-service-delivery']).toBe(dead!.eventId);
    expect(resent.raw).toBe(tries[0]!.raw);
    await expect
      .poll(async () => (await history(loose, hook)).find((d) => d.id === dead!.id), { timeout: 10_000 })
      .toMatchObject({
        id: dead!.id,
        eventId: dead!.eventId,
        status: 'delivered',
        httpStatus: 200,
        attempts: 1,
        lastError: null,
        nextAttemptAt: null,
      });

    // an unknown delivery id
    const unknown = await manage(loose, 'POST', `/${hook}/deliveries/del_nope/redeliver`);
    expect(unknown.status, unknown.text).toBe(404);
    expect(unknown.body.type).toBe('/errors/not-found');
  });
});

// graphile-worker's add_jobs queues nothing for a key whose waiting job a worker locks while the
// call runs (graphile/worker#580). Queueing a delivery must still leave it a job: here a worker
// takes the delivery's old job (run an hour out) at the moment a redelivery queues it again.
describe('queueing a delivery whose job a worker takes at that moment', () => {
  it('still leaves a job: the redelivered event goes out at once', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('taken');
    const hook = await subscribe(ctx, loose, `${r.url}/taken`, name);
    await insert(ctx, loose, name);
    const [first] = await r.waitFor('/taken', 1);
    const [done] = await settled(ctx, loose, hook, 1, ['delivered']);
    await loose.db.query(
      `SELECT svcgen_worker.add_job('svcgen_webhook_delivery', json_build_object('id', $1::text),
         run_at => now() + interval '1 hour', max_attempts => 25, job_key => $1::text)`,
      [done!.id],
    );
    const worker = new pg.Client({ connectionString: loose.database.url });
    await worker.connect();
    ctx.onTestFinished(() => worker.end());
    await worker.query('BEGIN');
    await worker.query(
      `UPDATE svcgen_worker._private_jobs SET locked_at = now(), locked_by = 'test-worker' WHERE key = $1`,
      [done!.id],
    );
    const again = manage(loose, 'POST', `/${hook}/deliveries/${done!.id}/redeliver`);
    // add_jobs found the job free and now waits for the worker's lock on it ...
    await waitingForLock(loose.db, 'WITH again AS', 'the redelivery waiting for the job the worker holds');
    // ... which then holds it: add_jobs leaves that job alone and queues no other
    await worker.query('COMMIT');
    expect((await again).status).toBe(202);
    const both = await r.waitFor('/taken', 2);
    expect(both[1]!.body.id).toBe(done!.eventId);
    expect(both[1]!.raw).toBe(first!.raw);
    await expect
      .poll(async () => (await history(loose, hook)).map((d) => [d.status, d.attempts]), { timeout: 10_000 })
      .toEqual([['delivered', 1]]);
  });
});

describe.concurrent('what is a failed attempt', () => {
  it('410 is a failed attempt like any non-2xx: retried until dead_letter', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('gone');
    r.always('/gone', 410);
    const hook = await subscribe(ctx, loose, `${r.url}/gone`, name);
    await insert(ctx, loose, name);
    const got = await r.waitFor('/gone', RETRY_DELAYS.length);
    const [delivery] = await settled(ctx, loose, hook, 1, ['dead_letter']);
    expect(delivery).toMatchObject({
      status: 'dead_letter',
      httpStatus: 410,
      attempts: RETRY_DELAYS.length,
      lastError: 'the receiver answered 410',
    });
    expect(new Set(got.map((req) => req.body.id))).toEqual(new Set([delivery!.eventId]));
    expect(r.received).toHaveLength(RETRY_DELAYS.length);
  });

  it('a 302 redirect is not followed and is a failed attempt', async (ctx) => {
    const { expect } = ctx;
    const target = await receiver(ctx);
    let hits = 0;
    const redirecting: Server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        hits++;
        res.writeHead(302, { location: `${target.url}/landed` }).end();
      });
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    ctx.onTestFinished(
      () =>
        new Promise<void>((resolve) => {
          redirecting.closeAllConnections();
          redirecting.close(() => resolve());
        }),
    );
    const port = (redirecting.address() as AddressInfo).port;
    const name = tag('redirect');
    const hook = await subscribe(ctx, loose, `http://127.0.0.1:${port}/moved`, name);
    await insert(ctx, loose, name);
    const [delivery] = await settled(ctx, loose, hook, 1, ['dead_letter']);
    expect(delivery).toMatchObject({
      status: 'dead_letter',
      httpStatus: 302,
      attempts: RETRY_DELAYS.length,
      lastError: 'the receiver answered 302',
    });
    expect(hits).toBe(RETRY_DELAYS.length);
    // every attempt has finished (dead_letter), so a followed redirect would have arrived by now
    expect(target.received).toEqual([]);
  });

  it(`a receiver that hangs past timeoutMs is a failed attempt ("no answer within ${TIMEOUT_MS} ms"); a reset before it is retried`, async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('hang');
    r.plan('/hang', ['reset', 500, 'hang']);
    const hook = await subscribe(ctx, loose, `${r.url}/hang`, name);
    await insert(ctx, loose, name);
    const got = await r.waitFor('/hang', 3);
    const [delivery] = await settled(ctx, loose, hook, 1, ['dead_letter']);
    expect(delivery).toMatchObject({ status: 'dead_letter', httpStatus: null, attempts: 3 });
    expect(delivery!.lastError).toMatch(/timeout|time out|timed out|within 1000 ms/i);
    // the attempt was given up after timeoutMs, not before
    expect(Date.parse(delivery!.updatedAt) - got[2]!.at).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(Date.parse(delivery!.updatedAt) - got[2]!.at).toBeLessThan(TIMEOUT_MS + 3_000);
    expect(new Set(got.map((req) => req.headers['x-service-delivery']))).toEqual(new Set([delivery!.eventId]));
    expect(r.received).toHaveLength(3);
  });

  it('a connection reset is a failed attempt (lastError "connection failed: …"); a hang before it is retried', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('reset');
    r.plan('/reset', ['hang', 500, 'reset']);
    const hook = await subscribe(ctx, loose, `${r.url}/reset`, name);
    await insert(ctx, loose, name);
    const got = await r.waitFor('/reset', 3, 10_000);
    const [delivery] = await settled(ctx, loose, hook, 1, ['dead_letter']);
    expect(delivery).toMatchObject({ status: 'dead_letter', httpStatus: null, attempts: 3 });
    expect(delivery!.lastError).toMatch(/^connection failed: /);
    // the first attempt hung: the second came only after the timeout and the retry delay
    expect(got[1]!.at - got[0]!.at).toBeGreaterThanOrEqual(TIMEOUT_MS + RETRY_DELAYS[1]! - 50);
    expect(r.received).toHaveLength(3);
  });
});

describe.concurrent('pausing a subscription with a delivery in retry', () => {
  it('the delivery waits (its retry sends nothing) and goes on when the subscription is resumed', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const name = tag('pause');
    r.plan('/pause', ['hang']);
    const hook = await subscribe(ctx, loose, `${r.url}/pause`, name);
    await insert(ctx, loose, name);
    await r.waitFor('/pause', 1);
    // pause while the first attempt hangs
    const paused = await manage(loose, 'PATCH', `/${hook}`, { active: false });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body.active).toBe(false);
    // the attempt times out and its retry job runs (after retryDelaysMs[1]) but finds the subscription paused
    const [waiting] = await settled(ctx, loose, hook, 1, ['retrying'], 5_000);
    await expect.poll(() => queuedJobs(loose, waiting!.id), { timeout: 5_000, interval: 20 }).toBe(0);
    const still = await history(loose, hook);
    expect(still).toEqual([
      { ...waiting, lastError: expect.stringMatching(/within 1000 ms/), nextAttemptAt: expect.stringMatching(ISO) },
    ]);
    expect(still[0]).toMatchObject({ status: 'retrying', attempts: 1, httpStatus: null });
    expect(r.received).toHaveLength(1);
    // resumed: the waiting delivery is sent again with the same event
    const resumed = await manage(loose, 'PATCH', `/${hook}`, { active: true });
    expect(resumed.status, resumed.text).toBe(200);
    const got = await r.waitFor('/pause', 2);
    expect(got[1]!.headers['x-service-delivery']).toBe(waiting!.eventId);
    expect(got[1]!.raw).toBe(got[0]!.raw);
    const [done] = await settled(ctx, loose, hook, 1, ['delivered']);
    expect(done).toMatchObject({ id: waiting!.id, status: 'delivered', attempts: 2, httpStatus: 200, lastError: null });
  });
});

interface CircuitRow {
  consecutive_failures: number;
  open_until: Date | null;
  trial_until: Date | null;
}

async function circuitOf(t: TestServer, origin: string): Promise<CircuitRow | undefined> {
  const rows = await t.db.query<CircuitRow>(
    `SELECT consecutive_failures, open_until, trial_until FROM svcgen.webhook_circuits WHERE environment = 'master' AND endpoint = $1`,
    [origin],
  );
  return rows[0];
}

describe.concurrent('circuit breaker (failureThreshold 3, cooldown 4 s)', { timeout: 60_000 }, () => {
  it('opens after 3 failures: deliveries wait deferred without using attempts and nothing is sent; one trial at a time; a success delivers all', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const origin = r.url;
    const name = tag('circuit');
    r.always('/c', 500);
    const hook = await subscribe(ctx, circuit, `${r.url}/c`, name);

    // 1. three consecutive failures of one delivery open the circuit
    await insert(ctx, circuit, name);
    const failures = await r.waitFor('/c', 3);
    await expect
      .poll(async () => (await circuitOf(circuit, origin))?.open_until ?? null, { timeout: 5_000, interval: 20 })
      .not.toBeNull();
    const opened = (await circuitOf(circuit, origin))!;
    expect(opened.consecutive_failures).toBe(3);
    expect(opened.trial_until).toBeNull();
    const firstOpen = opened.open_until!.getTime();
    expect(firstOpen - failures[2]!.at).toBeGreaterThan(COOLDOWN_MS - 200);
    expect(firstOpen - failures[2]!.at).toBeLessThanOrEqual(COOLDOWN_MS + 1_000); // the outcome is recorded after the request arrived

    // 2. the delivery that still has attempts waits deferred with its attempts unchanged; new ones too, with 0
    await expect
      .poll(async () => (await history(circuit, hook)).map((d) => [d.status, d.attempts]), {
        timeout: 3_000,
        interval: 20,
      })
      .toEqual([['deferred', 3]]);
    await insert(ctx, circuit, name);
    await insert(ctx, circuit, name);
    await expect
      .poll(async () => (await history(circuit, hook)).map((d) => [d.status, d.attempts]), {
        timeout: 3_000,
        interval: 20,
      })
      .toEqual([
        ['deferred', 0],
        ['deferred', 0],
        ['deferred', 3],
      ]);
    const deferred = await history(circuit, hook);
    for (const d of deferred) expect(Date.parse(d.nextAttemptAt!)).toBe(firstOpen);
    expect(deferred.map((d) => d.httpStatus)).toEqual([null, null, 500]);
    // (the test itself must have got here within the cooldown for the checks above to mean anything)
    expect(Date.now()).toBeLessThan(firstOpen);
    expect(r.received).toHaveLength(3);

    // 3. after the cooldown one trial goes out; it fails → the circuit opens again
    r.plan('/c', [500]);
    r.always('/c', 200);
    const trial = (await r.waitFor('/c', 4, COOLDOWN_MS + 5_000))[3]!;
    expect(trial.at).toBeGreaterThanOrEqual(firstOpen - 2);
    await expect
      .poll(async () => (await circuitOf(circuit, origin))?.open_until?.getTime() ?? 0, {
        timeout: 3_000,
        interval: 20,
      })
      .toBeGreaterThan(firstOpen);
    const reopened = (await circuitOf(circuit, origin))!;
    expect(reopened.consecutive_failures).toBe(4);
    const secondOpen = reopened.open_until!.getTime();
    expect(secondOpen - trial.at).toBeGreaterThan(COOLDOWN_MS - 200);

    // 4. after the second cooldown a trial succeeds, the circuit closes and every deferred delivery is delivered
    // (40 s: on a loaded CI machine a delivery job that errors once waits graphile-worker's backoff)
    const all = await settled(ctx, circuit, hook, 3, ['delivered'], 40_000);
    expect(all.map((d) => [d.status, d.httpStatus, d.lastError])).toEqual(Array(3).fill(['delivered', 200, null]));
    // attempts: 3 failures + 1 failed trial + 3 successes, none spent while deferred
    expect(all.reduce((sum, d) => sum + d.attempts, 0)).toBe(7);
    expect(r.received).toHaveLength(7);
    // only the one trial reached the receiver during the first reopening; nothing during either cooldown
    const at = r.received.map((req) => req.at);
    expect(at.filter((x) => x > failures[2]!.at && x < firstOpen - 2)).toEqual([]);
    expect(at.filter((x) => x >= firstOpen - 2 && x < secondOpen - 2)).toEqual([trial.at]);
    expect(r.received.slice(4).every((req) => req.at >= secondOpen - 2)).toBe(true);
    expect(new Set(r.received.slice(4).map((req) => req.body.id))).toEqual(new Set(all.map((d) => d.eventId)));
    expect(await circuitOf(circuit, origin)).toEqual({ consecutive_failures: 0, open_until: null, trial_until: null });
  });

  // Two deferred deliveries wait far beyond the cooldown (their jobs an hour out), so only the
  // wake of a closing circuit can send them promptly.
  it('a successful trial closes the circuit and wakes the deferred deliveries at once', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    const origin = r.url;
    const name = tag('wake');
    r.always('/w', 500);
    const hook = await subscribe(ctx, circuit, `${r.url}/w`, name);
    await insert(ctx, circuit, name);
    await r.waitFor('/w', 3);
    await expect
      .poll(async () => (await circuitOf(circuit, origin))?.open_until ?? null, { timeout: 5_000, interval: 20 })
      .not.toBeNull();
    const open = (await circuitOf(circuit, origin))!.open_until!.getTime();
    await insert(ctx, circuit, name);
    await insert(ctx, circuit, name);
    await expect
      .poll(async () => (await history(circuit, hook)).map((d) => [d.status, d.attempts]), {
        timeout: 3_000,
        interval: 20,
      })
      .toEqual([
        ['deferred', 0],
        ['deferred', 0],
        ['deferred', 3],
      ]);
    const later = (await history(circuit, hook)).filter((d) => d.attempts === 0).map((d) => d.id);
    // their next attempt an hour away, in the delivery row and in its job (graphile-worker's add_job replaces by key)
    await circuit.db.query(
      `WITH moved AS (UPDATE svcgen.webhook_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE id = ANY($1::text[]) RETURNING id)
       SELECT svcgen_worker.add_job('svcgen_webhook_delivery', json_build_object('id', id), run_at => now() + interval '1 hour', max_attempts => 25, job_key => id)
       FROM moved`,
      [later],
    );
    expect(Date.now()).toBeLessThan(open);
    r.always('/w', 200);
    const trial = (await r.waitFor('/w', 4, COOLDOWN_MS + 5_000))[3]!;
    expect(trial.at).toBeGreaterThanOrEqual(open - 2);
    // the trial's success closes the circuit ...
    await expect
      .poll(async () => (await circuitOf(circuit, origin))?.consecutive_failures, { timeout: 2_000, interval: 20 })
      .toBe(0);
    // ... and wakes the two others, which go out right after it
    await r.waitFor('/w', 6, 2_000);
    const all = await settled(ctx, circuit, hook, 3, ['delivered'], 2_000);
    expect(all.map((d) => d.attempts).sort()).toEqual([1, 1, 4]);
  });
});

describe.concurrent('address policy at delivery time (allowHttp true, allowPrivateTargets false)', () => {
  it('a subscription cannot be created on loopback', async (ctx) => {
    const { expect } = ctx;
    const r = await receiver(ctx);
    for (const url of [`${r.url}/x`, `http://localhost:${new URL(r.url).port}/x`]) {
      const res = await manage(strict, 'POST', '', {
        projectId: 'shop',
        environment: 'master',
        table: 'Customer',
        events: ['INSERT'],
        url,
        secret: 's',
      });
      expect(res.status, res.text).toBe(422);
      expect(res.body.type).toBe('/errors/validation');
      expect(res.body.errors).toEqual([{ field: 'url', rule: 'target', message: expect.stringContaining('loopback') }]);
    }
  });

  it.for([
    ['an IP literal', (port: string) => `http://127.0.0.1:${port}/x`],
    ['a name that resolves to loopback', (port: string) => `http://localhost:${port}/x`],
  ] as const)(
    'a target changed to %s after creation is refused without any request; dead_letter',
    async ([, target], ctx) => {
      const { expect } = ctx;
      const r = await receiver(ctx);
      const name = tag('ssrf');
      const hook = await subscribe(ctx, strict, 'http://8.8.8.8/hooks', name);
      // simulate DNS rebinding / a target changed behind the API's back
      const changed = await strict.db.query(`UPDATE svcgen.webhooks SET url = $2 WHERE id = $1 RETURNING id`, [
        hook,
        target(new URL(r.url).port),
      ]);
      expect(changed).toHaveLength(1);
      await insert(ctx, strict, name);
      const [delivery] = await settled(ctx, strict, hook, 1, ['dead_letter']);
      expect(delivery).toMatchObject({ status: 'dead_letter', httpStatus: null, attempts: RETRY_DELAYS.length });
      expect(delivery!.lastError).toMatch(/^target refused/);
      expect(delivery!.lastError).toContain('loopback');
      expect(r.received).toEqual([]);
      // a refused target says nothing about the endpoint's health: no circuit state for it
      expect(await circuitOf(strict, 'http://8.8.8.8')).toBeUndefined();
    },
  );
});
