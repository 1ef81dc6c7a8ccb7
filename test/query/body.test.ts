// POST /<table>/_query (docs/api.md §5.10: the list envelope; cursors as pagination.after, §5.8):
// the JSON form of a list query gives what the equivalent GET gives, walks cursors, rejects bad
// bodies with 400 naming the field, and never writes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { snapshot } from '../support/expect.ts';
import { buildSeed, qs, writeSeed, type Order, type Seed } from '../support/query-seed.ts';
import { expectProblem, startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
let S: Seed;

beforeAll(async () => {
  t = await startTestServer();
  S = buildSeed();
  await writeSeed(t.db, S);
});
afterAll(() => t?.close());

const query = (body: unknown, table = 'Order', key?: string) =>
  t.request('POST', `${BASE}/${table}/_query`, { body, key });
async function ok(body: unknown, table = 'Order') {
  const res = await query(body, table);
  expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(200);
  return res;
}
const byTotalDesc = (rows: Order[]) => [...rows].sort((a, b) => b.total - a.total || a.id - b.id);
const customerName = (o: Order) => S.customers.find((c) => c.id === o.customerId)!.name;
const idsOf = (res: { body: any }) => res.body.data.map((r: { id: number }) => r.id);

describe('same answer as the equivalent GET', () => {
  it('filter + sort + pagination + select with children', async () => {
    const body = {
      filter: [
        { field: 'status', operator: 'in', value: ['open', 'paid'] },
        { field: 'total', operator: 'gt', value: 5 },
      ],
      sort: [{ field: 'total', direction: 'DESC' }],
      pagination: { first: 5, skip: 2 },
      select: [{ field: 'id' }, { field: 'total' }, { field: 'customer', children: [{ field: 'name' }] }],
    };
    const post = await ok(body);
    const get = await t.request(
      'GET',
      `${BASE}/Order?${qs('status=in.(open,paid)&total=gt.5&sort=-total&limit=5&offset=2&select=id,total,customer(name)')}`,
    );
    expect(get.status, get.text).toBe(200);
    const want = byTotalDesc(S.orders.filter((o) => (o.status === 'open' || o.status === 'paid') && o.total > 5)).slice(
      2,
      7,
    );
    expect(post.body.data).toEqual(
      want.map((o) => ({ id: o.id, total: o.total, customer: { name: customerName(o) } })),
    );
    expect(post.body.data).toEqual(get.body.data);
    const { nextCursor: c1, ...p1 } = post.body.meta.pagination;
    const { nextCursor: c2, ...p2 } = get.body.meta.pagination;
    expect(p1).toEqual({ limit: 5, offset: 2, hasNextPage: true, hasPreviousPage: true });
    expect(p1).toEqual(p2);
    expect([typeof c1, typeof c2]).toEqual(['string', 'string']);
    expect(Object.keys(post.body)).toEqual(['data', 'meta']);
  });

  it('an empty body is the default list', async () => {
    const post = await ok({});
    const get = await t.request('GET', `${BASE}/Order`);
    expect(post.body).toEqual(get.body);
    expect(post.body.meta.pagination).toMatchObject({ limit: 100, offset: 0, hasNextPage: false });
  });

  const cases: [string, unknown[], (o: Order) => boolean][] = [
    [
      'between takes a two-element array',
      [{ field: 'total', operator: 'between', value: [5, 10] }],
      (o) => o.total >= 5 && o.total <= 10,
    ],
    [
      'between on DateTimes',
      [{ field: 'placedAt', operator: 'between', value: ['2024-01-15T10:00:00.000Z', '2024-07-01T00:00:00.000Z'] }],
      (o) =>
        o.placedAt !== null && o.placedAt >= '2024-01-15T10:00:00.000Z' && o.placedAt <= '2024-07-01T00:00:00.000Z',
    ],
    ['in takes an array', [{ field: 'id', operator: 'in', value: [3, 1, 7, 999] }], (o) => [1, 3, 7].includes(o.id)],
    [
      'not_in takes an array and keeps NULLs',
      [{ field: 'note', operator: 'not_in', value: ['Gift', 'a.b,c'] }],
      (o) => o.note !== 'Gift' && o.note !== 'a.b,c',
    ],
    ['equals null is IS NULL', [{ field: 'note', operator: 'equals', value: null }], (o) => o.note === null],
    [
      'not_equals keeps NULL rows',
      [{ field: 'note', operator: 'not_equals', value: 'Gift' }],
      (o) => o.note !== 'Gift',
    ],
    [
      'values with commas and parentheses need no quoting',
      [{ field: 'note', operator: 'in', value: ['see (box 2)', 'Fragile, handle with care.'] }],
      (o) => o.note === 'see (box 2)' || o.note === 'Fragile, handle with care.',
    ],
    [
      'contains is case-sensitive',
      [{ field: 'note', operator: 'contains', value: 'gift' }],
      (o) => o.note?.includes('gift') === true,
    ],
    [
      'is_empty takes true',
      [{ field: 'note', operator: 'is_empty', value: true }],
      (o) => o.note === null || o.note === '',
    ],
    [
      'relation filter with a JSON boolean',
      [{ field: 'customer.vip', operator: 'equals', value: true }],
      (o) => S.customers.find((c) => c.id === o.customerId)!.vip,
    ],
    [
      'two filters are ANDed',
      [
        { field: 'status', operator: 'equals', value: 'paid' },
        { field: 'total', operator: 'lte', value: 10 },
      ],
      (o) => o.status === 'paid' && o.total <= 10,
    ],
  ];
  it.each(cases)('%s', async (_name, filter, where) => {
    const want = S.orders.filter(where).map((o) => o.id);
    expect(want.length).toBeGreaterThan(0);
    expect(idsOf(await ok({ filter, sort: [{ field: 'id', direction: 'asc' }], pagination: { first: 1000 } }))).toEqual(
      want,
    );
  });

  it('Prefer: count=exact works on _query too', async () => {
    const res = await t.request('POST', `${BASE}/Order/_query`, {
      body: { filter: [{ field: 'status', operator: 'equals', value: 'shipped' }], pagination: { first: 2 } },
      headers: { prefer: 'count=exact' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('preference-applied')).toBe('count=exact');
    expect(res.body.meta.pagination.totalCount).toBe(S.orders.filter((o) => o.status === 'shipped').length);
  });
});

describe('pagination.after', () => {
  it('walks every row once, in the order of one big page, and ends with a null cursor', async () => {
    const base = {
      filter: [{ field: 'total', operator: 'gte', value: 2.5 }],
      sort: [
        { field: 'total', direction: 'DESC' },
        { field: 'placedAt', direction: 'asc' },
      ],
    };
    const big = await ok({ ...base, pagination: { first: 1000 } });
    const seen: unknown[] = [];
    let after: string | null = null;
    for (let i = 0; i < 50 && (i === 0 || after !== null); i++) {
      const res = await ok({ ...base, pagination: after ? { first: 7, after } : { first: 7 } });
      expect(res.body.data.length).toBeLessThanOrEqual(7);
      seen.push(...res.body.data);
      after = res.body.meta.pagination.nextCursor;
      expect(res.body.meta.pagination.hasNextPage).toBe(after !== null);
    }
    expect(after).toBeNull();
    expect(seen).toEqual(big.body.data);
    expect(seen.length).toBe(S.orders.filter((o) => o.total >= 2.5).length);
  });

  it('a cursor from another sort → 400', async () => {
    const first = await ok({ sort: [{ field: 'total', direction: 'DESC' }], pagination: { first: 5 } });
    const res = await query({
      sort: [{ field: 'total', direction: 'asc' }],
      pagination: { first: 5, after: first.body.meta.pagination.nextCursor },
    });
    expectProblem(res, 400, undefined, 'pagination.after');
  });
});

describe('bad bodies → 400 naming the field', () => {
  const at = (prefix: string) => new RegExp(`^${prefix.replace(/[[\].]/g, '\\$&')}`);
  const cases: [string, unknown, RegExp][] = [
    ['unknown operator', { filter: [{ field: 'total', operator: 'bigger', value: 1 }] }, /^filter(\[0\]|\.0)/],
    ['unknown field', { filter: [{ field: 'nope', operator: 'equals', value: 1 }] }, /^filter(\[0\]|\.0)/],
    [
      'unknown relation field',
      { filter: [{ field: 'customer.nope', operator: 'equals', value: 1 }] },
      /^filter(\[0\]|\.0)/,
    ],
    [
      'the second filter is the bad one',
      {
        filter: [
          { field: 'total', operator: 'gt', value: 1 },
          { field: 'status', operator: 'equals', value: 'lost' },
        ],
      },
      /^filter(\[1\]|\.1)/,
    ],
    [
      'wrong value type: text for a Float',
      { filter: [{ field: 'total', operator: 'gt', value: 'abc' }] },
      /^filter(\[0\]|\.0)/,
    ],
    [
      'wrong value type: object',
      { filter: [{ field: 'total', operator: 'equals', value: { a: 1 } }] },
      /^filter(\[0\]|\.0)/,
    ],
    [
      'wrong value type: number for a String',
      { filter: [{ field: 'note', operator: 'equals', value: 5 }] },
      /^filter(\[0\]|\.0)/,
    ],
    [
      'wrong value type: bad date',
      { filter: [{ field: 'placedAt', operator: 'gt', value: 'soon' }] },
      /^filter(\[0\]|\.0)/,
    ],
    ['in without an array', { filter: [{ field: 'status', operator: 'in', value: 'open' }] }, /^filter(\[0\]|\.0)/],
    [
      'between with three values',
      { filter: [{ field: 'total', operator: 'between', value: [1, 2, 3] }] },
      /^filter(\[0\]|\.0)/,
    ],
    [
      'in with 1001 values',
      { filter: [{ field: 'id', operator: 'in', value: Array.from({ length: 1001 }, (_, i) => i) }] },
      /^filter(\[0\]|\.0)/,
    ],
    [
      'operator on the wrong type',
      { filter: [{ field: 'total', operator: 'contains', value: '1' }] },
      /^filter(\[0\]|\.0)/,
    ],
    ['unknown key in a filter item', { filter: [{ field: 'total', operator: 'gt', value: 1, extra: 1 }] }, /^filter/],
    ['filter is not an array', { filter: { field: 'total' } }, /^filter/],
    ['unknown top-level key', { foo: 1 }, at('foo')],
    ['record fields are not a query', { status: 'paid' }, at('status')],
    ['sort on an unknown field', { sort: [{ field: 'nope', direction: 'asc' }] }, /^sort/],
    ['sort with a bad direction', { sort: [{ field: 'total', direction: 'sideways' }] }, /^sort/],
    ['pagination.first 0', { pagination: { first: 0 } }, at('pagination.first')],
    ['pagination.first 1001', { pagination: { first: 1001 } }, at('pagination.first')],
    ['pagination.first not an integer', { pagination: { first: 2.5 } }, at('pagination.first')],
    ['pagination.skip negative', { pagination: { skip: -1 } }, at('pagination.skip')],
    ['pagination.after garbage', { pagination: { after: 'garbage' } }, at('pagination.after')],
    ['pagination.after with skip', { pagination: { after: 'garbage', skip: 5 } }, /^pagination/],
    [
      'select of an unknown relation',
      { select: [{ field: 'id' }, { field: 'supplier', children: [{ field: 'name' }] }] },
      /^select/,
    ],
    ['select of an unknown field', { select: [{ field: 'nope' }] }, /^select/],
    [
      'select 4 embeds deep',
      {
        select: [
          {
            field: 'customer',
            children: [
              {
                field: 'city',
                children: [{ field: 'customers', children: [{ field: 'orders', children: [{ field: 'id' }] }] }],
              },
            ],
          },
        ],
      },
      /^select/,
    ],
  ];
  it.each(cases)('%s', async (_name, body, field) => {
    const res = await query(body);
    expectProblem(res, 400);
    expect(
      res.body.errors.map((e: { field: string }) => e.field).some((f: string) => field.test(f)),
      res.text,
    ).toBe(true);
  });

  it.each([
    ['malformed JSON', '{"filter": ['],
    ['an array body', '[]'],
    ['a string body', '"x"'],
  ])('%s → 400', async (_name, raw) => {
    const res = await t.request('POST', `${BASE}/Order/_query`, {
      raw,
      headers: { 'content-type': 'application/json' },
    });
    expectProblem(res, 400);
  });

  it('fields the role cannot read are unknown in filters and left out of select (customer role, Order.note)', async () => {
    const { key } = await t.createKey(['customer']);
    expect((await query({ filter: [{ field: 'total', operator: 'gt', value: 0 }] }, 'Order', key)).status).toBe(200);
    const f = await query({ filter: [{ field: 'note', operator: 'is_empty', value: true }] }, 'Order', key);
    expectProblem(f, 400);
    expect(
      f.body.errors.map((e: { field: string }) => e.field).some((x: string) => /^filter(\[0\]|\.0)/.test(x)),
      f.text,
    ).toBe(true);
    expect((await query({ select: [{ field: 'id' }, { field: 'note' }] }, 'Order', key)).status).toBe(200);
    expectProblem(
      await query({ select: [{ field: 'id' }, { field: 'notes' }] }, 'Order', key),
      400,
      undefined,
      'select',
    );
  });
});

describe('read-only', () => {
  it('_query changes no data, whatever the body', async () => {
    const before = await snapshot(t.db);
    const bodies: unknown[] = [
      {},
      { filter: [{ field: 'status', operator: 'equals', value: 'open' }], select: [{ field: 'id' }] },
      { status: 'cancelled', total: 0 },
      { filter: [{ field: 'note', operator: 'equals', value: 'x\'); delete from "Order"; --' }] },
      { data: { total: 1 } },
    ];
    for (const body of bodies) await query(body);
    for (const table of ['Customer', 'City', 'OrderItem', 'Product']) await query({ pagination: { first: 3 } }, table);
    expect(await snapshot(t.db)).toEqual(before);
  });
});
