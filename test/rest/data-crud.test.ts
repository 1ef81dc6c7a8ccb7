// Create, read, list, update and delete on the example tables (docs/api.md §5.1-§5.4, §5.11-§5.13).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ISO_8601, UUID, countRows, expectListEnvelope, expectProblemAt } from '../support/expect.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
/** Staging belongs to the pagination tests alone, so they know every row there. */
let stagingKey: string;

beforeAll(async () => {
  t = await startTestServer();
  stagingKey = (await t.createKey(['admin'], { environment: 'staging' })).key;
});
afterAll(() => t?.close());

async function post(table: string, body: unknown) {
  const res = await t.request('POST', `${BASE}/${table}`, { body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}
let seq = 0;
const newCustomer = () => post('Customer', { email: `c${++seq}-${randomUUID()}@example.com`, name: `Customer ${seq}` });
const newOrder = async (extra: Record<string, unknown> = {}) =>
  post('Order', { total: 10, customerId: (await newCustomer()).id, ...extra });

describe('POST', () => {
  it('201 { data: record } with a Location of the new record and ISO 8601 timestamps', async () => {
    const started = Date.now();
    const res = await t.request('POST', `${BASE}/City`, { body: { name: 'Lyon', country: 'FR' } });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      data: {
        id: expect.any(Number),
        name: 'Lyon',
        country: 'FR',
        createdAt: expect.stringMatching(ISO_8601),
        updatedAt: expect.stringMatching(ISO_8601),
      },
    });
    const { id, createdAt } = res.body.data;
    expect(res.headers.get('location')).toBe(`${BASE}/City/${id}`);
    expect(Math.abs(Date.parse(createdAt) - started)).toBeLessThan(60_000);
    const read = await t.request('GET', res.headers.get('location')!);
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
  });

  it('Prefer: return=minimal → 201 with no body and a Location', async () => {
    const res = await t.request('POST', `${BASE}/City`, {
      body: { name: 'Minimal', country: 'MI' },
      headers: { prefer: 'return=minimal' },
    });
    expect(res.status).toBe(201);
    expect(res.text).toBe('');
    const location = res.headers.get('location')!;
    expect(location).toMatch(new RegExp(`^${BASE}/City/\\d+$`));
    const read = await t.request('GET', location);
    expect(read.status).toBe(200);
    expect(read.body.data).toMatchObject({ name: 'Minimal', country: 'MI' });
  });

  it('a client-supplied id is kept (Int and UUID keys)', async () => {
    const city = await t.request('POST', `${BASE}/City`, { body: { id: 424242, name: 'Chosen', country: 'CH' } });
    expect(city.status, city.text).toBe(201);
    expect(city.body.data.id).toBe(424242);
    expect(city.headers.get('location')).toBe(`${BASE}/City/424242`);
    const id = randomUUID();
    const customer = await t.request('POST', `${BASE}/Customer`, {
      body: { id, email: `${id}@example.com`, name: 'Chosen' },
    });
    expect(customer.status, customer.text).toBe(201);
    expect(customer.body.data.id).toBe(id);
    expect(customer.headers.get('location')).toBe(`${BASE}/Customer/${id}`);
  });

  it('a client-supplied integer id moves the id sequence past it: later creates without an id do not collide (single and bulk)', async () => {
    const product = (sku: string, id?: number) => ({
      ...(id === undefined ? {} : { id }),
      sku: `${sku}-${randomUUID()}`,
      title: sku,
      price: 1,
      tags: [],
    });
    const first = await t.request('POST', `${BASE}/Product`, { body: product('auto') });
    expect(first.status, first.text).toBe(201);
    const chosen = first.body.data.id + 3;
    expect((await t.request('POST', `${BASE}/Product`, { body: product('chosen', chosen) })).status).toBe(201);
    for (let i = 1; i <= 4; i++) {
      const next = await t.request('POST', `${BASE}/Product`, { body: product(`after-${i}`) });
      expect(next.status, next.text).toBe(201);
      expect(next.body.data.id).toBe(chosen + i);
    }
    const bulk = await t.request('POST', `${BASE}/Product/_bulk`, {
      body: { items: [product('bulk-chosen', chosen + 100), product('bulk-auto')] },
    });
    expect(bulk.status, bulk.text).toBe(201);
    expect(bulk.body.data.items).toEqual([{ id: chosen + 100 }, { id: chosen + 101 }]);
  });

  it('Customer gets a UUID id and its defaults when none are sent', async () => {
    const email = `${randomUUID()}@example.com`;
    const res = await t.request('POST', `${BASE}/Customer`, { body: { email, name: 'Ann' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      data: {
        id: expect.stringMatching(UUID),
        email,
        name: 'Ann',
        vip: false,
        cityId: null,
        createdAt: expect.stringMatching(ISO_8601),
        updatedAt: expect.stringMatching(ISO_8601),
      },
    });
    expect(await countRows(t.db, 'Customer', 'master', 'id = $1', [res.body.data.id])).toBe(1);
  });
});

describe('GET one', () => {
  it('200 { data: record }; a missing record → 404 Problem', async () => {
    const order = await newOrder({ note: 'hello' });
    const res = await t.request('GET', `${BASE}/Order/${order.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: order });
    expectProblemAt(await t.request('GET', `${BASE}/Order/2000000000`), 404, `${BASE}/Order/2000000000`, 'not-found');
  });

  it.each([
    '/Customer/not-a-uuid',
    `/Customer/${'0'.repeat(8)}-0000-0000-0000-000000000000`,
    '/City/abc',
    '/City/99999999999',
    '/City/1.5',
    '/City/-1',
    '/City/%20',
    "/City/1'%20or%20'1'='1",
  ])('GET, PATCH and DELETE %s → 404', async (path) => {
    const received = `${BASE}${path}`;
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const res = await t.request(method, received, method === 'PATCH' ? { body: { name: 'x' } } : {});
      expectProblemAt(res, 404, received, 'not-found');
    }
  });
});

describe('list', () => {
  let ids: number[];
  beforeAll(async () => {
    ids = [];
    for (let i = 0; i < 5; i++) {
      const res = await t.request('POST', `${BASE}/Product`, {
        key: stagingKey,
        environment: 'staging',
        body: { sku: `PAGE-${i}`, title: `Page ${i}`, price: i, tags: [] },
      });
      expect(res.status, res.text).toBe(201);
      ids.push(res.body.data.id);
    }
  });
  const page = (query: string) =>
    t.request('GET', `${BASE}/Product${query}`, { key: stagingKey, environment: 'staging' });

  it('defaults: limit 100, offset 0, every record', async () => {
    const data = expectListEnvelope(await page(''), {
      limit: 100,
      offset: 0,
      hasNextPage: false,
      hasPreviousPage: false,
    });
    expect(data.map((p) => p.id).sort((a, b) => a - b)).toEqual(ids);
    expect(data[0]).toEqual({
      id: expect.any(Number),
      sku: expect.any(String),
      title: expect.any(String),
      price: expect.any(Number),
      stock: 0,
      tags: [],
      createdAt: expect.stringMatching(ISO_8601),
      updatedAt: expect.stringMatching(ISO_8601),
    });
  });

  it.each([
    ['?limit=2', 2, 0, 2, true, false],
    ['?limit=2&offset=2', 2, 2, 2, true, true],
    ['?limit=2&offset=4', 2, 4, 1, false, true],
    ['?limit=5', 5, 0, 5, false, false],
    ['?limit=4&offset=1', 4, 1, 4, false, true],
    ['?offset=5', 100, 5, 0, false, true],
    ['?offset=50', 100, 50, 0, false, true],
    ['?first=2&skip=2', 2, 2, 2, true, true],
    ['?first=3', 3, 0, 3, true, false],
    ['?skip=3', 100, 3, 2, false, true],
    ['?limit=1000', 1000, 0, 5, false, false],
  ])(
    '%s → limit %i, offset %i, %i rows, hasNextPage %s, hasPreviousPage %s',
    async (query, limit, offset, count, hasNextPage, hasPreviousPage) => {
      const data = expectListEnvelope(await page(query), { limit, offset, hasNextPage, hasPreviousPage });
      expect(data).toHaveLength(count);
    },
  );

  it('offset pages partition the records, in a stable order', async () => {
    const seen: number[] = [];
    for (const offset of [0, 2, 4])
      seen.push(...(await page(`?limit=2&offset=${offset}`)).body.data.map((p: { id: number }) => p.id));
    expect(seen).toHaveLength(5);
    expect([...seen].sort((a, b) => a - b)).toEqual(ids);
  });

  it('every list response carries meta.pagination.nextCursor: a string, null on the last page (docs/api.md §5.8)', async () => {
    const first = await page('?limit=2');
    expect(first.body.meta.pagination.nextCursor).toEqual(expect.any(String));
    const last = await page('?limit=2&offset=4');
    expect(last.body.meta.pagination).toHaveProperty('nextCursor', null);
  });

  it.each([
    ['limit=1001', 'limit'],
    ['first=1001', 'first'],
    ['limit=abc', 'limit'],
    ['limit=-1', 'limit'],
    ['limit=1.5', 'limit'],
    ['limit=', 'limit'],
    ['offset=abc', 'offset'],
    ['offset=-1', 'offset'],
    ['skip=x', 'skip'],
  ])('?%s → 400 Problem naming %s', async (query, field) => {
    expectProblemAt(await page(`?${query}`), 400, `${BASE}/Product`, 'invalid-parameter', field);
  });
});

describe('PATCH', () => {
  const old = '2001-02-03T04:05:06.789Z';
  it.each(['application/merge-patch+json', 'application/json'])(
    'merge patch (%s): null clears, untouched fields stay, updatedAt moves',
    async (type) => {
      const order = await newOrder({ note: 'before', placedAt: '2024-01-02T03:04:05.000Z', total: 12.5 });
      await t.db.query(`update env_master."Order" set "createdAt" = $1, "updatedAt" = $1 where id = $2`, [
        old,
        order.id,
      ]);
      const started = Date.now();
      const res = await t.request('PATCH', `${BASE}/Order/${order.id}`, {
        raw: JSON.stringify({ note: null, status: 'paid' }),
        headers: { 'content-type': type },
      });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({
        data: { ...order, note: null, status: 'paid', createdAt: old, updatedAt: expect.stringMatching(ISO_8601) },
      });
      expect(Date.parse(res.body.data.updatedAt)).toBeGreaterThan(Date.parse(old));
      expect(Date.parse(res.body.data.updatedAt)).toBeGreaterThanOrEqual(started - 60_000);
      expect((await t.request('GET', `${BASE}/Order/${order.id}`)).body).toEqual(res.body);
    },
  );

  it.each([
    ['an unknown field', { notes: 'x' }, 'notes'],
    ['createdAt', { createdAt: '2020-01-01T00:00:00.000Z' }, 'createdAt'],
    ['updatedAt', { updatedAt: '2020-01-01T00:00:00.000Z' }, 'updatedAt'],
    ['the id', { id: 5, note: 'x' }, 'id'],
    ['a relation', { customer: { name: 'x' } }, 'customer'],
  ])('writing %s → 422 naming it, nothing changes', async (_name, body, field) => {
    const order = await newOrder();
    const path = `${BASE}/Order/${order.id}`;
    expectProblemAt(await t.request('PATCH', path, { body }), 422, path, 'validation', field);
    expect((await t.request('GET', path)).body).toEqual({ data: order });
  });

  it('a missing record → 404', async () => {
    expectProblemAt(
      await t.request('PATCH', `${BASE}/City/2000000000`, { body: { name: 'x' } }),
      404,
      `${BASE}/City/2000000000`,
      'not-found',
    );
  });
});

describe('DELETE', () => {
  it('204 with no body, then GET → 404 and DELETE → 404', async () => {
    const city = await post('City', { name: 'Gone', country: 'GO' });
    const path = `${BASE}/City/${city.id}`;
    const res = await t.request('DELETE', path);
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
    expect(await countRows(t.db, 'City', 'master', 'id = $1', [city.id])).toBe(0);
    expectProblemAt(await t.request('GET', path), 404, path, 'not-found');
    expectProblemAt(await t.request('DELETE', path), 404, path, 'not-found');
  });
});

describe('composite key (OrderItem)', () => {
  it('POST → 201 with a Location that filters on the key fields', async () => {
    const order = await newOrder();
    const product = await post('Product', { sku: `OI-${randomUUID()}`, title: 'Item', price: '1.00', tags: [] });
    const res = await t.request('POST', `${BASE}/OrderItem`, { body: { orderId: order.id, productId: product.id } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      data: {
        orderId: order.id,
        productId: product.id,
        quantity: 1,
        createdAt: expect.stringMatching(ISO_8601),
        updatedAt: expect.stringMatching(ISO_8601),
      },
    });
    const location = res.headers.get('location')!;
    expect(location).toBe(`${BASE}/OrderItem?orderId=equals.${order.id}&productId=equals.${product.id}`);
    const found = expectListEnvelope(await t.request('GET', location), {
      limit: 100,
      offset: 0,
      hasNextPage: false,
      hasPreviousPage: false,
    });
    expect(found).toEqual([res.body.data]);
  });

  it.each(['GET', 'PATCH', 'DELETE'])('%s /OrderItem/1 → 404 Problem', async (method) => {
    const res = await t.request(method, `${BASE}/OrderItem/1`, method === 'PATCH' ? { body: { quantity: 2 } } : {});
    expectProblemAt(res, 404, `${BASE}/OrderItem/1`, 'not-found');
  });
});

describe('value round-trips', () => {
  it.each([
    ['12.30', 12.3, '12.30'],
    [0.1, 0.1, '0.10'],
    ['99999999.99', 99999999.99, '99999999.99'],
    [-5, -5, '-5.00'],
    ['0', 0, '0.00'],
  ])('Decimal price %j → %d (stored as %s)', async (price, returned, stored) => {
    const product = await post('Product', { sku: `DEC-${randomUUID()}`, title: 'Decimal', price, tags: ['x'] });
    expect(product.price).toBe(returned);
    expect((await t.request('GET', `${BASE}/Product/${product.id}`)).body.data.price).toBe(returned);
    const [row] = await t.db.query<{ p: string }>(`select price::text as p from env_master."Product" where id = $1`, [
      product.id,
    ]);
    expect(row!.p).toBe(stored);
  });

  it('String[] (tags) keeps order, duplicates, empty strings, quotes, commas, braces and unicode', async () => {
    const tags = ['b', 'a', 'a', '', 'with, comma', '"quoted"', '{brace}', 'NULL', 'ünïcødé ✓', 'back\\slash'];
    const product = await post('Product', { sku: `TAG-${randomUUID()}`, title: 'Tags', price: 1, tags });
    expect(product.tags).toEqual(tags);
    expect((await t.request('GET', `${BASE}/Product/${product.id}`)).body.data.tags).toEqual(tags);
    const patched = await t.request('PATCH', `${BASE}/Product/${product.id}`, { body: { tags: [] } });
    expect(patched.body.data.tags).toEqual([]);
  });

  it('enum, Float and nullable DateTime round-trip', async () => {
    const placedAt = '2024-02-29T13:45:30.123Z';
    const order = await newOrder({ status: 'shipped', total: 19.99, placedAt });
    expect(order).toMatchObject({ status: 'shipped', total: 19.99, placedAt, note: null });
    const path = `${BASE}/Order/${order.id}`;
    expect((await t.request('GET', path)).body.data).toMatchObject({ status: 'shipped', total: 19.99, placedAt });
    const offset = await t.request('PATCH', path, { body: { placedAt: '2024-03-01T01:00:00+02:00' } });
    expect(offset.body.data.placedAt).toBe('2024-02-29T23:00:00.000Z');
    const cleared = await t.request('PATCH', path, { body: { placedAt: null } });
    expect(cleared.body.data.placedAt).toBeNull();
    expect((await t.request('GET', path)).body.data.placedAt).toBeNull();
  });
});
