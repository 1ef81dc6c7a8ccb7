// What a webhook delivers (docs/api.md §8.2-§8.4: the payload, changed_fields, paused
// subscriptions; an event commits exactly when its mutation does): headers, signature, payload, and which row changes reach which subscription.
import { randomUUID } from 'node:crypto';
import { verify } from '@octokit/webhooks-methods';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type ReceivedDelivery, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
const PAYLOAD_KEYS = [
  'id',
  'timestamp',
  'project_id',
  'environment',
  'table',
  'event',
  'record',
  'data',
  'changed_fields',
];
/** The exact form Date#toISOString writes, which is what the API writes for DateTime. */
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let t: TestServer;
let receiver: Receiver;
let stagingKey: string;
/** Subscriptions made by the running test; removed after it so that later tests see only their own. */
const made: { id: string; environment: string }[] = [];

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestServer({
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0, 100, 100], timeoutMs: 1000 };
    },
  });
  stagingKey = (await t.createKey(['admin'], { environment: 'staging' })).key;
});
afterEach(async () => {
  for (const s of made.splice(0)) {
    const res = await manage('DELETE', `/${s.id}`, undefined, s.environment);
    expect(res.status, res.text).toBe(204);
  }
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

const manage = (method: string, path: string, body?: unknown, environment = 'master') =>
  t.request(method, `${BASE}/_webhooks${path}`, { body, key: MANAGEMENT_TOKEN, environment });

interface SubscriptionOptions {
  table?: string;
  events?: string[];
  filter?: Record<string, unknown>;
  select?: string[];
  secret?: string;
  environment?: string;
}

/** A subscription delivering to its own receiver path; returns its id and the path. */
async function subscribe(o: SubscriptionOptions = {}): Promise<{ id: string; path: string; secret: string }> {
  const path = `/hook-${randomUUID()}`;
  const environment = o.environment ?? 'master';
  const secret = o.secret ?? `secret-${randomUUID()}`;
  const body: Record<string, unknown> = {
    projectId: 'shop',
    environment,
    table: o.table ?? 'Customer',
    events: o.events ?? ['INSERT', 'UPDATE', 'DELETE'],
    url: `${receiver.url}${path}`,
    secret,
  };
  if (o.filter) body.filter = o.filter;
  if (o.select) body.select = o.select;
  const res = await manage('POST', '', body, environment);
  expect(res.status, res.text).toBe(201);
  made.push({ id: res.body.id, environment });
  return { id: res.body.id, path, secret };
}

const email = (tag: string) => `${tag}-${randomUUID()}@example.com`;

async function write(method: string, path: string, body?: unknown, environment?: string) {
  const res = await t.request(method, `${BASE}${path}`, {
    body,
    environment,
    key: environment === 'staging' ? stagingKey : undefined,
  });
  return res;
}

async function createCustomer(
  fields: Record<string, unknown> = {},
  environment?: string,
): Promise<Record<string, any>> {
  const res = await write('POST', '/Customer', { email: email('c'), name: 'C', ...fields }, environment);
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

/** Waits for a request at `path` that satisfies `match` (the receiver wakes on every arrival). */
async function arrival(
  path: string,
  match: (r: ReceivedDelivery) => boolean,
  timeoutMs = 10_000,
): Promise<ReceivedDelivery> {
  const deadline = Date.now() + timeoutMs;
  for (let n = 1; ; ) {
    const got = await receiver.waitFor(path, n, Math.max(1, deadline - Date.now()));
    const hit = got.find(match);
    if (hit) return hit;
    n = got.length + 1;
  }
}

const of = (event: string, id: unknown) => (r: ReceivedDelivery) =>
  r.body?.event === event && r.body?.record?.id === id;

/** What reached `path`, as "<event> <record id>" in arrival order. */
const seen = (path: string) => receiver.at(path).map((r) => `${r.body.event} ${r.body.record.id}`);

/** The deliveries recorded for a subscription, as "<event> <record id>" (sorted): the definitive list. */
async function recorded(webhookId: string): Promise<string[]> {
  const rows = await t.db.query<{ op: string; rid: string }>(
    `SELECT e.operation AS op, e.record->>'id' AS rid FROM svcgen.webhook_deliveries d JOIN svcgen.webhook_events e ON e.id = d.event_id
     WHERE d.webhook_id = $1`,
    [webhookId],
  );
  return rows.map((r) => `${r.op} ${r.rid}`).sort();
}

/** Event rows recorded for one row of a table (any subscription). */
async function eventRows(
  table: string,
  id: unknown,
): Promise<{ id: string; operation: string; changed_fields: string[] }[]> {
  return t.db.query(
    `SELECT id, operation, changed_fields FROM svcgen.webhook_events WHERE table_name = $1 AND record->>'id' = $2 ORDER BY created_at`,
    [table, String(id)],
  );
}

describe('INSERT delivery', () => {
  it('carries every header and payload field, signed with the subscription secret', async () => {
    const sub = await subscribe({ secret: 'insert-secret-1' });
    const before = Date.now();
    const created = await write('POST', '/Customer', { email: email('ins'), name: 'Ins', vip: true });
    const after = Date.now();
    expect(created.status, created.text).toBe(201);
    const record = created.body.data;
    const got = await arrival(sub.path, of('INSERT', record.id));

    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['x-service-event']).toBe('INSERT');
    expect(got.headers['x-service-delivery']).toBe(got.body.id);
    const prefixed = got.headers['x-service-signature'] as string;
    const bare = got.headers['x-webhook-signature'] as string;
    expect(prefixed).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(bare).toMatch(/^[0-9a-f]{64}$/);
    expect(prefixed).toBe(`sha256=${bare}`);
    // an independent HMAC implementation over the exact bytes received
    expect(await verify('insert-secret-1', got.raw, prefixed)).toBe(true);
    expect(await verify('insert-secret-2', got.raw, prefixed)).toBe(false);
    expect(await verify('insert-secret-1', `${got.raw} `, prefixed)).toBe(false);

    expect(Object.keys(got.body)).toEqual(PAYLOAD_KEYS);
    // compact JSON, members in the documented order
    expect(got.raw).toBe(JSON.stringify(got.body));
    expect(got.body.id).toMatch(/^evt_[0-9a-zA-Z]+$/);
    expect(got.body.timestamp).toMatch(ISO);
    const at = Date.parse(got.body.timestamp);
    expect(at).toBeGreaterThanOrEqual(before - 1_000);
    expect(at).toBeLessThanOrEqual(after + 1_000);
    expect(got.body.project_id).toBe('shop');
    expect(got.body.environment).toBe('master');
    expect(got.body.table).toBe('Customer');
    expect(got.body.event).toBe('INSERT');
    expect(Object.keys(record).sort()).toEqual(['cityId', 'createdAt', 'email', 'id', 'name', 'updatedAt', 'vip']);
    expect(got.body.record).toEqual(record);
    expect(got.body.data).toEqual(got.body.record);
    expect(got.body.changed_fields).toEqual([]);

    // the event row is the one delivered
    expect(await eventRows('Customer', record.id)).toEqual([
      { id: got.body.id, operation: 'INSERT', changed_fields: [] },
    ]);
  });

  it('Int keys, enums, floats, nulls and DateTime in the data API form (Order)', async () => {
    const customer = await createCustomer();
    const sub = await subscribe({ table: 'Order', events: ['INSERT'] });
    const res = await write('POST', '/Order', {
      total: 12.5,
      status: 'paid',
      placedAt: '2024-05-06T07:08:09.010Z',
      customerId: customer.id,
    });
    expect(res.status, res.text).toBe(201);
    const got = await arrival(sub.path, of('INSERT', res.body.data.id));
    expect(typeof got.body.record.id).toBe('number');
    expect(got.body.record).toEqual(res.body.data);
    expect(got.body.record).toMatchObject({
      total: 12.5,
      status: 'paid',
      note: null,
      placedAt: '2024-05-06T07:08:09.010Z',
      customerId: customer.id,
    });
    expect(got.body.table).toBe('Order');
  });
});

describe('UPDATE delivery', () => {
  it('changed_fields lists exactly the fields whose stored value changed; record is the after-image', async () => {
    const sub = await subscribe();
    const customer = await createCustomer({ name: 'Same', vip: false });
    await arrival(sub.path, of('INSERT', customer.id));

    // two fields sent, one keeps its value
    const one = await write('PATCH', `/Customer/${customer.id}`, { name: 'Same', vip: true });
    expect(one.status, one.text).toBe(200);
    expect(one.body.data.updatedAt).not.toBe(customer.updatedAt);
    const first = await arrival(sub.path, (r) => r.body.event === 'UPDATE' && r.body.record.id === customer.id);
    expect(first.headers['x-service-event']).toBe('UPDATE');
    expect(first.body.changed_fields).toEqual(['vip']);
    expect(first.body.record).toEqual(one.body.data);
    expect(first.body.record).toMatchObject({ name: 'Same', vip: true });
    expect(first.body.data).toEqual(first.body.record);

    // both fields change (order of the names is not specified: compare as a set)
    const two = await write('PATCH', `/Customer/${customer.id}`, { name: 'Other', cityId: null, vip: false });
    expect(two.status, two.text).toBe(200);
    const second = await arrival(sub.path, (r) => r.body.event === 'UPDATE' && r.body.record.name === 'Other');
    expect([...second.body.changed_fields].sort()).toEqual(['name', 'vip']);
    expect(second.body.record).toEqual(two.body.data);

    // nothing changes (the same values again): an UPDATE with no changed field; updatedAt is never listed
    const none = await write('PATCH', `/Customer/${customer.id}`, { name: 'Other', vip: false });
    expect(none.status, none.text).toBe(200);
    expect(none.body.data.updatedAt).not.toBe(two.body.data.updatedAt);
    const third = await arrival(
      sub.path,
      (r) => r.body.event === 'UPDATE' && r.body.record.updatedAt === none.body.data.updatedAt,
    );
    expect(third.body.changed_fields).toEqual([]);
    expect(third.body.record).toEqual(none.body.data);

    const rows = await eventRows('Customer', customer.id);
    expect(rows.map((r) => [r.operation, [...r.changed_fields].sort()])).toEqual([
      ['INSERT', []],
      ['UPDATE', ['vip']],
      ['UPDATE', ['name', 'vip']],
      ['UPDATE', []],
    ]);
    expect(new Set(rows.map((r) => r.id)).size).toBe(4);
    expect(seen(sub.path).filter((s) => s.endsWith(customer.id))).toHaveLength(4);
  });
});

describe('DELETE delivery', () => {
  it('record is the row as it was immediately before deletion; changed_fields []', async () => {
    const sub = await subscribe({ events: ['DELETE'] });
    const customer = await createCustomer({ name: 'Doomed' });
    const patched = await write('PATCH', `/Customer/${customer.id}`, { name: 'Renamed before delete', vip: true });
    expect(patched.status, patched.text).toBe(200);
    const removed = await write('DELETE', `/Customer/${customer.id}`);
    expect(removed.status, removed.text).toBe(204);
    const got = await arrival(sub.path, of('DELETE', customer.id));
    expect(got.headers['x-service-event']).toBe('DELETE');
    expect(got.body.record).toEqual(patched.body.data);
    expect(got.body.data).toEqual(patched.body.data);
    expect(got.body.changed_fields).toEqual([]);
    expect(await verify(sub.secret, got.raw, got.headers['x-service-signature'] as string)).toBe(true);
    // the subscription listens to DELETE only: nothing else was recorded or sent for it
    expect(await recorded(sub.id)).toEqual([`DELETE ${customer.id}`]);
    expect(seen(sub.path)).toEqual([`DELETE ${customer.id}`]);
  });
});

describe('filter and select', () => {
  it('Order filter status=paid delivers only matching rows; select trims record and data', async () => {
    const customer = await createCustomer();
    const sub = await subscribe({ table: 'Order', filter: { status: 'paid' }, select: ['id', 'status', 'total'] });
    const open = await write('POST', '/Order', { total: 1, status: 'open', customerId: customer.id });
    const paid = await write('POST', '/Order', { total: 2, status: 'paid', customerId: customer.id });
    expect([open.status, paid.status]).toEqual([201, 201]);
    const openId = open.body.data.id;
    const paidId = paid.body.data.id;

    const inserted = await arrival(sub.path, of('INSERT', paidId));
    expect(inserted.body.record).toEqual({ id: paidId, status: 'paid', total: 2 });
    expect(inserted.body.data).toEqual({ id: paidId, status: 'paid', total: 2 });
    expect(Object.keys(inserted.body)).toEqual(PAYLOAD_KEYS);

    // the open order becomes paid: its after-image matches
    const toPaid = await write('PATCH', `/Order/${openId}`, { status: 'paid', note: 'now paid' });
    expect(toPaid.status, toPaid.text).toBe(200);
    const updated = await arrival(sub.path, of('UPDATE', openId));
    expect(updated.body.record).toEqual({ id: openId, status: 'paid', total: 1 });
    expect([...updated.body.changed_fields].sort()).toEqual(['note', 'status']);

    // the paid order becomes shipped: its after-image does not match
    const shipped = await write('PATCH', `/Order/${paidId}`, { status: 'shipped' });
    expect(shipped.status, shipped.text).toBe(200);
    // barrier: a later matching write that is delivered
    const barrier = await write('POST', '/Order', { total: 3, status: 'paid', customerId: customer.id });
    await arrival(sub.path, of('INSERT', barrier.body.data.id));
    const expected = [`INSERT ${paidId}`, `UPDATE ${openId}`, `INSERT ${barrier.body.data.id}`];
    expect(await recorded(sub.id)).toEqual([...expected].sort());
    expect([...seen(sub.path)].sort()).toEqual([...expected].sort());
    // the unmatched row changes recorded no event at all (no other subscription on Order)
    expect((await eventRows('Order', openId)).map((r) => r.operation)).toEqual(['UPDATE']);
    expect((await eventRows('Order', paidId)).map((r) => r.operation)).toEqual(['INSERT']);
  });

  it('Customer filter vip=true with select ["email"]', async () => {
    const sub = await subscribe({ filter: { vip: true }, select: ['email'], events: ['INSERT'] });
    const plain = await createCustomer({ vip: false });
    const vip = await createCustomer({ vip: true });
    const got = await receiver.waitFor(sub.path, 1);
    expect(got[0]!.body.record).toEqual({ email: vip.email });
    expect(got[0]!.body.data).toEqual({ email: vip.email });
    const barrier = await createCustomer({ vip: true });
    await arrival(sub.path, (r) => r.body.record.email === barrier.email);
    expect(
      receiver
        .at(sub.path)
        .map((r) => r.body.record.email)
        .sort(),
    ).toEqual([vip.email, barrier.email].sort());
    expect(await eventRows('Customer', plain.id)).toEqual([]);
  });
});

describe('several subscriptions', () => {
  it('each gets its own copy with the same event id; one whose events exclude UPDATE gets no UPDATE; one event row per change', async () => {
    const all = await subscribe({ secret: 'secret-all' });
    const noUpdate = await subscribe({ events: ['INSERT', 'DELETE'], secret: 'secret-no-update' });
    const customer = await createCustomer();
    const a = await arrival(all.path, of('INSERT', customer.id));
    const b = await arrival(noUpdate.path, of('INSERT', customer.id));
    expect(a.body.id).toBe(b.body.id);
    expect(a.headers['x-service-delivery']).toBe(b.headers['x-service-delivery']);
    expect(a.raw).toBe(b.raw);
    // same bytes, different secrets: each signature verifies only with its own subscription's secret
    expect(await verify('secret-all', a.raw, a.headers['x-service-signature'] as string)).toBe(true);
    expect(await verify('secret-no-update', b.raw, b.headers['x-service-signature'] as string)).toBe(true);
    expect(await verify('secret-all', b.raw, b.headers['x-service-signature'] as string)).toBe(false);

    const patched = await write('PATCH', `/Customer/${customer.id}`, { name: 'Twice' });
    expect(patched.status).toBe(200);
    await arrival(all.path, of('UPDATE', customer.id));
    const removed = await write('DELETE', `/Customer/${customer.id}`);
    expect(removed.status, removed.text).toBe(204);
    const da = await arrival(all.path, of('DELETE', customer.id));
    const db = await arrival(noUpdate.path, of('DELETE', customer.id)); // the barrier for noUpdate
    expect(da.body.id).toBe(db.body.id);

    expect(seen(noUpdate.path)).toEqual([`INSERT ${customer.id}`, `DELETE ${customer.id}`]);
    expect(await recorded(noUpdate.id)).toEqual([`DELETE ${customer.id}`, `INSERT ${customer.id}`]);
    expect(await recorded(all.id)).toEqual([`DELETE ${customer.id}`, `INSERT ${customer.id}`, `UPDATE ${customer.id}`]);
    // exactly one event row per row change, shared by both subscriptions' deliveries
    const rows = await eventRows('Customer', customer.id);
    expect(rows.map((r) => r.operation)).toEqual(['INSERT', 'UPDATE', 'DELETE']);
    expect(rows.map((r) => r.id)).toEqual([a.body.id, expect.stringMatching(/^evt_/), da.body.id]);
    const [{ n }] = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM svcgen.webhook_deliveries WHERE event_id = ANY($1::text[])`,
      [rows.map((r) => r.id)],
    );
    expect(n).toBe(5);
  });
});

describe('paused subscription', () => {
  it('gets nothing for events during the pause; after resuming it gets later events', async () => {
    const sub = await subscribe({ events: ['INSERT'] });
    const paused = await manage('PATCH', `/${sub.id}`, { active: false });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.body.active).toBe(false);
    const during = await createCustomer();
    const resumed = await manage('PATCH', `/${sub.id}`, { active: true });
    expect(resumed.status, resumed.text).toBe(200);
    expect(resumed.body.active).toBe(true);
    const afterwards = await createCustomer();
    await arrival(sub.path, of('INSERT', afterwards.id));
    expect(seen(sub.path)).toEqual([`INSERT ${afterwards.id}`]);
    expect(await recorded(sub.id)).toEqual([`INSERT ${afterwards.id}`]);
    // no other subscription was active: the write during the pause recorded no event at all
    expect(await eventRows('Customer', during.id)).toEqual([]);
  });
});

describe('bulk writes and update by filter', () => {
  it('a rolled-back ALL_OR_NOTHING bulk create emits nothing', async () => {
    const existing = await createCustomer();
    const sub = await subscribe({ events: ['INSERT'] });
    const fresh = { email: email('aon'), name: 'AON' };
    const res = await write('POST', '/Customer/_bulk', { items: [fresh, { email: existing.email, name: 'Dup' }] });
    expect(res.status, res.text).toBe(422);
    expect(res.body.data).toMatchObject({
      success: false,
      transactionMode: 'ALL_OR_NOTHING',
      totalSucceeded: 0,
      items: [],
    });
    const [{ n }] = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM env_master."Customer" WHERE email = $1`,
      [fresh.email],
    );
    expect(n).toBe(0);
    const barrier = await createCustomer();
    await arrival(sub.path, of('INSERT', barrier.id));
    expect(seen(sub.path)).toEqual([`INSERT ${barrier.id}`]);
    expect(await recorded(sub.id)).toEqual([`INSERT ${barrier.id}`]);
    const [{ m }] = await t.db.query<{ m: number }>(
      `SELECT count(*)::int AS m FROM svcgen.webhook_events WHERE table_name = 'Customer' AND record->>'email' = ANY($1::text[])`,
      [[fresh.email, existing.email]],
    );
    expect(m).toBe(0);
  });

  it('BEST_EFFORT bulk create with one failing item emits exactly the succeeded rows', async () => {
    const existing = await createCustomer();
    const sub = await subscribe({ events: ['INSERT'] });
    const items = [
      { email: email('be1'), name: 'BE' },
      { email: existing.email, name: 'Dup' },
      { email: email('be2'), name: 'BE' },
    ];
    const res = await write('POST', '/Customer/_bulk', { items, transactionMode: 'BEST_EFFORT' });
    expect(res.status, res.text).toBe(207);
    expect(res.body.data).toMatchObject({
      success: false,
      transactionMode: 'BEST_EFFORT',
      totalSucceeded: 2,
      totalFailed: 1,
    });
    const ids: string[] = res.body.data.items.map((i: { id: string }) => i.id);
    expect(ids).toHaveLength(2);
    const got = await receiver.waitFor(sub.path, 2);
    const barrier = await createCustomer();
    await arrival(sub.path, of('INSERT', barrier.id));
    expect(
      got
        .slice(0, 2)
        .map((r) => r.body.record.email)
        .sort(),
    ).toEqual([items[0]!.email, items[2]!.email].sort());
    expect([...seen(sub.path)].sort()).toEqual([...ids, barrier.id].map((id) => `INSERT ${id}`).sort());
    expect(await recorded(sub.id)).toEqual([...ids, barrier.id].map((id) => `INSERT ${id}`).sort());
    const [{ m }] = await t.db.query<{ m: number }>(
      `SELECT count(*)::int AS m FROM svcgen.webhook_events WHERE table_name = 'Customer' AND record->>'email' = $1`,
      [existing.email],
    );
    expect(m).toBe(0);
  });

  it('bulk create of 3 → 3 INSERT events with the created records', async () => {
    const sub = await subscribe({ events: ['INSERT'] });
    const items = [0, 1, 2].map((i) => ({ email: email(`bulk${i}`), name: `Bulk ${i}`, vip: i === 1 }));
    const res = await write('POST', '/Customer/_bulk', { items });
    expect(res.status, res.text).toBe(201);
    const ids: string[] = res.body.data.items.map((i: { id: string }) => i.id);
    const got = await receiver.waitFor(sub.path, 3);
    for (const [i, id] of ids.entries()) {
      const one = got.find((r) => r.body.record.id === id)!;
      expect(one.body.event).toBe('INSERT');
      expect(one.body.changed_fields).toEqual([]);
      const read = await write('GET', `/Customer/${id}`);
      expect(one.body.record).toEqual(read.body.data);
      expect(one.body.record).toMatchObject(items[i]!);
    }
    expect(new Set(got.map((r) => r.body.id)).size).toBe(3);
    expect(await recorded(sub.id)).toEqual(ids.map((id) => `INSERT ${id}`).sort());
  });

  it('bulk create of 100 → one event each, queued in item order in one outbox row, each payload the record as read', async () => {
    const sub = await subscribe({ events: ['INSERT'] });
    // What the outbox receives, in the order it receives it: the queue's order of first attempts.
    await t.db.query(`CREATE TABLE public.outbox_seen (seq bigint, event_ids text[], webhook_ids text[])`);
    await t.db.query(`CREATE FUNCTION public.outbox_seen() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO public.outbox_seen VALUES (NEW.seq, NEW.event_ids, NEW.webhook_ids); RETURN NEW; END $$`);
    await t.db.query(
      `CREATE TRIGGER outbox_seen AFTER INSERT ON svcgen.webhook_event_outbox FOR EACH ROW EXECUTE FUNCTION public.outbox_seen()`,
    );
    try {
      const items = Array.from({ length: 100 }, (_, i) => ({
        email: email(`b${i}`),
        name: `Bulk ${i}`,
        vip: i % 7 === 0,
      }));
      const res = await write('POST', '/Customer/_bulk', { items });
      expect(res.status, res.text).toBe(201);
      const ids: string[] = res.body.data.items.map((i: { id: string }) => i.id);
      // The statement wrote one outbox row listing its 100 (event, subscription) pairs.
      expect(
        await t.db.query(
          `SELECT cardinality(event_ids) AS n, array_agg(DISTINCT w) AS hooks FROM public.outbox_seen, unnest(webhook_ids) w GROUP BY 1`,
        ),
      ).toEqual([{ n: 100, hooks: [sub.id] }]);
      const queued = await t.db.query<{ rid: string }>(
        `SELECT e.record->>'id' AS rid FROM public.outbox_seen o, unnest(o.event_ids) WITH ORDINALITY AS q(id, nth)
         JOIN svcgen.webhook_events e ON e.id = q.id ORDER BY o.seq, q.nth`,
      );
      expect(queued.map((r) => r.rid)).toEqual(ids);
      // Delivery is at least once: on a loaded machine an attempt can outlast the 1 s timeout and be
      // sent again, so the receiver may see an event twice. One delivery row per event (recorded(),
      // below) is what says each event was queued once.
      let received = await receiver.waitFor(sub.path, 100);
      while (new Set(received.map((r) => r.body.id)).size < 100)
        received = await receiver.waitFor(sub.path, received.length + 1);
      const got = [...new Map(received.map((r) => [r.body.id as string, r])).values()];
      expect(got).toHaveLength(100);
      expect(got.map((r) => r.body.record.id).sort()).toEqual([...ids].sort());
      const read = await write('GET', `/Customer?id=in.(${ids.join(',')})&limit=100`);
      const byId = new Map(read.body.data.map((r: { id: string }) => [r.id, r]));
      for (const r of got) {
        expect(r.body.event).toBe('INSERT');
        expect(r.body.changed_fields).toEqual([]);
        expect(r.body.record).toEqual(byId.get(r.body.record.id));
      }
      expect(await recorded(sub.id)).toEqual(ids.map((id) => `INSERT ${id}`).sort());
    } finally {
      await t.db.query(`DROP TRIGGER outbox_seen ON svcgen.webhook_event_outbox`);
      await t.db.query(`DROP FUNCTION public.outbox_seen() CASCADE`);
      await t.db.query(`DROP TABLE public.outbox_seen`);
    }
  });

  it('bulk delete of 2 → 2 DELETE events with the pre-images', async () => {
    const a = await createCustomer({ name: 'BD-a' });
    const b = await createCustomer({ name: 'BD-b', vip: true });
    const pa = await write('PATCH', `/Customer/${a.id}`, { name: 'BD-a changed' });
    expect(pa.status).toBe(200);
    const sub = await subscribe({ events: ['DELETE'] });
    const res = await write('DELETE', '/Customer/_bulk', { ids: [a.id, b.id] });
    expect(res.status, res.text).toBe(200);
    const got = await receiver.waitFor(sub.path, 2);
    const byId = new Map(got.map((r) => [r.body.record.id, r.body]));
    expect(byId.get(a.id)).toMatchObject({
      event: 'DELETE',
      record: pa.body.data,
      data: pa.body.data,
      changed_fields: [],
    });
    expect(byId.get(b.id)).toMatchObject({ event: 'DELETE', record: b, data: b, changed_fields: [] });
    expect(byId.get(a.id)!.record).toEqual(pa.body.data);
    expect(byId.get(b.id)!.record).toEqual(b);
    expect(await recorded(sub.id)).toEqual([`DELETE ${a.id}`, `DELETE ${b.id}`].sort());
  });

  it('update by filter of 3 rows → 3 UPDATE events with the after-images', async () => {
    const name = `UBF-${randomUUID()}`;
    const rows = [
      await createCustomer({ name }),
      await createCustomer({ name }),
      await createCustomer({ name, vip: true }),
    ];
    const other = await createCustomer({ name: `${name}-other` });
    const sub = await subscribe({ events: ['UPDATE'] });
    const res = await write('PATCH', `/Customer?name=equals.${name}`, { vip: true });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 3 } });
    const got = await receiver.waitFor(sub.path, 3);
    for (const row of rows) {
      const one = got.find((r) => r.body.record.id === row.id)!;
      const read = await write('GET', `/Customer/${row.id}`);
      expect(one.body.event).toBe('UPDATE');
      expect(one.body.record).toEqual(read.body.data);
      expect(one.body.record.vip).toBe(true);
      // the third row was vip already: nothing of it changed
      expect(one.body.changed_fields).toEqual(row.vip ? [] : ['vip']);
    }
    const barrier = await write('PATCH', `/Customer/${other.id}`, { vip: true });
    expect(barrier.status).toBe(200);
    await arrival(sub.path, of('UPDATE', other.id));
    expect(await recorded(sub.id)).toEqual([...rows, other].map((r) => `UPDATE ${r.id}`).sort());
    expect(receiver.at(sub.path)).toHaveLength(4);
  });
});

