// PATCH /<table>?<filters>: one merge patch applied to every matching record (docs/api.md §5.14:
// 200 { data: { count } }, 422 without a filter; row filters and field lists: docs/permissions.md;
// docs/api.md "Order of checks").
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblemAt, snapshot } from '../support/expect.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
let keys: { catalog: string; noter: string; customer: string; opener: string };

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      // An API key has no user, so the example customer role ($user.id) matches no rows; this role has
      // a literal update filter and a field list.
      raw.roles.noter = {
        tables: {
          Order: { read: true, update: { filter: { status: 'open' }, fields: ['note'] } },
        },
      };
      // Reads only open and paid orders, updates open ones (total and status).
      raw.roles.opener = {
        tables: {
          Order: {
            read: { filter: { status: { in: ['open', 'paid'] } } },
            update: { filter: { status: 'open' }, fields: ['total', 'status'] },
          },
        },
      };
    },
  });
  keys = {
    catalog: (await t.createKey(['catalog'])).key,
    noter: (await t.createKey(['noter'])).key,
    customer: (await t.createKey(['customer'])).key,
    opener: (await t.createKey(['opener'])).key,
  };
});
afterAll(() => t?.close());

interface OrderRow {
  id: number;
  status: string;
  total: number;
  note: string | null;
  updatedAt: string;
}

/** A customer of its own with orders in the given statuses, so each test has rows no other test touches. */
async function arrange(statuses: string[]): Promise<{ customerId: string; ids: number[] }> {
  const c = await t.request('POST', `${BASE}/Customer`, {
    body: { email: `ubf-${randomUUID()}@example.com`, name: 'UBF' },
  });
  expect(c.status, c.text).toBe(201);
  const items = statuses.map((status, i) => ({ status, total: i + 1, note: null, customerId: c.body.data.id }));
  const res = await t.request('POST', `${BASE}/Order/_bulk`, { body: { items } });
  expect(res.status, res.text).toBe(201);
  // push updatedAt into the past so that a write (now()) is certainly later
  await t.db.query(`update env_master."Order" set "updatedAt" = '2000-01-01T00:00:00Z' where "customerId" = $1`, [
    c.body.data.id,
  ]);
  return { customerId: c.body.data.id, ids: res.body.data.items.map((i: { id: number }) => i.id) };
}

async function rows(customerId: string): Promise<OrderRow[]> {
  return t.db.query<OrderRow>(
    `select id, status::text as status, total, note, to_char("updatedAt", 'YYYY-MM-DD"T"HH24:MI:SS.MS') as "updatedAt"
     from env_master."Order" where "customerId" = $1 order by id`,
    [customerId],
  );
}

const OLD = '2000-01-01T00:00:00.000';

