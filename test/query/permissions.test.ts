// Role permissions on the data API through API keys (docs/permissions.md; docs/api.md §5.17):
// table-level actions, field allow-lists on writes, row filters (fail closed without a user),
// several roles as a union, and `$context.<key>` filters from a key's context.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, expectListEnvelope, expectProblemAt, problemFields, snapshot } from '../support/expect.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
const ALL_ROWS = { limit: 100, offset: 0, hasNextPage: false, hasPreviousPage: false };
let t: TestServer;
const keys: Record<'catalog' | 'customer' | 'both' | 'customerAdmin', string> = {
  catalog: '',
  customer: '',
  both: '',
  customerAdmin: '',
};
let customer: { id: string };
let order: { id: number; note: string | null };
let product: { id: number };
let city: { id: number };

async function post(table: string, body: unknown, server: TestServer = t) {
  const res = await server.request('POST', `${BASE}/${table}`, { body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

beforeAll(async () => {
  t = await startTestServer();
  keys.catalog = (await t.createKey(['catalog'])).key;
  keys.customer = (await t.createKey(['customer'])).key;
  keys.both = (await t.createKey(['catalog', 'customer'])).key;
  keys.customerAdmin = (await t.createKey(['customer', 'admin'])).key;
  customer = await post('Customer', { email: `perm-${randomUUID()}@example.com`, name: 'Perm' });
  order = await post('Order', { total: 30, note: 'secret note', customerId: customer.id });
  product = await post('Product', { sku: `PERM-${randomUUID()}`, title: 'Perm', price: 3, tags: [] });
  city = await post('City', { name: 'Permcity', country: 'PC' });
});
afterAll(() => t?.close());

type Op = 'list' | 'read' | 'create' | 'update' | 'delete';
function call(op: Op, table: string, key: string, body?: unknown) {
  const id = {
    City: () => city.id,
    Customer: () => customer.id,
    Product: () => product.id,
    Order: () => order.id,
    OrderItem: () => 1,
  }[table]!();
  const sample: Record<string, unknown> = {
    City: { name: 'Denied', country: 'DN' },
    Customer: { email: `denied-${randomUUID()}@example.com`, name: 'Denied' },
    Product: { sku: `DENIED-${randomUUID()}`, title: 'Denied', price: 1, tags: [] },
    Order: { total: 1, customerId: customer.id },
    OrderItem: { orderId: order.id, productId: product.id },
  };
  const patch: Record<string, unknown> = {
    City: { name: 'Patched' },
    Customer: { name: 'Patched' },
    Product: { title: 'Patched' },
    Order: { total: 31 },
  };
  const path = op === 'list' || op === 'create' ? `${BASE}/${table}` : `${BASE}/${table}/${id}`;
  const method = { list: 'GET', read: 'GET', create: 'POST', update: 'PATCH', delete: 'DELETE' }[op];
  return {
    path,
    res: t.request(method, path, {
      key,
      body: body ?? (op === 'create' ? sample[table] : op === 'update' ? patch[table] : undefined),
    }),
  };
}

const OPS: Op[] = ['list', 'read', 'create', 'update', 'delete'];
const denied: [string, Op, string][] = [
  ...OPS.map((op): [string, Op, string] => ['catalog', op, 'Order']),
  ...OPS.map((op): [string, Op, string] => ['catalog', op, 'Customer']),
  ['catalog', 'list', 'OrderItem'],
  ['catalog', 'create', 'OrderItem'],
  ['catalog', 'delete', 'Product'],
  ['catalog', 'create', 'City'],
  ['catalog', 'update', 'City'],
  ['catalog', 'delete', 'City'],
  ['customer', 'delete', 'Order'],
  ['customer', 'list', 'Customer'],
  ['customer', 'create', 'Product'],
  ['customer', 'update', 'City'],
  ['both', 'delete', 'Product'],
  ['both', 'delete', 'Order'],
  ['both', 'read', 'Customer'],
];

describe('table-level actions', () => {
  it.each(denied)('%s: %s %s → 403, nothing changes', async (role, op, table) => {
    const before = await snapshot(t.db);
    const { path, res } = call(op, table, keys[role as keyof typeof keys]);
    expectProblemAt(await res, 403, path, 'forbidden');
    expect(await snapshot(t.db)).toEqual(before);
  });

  it.each([
    ['catalog', 'list', 'Product', 200],
    ['catalog', 'read', 'Product', 200],
    ['catalog', 'create', 'Product', 201],
    ['catalog', 'update', 'Product', 200],
    ['catalog', 'list', 'City', 200],
    ['catalog', 'read', 'City', 200],
    ['customer', 'list', 'City', 200],
    ['customer', 'read', 'Product', 200],
    ['both', 'create', 'Product', 201],
    ['both', 'update', 'Product', 200],
    ['both', 'list', 'City', 200],
    ['both', 'list', 'Order', 200],
  ] as const)('%s: %s %s → %i', async (role, op, table, status) => {
    const { res } = call(op, table, keys[role]);
    const r = await res;
    expect(r.status, r.text).toBe(status);
  });

  it('catalog update on Product writes and answers the record', async () => {
    const res = await t.request('PATCH', `${BASE}/Product/${product.id}`, {
      key: keys.catalog,
      body: { title: 'Renamed by catalog', tags: ['new'] },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ id: product.id, title: 'Renamed by catalog', tags: ['new'] });
  });

  it.each(['City', 'Customer', 'Product', 'Order', 'OrderItem'])('admin ("*") lists %s', async (table) => {
    expect((await t.request('GET', `${BASE}/${table}`)).status).toBe(200);
  });

  it('admin ("*") creates, updates and deletes on every table with /<id> routes', async () => {
    const c = await post('City', { name: 'Adm', country: 'AD' });
    expect((await t.request('PATCH', `${BASE}/City/${c.id}`, { body: { name: 'Adm2' } })).body.data.name).toBe('Adm2');
    const cu = await post('Customer', { email: `adm-${randomUUID()}@example.com`, name: 'Adm', cityId: c.id });
    const p = await post('Product', { sku: `ADM-${randomUUID()}`, title: 'Adm', price: 1, tags: [] });
    const o = await post('Order', { total: 2, customerId: cu.id });
    await post('OrderItem', { orderId: o.id, productId: p.id, quantity: 2 });
    for (const path of [`/Order/${o.id}`, `/Product/${p.id}`, `/Customer/${cu.id}`, `/City/${c.id}`]) {
      const res = await t.request('DELETE', `${BASE}${path}`);
      expect(res.status, `${path} ${res.text}`).toBe(204);
    }
    expect(await countRows(t.db, 'OrderItem', 'master', '"orderId" = $1', [o.id])).toBe(0);
  });
});

describe('row filters and field lists of the customer role', () => {
  it('Order read filter customerId = $user.id: an API key has no user, so it sees no rows (200, fail closed)', async () => {
    expect(await countRows(t.db, 'Order')).toBeGreaterThan(0);
    for (const key of [keys.customer, keys.both]) {
      expect(expectListEnvelope(await t.request('GET', `${BASE}/Order`, { key }), ALL_ROWS)).toEqual([]);
      expectProblemAt(
        await t.request('GET', `${BASE}/Order/${order.id}`, { key }),
        404,
        `${BASE}/Order/${order.id}`,
        'not-found',
      );
    }
  });

  it('several roles: rows and fields are the union (customer + admin sees every Order, every field)', async () => {
    const data = expectListEnvelope(await t.request('GET', `${BASE}/Order`, { key: keys.customerAdmin }), ALL_ROWS);
    expect(data).toContainEqual(order);
    const one = await t.request('GET', `${BASE}/Order/${order.id}`, { key: keys.customerAdmin });
    expect(one.body).toEqual({ data: order });
  });

  it('create filter customerId = $user.id: an API key has no user, so every create is refused (403 row_filter), nothing written', async () => {
    const before = await snapshot(t.db);
    const res = await t.request('POST', `${BASE}/Order`, {
      key: keys.customer,
      body: { total: 7, customerId: customer.id },
    });
    expectProblemAt(res, 403, `${BASE}/Order`, 'forbidden');
    expect(res.body.errors).toEqual([
      { field: 'customerId', rule: 'row_filter', message: "customerId must match your role's filter" },
    ]);
    // no user, so no preset either: the required field is missing
    expectProblemAt(
      await t.request('POST', `${BASE}/Order`, { key: keys.customer, body: { total: 7 } }),
      422,
      `${BASE}/Order`,
      'validation',
      'customerId',
    );
    expect(await snapshot(t.db)).toEqual(before);
  });

  it.each<[string, Record<string, unknown>, string[]]>([
    ['note', { total: 1, customerId: 'x', note: 'hi' }, ['note']],
    ['status', { total: 1, customerId: 'x', status: 'paid' }, ['status']],
    [
      'note and placedAt',
      { total: 1, customerId: 'x', note: 'hi', placedAt: '2024-01-01T00:00:00Z' },
      ['note', 'placedAt'],
    ],
    ['note with a wrong type (403 before validation)', { total: 'abc', note: 5 }, ['note']],
  ])('create writing %s → 403 naming it, nothing written', async (_name, body, fields) => {
    const before = await snapshot(t.db);
    const b = { ...body, ...('customerId' in body ? { customerId: customer.id } : {}) };
    for (const key of [keys.customer, keys.both]) {
      const res = await t.request('POST', `${BASE}/Order`, { key, body: b });
      expectProblemAt(res, 403, `${BASE}/Order`, 'forbidden');
      for (const f of fields) expect(problemFields(res), res.text).toContain(f);
      expect(problemFields(res)).not.toContain('total');
    }
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('update of an open order: an API key reads no Order rows, so it updates none (404, unchanged); a forbidden field → 403 first', async () => {
    const open = await post('Order', { total: 1, customerId: customer.id });
    const path = `${BASE}/Order/${open.id}`;
    expectProblemAt(
      await t.request('PATCH', path, { key: keys.customer, body: { total: 99 } }),
      404,
      path,
      'not-found',
    );
    expect((await t.request('GET', path)).body).toEqual({ data: open });
    const forbidden = await t.request('PATCH', path, { key: keys.customer, body: { note: 'x' } });
    expectProblemAt(forbidden, 403, path, 'forbidden', 'note');
  });

  it('update of a row outside the filter (status paid) → 404, unchanged', async () => {
    const paid = await post('Order', { total: 1, status: 'paid', customerId: customer.id });
    const path = `${BASE}/Order/${paid.id}`;
    expectProblemAt(
      await t.request('PATCH', path, { key: keys.customer, body: { total: 50 } }),
      404,
      path,
      'not-found',
    );
    expect((await t.request('GET', path)).body).toEqual({ data: paid });
  });
});

describe('custom roles: $context filters and read field lists', () => {
  let c: TestServer;
  beforeAll(async () => {
    c = await startTestServer({
      configPatch: (raw) => {
        raw.roles.region = { tables: { Customer: { read: { filter: { name: '$context.name' } } } } };
        raw.roles.auditor = { tables: { Order: { read: { fields: ['id', 'total'] } } } };
      },
    });
  });
  afterAll(() => c?.close());

  it('a key with context { name: "Ann" } sees only Ann; other contexts see theirs; none sees nothing', async () => {
    const ann = await post('Customer', { email: `ann-${randomUUID()}@example.com`, name: 'Ann' }, c);
    const bob = await post('Customer', { email: `bob-${randomUUID()}@example.com`, name: 'Bob' }, c);
    const annKey = (await c.createKey(['region'], { context: { name: 'Ann' } })).key;
    const bobKey = (await c.createKey(['region'], { context: { name: 'Bob' } })).key;
    const noContext = (await c.createKey(['region'])).key;
    const otherContext = (await c.createKey(['region'], { context: { city: 'Paris' } })).key;

    expect(expectListEnvelope(await c.request('GET', `${BASE}/Customer`, { key: annKey }), ALL_ROWS)).toEqual([ann]);
    expect(expectListEnvelope(await c.request('GET', `${BASE}/Customer`, { key: bobKey }), ALL_ROWS)).toEqual([bob]);
    expect(expectListEnvelope(await c.request('GET', `${BASE}/Customer`, { key: noContext }), ALL_ROWS)).toEqual([]);
    expect(expectListEnvelope(await c.request('GET', `${BASE}/Customer`, { key: otherContext }), ALL_ROWS)).toEqual([]);
    expect((await c.request('GET', `${BASE}/Customer/${ann.id}`, { key: annKey })).body).toEqual({ data: ann });
    expectProblemAt(
      await c.request('GET', `${BASE}/Customer/${bob.id}`, { key: annKey }),
      404,
      `${BASE}/Customer/${bob.id}`,
      'not-found',
    );
    expectProblemAt(
      await c.request('POST', `${BASE}/Customer`, { key: annKey, body: { email: 'x@example.com', name: 'Ann' } }),
      403,
      `${BASE}/Customer`,
      'forbidden',
    );
  });

  it('a read field list leaves the other fields out of lists and single reads', async () => {
    const zed = await post('Customer', { email: `zed-${randomUUID()}@example.com`, name: 'Zed' }, c);
    const o = await post('Order', { total: 42.5, note: 'hidden', customerId: zed.id }, c);
    const key = (await c.createKey(['auditor'])).key;
    const data = expectListEnvelope(await c.request('GET', `${BASE}/Order`, { key }), ALL_ROWS);
    expect(data).toContainEqual({ id: o.id, total: 42.5 });
    for (const row of data) expect(Object.keys(row).sort()).toEqual(['id', 'total']);
    expect((await c.request('GET', `${BASE}/Order/${o.id}`, { key })).body).toEqual({
      data: { id: o.id, total: 42.5 },
    });
  });
});