describe('environments', () => {
  it('a subscription in staging gets nothing from writes in master, and vice versa', async () => {
    const inMaster = await subscribe({ events: ['INSERT'] });
    const inStaging = await subscribe({ events: ['INSERT'], environment: 'staging' });
    const listed = await manage('GET', '', undefined, 'staging');
    expect(listed.body.data.map((s: { id: string }) => s.id)).toEqual([inStaging.id]);

    const m = await createCustomer({}, 'master');
    const s = await createCustomer({}, 'staging');
    const gotM = await arrival(inMaster.path, of('INSERT', m.id));
    const gotS = await arrival(inStaging.path, of('INSERT', s.id));
    expect(gotM.body.environment).toBe('master');
    expect(gotS.body.environment).toBe('staging');
    expect(gotS.body.record).toEqual(s);
    // barriers: a second write in each environment, delivered to its own subscription
    const m2 = await createCustomer({}, 'master');
    const s2 = await createCustomer({}, 'staging');
    await arrival(inMaster.path, of('INSERT', m2.id));
    await arrival(inStaging.path, of('INSERT', s2.id));
    expect(seen(inMaster.path)).toEqual([`INSERT ${m.id}`, `INSERT ${m2.id}`]);
    expect(seen(inStaging.path)).toEqual([`INSERT ${s.id}`, `INSERT ${s2.id}`]);
    expect(await recorded(inMaster.id)).toEqual([m.id, m2.id].map((id) => `INSERT ${id}`).sort());
    expect(await recorded(inStaging.id)).toEqual([s.id, s2.id].map((id) => `INSERT ${id}`).sort());
    const events = await t.db.query<{ environment: string; rid: string }>(
      `SELECT environment, record->>'id' AS rid FROM svcgen.webhook_events WHERE record->>'id' = ANY($1::text[]) ORDER BY created_at`,
      [[m.id, s.id]],
    );
    expect(events).toEqual([
      { environment: 'master', rid: m.id },
      { environment: 'staging', rid: s.id },
    ]);
    // the other environment's subscription is unknown here
    const cross = await manage('GET', `/${inStaging.id}`, undefined, 'master');
    expect(cross.status).toBe(404);
  });
});

