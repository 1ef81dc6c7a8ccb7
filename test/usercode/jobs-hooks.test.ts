/**
 * Jobs queued by a table hook (docs/own-code.md "Jobs"): in the write's transaction, so a write
 * that commits runs its job once and one that a hook fails after queueing never does; a payload
 * the job refuses fails the write like any throw of the code, without leaking the message.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCode, defineJob } from '../../examples/shop/generated/code.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const BASE = '/gw/api/rest';
const logs: string[] = [];

const receipt = defineJob({
  name: 'receipt',
  payload: z.object({ orderId: z.number().int(), customerId: z.string() }),
  async run({ orderId, customerId }, ctx) {
    await ctx.sql`INSERT INTO public.receipts (order_id, customer_id, environment) VALUES (${orderId}, ${customerId}, ${ctx.environment})`;
  },
});

const code = defineCode({
  jobs: [receipt],
  hooks: {
    Order: {
      async afterWrite({ action, record, ctx }) {
        if (action !== 'create' || !record) return;
        if (record.note === 'bad-payload')
          await receipt.enqueue(ctx, { orderId: String(record.id) as never, customerId: record.customerId });
        else await receipt.enqueue(ctx, { orderId: record.id, customerId: record.customerId });
        if (record.note === 'fail-after') throw new Error('afterWrite failed after queueing');
      },
    },
  },
});

let t: TestServer;
let stagingKey: string;

beforeAll(async () => {
  t = await startTestServer({
    code,
    logging: { format: 'json', level: 'info', destination: { write: (line: string) => void logs.push(line) } },
  });
  stagingKey = (await t.createKey(['admin'], { environment: 'staging' })).key;
  await t.db.query('CREATE TABLE public.receipts (order_id int, customer_id uuid, environment text)');
}, 60_000);
afterAll(() => t?.close());

async function customer(environment = 'master'): Promise<string> {
  const res = await t.request('POST', `${BASE}/Customer`, {
    body: { email: `${randomUUID()}@example.com`, name: 'C' },
    environment,
    key: environment === 'staging' ? stagingKey : undefined,
  });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

const receipts = (customerId: string) =>
  t.db.query<{ order_id: number; environment: string }>(
    'SELECT order_id, environment FROM public.receipts WHERE customer_id = $1',
    [customerId],
  );

/** Jobs of `customerId` still in the queue (waiting, running or failed). */
const queued = (customerId: string) =>
  t.db.query(
    `SELECT 1 FROM svcgen_worker._private_jobs j JOIN svcgen_worker._private_tasks k ON k.id = j.task_id
     WHERE k.identifier = 'svcgen.code.receipt' AND j.payload->'payload'->>'customerId' = $1`,
    [customerId],
  );

describe('a job queued by a hook', () => {
  it('runs once when the write commits, in the environment of the request', async () => {
    const c = await customer('staging');
    const res = await t.request('POST', `${BASE}/Order`, {
      body: { total: 5, customerId: c },
      environment: 'staging',
      key: stagingKey,
    });
    expect(res.status, res.text).toBe(201);
    const rows = await until(
      () => receipts(c),
      (r) => r.length === 1,
      10_000,
      'the receipt job ran',
    );
    expect(rows).toEqual([{ order_id: res.body.data.id, environment: 'staging' }]);
    await until(
      () => queued(c),
      (r) => r.length === 0,
      10_000,
      'the job completed',
    );
    expect(await receipts(c)).toHaveLength(1);
  });

  it('is never queued when a hook fails the write after queueing it', async () => {
    const c = await customer();
    const res = await t.request('POST', `${BASE}/Order`, {
      body: { total: 5, customerId: c, note: 'fail-after' },
      headers: { 'x-request-id': 'jobs-fail-after-1' },
    });
    expect(res.status, res.text).toBe(500);
    expect(await queued(c)).toEqual([]);
    // The same write that commits is queued and runs: the check above can fail.
    const ok = await t.request('POST', `${BASE}/Order`, { body: { total: 5, customerId: c } });
    expect(ok.status, ok.text).toBe(201);
    await until(
      () => receipts(c),
      (r) => r.length === 1,
      10_000,
      'the committed write queued its job',
    );
    expect((await receipts(c))[0]!.order_id).toBe(ok.body.data.id);
  });

  it('with a payload the job refuses fails the write: 500 with the request id, the message in the log only', async () => {
    const c = await customer();
    const res = await t.request('POST', `${BASE}/Order`, {
      body: { total: 5, customerId: c, note: 'bad-payload' },
      headers: { 'x-request-id': 'jobs-bad-payload-1' },
    });
    expect(res.status, res.text).toBe(500);
    expect(res.body).toMatchObject({ type: '/errors/internal', status: 500, requestId: 'jobs-bad-payload-1' });
    expect(res.text).not.toMatch(/JobPayloadError|orderId|expected number/);
    expect(
      logs.some(
        (l) =>
          l.includes('jobs-bad-payload-1') &&
          l.includes(
            "job receipt: the payload does not match the job's payload schema: orderId: Invalid input: expected number, received string",
          ),
      ),
    ).toBe(true);
    expect(await queued(c)).toEqual([]);
    const [{ n }] = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM env_master."Order" WHERE "customerId" = $1`,
      [c],
    );
    expect(n).toBe(0);
  });
});