describe('PATCH /<table>?<filters>', () => {
  it('200 { data: { count } } = the matching rows; only they change, and only their updatedAt moves', async () => {
    const { customerId } = await arrange(['open', 'paid', 'open', 'shipped', 'open']);
    const before = await rows(customerId);
    const path = `${BASE}/Order?status=equals.open&customerId=equals.${customerId}`;
    const res = await t.request('PATCH', path, { body: { note: 'x' } });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ data: { count: 3 } });
    const [{ n }] = await t.db.query<{ n: number }>(
      `select count(*)::int as n from env_master."Order" where "customerId" = $1 and status = 'open' and note = 'x'`,
      [customerId],
    );
    expect(n).toBe(res.body.data.count);
    const after = await rows(customerId);
    for (const [i, row] of after.entries()) {
      const was = before[i]!;
      if (was.status === 'open') {
        expect(row).toMatchObject({ id: was.id, status: 'open', total: was.total, note: 'x' });
        expect(row.updatedAt > OLD).toBe(true);
      } else {
        expect(row).toEqual(was);
      }
    }
  });

  it('matching nothing → 200 { data: { count: 0 } }, nothing changes', async () => {
    const { customerId } = await arrange(['paid']);
    const before = await snapshot(t.db);
    const res = await t.request('PATCH', `${BASE}/Order?status=equals.cancelled&customerId=equals.${customerId}`, {
      body: { note: 'none' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 0 } });
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('Content-Type application/merge-patch+json is accepted; null clears a field (RFC 7396)', async () => {
    const { customerId } = await arrange(['open', 'open']);
    await t.db.query(`update env_master."Order" set note = 'old' where "customerId" = $1`, [customerId]);
    const path = `${BASE}/Order?customerId=equals.${customerId}`;
    const res = await t.request('PATCH', path, {
      raw: JSON.stringify({ note: null, total: 9.5 }),
      headers: { 'content-type': 'application/merge-patch+json' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 2 } });
    expect((await rows(customerId)).map((r) => [r.note, r.total])).toEqual([
      [null, 9.5],
      [null, 9.5],
    ]);
  });

  it('or-groups and relation filters select the rows as on GET', async () => {
    const { customerId, ids } = await arrange(['open', 'paid', 'shipped']);
    const path = `${BASE}/Order?customer.id=equals.${customerId}&or=(status.equals.paid,status.equals.shipped)`;
    const list = await t.request('GET', path);
    expect(list.status, list.text).toBe(200);
    const res = await t.request('PATCH', path, { body: { note: 'grouped' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: list.body.data.length } });
    expect((await rows(customerId)).filter((r) => r.note === 'grouped').map((r) => r.id)).toEqual([ids[1], ids[2]]);
  });

  it('no filter → 422, nothing changes', async () => {
    await arrange(['open']);
    const before = await snapshot(t.db);
    const path = `${BASE}/Order`;
    expectProblemAt(await t.request('PATCH', path, { body: { note: 'all' } }), 422, path, 'validation');
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('only non-filter parameters (select, limit, sort) → 422, nothing changes', async () => {
    const before = await snapshot(t.db);
    const path = `${BASE}/Order?limit=1&sort=id&select=id`;
    const res = await t.request('PATCH', path, { body: { note: 'all' } });
    expect([400, 422], res.text).toContain(res.status);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it.each([
    ['unknown operator', 'status=bogus.open', 'status'],
    ['unknown field', 'nope=equals.1', 'nope'],
    ['bad enum value', 'status=equals.lost', 'status'],
    ['malformed or-group', 'or=(status.equals.open', 'or'],
    ['wrong value type', 'total=gt.abc', 'total'],
  ])('bad filter (%s) → 400 naming it, nothing changes', async (_name, query, field) => {
    await arrange(['open']);
    const before = await snapshot(t.db);
    const path = `${BASE}/Order?${query}`;
    const res = await t.request('PATCH', path, { body: { note: 'bad' } });
    expectProblemAt(res, 400, path);
    expect(JSON.stringify(res.body.errors) + res.body.detail).toContain(field);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it.each([
    ['unknown body field', 'bogus', { note: 'x', bogus: 1 }],
    ['wrong type', 'total', { total: 'ten' }],
    ['bad enum value', 'status', { status: 'lost' }],
    ['server-set field', 'updatedAt', { updatedAt: '2020-01-01T00:00:00Z' }],
    ['the primary key', 'id', { id: 5 }],
    ['a relation', 'customer', { customer: { name: 'x' } }],
  ])('%s → 422 naming %s, nothing changes', async (_name, field, body) => {
    const { customerId } = await arrange(['open']);
    const before = await snapshot(t.db);
    const path = `${BASE}/Order?customerId=equals.${customerId}`;
    expectProblemAt(await t.request('PATCH', path, { body }), 422, path, 'validation', field);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('a body that is not an object → 422; malformed JSON → 400; text/plain → 415', async () => {
    const { customerId } = await arrange(['open']);
    const before = await snapshot(t.db);
    const path = `${BASE}/Order?customerId=equals.${customerId}`;
    expectProblemAt(await t.request('PATCH', path, { body: [{ note: 'x' }] }), 422, path, 'validation');
    expectProblemAt(
      await t.request('PATCH', path, { raw: '{"note":', headers: { 'content-type': 'application/json' } }),
      400,
      path,
      'invalid-json',
    );
    expectProblemAt(
      await t.request('PATCH', path, { raw: '{"note":"x"}', headers: { 'content-type': 'text/plain' } }),
      415,
      path,
      'unsupported-media-type',
    );
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('a role without update on the table → 403, nothing changes', async () => {
    const { customerId } = await arrange(['open']);
    const before = await snapshot(t.db);
    const path = `${BASE}/Order?customerId=equals.${customerId}`;
    expectProblemAt(await t.request('PATCH', path, { key: keys.catalog, body: { note: 'x' } }), 403, path, 'forbidden');
    expect(await snapshot(t.db)).toEqual(before);
  });

  it("the role's update row filter applies: only open orders change, count says so", async () => {
    const { customerId } = await arrange(['open', 'paid', 'open', 'cancelled']);
    const before = await rows(customerId);
    const path = `${BASE}/Order?customerId=equals.${customerId}`;
    const res = await t.request('PATCH', path, { key: keys.noter, body: { note: 'by noter' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 2 } });
    const after = await rows(customerId);
    for (const [i, row] of after.entries()) {
      const was = before[i]!;
      if (was.status === 'open') {
        expect(row).toMatchObject({ note: 'by noter', total: was.total });
        expect(row.updatedAt > OLD).toBe(true);
      } else expect(row).toEqual(was);
    }
    const outside = await t.request('PATCH', `${path}&status=equals.paid`, {
      key: keys.noter,
      body: { note: 'sneaky' },
    });
    expect(outside.status, outside.text).toBe(200);
    expect(outside.body).toEqual({ data: { count: 0 } });
    expect(await rows(customerId)).toEqual(after);
  });

  it("writing a field outside the role's list → 403 naming it, nothing changes", async () => {
    const { customerId } = await arrange(['open']);
    const before = await snapshot(t.db);
    const path = `${BASE}/Order?customerId=equals.${customerId}`;
    expectProblemAt(
      await t.request('PATCH', path, { key: keys.noter, body: { total: 1 } }),
      403,
      path,
      'forbidden',
      'total',
    );
    expectProblemAt(
      await t.request('PATCH', path, { key: keys.noter, body: { note: 'n', status: 'paid' } }),
      403,
      path,
      'forbidden',
      'status',
    );
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('an update filter (status=open) changes only open orders', async () => {
    const { customerId } = await arrange(['open', 'paid']);
    const before = await rows(customerId);
    const res = await t.request('PATCH', `${BASE}/Order?customerId=equals.${customerId}`, {
      key: keys.opener,
      body: { total: 3 },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 1 } });
    const after = await rows(customerId);
    expect(after[0]).toMatchObject({ status: 'open', total: 3 });
    expect(after[1]).toEqual(before[1]);
  });

  it('rows the role cannot read are neither changed nor counted, even with an empty patch', async () => {
    const { customerId } = await arrange(['open', 'cancelled']);
    const before = await rows(customerId);
    await t.db.query(`update env_master."Order" set status = 'cancelled' where "customerId" = $1`, [customerId]);
    const hidden = await rows(customerId);
    for (const body of [{ total: 9 }, {}]) {
      const res = await t.request('PATCH', `${BASE}/Order?customerId=equals.${customerId}`, { key: keys.opener, body });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ data: { count: 0 } });
    }
    expect(await rows(customerId)).toEqual(hidden);
    expect(before).toHaveLength(2);
  });

  it('a change that would take a row out of the update filter → 403 row_filter, nothing changes', async () => {
    const { customerId } = await arrange(['open', 'open']);
    const before = await rows(customerId);
    const path = `${BASE}/Order?customerId=equals.${customerId}`;
    const res = await t.request('PATCH', path, { key: keys.opener, body: { status: 'paid' } });
    expectProblemAt(res, 403, path, 'forbidden');
    expect(res.body.errors).toEqual([
      { field: 'status', rule: 'row_filter', message: "status must match your role's filter" },
    ]);
    expect(await rows(customerId)).toEqual(before);
  });

  it('an empty patch changes nothing and answers the matching count', async () => {
    const { customerId } = await arrange(['open', 'paid']);
    const before = await rows(customerId);
    const res = await t.request('PATCH', `${BASE}/Order?customerId=equals.${customerId}`, { body: {} });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 2 } });
    expect(await rows(customerId)).toEqual(before);
  });

  it('composite-key tables can be patched by filter', async () => {
    const { ids } = await arrange(['open']);
    const p = await t.request('POST', `${BASE}/Product`, {
      body: { sku: `UBF-${randomUUID()}`, title: 'P', price: 1, tags: [] },
    });
    expect(p.status, p.text).toBe(201);
    const item = await t.request('POST', `${BASE}/OrderItem`, { body: { orderId: ids[0], productId: p.body.data.id } });
    expect(item.status, item.text).toBe(201);
    const res = await t.request('PATCH', `${BASE}/OrderItem?orderId=equals.${ids[0]}`, { body: { quantity: 7 } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { count: 1 } });
    const [{ quantity }] = await t.db.query<{ quantity: number }>(
      `select quantity from env_master."OrderItem" where "orderId" = $1`,
      [ids[0]],
    );
    expect(quantity).toBe(7);
  });
});