describe('delivery history', () => {
  it('GET /_webhooks/{id} lists deliveries newest first: delivered, httpStatus 200, attempts 1, matching event ids', async () => {
    const sub = await subscribe({ events: ['INSERT', 'UPDATE'] });
    const first = await createCustomer();
    const second = await createCustomer();
    const patched = await write('PATCH', `/Customer/${first.id}`, { name: 'History' });
    expect(patched.status).toBe(200);
    const got = await receiver.waitFor(sub.path, 3);
    const eventOf = (event: string, id: string) => got.find(of(event, id))!.body.id as string;
    const expectedOrder = [eventOf('UPDATE', first.id), eventOf('INSERT', second.id), eventOf('INSERT', first.id)];
    await expect
      .poll(async () => (await manage('GET', `/${sub.id}`)).body.deliveries.map((d: { status: string }) => d.status), {
        timeout: 10_000,
      })
      .toEqual(['delivered', 'delivered', 'delivered']);
    const detail = await manage('GET', `/${sub.id}`);
    expect(detail.status).toBe(200);
    expect(detail.body.webhook).toMatchObject({
      id: sub.id,
      table: 'Customer',
      events: ['INSERT', 'UPDATE'],
      active: true,
    });
    expect(detail.body.webhook).not.toHaveProperty('secret');
    expect(detail.body.deliveries.map((d: { eventId: string }) => d.eventId)).toEqual(expectedOrder);
    expect(detail.body.deliveries.map((d: { event: string }) => d.event)).toEqual(['UPDATE', 'INSERT', 'INSERT']);
    for (const d of detail.body.deliveries) {
      expect(d).toEqual({
        id: expect.stringMatching(/^del_/),
        eventId: expect.stringMatching(/^evt_/),
        event: expect.any(String),
        status: 'delivered',
        httpStatus: 200,
        attempts: 1,
        lastError: null,
        nextAttemptAt: null,
        createdAt: expect.stringMatching(ISO),
        updatedAt: expect.stringMatching(ISO),
      });
    }
    const created = detail.body.deliveries.map((d: { createdAt: string }) => Date.parse(d.createdAt));
    expect([...created].sort((x, y) => y - x)).toEqual(created);
  });
});
