// A to-many embed's own filter, order and page (docs/api.md §5.7, §5.10): `orders(id;status=equals.open;sort=-total;limit=2)`
// in `select`, and `filter` / `sort` / `pagination` on a `_query` select item. Results against the
// seed, every refusal with its exact body, and the permissions (docs/permissions.md): the embed's
// filter and sort name only what the caller may read, narrow only the rows it may read, and a
// value hidden on some rows is unknown to a filter and sorts as null there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSeed, qs, uuid, writeSeed, type Order, type Seed } from '../support/query-seed.ts';
import { startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
let S: Seed;
/** Keys whose `customer` context is uuid(2) (alice Cooper, Lyon). */
const keys = { shopper: '', mixed: '' };
const ME = uuid(2);

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      // Own orders, without their note and placedAt; every customer and city.
      raw.roles.shopper = {
        tables: {
          Customer: { read: true },
          City: { read: true },
          Order: {
            read: { filter: { customerId: '$context.customer' }, fields: ['id', 'status', 'total', 'customerId'] },
          },
        },
      };
      // Every order without its total, own orders with every field: total is hidden on the others.
      raw.roles.auditor = {
        tables: { Customer: { read: true }, Order: { read: { fields: ['id', 'status', 'customerId'] } } },
      };
      raw.roles.ownOrders = { tables: { Order: { read: { filter: { customerId: '$context.customer' } } } } };
    },
  });
  S = buildSeed();
  await writeSeed(t.db, S);
  keys.shopper = (await t.createKey(['shopper'], { context: { customer: ME } })).key;
  keys.mixed = (await t.createKey(['auditor', 'ownOrders'], { context: { customer: ME } })).key;
});
afterAll(() => t?.close());

async function data(path: string, key?: string): Promise<any> {
  const res = await t.request('GET', `${BASE}/${path}`, { key });
  expect(res.status, `${path}: ${res.text}`).toBe(200);
  return res.body.data;
}

/** The exact Problem of a query-layer refusal. */
function expectRefused(res: TestResponse, path: string, field: string, message: string, rule = 'filter'): void {
  expect(res.status, res.text).toBe(400);
  expect(res.body).toEqual({
    type: '/errors/invalid-parameter',
    title: 'Invalid query parameter',
    status: 400,
    detail: `${field}: ${message}`,
    instance: path,
    errors: [{ field, rule, message }],
  });
}

const ordersOf = (customerId: string) => S.orders.filter((o) => o.customerId === customerId);
const byTotalDesc = (a: Order, b: Order) => b.total - a.total || a.id - b.id;
const customerIds = Array.from({ length: 10 }, (_, i) => uuid(i + 1));

