// select on GET /<table> and GET /<table>/<id> (docs/api.md §5.7, §7): exact keys, aliases, embeds of
// to-one and to-many relations up to 3 levels and 10 embeds, and 400 for everything beyond.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSeed, qs, uuid, writeSeed, type Customer, type Order, type Seed } from '../support/query-seed.ts';
import { expectProblem, startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
const ORDER_FIELDS = [
  'id',
  'status',
  'total',
  'note',
  'placedAt',
  'customerId',
  'invoiceId',
  'receiptId',
  'createdAt',
  'updatedAt',
];
let t: TestServer;
let S: Seed;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.roles.noteless = { tables: { Order: { read: { fields: ['id', 'total'] } } } };
    },
  });
  S = buildSeed();
  await writeSeed(t.db, S);
});
afterAll(() => t?.close());

async function rows(path: string, key?: string): Promise<any[]> {
  const res = await t.request('GET', `${BASE}/${path}`, { key });
  expect(res.status, `${path}: ${res.text}`).toBe(200);
  return res.body.data;
}
const customer = (id: string) => S.customers.find((c) => c.id === id)!;
const city = (c: Customer) => (c.cityId === null ? null : { name: S.cities.find((x) => x.id === c.cityId)!.name });
const itemsOf = (o: Order) => S.items.filter((i) => i.orderId === o.id).sort((a, b) => a.productId - b.productId);
const byProduct = (xs: { productId: number }[]) => [...xs].sort((a, b) => a.productId - b.productId);

describe('fields and aliases', () => {
  it('select=id,total returns exactly those keys', async () => {
    const got = await rows('Order?select=id,total&sort=id&limit=1000');
    expect(got).toEqual(S.orders.map((o) => ({ id: o.id, total: o.total })));
    for (const r of got) expect(Object.keys(r)).toEqual(['id', 'total']);
  });

  it('total:amount renames the field', async () => {
    expect(await rows('Order?select=id,total:amount,placedAt:when&sort=id&limit=3')).toEqual(
      S.orders.slice(0, 3).map((o) => ({ id: o.id, amount: o.total, when: o.placedAt })),
    );
  });

  it('* is every field; * combines with an embed', async () => {
    const all = await rows('Order?select=*&sort=id&limit=2');
    for (const [i, r] of all.entries()) {
      expect(Object.keys(r).sort()).toEqual([...ORDER_FIELDS].sort());
      const o = S.orders[i]!;
      expect(r).toMatchObject({
        id: o.id,
        status: o.status,
        total: o.total,
        note: o.note,
        placedAt: o.placedAt,
        customerId: o.customerId,
      });
    }
    const withEmbed = await rows(`Order?${qs('select=*,customer(name)&sort=id&limit=1')}`);
    expect(Object.keys(withEmbed[0]).sort()).toEqual([...ORDER_FIELDS, 'customer'].sort());
    expect(withEmbed[0].customer).toEqual({ name: customer(S.orders[0]!.customerId).name });
  });
});

