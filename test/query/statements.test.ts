// Every read sends exactly one SQL statement, whatever it asks for: filters, relation filters,
// sorts, embeds two levels deep, a single read with embeds, an aggregate, a _query, a total count
// and a cursor page (runtime/query/compile-read.ts: "one statement whose rows are finished JSON").
// Statements are seen through the server's onQuery hook. Background housekeeping that runs on
// timers, off the request path (rate-limit window flush, API-key last-used flush, idempotency
// cleanup), is not part of a request and is left out of the count.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSeed, qs, writeSeed, type Seed } from '../support/query-seed.ts';
import { startTestServer, type TestServer, type TestResponse } from '../support/server.ts';

const BASE = '/gw/api/rest';
const BACKGROUND = [
  /svcgen\.rate_limits/,
  /UPDATE svcgen\.api_keys k SET last_used_at/,
  /svcgen\.idempotency WHERE expires_at/,
];
let t: TestServer;
let S: Seed;
let seen: string[] = [];

beforeAll(async () => {
  t = await startTestServer({ onQuery: (text) => seen.push(text) });
  S = buildSeed();
  await writeSeed(t.db, S);
  // The first request of a key looks the key up; later ones use the cache.
  expect((await t.request('GET', `${BASE}/City`)).status).toBe(200);
});
afterAll(() => t?.close());

/** The statements one request sends (counter reset right before it). */
async function statementsOf(send: () => Promise<TestResponse>): Promise<{ res: TestResponse; statements: string[] }> {
  seen = [];
  const res = await send();
  const statements = seen.filter((s) => !BACKGROUND.some((b) => b.test(s)));
  return { res, statements };
}

function expectOne(res: TestResponse, statements: string[]): void {
  expect(res.status, res.text).toBe(200);
  expect(statements, statements.join('\n---\n')).toHaveLength(1);
  expect(statements[0]).toMatch(/env_master/);
}

const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
const cityOf = (customerId: string) =>
  S.cities.find((c) => c.id === S.customers.find((p) => p.id === customerId)!.cityId)?.name;

describe('one statement per read', () => {
  it('list with filters, a two-level relation filter, a multi-column sort and a 2-level embed', async () => {
    const query = qs(
      'status=in.(open,paid)&total=gt.5&customer.city.name=equals.Paris&or=(note.is_empty.true,placedAt.is_not_empty.true)' +
        '&sort=-total,placedAt&select=id,total,customer(name,city(name)),items(quantity,product(sku))&limit=5',
    );
    const { res, statements } = await statementsOf(() => t.request('GET', `${BASE}/Order?${query}`));
    expectOne(res, statements);
    const want = S.orders
      .filter(
        (o) =>
          (o.status === 'open' || o.status === 'paid') &&
          o.total > 5 &&
          cityOf(o.customerId) === 'Paris' &&
          (o.note === null || o.note === '' || o.placedAt !== null),
      )
      .sort((a, b) => b.total - a.total || cmp(a.placedAt ?? '~', b.placedAt ?? '~') || a.id - b.id)
      .slice(0, 5);
    expect(res.body.data.map((r: { id: number }) => r.id)).toEqual(want.map((o) => o.id));
    expect(res.body.data[0].customer.city).toEqual({ name: 'Paris' });
  });

  it('single read with embeds', async () => {
    const { res, statements } = await statementsOf(() =>
      t.request(
        'GET',
        `${BASE}/Order/4?${qs('select=id,customer(name,city(name)),items(quantity,product(sku,title))')}`,
      ),
    );
    expectOne(res, statements);
    expect(res.body.data.id).toBe(4);
    expect(res.body.data.items).toHaveLength(S.items.filter((i) => i.orderId === 4).length);
  });

  it('embeds with their own filter, relation filter, sort and limit at two levels', async () => {
    const query = qs(
      'select=id,customers(id,orders(id;items.quantity=gte.2;sort=-total;limit=2);vip=equals.true;offset=1)&sort=id',
    );
    const { res, statements } = await statementsOf(() => t.request('GET', `${BASE}/City?${query}`));
    expectOne(res, statements);
    expect(res.body.data.some((c: any) => c.customers.some((p: any) => p.orders.length === 2))).toBe(true);
  });

  it('single read without select', async () => {
    const { res, statements } = await statementsOf(() => t.request('GET', `${BASE}/Customer/${S.customers[0]!.id}`));
    expectOne(res, statements);
  });

  it('aggregate with a filter, groupBy, having and sort', async () => {
    const query = qs(
      'status=not_equals.cancelled&customer.vip=equals.true&groupBy=status&fn=count,sum:total,max:placedAt&having=count.gt.1&sort=-count',
    );
    const { res, statements } = await statementsOf(() => t.request('GET', `${BASE}/Order/_aggregate?${query}`));
    expectOne(res, statements);
    expect(res.body.data.aggregates.length).toBeGreaterThan(0);
  });

  it('_query with filter, sort, pagination and select children', async () => {
    const body = {
      filter: [
        { field: 'status', operator: 'in', value: ['open', 'shipped'] },
        { field: 'customer.city.name', operator: 'equals', value: 'Berlin' },
      ],
      sort: [{ field: 'total', direction: 'DESC' }],
      pagination: { first: 5, skip: 1 },
      select: [
        { field: 'id' },
        { field: 'customer', children: [{ field: 'name' }, { field: 'city', children: [{ field: 'name' }] }] },
      ],
    };
    const { res, statements } = await statementsOf(() => t.request('POST', `${BASE}/Order/_query`, { body }));
    expectOne(res, statements);
    expect(res.body.data.every((r: any) => r.customer.city.name === 'Berlin')).toBe(true);
  });

  it('list with Prefer: count=exact (rows and total in one statement)', async () => {
    const { res, statements } = await statementsOf(() =>
      t.request('GET', `${BASE}/Order?${qs('status=equals.paid&sort=-total&limit=3&select=id,customer(name)')}`, {
        headers: { prefer: 'count=exact' },
      }),
    );
    expectOne(res, statements);
    expect(res.body.meta.pagination.totalCount).toBe(S.orders.filter((o) => o.status === 'paid').length);
    expect(res.body.data).toHaveLength(3);
  });

  it('list with Prefer: count=exact and an empty page', async () => {
    const { res, statements } = await statementsOf(() =>
      t.request('GET', `${BASE}/Order?status=equals.paid&offset=900`, { headers: { prefer: 'count=exact' } }),
    );
    expectOne(res, statements);
    expect(res.body.data).toEqual([]);
  });

  it('a cursor page (after)', async () => {
    const first = await t.request('GET', `${BASE}/Order?sort=-total&limit=5`);
    const cursor = first.body.meta.pagination.nextCursor;
    const { res, statements } = await statementsOf(() =>
      t.request('GET', `${BASE}/Order?sort=-total&limit=5&after=${encodeURIComponent(cursor)}`),
    );
    expectOne(res, statements);
  });

  it('a list by a role with a row filter and a field list', async () => {
    const { key } = await t.createKey(['customer']);
    expect((await t.request('GET', `${BASE}/City`, { key })).status).toBe(200);
    const { res, statements } = await statementsOf(() =>
      t.request('GET', `${BASE}/Order?sort=-total&select=id,total`, { key }),
    );
    expectOne(res, statements);
  });
});