describe('results', () => {
  it('filter, sort and limit: each customer with its two largest open orders', async () => {
    const got = await data(
      `Customer?${qs('select=id,orders(id,total;status=equals.open;sort=-total;limit=2)&sort=id')}`,
    );
    expect(got).toEqual(
      customerIds.map((id) => ({
        id,
        orders: ordersOf(id)
          .filter((o) => o.status === 'open')
          .sort(byTotalDesc)
          .slice(0, 2)
          .map((o) => ({ id: o.id, total: o.total })),
      })),
    );
    expect(got.some((c: any) => c.orders.length === 2)).toBe(true);
    expect(got.some((c: any) => c.orders.length === 0)).toBe(true);
  });

  it('offset (and the first / skip spellings) pages the array; without sort the key orders it', async () => {
    const want = customerIds.map((id) => ({
      id,
      orders: ordersOf(id)
        .slice(1, 3)
        .map((o) => ({ id: o.id })),
    }));
    expect(await data(`Customer?${qs('select=id,orders(id;limit=2;offset=1)&sort=id')}`)).toEqual(want);
    expect(await data(`Customer?${qs('select=id,orders(id;skip=1;first=2)&sort=id')}`)).toEqual(want);
  });

  it('without arguments an embed is every related row, in key order', async () => {
    expect(await data(`Customer?${qs('select=id,orders(id)&sort=id')}`)).toEqual(
      customerIds.map((id) => ({ id, orders: ordersOf(id).map((o) => ({ id: o.id })) })),
    );
  });

  it('groups, lists and relation paths as in a query string; filters ANDed', async () => {
    const got = await data(
      `Customer?${qs('select=id,orders(id;or=(status.equals.paid,items.quantity.gte.5);total=gt.10)&sort=id')}`,
    );
    const bigItem = (o: Order) => S.items.some((i) => i.orderId === o.id && i.quantity >= 5);
    expect(got).toEqual(
      customerIds.map((id) => ({
        id,
        orders: ordersOf(id)
          .filter((o) => (o.status === 'paid' || bigItem(o)) && o.total > 10)
          .map((o) => ({ id: o.id })),
      })),
    );
  });

  it('a quoted value holds , . ; and parentheses', async () => {
    const got = await data(
      `Customer?${qs(`select=id,orders(id,note;note=in.("a.b,c","see (box 2)","x;y"))&id=in.(${uuid(4)},${uuid(2)})&sort=id`)}`,
    );
    const pick = (id: string) =>
      ordersOf(id)
        .filter((o) => o.note === 'a.b,c' || o.note === 'see (box 2)')
        .map((o) => ({ id: o.id, note: o.note }));
    expect(got).toEqual([
      { id: uuid(2), orders: pick(uuid(2)) },
      { id: uuid(4), orders: pick(uuid(4)) },
    ]);
    expect(got.flatMap((c: any) => c.orders).length).toBeGreaterThan(0);
  });

  it('arguments at two levels: City → customers (vip) → orders (largest one)', async () => {
    const got = await data(
      `City?${qs('select=id,customers(id,orders(id;sort=-total;limit=1);vip=equals.true;sort=id)&sort=id')}`,
    );
    expect(got).toEqual(
      S.cities.map((c) => ({
        id: c.id,
        customers: S.customers
          .filter((p) => p.cityId === c.id && p.vip)
          .sort((a, b) => (a.id < b.id ? -1 : 1))
          .map((p) => ({
            id: p.id,
            orders: ordersOf(p.id)
              .sort(byTotalDesc)
              .slice(0, 1)
              .map((o) => ({ id: o.id })),
          })),
      })),
    );
  });

  it('a single record takes them too', async () => {
    const res = await t.request(
      'GET',
      `${BASE}/Customer/${uuid(3)}?${qs('select=id,orders(id;status=not_equals.cancelled;sort=-id;limit=3)')}`,
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      data: {
        id: uuid(3),
        orders: ordersOf(uuid(3))
          .filter((o) => o.status !== 'cancelled')
          .reverse()
          .slice(0, 3)
          .map((o) => ({ id: o.id })),
      },
    });
  });

  it('_query: filter, sort and pagination on a select item give what the GET gives', async () => {
    const body = {
      sort: [{ field: 'id' }],
      select: [
        { field: 'id' },
        {
          field: 'orders',
          alias: 'open',
          children: [{ field: 'id' }, { field: 'total' }],
          filter: [{ field: 'status', operator: 'in', value: ['open', 'paid'] }],
          sort: [{ field: 'total', direction: 'DESC' }],
          pagination: { first: 2, skip: 1 },
        },
      ],
    };
    const post = await t.request('POST', `${BASE}/Customer/_query`, { body });
    expect(post.status, post.text).toBe(200);
    const get = await data(
      `Customer?${qs('sort=id&select=id,orders:open(id,total;status=in.(open,paid);sort=-total;limit=2;offset=1)')}`,
    );
    expect(post.body.data).toEqual(get);
    expect(get).toEqual(
      customerIds.map((id) => ({
        id,
        open: ordersOf(id)
          .filter((o) => o.status === 'open' || o.status === 'paid')
          .sort(byTotalDesc)
          .slice(1, 3)
          .map((o) => ({ id: o.id, total: o.total })),
      })),
    );
  });
});

