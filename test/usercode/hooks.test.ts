// Table hooks (docs/own-code.md "Hooks") through real HTTP on every path that writes a table: REST
// single, bulk (both modes) and by filter, GraphQL create/update/delete/updateWhere/deleteWhere. The
// shop's Order stamps placedAt when it becomes paid and refuses paid → open; afterWrite writes an
// audit row in the write's transaction; afterCommit records what committed.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { defineCode, refuse } from '../../examples/shop/generated/code.ts';
import { expectProblem, MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';
import { until, waitingForLock } from '../support/until.ts';

const BASE = '/gw/api/rest';

/** What the before hooks saw, in call order. */
const calls: { hook: string; id?: unknown; input?: Record<string, unknown>; previous?: Record<string, unknown> }[] = [];
/** What afterCommit saw, as `<action> <id>`. */
const committed: string[] = [];
const logs: string[] = [];
/** A hook waiting on this (note "hang") runs until the test releases it. */
let release: (() => void) | undefined;
let released: Promise<void> = Promise.resolve();
/** What a hung hook's SQL did once released: 'ran' or the error's message. */
let lateSql: string | undefined;

const code = defineCode({
  hooks: {
    Order: {
      async beforeCreate({ input, ctx }) {
        calls.push({ hook: 'beforeCreate', input: { ...input } });
        if (input.note === 'refuse-create') throw refuse({ note: 'this note is refused' });
        if (input.note === 'boom') throw new Error('internal detail: SELECT secret FROM vault');
        if (input.note === 'hang') {
          await released;
          try {
            await ctx.sql`SELECT 1`;
            lateSql = 'ran';
          } catch (error) {
            lateSql = (error as Error).message;
          }
        }
        return input.status === 'paid' ? { ...input, placedAt: '2030-01-02T03:04:05.000Z' } : input;
      },
      async beforeUpdate({ input, previous }) {
        calls.push({ hook: 'beforeUpdate', id: previous.id, input: { ...input }, previous: { ...previous } });
        if (input.note === 'block') await released;
        if (input.note === 'hook-pays') return { ...input, status: 'paid' };
        if (previous.status === 'paid' && input.status === 'open')
          throw refuse({ status: 'a paid order cannot reopen' });
        if (input.status === 'paid' && previous.status !== 'paid')
          return { ...input, placedAt: '2030-01-02T03:04:05.000Z' };
        return undefined;
      },
      beforeDelete({ previous }) {
        calls.push({ hook: 'beforeDelete', id: previous.id, previous: { ...previous } });
        if (previous.note === 'keep') throw refuse({ id: 'this order is kept' });
      },
      async afterWrite({ action, record, previous, ctx }) {
        const row = (record ?? previous)!;
        await ctx.sql`INSERT INTO public.hook_log (action, order_id, customer_id, status, previous_status, placed_at, note, caller)
          VALUES (${action}, ${row.id}, ${row.customerId}, ${record?.status ?? null}, ${previous?.status ?? null},
                  ${record?.placedAt ?? null}, ${row.note ?? null}, ${ctx.caller.kind})`;
        if (row.note === 'refuse-after') throw refuse({ note: 'refused after the write' });
        if (row.note === 'fail-after') throw new Error('afterWrite failed: password=hunter2');
      },
      async afterCommit({ action, record, previous }) {
        const row = (record ?? previous)!;
        committed.push(`${action} ${row.id}`);
        if (row.note === 'hang-commit') await released;
        if (row.note === 'fail-commit') throw new Error('afterCommit failed');
      },
    },
  },
});

let t: TestServer;
let clerk: string;
let openOnly: string;

beforeAll(async () => {
  t = await startTestServer({
    code,
    logging: { format: 'json', level: 'info', destination: { write: (line: string) => void logs.push(line) } },
    configPatch: (raw) => {
      raw.code = { hookTimeoutMs: 1500 };
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true };
      // May not write placedAt (the hook stamps it), nor read note (the hook sees it anyway).
      raw.roles.clerk = {
        tables: {
          Order: {
            read: { fields: ['id', 'status', 'total', 'customerId', 'placedAt', 'createdAt', 'updatedAt'] },
            create: { fields: ['status', 'total', 'customerId', 'note'] },
            update: { fields: ['status', 'total', 'note'] },
            delete: true,
          },
        },
      };
      // Reads, updates and deletes open orders only.
      raw.roles.openOnly = {
        tables: {
          Order: {
            read: { filter: { status: 'open' } },
            update: { filter: { status: 'open' }, fields: ['total', 'note'] },
            delete: { filter: { status: 'open' } },
          },
        },
      };
    },
  });
  await t.db.query(`CREATE TABLE public.hook_log (
    seq serial PRIMARY KEY, action text, order_id int, customer_id uuid, status text, previous_status text,
    placed_at text, note text, caller text)`);
  clerk = (await t.createKey(['clerk'])).key;
  openOnly = (await t.createKey(['openOnly'])).key;
});
afterAll(() => t?.close());
beforeEach(() => {
  calls.length = 0;
});