describe('embeds', () => {
  it('to-one: customer(name)', async () => {
    expect(await rows(`Order?${qs('select=id,customer(name)&sort=id&limit=1000')}`)).toEqual(
      S.orders.map((o) => ({ id: o.id, customer: { name: customer(o.customerId).name } })),
    );
  });

  it('to-many: items(productId,quantity), [] when there are none', async () => {
    const got = await rows(`Order?${qs('select=id,items(productId,quantity)&sort=id&limit=1000')}`);
    expect(got.map((r) => ({ id: r.id, items: byProduct(r.items) }))).toEqual(
      S.orders.map((o) => ({
        id: o.id,
        items: itemsOf(o).map((i) => ({ productId: i.productId, quantity: i.quantity })),
      })),
    );
    expect(got.some((r) => r.items.length === 0)).toBe(true);
  });

  it('nested to-one: customer(name,city(name)); a missing city is null', async () => {
    const got = await rows(`Order?${qs('select=id,customer(name,city(name))&sort=id&limit=1000')}`);
    expect(got).toEqual(
      S.orders.map((o) => ({
        id: o.id,
        customer: { name: customer(o.customerId).name, city: city(customer(o.customerId)) },
      })),
    );
    expect(got.some((r) => r.customer.city === null)).toBe(true);
  });

  it('3 embeds deep is allowed: City → customers → orders → items', async () => {
    const got = await rows(`City?${qs('select=id,customers(name,orders(id,items(quantity)))&sort=id')}`);
    const norm = (cities: any[]) =>
      cities.map((c) => ({
        id: c.id,
        customers: [...c.customers]
          .sort((a, b) => (a.name < b.name ? -1 : 1))
          .map((p) => ({
            name: p.name,
            orders: [...p.orders]
              .sort((a, b) => a.id - b.id)
              .map((o) => ({ id: o.id, items: o.items.map((i: any) => i.quantity).sort() })),
          })),
      }));
    const want = S.cities.map((c) => ({
      id: c.id,
      customers: S.customers
        .filter((p) => p.cityId === c.id)
        .map((p) => ({
          name: p.name,
          orders: S.orders
            .filter((o) => o.customerId === p.id)
            .map((o) => ({ id: o.id, items: itemsOf(o).map((i) => ({ quantity: i.quantity })) })),
        })),
    }));
    expect(norm(got)).toEqual(norm(want));
  });

  it('aliases on embeds: customer:buyer(name), items:lines(quantity)', async () => {
    const got = await rows(
      `Order?${qs('select=id,customer:buyer(name:fullName),items:lines(productId,quantity)&sort=id&limit=5')}`,
    );
    expect(got.map((r) => ({ ...r, lines: byProduct(r.lines) }))).toEqual(
      S.orders.slice(0, 5).map((o) => ({
        id: o.id,
        buyer: { fullName: customer(o.customerId).name },
        lines: itemsOf(o).map(({ productId, quantity }) => ({ productId, quantity })),
      })),
    );
  });

  it('the same relation embedded twice under two aliases', async () => {
    const [r] = await rows(`Order?${qs('select=id,customer:a(name),customer:b(email)&sort=id&limit=1')}`);
    const c = customer(S.orders[0]!.customerId);
    expect(r).toEqual({ id: 1, a: { name: c.name }, b: { email: c.email } });
  });

  it('to-many from Customer: orders(id,total) and a customer without orders gets []', async () => {
    const got = await rows(`Customer?${qs(`select=id,orders(id,total)&id=in.(${uuid(1)},${uuid(9)})`)}`);
    const want = [uuid(1), uuid(9)].map((id) => ({
      id,
      orders: S.orders.filter((o) => o.customerId === id).map((o) => ({ id: o.id, total: o.total })),
    }));
    expect(
      got
        .map((r) => ({ ...r, orders: [...r.orders].sort((a, b) => a.id - b.id) }))
        .sort((a, b) => (a.id < b.id ? -1 : 1)),
    ).toEqual(want);
    expect(want[1]!.orders).toEqual([]);
  });

  it('10 embeds in one select, counting nested ones, are allowed', async () => {
    const five = Array.from({ length: 5 }, (_, i) => `customer:c${i}(city(name))`).join(',');
    const [r] = await rows(`Order?${qs(`select=id,${five}&sort=id&limit=1`)}`);
    const c = customer(S.orders[0]!.customerId);
    expect(r).toEqual({
      id: 1,
      ...Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`c${i}`, { city: city(c) }])),
    });
    const ten = Array.from({ length: 10 }, (_, i) => `customer:c${i}(name)`).join(',');
    expect(Object.keys((await rows(`Order?${qs(`select=${ten}&limit=1`)}`))[0])).toHaveLength(10);
  });
});