describe('refusals: 400 naming select (the query string) or the member (a _query body)', () => {
  it.each<[string, string, string]>([
    [
      'a to-one embed',
      'Order?select=id,customer(name;limit=1)',
      'Order.customer is a to-one relation: filter, order and limit apply to to-many embeds',
    ],
    [
      'a to-one embed with a filter',
      'Order?select=id,customer(name;name=equals.x)',
      'Order.customer is a to-one relation: filter, order and limit apply to to-many embeds',
    ],
    ['limit 0', 'Customer?select=orders(id;limit=0)', 'in orders(...), limit: must be at least 1'],
    [
      'limit over the page maximum',
      'Customer?select=orders(id;limit=1001)',
      'in orders(...), limit: must be at most 1000',
    ],
    [
      'offset not a number',
      'Customer?select=orders(id;offset=x)',
      'in orders(...), offset: must be a whole number from 0 to 100000000',
    ],
    ['limit twice', 'Customer?select=orders(id;limit=1;first=1)', 'in orders(...), first: send limit or first once'],
    ['an unknown field', 'Customer?select=orders(id;nope=equals.1)', 'in orders(...), nope: Order has no field "nope"'],
    [
      'an unknown operator',
      'Customer?select=orders(id;status=is.open)',
      'in orders(...), status: unknown operator "is"',
    ],
    ['a bad value', 'Customer?select=orders(id;total=gt.lots)', 'in orders(...), total: total takes a number'],
    [
      'sort on an unknown field',
      'Customer?select=orders(id;sort=nope)',
      'in orders(...), sort: Order has no field "nope" to sort by',
    ],
    [
      'after',
      'Customer?select=orders(id;after=abc)',
      'in orders(...), after: not available in an embed (a field named after is filtered as col.after)',
    ],
    [
      'a term that is no name=value',
      'Customer?select=orders(id;limit)',
      'in orders(...), write <filter>=<operator>.<value>, sort=, limit= or offset= after ";", not "limit"',
    ],
    [
      'a nested embed, named by its path',
      'City?select=customers:people(orders(id;limit=0))',
      'in people.orders(...), limit: must be at least 1',
    ],
  ])('%s', async (_name, path, message) => {
    const [table, query] = path.split('?') as [string, string];
    const res = await t.request('GET', `${BASE}/${table}?${qs(query)}`);
    expectRefused(res, `${BASE}/${table}`, 'select', message);
  });

  it('the value check of a filter is the top-level one', async () => {
    const top = await t.request('GET', `${BASE}/Order?${qs('total=gt.lots')}`);
    expect(top.body.errors[0].message).toBe('total takes a number');
  });

  const item = (extra: Record<string, unknown>) => ({
    select: [{ field: 'id' }, { field: 'orders', children: [{ field: 'id' }], ...extra }],
  });
  it.each<[string, unknown, string, string, string?]>([
    [
      'a to-one embed',
      { select: [{ field: 'id' }, { field: 'customer', children: [{ field: 'name' }], pagination: { first: 1 } }] },
      'select[1]',
      'Order.customer is a to-one relation: filter, order and limit apply to to-many embeds',
    ],
    [
      'an unknown field in a filter',
      item({
        filter: [
          { field: 'total', operator: 'gt', value: 1 },
          { field: 'nope', operator: 'equals', value: 1 },
        ],
      }),
      'select[1].filter[1]',
      'Order has no field "nope"',
    ],
    [
      'a bad operator',
      item({ filter: [{ field: 'total', operator: 'above', value: 1 }] }),
      'select[1].filter[0]',
      'unknown operator "above"',
    ],
    [
      'in without an array',
      item({ filter: [{ field: 'status', operator: 'in', value: 'open' }] }),
      'select[1].filter[0]',
      'in takes an array value',
    ],
    [
      'a sort on an unknown field',
      item({ sort: [{ field: 'nope' }] }),
      'select[1].sort',
      'Order has no field "nope" to sort by',
    ],
    [
      'first 0',
      item({ pagination: { first: 0 } }),
      'select[1].pagination.first',
      'expected a whole number from 1 to 1000',
      'invalid',
    ],
    [
      'a cursor',
      item({ pagination: { after: 'abc' } }),
      'select[1].pagination.after',
      'unknown member "after"',
      'invalid',
    ],
    [
      'pagination not an object',
      item({ pagination: 5 }),
      'select[1].pagination',
      'expected an object { "first", "skip" }',
      'invalid',
    ],
  ])('_query: %s', async (_name, body, field, message, rule) => {
    const table = field === 'select[1]' ? 'Order' : 'Customer';
    expectRefused(
      await t.request('POST', `${BASE}/${table}/_query`, { body }),
      `${BASE}/${table}/_query`,
      field,
      message,
      rule,
    );
  });

  it('_query: nested children are named by their path', async () => {
    const body = {
      select: [
        {
          field: 'customers',
          children: [{ field: 'id' }, { field: 'orders', children: [{ field: 'id' }], sort: [{ field: 'nope' }] }],
        },
      ],
    };
    expectRefused(
      await t.request('POST', `${BASE}/City/_query`, { body }),
      `${BASE}/City/_query`,
      'select[0].children[1].sort',
      'Order has no field "nope" to sort by',
    );
  });

  it(`an embed's filters count toward the request's 100 conditions`, async () => {
    const fifty = (field: string) => `(${Array.from({ length: 50 }, (_, i) => `${field}.equals.${i}`).join(',')})`;
    const ok = await t.request(
      'GET',
      `${BASE}/Customer?${qs(`or=${fifty('name')}&select=orders(id;or=${fifty('id')})`)}`,
    );
    expect(ok.status, ok.text).toBe(200);
    const over = await t.request(
      'GET',
      `${BASE}/Customer?${qs(`or=${fifty('name')}&select=orders(id;or=${fifty('id')};total=gt.1)`)}`,
    );
    expectRefused(over, `${BASE}/Customer`, 'select', 'in orders(...), total: at most 100 conditions per request');
  });
});

