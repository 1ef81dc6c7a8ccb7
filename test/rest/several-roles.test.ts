// Several roles, CONTRACT §5 and docs/permissions.md "Several roles": a row's writable fields are the
// union of the `fields` lists of the roles that allow the action on that row. A key with two roles,
// one updating `total` of shipped orders and the other `total` and `status` of open or paid ones,
// got 404 for `{"status": …}` on a shipped order it may read and update: only the roles listing
// every body field decided, and their filter missed the row. Now: 403 naming `status`, as for a
// field outside `fields`; a row no role may update stays 404; an update by filter leaves the rows
// where the fields are not writable untouched and uncounted; the row after the change must still
// take the fields (403 row_filter). Through REST and GraphQL.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';

let t: TestServer;
let key: string;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.roles.shippedTotals = {
        tables: {
          Order: {
            read: true,
            update: { filter: { status: 'shipped' }, fields: ['total'] },
            // Create: `status` on open orders, `note` on orders of 100 or more; no role lists both.
            create: { filter: { status: 'open' }, fields: ['status', 'total', 'customerId'] },
          },
        },
      };
      raw.roles.openPaid = {
        tables: {
          Order: {
            read: true,
            update: { filter: { status: { in: ['open', 'paid'] } }, fields: ['total', 'status'] },
            create: { filter: { total: { gte: 100 } }, fields: ['note', 'total', 'customerId'] },
          },
        },
      };
    },
  });
  key = (await t.createKey(['shippedTotals', 'openPaid'])).key;
});
afterAll(() => t?.close());

/** A customer of its own with orders in the given statuses (created by the admin key); their ids in that order. */
async function orders(...statuses: string[]): Promise<{ customerId: string; ids: number[] }> {
  const customer = await t.request('POST', `${BASE}/Customer`, {
    body: { email: `roles-${randomUUID()}@example.com`, name: 'R' },
  });
  expect(customer.status, customer.text).toBe(201);
  const customerId = customer.body.data.id as string;
  const ids: number[] = [];
  for (const status of statuses) {
    const made = await t.request('POST', `${BASE}/Order`, { body: { customerId, total: 10, status } });
    expect(made.status, made.text).toBe(201);
    ids.push(made.body.data.id);
  }
  return { customerId, ids };
}

const stored = async (id: number) =>
  (
    await t.db.query<{ status: string; total: number }>('SELECT status, total FROM env_master."Order" WHERE id = $1', [
      id,
    ])
  )[0];

const patch = (id: number, body: unknown) => t.request('PATCH', `${BASE}/Order/${id}`, { key, body });

function expectForbiddenField(res: TestResponse, id: number, fields: string[]) {
  expect(res.status, res.text).toBe(403);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toEqual({
    type: '/errors/forbidden',
    title: 'Forbidden',
    status: 403,
    detail: `your roles may not write ${fields.join(', ')} of this Order record`,
    instance: `${BASE}/Order/${id}`,
    errors: fields.map((field) => ({
      field,
      rule: 'forbidden_field',
      message: `${field} may not be written by your role`,
    })),
  });
}

const ROW_FILTER = {
  type: '/errors/forbidden',
  title: 'Forbidden',
  status: 403,
  detail: "the Order record would not match your role's filter on status; nothing was changed",
  errors: [{ field: 'status', rule: 'row_filter', message: "status must match your role's filter" }],
};

