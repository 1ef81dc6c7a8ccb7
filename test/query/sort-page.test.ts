// Sorting and pagination of GET /<table> (docs/api.md §5.4, §5.6, §5.8, §7): sort forms and the primary-key
// tie break, limit/offset and their aliases, totalCount, and keyset cursors walked end to end.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectListEnvelope } from '../support/expect.ts';
import { buildSeed, qs, uuid, writeSeed, type Order, type Seed } from '../support/query-seed.ts';
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

type Term = [keyof Order, 'asc' | 'desc'];
/** The order of docs/api.md §5.6: the terms, nulls last ascending / first descending, then the id. */
function ordered(rows: Order[], terms: Term[]): number[] {
  const all: Term[] = [...terms, ['id', 'asc']];
  return [...rows]
    .sort((a, b) => {
      for (const [f, d] of all) {
        const x = a[f];
        const y = b[f];
        if (x === y) continue;
        if (x === null) return d === 'asc' ? 1 : -1;
        if (y === null) return d === 'asc' ? -1 : 1;
        return (x < y ? -1 : 1) * (d === 'asc' ? 1 : -1);
      }
      return 0;
    })
    .map((o) => o.id);
}

async function get(path: string, headers?: Record<string, string>) {
  const res = await t.request('GET', `${BASE}/${path}`, { headers });
  expect(res.status, `${path}: ${res.text}`).toBe(200);
  return res;
}
const idsOf = (res: { body: any }) => res.body.data.map((r: { id: number }) => r.id);

describe('sort', () => {
  it.each<[string, Term[]]>([
    [
      'sort=total,-placedAt',
      [
        ['total', 'asc'],
        ['placedAt', 'desc'],
      ],
    ],
    [
      'sort=total.asc,placedAt.desc',
      [
        ['total', 'asc'],
        ['placedAt', 'desc'],
      ],
    ],
    ['sort=-total', [['total', 'desc']]],
    ['sort=total.desc', [['total', 'desc']]],
    [
      'sort=status.asc,-total,placedAt',
      [
        ['status', 'asc'],
        ['total', 'desc'],
        ['placedAt', 'asc'],
      ],
    ],
    ['sort=placedAt', [['placedAt', 'asc']]],
    ['sort=-placedAt', [['placedAt', 'desc']]],
    [
      'sort=-customerId,total',
      [
        ['customerId', 'desc'],
        ['total', 'asc'],
      ],
    ],
    ['sort=col.total', [['total', 'asc']]],
  ])('%s', async (query, terms) => {
    const rows = query.includes('status') ? S.orders.filter((o) => o.status === 'paid') : S.orders;
    const extra = query.includes('status') ? '&status=equals.paid' : '';
    expect(idsOf(await get(`Order?${qs(query + extra)}&limit=1000`))).toEqual(ordered(rows, terms));
  });

  it('rows with equal sort values come in primary-key order, ascending, whatever the direction', async () => {
    for (const dir of ['', '-']) {
      const got: number[] = idsOf(await get(`Order?sort=${dir}total&limit=1000`));
      const byTotal = new Map<number, number[]>();
      for (const id of got) {
        const total = S.orders[id - 1]!.total;
        byTotal.set(total, [...(byTotal.get(total) ?? []), id]);
      }
      expect([...byTotal.values()].some((group) => group.length > 1)).toBe(true);
      for (const group of byTotal.values()) expect(group).toEqual([...group].sort((a, b) => a - b));
    }
  });

  it.each([
    ['unknown field', 'sort=nope'],
    ['unknown field after a good one', 'sort=total,-nope'],
    ['a relation is not a field', 'sort=customer'],
    ['empty term', 'sort=total,'],
  ])('bad sort → 400 naming sort: %s', async (_name, query) => {
    expectProblem(await t.request('GET', `${BASE}/Order?${qs(query)}`), 400, undefined, 'sort');
  });

  it('a field the role cannot read cannot be sorted on (400 sort)', async () => {
    const { key } = await t.createKey(['customer']);
    expect((await t.request('GET', `${BASE}/Order?sort=-total`, { key })).status).toBe(200);
    expectProblem(await t.request('GET', `${BASE}/Order?sort=note`, { key }), 400, undefined, 'sort');
  });
});