describe('permissions', () => {
  it('a filter or sort on a field the role cannot read is refused exactly like an unknown field', async () => {
    const path = `${BASE}/Customer`;
    expectRefused(
      await t.request('GET', `${path}?${qs('select=orders(id;note=equals.x)')}`, { key: keys.shopper }),
      path,
      'select',
      'in orders(...), note: Order has no field "note"',
    );
    expectRefused(
      await t.request('GET', `${path}?${qs('select=orders(id;or=(status.equals.open,placedAt.is_empty.true))')}`, {
        key: keys.shopper,
      }),
      path,
      'select',
      'in orders(...), or: Order has no field "placedAt"',
    );
    expectRefused(
      await t.request('GET', `${path}?${qs('select=orders(id;sort=-note)')}`, { key: keys.shopper }),
      path,
      'select',
      'in orders(...), sort: Order has no field "note" to sort by',
    );
    // ... and through a relation it cannot follow (OrderItem is not readable to it)
    expectRefused(
      await t.request('GET', `${path}?${qs('select=orders(id;items.quantity=gt.1)')}`, { key: keys.shopper }),
      path,
      'select',
      'in orders(...), items.quantity: Order has no field "items"',
    );
    const body = {
      select: [
        { field: 'orders', children: [{ field: 'id' }], filter: [{ field: 'note', operator: 'equals', value: 'x' }] },
      ],
    };
    expectRefused(
      await t.request('POST', `${path}/_query`, { body, key: keys.shopper }),
      `${path}/_query`,
      'select[0].filter[0]',
      'Order has no field "note"',
    );
  });

  it("an embed's filter only narrows the readable rows: other customers' orders never appear, whatever it says", async () => {
    const everything = `or=(customerId.equals.${uuid(3)},customerId.not_equals.${ME},status.in.(open,paid,shipped,cancelled))`;
    const got = await data(`Customer?${qs(`select=id,orders(id,customerId;${everything})&sort=id`)}`, keys.shopper);
    expect(got).toEqual(
      customerIds.map((id) => ({
        id,
        orders: id === ME ? ordersOf(ME).map((o) => ({ id: o.id, customerId: ME })) : [],
      })),
    );
    const theirs = await data(
      `Customer/${uuid(3)}?${qs(`select=id,orders(id;customerId=equals.${uuid(3)})`)}`,
      keys.shopper,
    );
    expect(theirs).toEqual({ id: uuid(3), orders: [] });
  });

  it("a relation path in an embed's filter sees only readable rows: no customer is revealed by another's orders", async () => {
    const got = await data(`City?${qs('select=id,customers(id;orders.status=equals.open)&sort=id')}`, keys.shopper);
    const mine = ordersOf(ME).some((o) => o.status === 'open');
    expect(mine).toBe(true);
    expect(got).toEqual(
      S.cities.map((c) => ({ id: c.id, customers: c.id === S.customers[1]!.cityId ? [{ id: ME }] : [] })),
    );
    // the same filter as admin finds the other customers with open orders
    const all = await data(`City?${qs('select=id,customers(id;orders.status=equals.open)&sort=id')}`);
    expect(all.flatMap((c: any) => c.customers).length).toBeGreaterThan(1);
  });

  it('a field hidden on some rows sorts as null there, and a filter on it does not match there', async () => {
    const two = `id=in.(${ME},${uuid(3)})&sort=id`;
    const sorted = await data(`Customer?${qs(`select=id,orders(id,total;sort=-total)&${two}`)}`, keys.mixed);
    expect(sorted).toEqual([
      {
        id: ME,
        orders: ordersOf(ME)
          .sort(byTotalDesc)
          .map((o) => ({ id: o.id, total: o.total })),
      },
      // total is hidden on these rows: every key null, left in key order, and out of the records
      { id: uuid(3), orders: ordersOf(uuid(3)).map((o) => ({ id: o.id })) },
    ]);
    const filtered = await data(`Customer?${qs(`select=id,orders(id;total=gte.0)&${two}`)}`, keys.mixed);
    expect(filtered).toEqual([
      { id: ME, orders: ordersOf(ME).map((o) => ({ id: o.id })) },
      { id: uuid(3), orders: [] },
    ]);
    const negated = await data(`Customer?${qs(`select=id,orders(id;not=(total.lt.0))&${two}`)}`, keys.mixed);
    expect(negated).toEqual([
      { id: ME, orders: ordersOf(ME).map((o) => ({ id: o.id })) },
      { id: uuid(3), orders: [] },
    ]);
  });
});