describe('REST: a row takes the union of the fields of the roles allowing its update', () => {
  it('status of a shipped order (only the role without status allows it there) was 404: now 403 naming status, nothing changed', async () => {
    const { ids } = await orders('shipped');
    const shipped = ids[0]!;
    expectForbiddenField(await patch(shipped, { status: 'paid' }), shipped, ['status']);
    // With a field that is writable there, only the other is named.
    expectForbiddenField(await patch(shipped, { total: 11, status: 'paid' }), shipped, ['status']);
    expect(await stored(shipped)).toEqual({ status: 'shipped', total: 10 });
    // total of a shipped order: the first role allows it.
    const res = await patch(shipped, { total: 12 });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ id: shipped, status: 'shipped', total: 12 });
  });

  it('a row no role may update (cancelled) is still 404; a row the caller may not read is 404 too', async () => {
    const { ids } = await orders('cancelled');
    const res = await patch(ids[0]!, { status: 'open' });
    expect(res.status, res.text).toBe(404);
    expect(res.body).toEqual({
      type: '/errors/not-found',
      title: 'Not Found',
      status: 404,
      detail: `no Order record with id "${ids[0]}"`,
      instance: `${BASE}/Order/${ids[0]}`,
      errors: [],
    });
    expect((await patch(2_000_000_000, { status: 'open' })).status).toBe(404);
    expect(await stored(ids[0]!)).toEqual({ status: 'cancelled', total: 10 });
  });

  it('paid → open is allowed; open → shipped leaves the rows where status is writable: 403 row_filter, nothing changed', async () => {
    const { ids } = await orders('paid');
    const id = ids[0]!;
    const reopened = await patch(id, { status: 'open' });
    expect(reopened.status, reopened.text).toBe(200);
    const shipped = await patch(id, { status: 'shipped' });
    expect(shipped.status, shipped.text).toBe(403);
    expect(shipped.body).toEqual({ ...ROW_FILTER, instance: `${BASE}/Order/${id}` });
    expect(await stored(id)).toEqual({ status: 'open', total: 10 });
  });

  it('update by filter: rows where the fields are not all writable are not touched and not counted', async () => {
    const { customerId, ids } = await orders('shipped', 'paid', 'open', 'cancelled');
    const res = await t.request('PATCH', `${BASE}/Order?customerId=equals.${customerId}`, {
      key,
      body: { status: 'paid', total: 20 },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 2 } });
    expect(await Promise.all(ids.map(stored))).toEqual([
      { status: 'shipped', total: 10 },
      { status: 'paid', total: 20 },
      { status: 'paid', total: 20 },
      { status: 'cancelled', total: 10 },
    ]);
    // total alone: writable on shipped, open and paid rows.
    const totals = await t.request('PATCH', `${BASE}/Order?customerId=equals.${customerId}`, {
      key,
      body: { total: 30 },
    });
    expect(totals.body).toEqual({ data: { count: 3 } });
  });

  it('create: fields no single role lists are written together when the new row takes each (status where open, note where total >= 100)', async () => {
    const { customerId } = await orders();
    const body = { customerId, status: 'open', note: 'big', total: 150 };
    const made = await t.request('POST', `${BASE}/Order`, { key, body });
    expect(made.status, made.text).toBe(201);
    expect(made.body.data).toMatchObject({ status: 'open', note: 'big', total: 150 });
    // note on an order under 100: no role allowing its creation lists note there.
    const small = await t.request('POST', `${BASE}/Order`, { key, body: { ...body, total: 50 } });
    expect(small.status, small.text).toBe(403);
    // row_filter names the fields of the filters of the roles bearing on the body (both here).
    expect(small.body).toEqual({
      type: '/errors/forbidden',
      title: 'Forbidden',
      status: 403,
      detail: "the Order record would not match your role's filter on status, total; nothing was changed",
      instance: `${BASE}/Order`,
      errors: [
        { field: 'status', rule: 'row_filter', message: "status must match your role's filter" },
        { field: 'total', rule: 'row_filter', message: "total must match your role's filter" },
      ],
    });
  });
});

describe('GraphQL: the same rule (mutations run the REST writes)', () => {
  const gql = (query: string, variables: Record<string, unknown>) =>
    t.request('POST', '/gw/api/graphql', { key, body: { query, variables } });
  const UPDATE =
    'mutation($id: Int!, $data: OrderUpdateInput!) { updateOrder(id: $id, data: $data) { id status total } }';

  it('updateOrder: status of a shipped order → FORBIDDEN naming status; total → the record; a cancelled one → NOT_FOUND', async () => {
    const { ids } = await orders('shipped', 'cancelled');
    const [shipped, cancelled] = ids as [number, number];
    const refused = await gql(UPDATE, { id: shipped, data: { status: 'paid' } });
    expect(refused.body).toEqual({
      data: { updateOrder: null },
      errors: [
        {
          message: 'your roles may not write status of this Order record',
          locations: expect.any(Array),
          path: ['updateOrder'],
          extensions: {
            code: 'FORBIDDEN',
            type: '/errors/forbidden',
            status: 403,
            errors: [{ field: 'status', rule: 'forbidden_field', message: 'status may not be written by your role' }],
          },
        },
      ],
    });
    expect(await stored(shipped)).toEqual({ status: 'shipped', total: 10 });
    const total = await gql(UPDATE, { id: shipped, data: { total: 13 } });
    expect(total.body).toEqual({ data: { updateOrder: { id: shipped, status: 'shipped', total: 13 } } });
    const missing = await gql(UPDATE, { id: cancelled, data: { status: 'open' } });
    expect(missing.body.errors.map((e: { extensions: { code: string } }) => e.extensions.code)).toEqual(['NOT_FOUND']);
  });

  it('updateOrderWhere: only the rows taking every field are changed and counted', async () => {
    const { customerId, ids } = await orders('shipped', 'open');
    const res = await gql(
      'mutation($c: String!) { updateOrderWhere(where: { customerId: { equals: $c } }, data: { status: paid }) { count } }',
      { c: customerId },
    );
    expect(res.body).toEqual({ data: { updateOrderWhere: { count: 1 } } });
    expect(await Promise.all(ids.map(stored))).toEqual([
      { status: 'shipped', total: 10 },
      { status: 'paid', total: 10 },
    ]);
  });
});