describe('limit and offset', () => {
  it.each([
    ['limit=5&offset=10', { limit: 5, offset: 10, hasNextPage: true, hasPreviousPage: true }, [11, 12, 13, 14, 15]],
    ['first=5&skip=10', { limit: 5, offset: 10, hasNextPage: true, hasPreviousPage: true }, [11, 12, 13, 14, 15]],
    ['limit=3', { limit: 3, offset: 0, hasNextPage: true, hasPreviousPage: false }, [1, 2, 3]],
    ['limit=10&offset=55', { limit: 10, offset: 55, hasNextPage: false, hasPreviousPage: true }, [56, 57, 58, 59, 60]],
    ['limit=60', { limit: 60, offset: 0, hasNextPage: false, hasPreviousPage: false }, S_IDS()],
    ['offset=70', { limit: 100, offset: 70, hasNextPage: false, hasPreviousPage: true }, []],
    ['', { limit: 100, offset: 0, hasNextPage: false, hasPreviousPage: false }, S_IDS()],
    ['limit=1000', { limit: 1000, offset: 0, hasNextPage: false, hasPreviousPage: false }, S_IDS()],
  ])('%s', async (query, pagination, want) => {
    const res = await get(`Order?sort=id&${query}`);
    expect(expectListEnvelope(res, pagination).map((r) => r.id)).toEqual(want);
    const cursor = res.body.meta.pagination.nextCursor;
    if (pagination.hasNextPage) expect(cursor).toEqual(expect.any(String));
    else expect(cursor).toBeNull();
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=1001', 'limit'],
    ['first=1001', 'first'],
    ['first=0', 'first'],
    ['limit=-1', 'limit'],
    ['limit=abc', 'limit'],
    ['limit=2.5', 'limit'],
    ['offset=-1', 'offset'],
    ['skip=x', 'skip'],
  ])('%s → 400 naming %s', async (query, field) => {
    expectProblem(await t.request('GET', `${BASE}/Order?${query}`), 400, undefined, field);
  });
});

function S_IDS(): number[] {
  return Array.from({ length: 60 }, (_, i) => i + 1);
}

describe('Prefer: count=exact', () => {
  const paid = () => S.orders.filter((o) => o.status === 'paid');
  it('adds meta.pagination.totalCount and Preference-Applied', async () => {
    const res = await get('Order?status=equals.paid&sort=id&limit=5', { prefer: 'count=exact' });
    expect(res.headers.get('preference-applied')).toBe('count=exact');
    expect(idsOf(res)).toEqual(
      paid()
        .slice(0, 5)
        .map((o) => o.id),
    );
    expect(res.body.meta.pagination).toEqual({
      limit: 5,
      offset: 0,
      hasNextPage: true,
      hasPreviousPage: false,
      nextCursor: expect.any(String),
      totalCount: paid().length,
    });
  });
  it('counts every matching row even when the page is empty', async () => {
    const res = await get('Order?status=equals.paid&offset=500', { prefer: 'count=exact' });
    expect(res.body.data).toEqual([]);
    expect(res.body.meta.pagination.totalCount).toBe(paid().length);
    const none = await get('Order?total=gt.100000', { prefer: 'count=exact' });
    expect(none.body.data).toEqual([]);
    expect(none.body.meta.pagination.totalCount).toBe(0);
  });
  it('without the header there is no totalCount key and no Preference-Applied', async () => {
    const res = await get('Order?status=equals.paid&limit=5');
    expect(Object.keys(res.body.meta.pagination)).not.toContain('totalCount');
    expect(res.headers.get('preference-applied')).toBeNull();
  });
});