/** A customer of its own per test: its orders are the test's rows. */
async function customer(): Promise<string> {
  const res = await t.request('POST', `${BASE}/Customer`, {
    body: { email: `${randomUUID()}@example.com`, name: 'C' },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

/** Orders of `customerId` as stored (every field). */
async function orders(customerId: string) {
  return t.db.query<{ id: number; status: string; note: string | null; placedAt: Date | null; total: number }>(
    `SELECT id, status, note, "placedAt", total FROM env_master."Order" WHERE "customerId" = $1 ORDER BY id`,
    [customerId],
  );
}

async function audit(customerId: string) {
  return t.db.query<{ action: string; order_id: number; status: string | null; previous_status: string | null }>(
    `SELECT action, order_id, status, previous_status, placed_at, note, caller FROM public.hook_log WHERE customer_id = $1 ORDER BY seq`,
    [customerId],
  );
}

/** An order created as the admin, with no hook in the way (SQL). */
async function order(customerId: string, fields: { status?: string; note?: string; total?: number } = {}) {
  const [row] = await t.db.query<{ id: number }>(
    `INSERT INTO env_master."Order" (status, total, note, "customerId", "updatedAt") VALUES ($1, $2, $3, $4, now()) RETURNING id`,
    [fields.status ?? 'open', fields.total ?? 10, fields.note ?? null, customerId],
  );
  return row!.id;
}

const rest = (method: string, path: string, body?: unknown, key?: string, headers?: Record<string, string>) =>
  t.request(method, `${BASE}/${path}`, { body, key, headers });

const gql = (query: string, variables?: Record<string, unknown>, key?: string) =>
  t.request('POST', '/gw/api/graphql', { body: { query, variables }, key });

const REFUSED_REOPEN = {
  type: '/errors/validation',
  title: 'Validation failed',
  status: 422,
  detail: 'status: a paid order cannot reopen',
  errors: [{ field: 'status', rule: 'refused', message: 'a paid order cannot reopen' }],
};

describe('REST single writes', () => {
  it('beforeCreate stamps placedAt, a field the caller may not write; afterWrite sees every field, the answer only readable ones', async () => {
    const c = await customer();
    // The caller itself may not send placedAt.
    const own = await rest('POST', 'Order', { total: 5, customerId: c, placedAt: '2030-01-01T00:00:00.000Z' }, clerk);
    expectProblem(own, 403, 'forbidden', 'placedAt');
    expect(calls).toEqual([]);
    const res = await rest('POST', 'Order', { total: 5, customerId: c, status: 'paid', note: 'hidden' }, clerk);
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.placedAt).toBe('2030-01-02T03:04:05.000Z');
    expect(res.body.data).not.toHaveProperty('note');
    expect(calls).toEqual([
      { hook: 'beforeCreate', input: { total: 5, customerId: c, status: 'paid', note: 'hidden' } },
    ]);
    expect(await audit(c)).toEqual([
      {
        action: 'create',
        order_id: res.body.data.id,
        status: 'paid',
        previous_status: null,
        placed_at: '2030-01-02T03:04:05.000Z',
        note: 'hidden',
        caller: 'apiKey',
      },
    ]);
    await until(
      async () => committed.includes(`create ${res.body.data.id}`),
      Boolean,
      5000,
      'afterCommit of the create',
    );
  });

  it('a before hook refusing answers 422 naming the field, and nothing is written', async () => {
    const c = await customer();
    const res = await rest('POST', 'Order', { total: 5, customerId: c, note: 'refuse-create' });
    expectProblem(res, 422, 'validation');
    expect(res.body).toEqual({
      type: '/errors/validation',
      title: 'Validation failed',
      status: 422,
      detail: 'note: this note is refused',
      instance: `${BASE}/Order`,
      errors: [{ field: 'note', rule: 'refused', message: 'this note is refused' }],
    });
    expect(await orders(c)).toEqual([]);
  });

  it('the input a hook returns is validated again', async () => {
    const c = await customer();
    const id = await order(c);
    // beforeUpdate passes the input through; a value the validators refuse stays refused.
    const res = await rest('PATCH', `Order/${id}`, { status: 'nonsense' });
    expectProblem(res, 422, 'validation', 'status');
  });

  it('beforeUpdate sees the whole previous row; paid stamps placedAt; paid → open is refused with 422 naming status', async () => {
    const c = await customer();
    const id = await order(c, { note: 'secret note' });
    const paid = await rest('PATCH', `Order/${id}`, { status: 'paid' }, clerk);
    expect(paid.status, paid.text).toBe(200);
    expect(paid.body.data).toMatchObject({ id, status: 'paid', placedAt: '2030-01-02T03:04:05.000Z' });
    expect(paid.body.data).not.toHaveProperty('note');
    expect(calls[0]!.previous).toMatchObject({
      id,
      status: 'open',
      note: 'secret note',
      customerId: c,
      placedAt: null,
    });
    expect(Object.keys(calls[0]!.previous!).sort()).toEqual(
      [
        'createdAt',
        'customerId',
        'id',
        'invoiceId',
        'note',
        'placedAt',
        'receiptId',
        'status',
        'total',
        'updatedAt',
      ].sort(),
    );
    const reopen = await rest('PATCH', `Order/${id}`, { status: 'open' }, clerk);
    expect(reopen.status, reopen.text).toBe(422);
    expect(reopen.body).toEqual({ ...REFUSED_REOPEN, instance: `${BASE}/Order/${id}` });
    expect((await orders(c))[0]).toMatchObject({ status: 'paid' });
    expect((await audit(c)).map((a) => [a.action, a.previous_status, a.status])).toEqual([['update', 'open', 'paid']]);
  });

  it('previous is locked: a concurrent write of the row waits for the hook, then sees what it wrote', async () => {
    const c = await customer();
    const id = await order(c, { total: 10 });
    released = new Promise((resolve) => {
      release = resolve;
    });
    const first = rest('PATCH', `Order/${id}`, { note: 'block', total: 1 });
    await until(
      async () => calls.length,
      (n) => n === 1,
      5000,
      'the first update in its hook',
    );
    const second = rest('PATCH', `Order/${id}`, { total: 2 });
    await waitingForLock(t.db, 'SELECT (SELECT row_to_json', 'the second update waiting for the row');
    expect(calls).toHaveLength(1);
    release!();
    expect((await first).status).toBe(200);
    expect((await second).body.data).toMatchObject({ id, total: 2 });
    expect(calls.map((x) => x.previous!.total)).toEqual([10, 1]);
    expect(calls[1]!.previous!.note).toBe('block');
  });

  it('beforeDelete refuses with 422; a delete passes previous to afterWrite with record null', async () => {
    const c = await customer();
    const kept = await order(c, { note: 'keep' });
    const gone = await order(c);
    const refused = await rest('DELETE', `Order/${kept}`, undefined, clerk);
    expect(refused.status, refused.text).toBe(422);
    expect(refused.body.errors).toEqual([{ field: 'id', rule: 'refused', message: 'this order is kept' }]);
    const res = await rest('DELETE', `Order/${gone}`, undefined, clerk);
    expect(res.status, res.text).toBe(204);
    expect((await orders(c)).map((o) => o.id)).toEqual([kept]);
    expect(await audit(c)).toMatchObject([{ action: 'delete', order_id: gone, status: null, previous_status: 'open' }]);
  });

  it("a hook may set a field the role may not write, but not move the row out of the role's filter (403)", async () => {
    const c = await customer();
    const id = await order(c);
    const res = await rest('PATCH', `Order/${id}`, { note: 'hook-pays' }, openOnly);
    expect(res.status, res.text).toBe(403);
    expect(res.body).toMatchObject({
      type: '/errors/forbidden',
      detail: "the Order record would not match your role's filter on status; nothing was changed",
      errors: [{ field: 'status', rule: 'row_filter', message: "status must match your role's filter" }],
    });
    expect(await orders(c)).toMatchObject([{ id, status: 'open', note: null }]);
    expect(await audit(c)).toEqual([]);
  });

  it('a row the caller may not read or update runs no hook: 404 as without hooks', async () => {
    const c = await customer();
    const paid = await order(c, { status: 'paid' });
    const update = await rest('PATCH', `Order/${paid}`, { total: 1 }, openOnly);
    expectProblem(update, 404, 'not-found');
    const del = await rest('DELETE', `Order/${paid}`, undefined, openOnly);
    expectProblem(del, 404, 'not-found');
    expect(calls).toEqual([]);
    expect(await audit(c)).toEqual([]);
  });

  it('under an Idempotency-Key the hooks run once and afterCommit after the commit', async () => {
    const c = await customer();
    const key = randomUUID();
    const first = await rest('POST', 'Order', { total: 2, customerId: c }, undefined, { 'idempotency-key': key });
    expect(first.status, first.text).toBe(201);
    const again = await rest('POST', 'Order', { total: 2, customerId: c }, undefined, { 'idempotency-key': key });
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(calls.filter((x) => x.hook === 'beforeCreate')).toHaveLength(1);
    await until(async () => committed.includes(`create ${first.body.data.id}`), Boolean, 5000, 'afterCommit');
  });
});

describe('a hook cannot be skipped by choosing another path', () => {
  it('paid → open is refused by PATCH by id, PATCH by filter, GraphQL updateOrder and updateOrderWhere', async () => {
    const c = await customer();
    const id = await order(c, { status: 'paid' });
    const byId = await rest('PATCH', `Order/${id}`, { status: 'open' });
    expect(byId.body.errors).toEqual(REFUSED_REOPEN.errors);
    const byFilter = await rest('PATCH', `Order?customerId=equals.${c}`, { status: 'open' });
    expect(byFilter.status, byFilter.text).toBe(422);
    expect(byFilter.body.errors).toEqual(REFUSED_REOPEN.errors);
    const extensions = {
      code: 'VALIDATION',
      type: '/errors/validation',
      status: 422,
      errors: REFUSED_REOPEN.errors,
    };
    const g = await gql(`mutation { updateOrder(id: ${id}, data: { status: open }) { id } }`);
    expect(g.body.errors[0].extensions).toEqual(extensions);
    const gw = await gql(
      `mutation { updateOrderWhere(where: { customerId: { equals: "${c}" } }, data: { status: open }) { count } }`,
    );
    expect(gw.body.errors[0].extensions).toEqual(extensions);
    expect(await orders(c)).toMatchObject([{ id, status: 'paid' }]);
    expect(calls.filter((x) => x.hook === 'beforeUpdate')).toHaveLength(4);
  });
});

describe('updates and deletes by filter', () => {
  it('PATCH by filter runs beforeUpdate per row with that row as previous, and counts the rows', async () => {
    const c = await customer();
    const a = await order(c, { note: 'a' });
    const b = await order(c, { note: 'b' });
    const res = await rest('PATCH', `Order?customerId=equals.${c}`, { status: 'paid' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({ count: 2 });
    expect(calls.map((x) => [x.id, x.previous!.note])).toEqual([
      [a, 'a'],
      [b, 'b'],
    ]);
    expect((await orders(c)).map((o) => o.placedAt?.toISOString())).toEqual([
      '2030-01-02T03:04:05.000Z',
      '2030-01-02T03:04:05.000Z',
    ]);
  });

  it('one refused row rolls the whole update back', async () => {
    const c = await customer();
    await order(c);
    await order(c, { status: 'paid' });
    const res = await rest('PATCH', `Order?customerId=equals.${c}`, { status: 'open', total: 99 });
    expect(res.status, res.text).toBe(422);
    expect((await orders(c)).map((o) => o.total)).toEqual([10, 10]);
    expect(await audit(c)).toEqual([]);
  });

  it('by filter reaches only the rows the caller may read and update: no hook sees another row', async () => {
    const c = await customer();
    const open = await order(c);
    await order(c, { status: 'paid' });
    const res = await rest('PATCH', `Order?customerId=equals.${c}`, { total: 3 }, openOnly);
    expect(res.body.data).toEqual({ count: 1 });
    expect(calls.map((x) => x.id)).toEqual([open]);
  });

  it('GraphQL deleteOrderWhere runs beforeDelete and afterWrite per row; a refusal rolls back all', async () => {
    const c = await customer();
    const a = await order(c);
    const b = await order(c);
    const kept = await order(c, { note: 'keep' });
    const refused = await gql(`mutation { deleteOrderWhere(where: { customerId: { equals: "${c}" } }) { count } }`);
    expect(refused.body.errors[0].extensions).toMatchObject({ status: 422 });
    expect((await orders(c)).map((o) => o.id)).toEqual([a, b, kept]);
    const res = await gql(
      `mutation { deleteOrderWhere(where: { customerId: { equals: "${c}" }, note: { equals: null } }) { count } }`,
    );
    expect(res.body).toEqual({ data: { deleteOrderWhere: { count: 2 } } });
    expect((await audit(c)).map((x) => [x.action, x.order_id])).toEqual([
      ['delete', a],
      ['delete', b],
    ]);
  });
});

describe('GraphQL mutations', () => {
  it('createOrder, updateOrder and deleteOrder run their hooks', async () => {
    const c = await customer();
    const created = await gql(
      `mutation { createOrder(data: { total: 4, customerId: "${c}", status: paid }) { id placedAt } }`,
    );
    expect(created.body.data.createOrder.placedAt).toBe('2030-01-02T03:04:05.000Z');
    const id = created.body.data.createOrder.id;
    const updated = await gql(`mutation { updateOrder(id: ${id}, data: { total: 6 }) { total } }`);
    expect(updated.body).toEqual({ data: { updateOrder: { total: 6 } } });
    const deleted = await gql(`mutation { deleteOrder(id: ${id}) }`);
    expect(deleted.body.errors).toBeUndefined();
    expect((await audit(c)).map((x) => [x.action, x.previous_status, x.status])).toEqual([
      ['create', null, 'paid'],
      ['update', 'paid', 'paid'],
      ['delete', 'paid', null],
    ]);
    expect(calls.map((x) => x.hook)).toEqual(['beforeCreate', 'beforeUpdate', 'beforeDelete']);
  });
});

describe('bulk writes', () => {
  it('bulk create BEST_EFFORT: a refused item (before or after the write) is that item failure; the rest stay', async () => {
    const c = await customer();
    const res = await rest('POST', 'Order/_bulk?mode=BEST_EFFORT', {
      items: [
        { total: 1, customerId: c, status: 'paid' },
        { total: 2, customerId: c, note: 'refuse-create' },
        { total: 3, customerId: c, note: 'refuse-after' },
      ],
    });
    expect(res.status, res.text).toBe(207);
    expect(res.body.data).toMatchObject({
      totalSucceeded: 1,
      totalFailed: 2,
      errors: [
        { index: 1, message: 'note: this note is refused' },
        { index: 2, message: 'note: refused after the write' },
      ],
    });
    const rows = await orders(c);
    expect(rows.map((o) => [o.total, o.placedAt?.toISOString()])).toEqual([[1, '2030-01-02T03:04:05.000Z']]);
    expect((await audit(c)).map((x) => x.order_id)).toEqual([rows[0]!.id]);
    await until(async () => committed.includes(`create ${rows[0]!.id}`), Boolean, 5000, 'afterCommit of the kept item');
  });

  it('bulk create ALL_OR_NOTHING: a refused item fails the request and nothing is written', async () => {
    const c = await customer();
    const res = await rest('POST', 'Order/_bulk', {
      items: [
        { total: 1, customerId: c },
        { total: 2, customerId: c, note: 'refuse-create' },
      ],
    });
    expectProblem(res, 422, 'validation', 'items[1]');
    expect(res.body.errors).toEqual([{ field: 'items[1]', rule: 'item', message: 'note: this note is refused' }]);
    expect(await orders(c)).toEqual([]);
    expect(await audit(c)).toEqual([]);
  });

  it('bulk delete runs beforeDelete per item, in both modes', async () => {
    const c = await customer();
    const a = await order(c);
    const kept = await order(c, { note: 'keep' });
    const all = await rest('DELETE', 'Order/_bulk', { ids: [a, kept] });
    expect(all.status, all.text).toBe(422);
    expect(all.body.errors).toEqual([{ field: 'items[1]', rule: 'item', message: 'id: this order is kept' }]);
    expect((await orders(c)).map((o) => o.id)).toEqual([a, kept]);
    const best = await rest('DELETE', 'Order/_bulk?mode=BEST_EFFORT', { ids: [a, kept, 2147483000] });
    expect(best.status, best.text).toBe(207);
    expect(best.body.data).toMatchObject({
      items: [{ id: a }],
      errors: [
        { index: 1, message: 'id: this order is kept' },
        { index: 2, message: 'no Order record at index 2 (id 2147483000)' },
      ],
    });
    expect((await orders(c)).map((o) => o.id)).toEqual([kept]);
    expect((await audit(c)).map((x) => [x.action, x.order_id])).toEqual([['delete', a]]);
  });

  it('GraphQL createOrderMany runs beforeCreate per item', async () => {
    const c = await customer();
    const res = await gql(`mutation($d: [OrderCreateInput!]!) { createOrderMany(data: $d) { totalSucceeded } }`, {
      d: [
        { total: 1, customerId: c, status: 'paid' },
        { total: 2, customerId: c },
      ],
    });
    expect(res.body).toEqual({ data: { createOrderMany: { totalSucceeded: 2 } } });
    expect((await orders(c)).map((o) => o.placedAt !== null)).toEqual([true, false]);
  });
});

describe('failures', () => {
  it('an afterWrite throw rolls back the row and its webhook event: 500 with the request id, nothing internal', async () => {
    const sub = await t.request('POST', `${BASE}/_webhooks`, {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Order',
        events: ['INSERT', 'UPDATE', 'DELETE'],
        url: 'http://127.0.0.1:9/hooks-test',
        secret: `secret-${randomUUID()}`,
      },
    });
    expect(sub.status, sub.text).toBe(201);
    try {
      const c = await customer();
      const res = await rest('POST', 'Order', { total: 5, customerId: c, note: 'fail-after' }, undefined, {
        'x-request-id': 'hooks-fail-after-1',
      });
      expect(res.status, res.text).toBe(500);
      expect(res.body).toEqual({
        type: '/errors/internal',
        title: 'Internal Server Error',
        status: 500,
        detail:
          "hook Order.afterWrite failed, so nothing was written; the server's log has the detail under request id hooks-fail-after-1",
        instance: `${BASE}/Order`,
        errors: [],
        requestId: 'hooks-fail-after-1',
      });
      expect(res.text).not.toMatch(/hunter2|INSERT|stack/);
      expect(await orders(c)).toEqual([]);
      expect(await audit(c)).toEqual([]);
      const events = await t.db.query(
        `SELECT 1 FROM svcgen.webhook_events WHERE table_name = 'Order' AND record->>'customerId' = $1`,
        [c],
      );
      expect(events).toEqual([]);
      expect(logs.some((l) => l.includes('hooks-fail-after-1') && l.includes('hunter2'))).toBe(true);
      // The same write without the failure captures its event: the check above can fail.
      const ok = await rest('POST', 'Order', { total: 5, customerId: c });
      expect(ok.status).toBe(201);
      const captured = await t.db.query(
        `SELECT 1 FROM svcgen.webhook_events WHERE table_name = 'Order' AND record->>'customerId' = $1`,
        [c],
      );
      expect(captured).toHaveLength(1);
    } finally {
      await t.request('DELETE', `${BASE}/_webhooks/${sub.body.id}`, { key: MANAGEMENT_TOKEN, environment: 'master' });
    }
  });

  it('a before hook throwing anything but refuse() answers 500 without its message', async () => {
    const c = await customer();
    const res = await rest('POST', 'Order', { total: 5, customerId: c, note: 'boom' });
    expectProblem(res, 500, 'internal');
    expect(res.text).not.toMatch(/vault|SELECT|internal detail/);
    expect(res.body.requestId).toBe(res.headers.get('x-request-id'));
  });

  it('an afterCommit throw keeps the write and is logged', async () => {
    const c = await customer();
    const res = await rest('POST', 'Order', { total: 5, customerId: c, note: 'fail-commit' });
    expect(res.status, res.text).toBe(201);
    const id = res.body.data.id;
    await until(
      async () => logs.some((l) => l.includes('hook Order.afterCommit threw') && l.includes('afterCommit failed')),
      Boolean,
      5000,
      'the afterCommit failure in the log',
    );
    expect(committed).toContain(`create ${id}`);
    expect((await orders(c)).map((o) => o.id)).toEqual([id]);
  });

  it('an afterCommit past code.hookTimeoutMs is logged; the write stays and was answered at once', async () => {
    const c = await customer();
    released = new Promise((resolve) => {
      release = resolve;
    });
    try {
      const res = await rest('POST', 'Order', { total: 5, customerId: c, note: 'hang-commit' });
      expect(res.status, res.text).toBe(201);
      await until(
        async () => logs.some((l) => l.includes('hook Order.afterCommit did not finish within code.hookTimeoutMs')),
        Boolean,
        5000,
        'the afterCommit timeout in the log',
      );
      expect((await orders(c)).map((o) => o.id)).toEqual([res.body.data.id]);
    } finally {
      release!();
    }
  });

  it('a hook past code.hookTimeoutMs fails its write with 500 and rolls back; the server answers meanwhile; the hook can no longer reach the transaction', async () => {
    const c = await customer();
    released = new Promise((resolve) => {
      release = resolve;
    });
    lateSql = undefined;
    const hung = rest('POST', 'Order', { total: 5, customerId: c, note: 'hang' });
    // Another request is answered while the hook hangs.
    const other = await rest('GET', `Order?customerId=equals.${c}`);
    expect(other.status).toBe(200);
    const res = await hung;
    expectProblem(res, 500, 'internal');
    const requestId = res.headers.get('x-request-id');
    expect(res.body).toEqual({
      type: '/errors/internal',
      title: 'Internal Server Error',
      status: 500,
      detail: `hook Order.beforeCreate did not finish within 1500 ms (code.hookTimeoutMs), so nothing was written; the server's log has the detail under request id ${requestId}`,
      instance: `${BASE}/Order`,
      errors: [],
      requestId,
    });
    expect(res.headers.get('retry-after')).toBeNull();
    release!();
    await until(
      async () => lateSql,
      (v) => v !== undefined,
      5000,
      'the abandoned hook to run its SQL',
    );
    expect(lateSql).toBe(
      'hook Order.beforeCreate has ended (returned, failed or timed out): its context takes no more statements',
    );
    expect(await orders(c)).toEqual([]);
  });
});

describe('cost', () => {
  /** The statements of the second of two identical writes through `server`, as the server sent them. */
  async function measured(options: { code?: typeof code }, writes: [string, string, () => unknown][]) {
    const statements: string[] = [];
    const server = await startTestServer({
      ...options,
      databaseUrl: t.database.url,
      onQuery: (text) => void statements.push(text),
    });
    try {
      const seen: string[][] = [];
      for (const [method, path, body] of writes) {
        await server.request(method, `${BASE}/${path}`, { body: body(), key: t.adminKey });
        statements.length = 0;
        const res = await server.request(method, `${BASE}/${path}`, { body: body(), key: t.adminKey });
        expect(res.status, res.text).toBeLessThan(300);
        // The write's own statements: background ones (the rate limiter's batched counts, the
        // webhook worker) come and go with timing.
        seen.push(statements.filter((text) => /"env_master"|public\./.test(text)));
      }
      return seen;
    } finally {
      await server.server.close();
      await server.db.close();
    }
  }

  it('a table without hooks issues the same statements as without code; a table with hooks adds the lock', async () => {
    const c = await customer();
    const id = await order(c);
    const writes: [string, string, () => unknown][] = [
      ['PATCH', `Customer/${c}`, () => ({ name: 'D' })],
      // A new customer each time: its email is unique.
      ['POST', 'Customer', () => ({ email: `cost-${randomUUID()}@example.com`, name: 'E' })],
      ['PATCH', `Order/${id}`, () => ({ total: 7 })],
    ];
    const [bareCustomer, bareCreate, bareOrder] = await measured({}, writes);
    const [hookedCustomer, hookedCreate, hookedOrder] = await measured({ code }, writes);
    expect(hookedCustomer).toEqual(bareCustomer);
    expect(hookedCustomer).toHaveLength(1);
    expect(hookedCreate).toEqual(bareCreate);
    expect(bareOrder).toHaveLength(1);
    // In a transaction (its BEGIN and COMMIT are not statements onQuery sees): the row locked and
    // read whole, the write, then afterWrite's own INSERT.
    expect(hookedOrder).toHaveLength(3);
    expect(hookedOrder[0]).toMatch(/FOR UPDATE OF/);
    expect(hookedOrder[1]).toMatch(/^WITH w AS \(UPDATE/);
    expect(hookedOrder[2]).toMatch(/INSERT INTO public\.hook_log/);
  });
});