describe('single record: GET /<table>/<id>?select=', () => {
  it('fields, aliases and embeds', async () => {
    const o = S.orders[3]!;
    const res = await t.request(
      'GET',
      `${BASE}/Order/${o.id}?${qs('select=id,total:amount,customer:buyer(name,city(name)),items(productId,quantity)')}`,
    );
    expect(res.status, res.text).toBe(200);
    const c = customer(o.customerId);
    expect({ ...res.body.data, items: byProduct(res.body.data.items) }).toEqual({
      id: o.id,
      amount: o.total,
      buyer: { name: c.name, city: city(c) },
      items: itemsOf(o).map(({ productId, quantity }) => ({ productId, quantity })),
    });
    expect(Object.keys(res.body)).toEqual(['data']);
  });

  it('a customer with its orders', async () => {
    const res = await t.request('GET', `${BASE}/Customer/${uuid(2)}?${qs('select=name,orders(id)')}`);
    expect(res.status, res.text).toBe(200);
    expect({
      ...res.body.data,
      orders: res.body.data.orders.map((x: any) => x.id).sort((a: number, b: number) => a - b),
    }).toEqual({
      name: customer(uuid(2)).name,
      orders: S.orders.filter((o) => o.customerId === uuid(2)).map((o) => o.id),
    });
  });

  it.each(['select=nope', 'select=id,supplier(name)', 'select=customer(city(customers(orders(id))))'])(
    'bad select → 400 select: %s',
    async (query) => {
      expectProblem(await t.request('GET', `${BASE}/Order/1?${qs(query)}`), 400, undefined, 'select');
    },
  );
});

describe('bad selects → 400 naming select', () => {
  const eleven = Array.from({ length: 11 }, (_, i) => `customer:c${i}(name)`).join(',');
  const fivePlusOne = `${Array.from({ length: 5 }, (_, i) => `customer:c${i}(city(name))`).join(',')},items(quantity)`;
  it.each([
    ['4 embeds deep (City)', 'City', 'select=customers(orders(items(product(sku))))'],
    ['4 embeds deep (Order)', 'Order', 'select=id,customer(city(customers(orders(id))))'],
    ['11 embeds', 'Order', `select=${eleven}`],
    ['11 embeds counting nested ones', 'Order', `select=${fivePlusOne}`],
    ['embed of an unknown relation', 'Order', 'select=id,supplier(name)'],
    ['unknown field', 'Order', 'select=id,nope'],
    ['unknown field inside an embed', 'Order', 'select=id,customer(nope)'],
    ['a field embedded as a relation', 'Order', 'select=total(x)'],
    ['a relation without parentheses', 'Order', 'select=id,customer'],
    ['the same output key twice', 'Order', 'select=id,total:id'],
    ['an alias that is not a name', 'Order', 'select=total:a-b'],
    ['unbalanced parentheses', 'Order', 'select=id,customer(name'],
    ['empty', 'Order', 'select='],
  ])('%s', async (_name, table, query) => {
    expectProblem(await t.request('GET', `${BASE}/${table}?${qs(query)}`), 400, undefined, 'select');
  });

  it('a field the role cannot read is left out silently (catalog role reads Product only; customer role, Order.note)', async () => {
    const { key } = await t.createKey(['customer']);
    expect(await rows('Order?select=id,total', key)).toEqual([]); // readable fields: fine (no user → no rows)
    expect((await t.request('GET', `${BASE}/Order?select=id,note`, { key })).status).toBe(200);
    const { key: reader } = await t.createKey(['noteless']);
    const all = await rows('Order?select=id,note,total&limit=3', t.adminKey);
    expect(await rows('Order?select=id,note,total&limit=3', reader)).toEqual(
      all.map((o: any) => ({ id: o.id, total: o.total })),
    );
    expect(await rows('Order?select=note:n&limit=3', reader)).toEqual(all.map(() => ({})));
    // a name the table does not have is still a 400
    expectProblem(await t.request('GET', `${BASE}/Order?select=id,notes`, { key: reader }), 400, undefined, 'select');
  });
});