/** Follows nextCursor with `after` until it is null; every page checked on the way. */
async function walk(path: string, size = 7, sizeParam = 'limit'): Promise<any[]> {
  const rows: any[] = [];
  let after: string | null = null;
  for (let page = 0; page < 100; page++) {
    const res = await get(`${path}&${sizeParam}=${size}${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    const p = res.body.meta.pagination;
    expect(p).toMatchObject({ limit: size, offset: 0, hasPreviousPage: after !== null });
    expect(res.body.data.length).toBeLessThanOrEqual(size);
    rows.push(...res.body.data);
    after = p.nextCursor;
    expect(p.hasNextPage).toBe(after !== null);
    if (after === null) return rows;
    expect(res.body.data.length).toBe(size);
  }
  throw new Error('the cursor walk did not end');
}

describe('cursor walks: every row once, in the order of one big page', () => {
  it.each<[string, string, Term[] | null]>([
    ['Order', 'sort=-total', [['total', 'desc']]],
    ['Order', 'sort=placedAt', [['placedAt', 'asc']]],
    ['Order', 'sort=-placedAt,note', null],
    ['Order', 'sort=-total&status=in.(open,paid)', null],
    ['Order', 'sort=note.desc,total', null],
    ['Order', 'customer.name=starts_with.A', null],
    ['OrderItem', 'sort=-quantity', null],
    ['Customer', 'sort=vip', null],
  ])('%s %s', async (table, query, terms) => {
    const big = await get(`${table}?${qs(query)}&limit=1000`);
    const got = await walk(`${table}?${qs(query)}`, 7);
    expect(got).toEqual(big.body.data);
    if (terms) expect(got.map((r) => r.id)).toEqual(ordered(S.orders, terms));
    if (table === 'Order' && query === 'sort=-total&status=in.(open,paid)') {
      expect(got.map((r) => r.id)).toEqual(
        ordered(
          S.orders.filter((o) => o.status === 'open' || o.status === 'paid'),
          [['total', 'desc']],
        ),
      );
    }
  });

  it('first=<n> works with after, and the page size may change between pages', async () => {
    expect((await walk('Order?sort=-placedAt', 9, 'first')).map((r) => r.id)).toEqual(
      ordered(S.orders, [['placedAt', 'desc']]),
    );
    const first = await get('Order?sort=-total&limit=7');
    const rest = await get(
      `Order?sort=-total&limit=1000&after=${encodeURIComponent(first.body.meta.pagination.nextCursor)}`,
    );
    expect([...idsOf(first), ...idsOf(rest)]).toEqual(ordered(S.orders, [['total', 'desc']]));
    expect(rest.body.meta.pagination.nextCursor).toBeNull();
  });

  it('rows inserted during the walk neither duplicate nor skip rows that existed before', async () => {
    const want = ordered(S.orders, [['total', 'desc']]);
    const seen: number[] = [];
    const page1 = await get('Order?sort=-total&limit=7');
    seen.push(...idsOf(page1));
    const lastTotal = S.orders[seen.at(-1)! - 1]!.total;
    const add = async (total: number) =>
      (
        await t.db.query<{ id: number }>(
          `insert into env_master."Order" (status, total, "customerId", "updatedAt") values ('open', $1, $2, now()) returning id`,
          [total, uuid(1)],
        )
      )[0]!.id;
    const before = await add(5000); // sorts before the cursor: already passed
    const tie = await add(lastTotal); // same total as the cursor row, larger id: still ahead
    const ahead = await add(1); // in the part not yet visited
    try {
      let after: string | null = page1.body.meta.pagination.nextCursor;
      while (after !== null) {
        const res = await get(`Order?sort=-total&limit=7&after=${encodeURIComponent(after)}`);
        seen.push(...idsOf(res));
        after = res.body.meta.pagination.nextCursor;
      }
      expect(seen.filter((id) => id <= 60)).toEqual(want);
      expect(seen).not.toContain(before);
      expect(seen.filter((id) => id === tie || id === ahead)).toEqual([tie, ahead]);
      expect(new Set(seen).size).toBe(seen.length);
    } finally {
      await t.db.query(`delete from env_master."Order" where id = any($1)`, [[before, tie, ahead]]);
    }
  });
});

describe('bad cursors → 400 naming after', () => {
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
  async function cursorOf(path: string): Promise<string> {
    const c = (await get(path)).body.meta.pagination.nextCursor;
    expect(c).toEqual(expect.any(String));
    return c;
  }
  it('tampered, foreign, garbage, or combined with offset', async () => {
    const cursor = await cursorOf('Order?sort=-total&limit=7');
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/); // one base64url string
    const bad: [string, string][] = [
      ['a flipped character early on', `Order?sort=-total&after=${encodeURIComponent(flip(cursor, 3))}`],
      [
        'a flipped character at the end',
        `Order?sort=-total&after=${encodeURIComponent(flip(cursor, cursor.length - 2))}`,
      ],
      [
        'a flipped character in the middle',
        `Order?sort=-total&after=${encodeURIComponent(flip(cursor, Math.floor(cursor.length / 2)))}`,
      ],
      [
        'a dot-separated cursor',
        `Order?sort=-total&after=${encodeURIComponent(`${cursor.slice(0, 20)}.${cursor.slice(20)}`)}`,
      ],
      ['another sort', `Order?sort=total&after=${encodeURIComponent(cursor)}`],
      ['another sort with more terms', `Order?sort=-total,id&after=${encodeURIComponent(cursor)}`],
      ['another filter', `Order?sort=-total&status=equals.paid&after=${encodeURIComponent(cursor)}`],
      ['another table', `Customer?sort=-name&after=${encodeURIComponent(cursor)}`],
      ['garbage', 'Order?sort=-total&after=garbage'],
      ['empty', 'Order?sort=-total&after='],
      ['base64 of JSON', `Order?sort=-total&after=${Buffer.from('{"v":[1]}').toString('base64url')}`],
    ];
    for (const [name, path] of bad) {
      const res = await t.request('GET', `${BASE}/${path}`);
      expect(res.status, `${name}: ${res.text}`).toBe(400);
      expectProblem(res, 400, undefined, 'after');
    }
    // The untouched cursor still works.
    expect((await t.request('GET', `${BASE}/Order?sort=-total&after=${encodeURIComponent(cursor)}`)).status).toBe(200);
  });

  it('after together with offset → 400', async () => {
    const cursor = await cursorOf('Order?sort=-total&limit=7');
    const res = await t.request('GET', `${BASE}/Order?sort=-total&offset=7&after=${encodeURIComponent(cursor)}`);
    expectProblem(res, 400);
    expect(
      res.body.errors.map((e: { field: string }) => e.field).some((f: string) => f === 'after' || f === 'offset'),
      res.text,
    ).toBe(true);
  });
});
