// A filtered list compiles its statement once per caller and filter shape (runtime/query/kept-statements.ts
// keptPage, runtime/query/condition-shape.ts): the next request of that shape only fills in its
// own values. Regression test for issue 33, where every filtered list compiled its SQL afresh
// (about 11 KiB of allocation and a third of the handler's time), and a check that filled-in
// values answer each request with its own rows and cursors.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildSeed, writeSeed, type Seed } from '../support/query-seed.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const compiles = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../runtime/query/compile-read.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../runtime/query/compile-read.ts')>();
  return {
    ...real,
    compileRead: (...args: Parameters<typeof real.compileRead>) => {
      compiles.count++;
      return real.compileRead(...args);
    },
  };
});

const BASE = '/gw/api/rest';
let t: TestServer;
let S: Seed;

beforeAll(async () => {
  t = await startTestServer({
    // Two grants differing only in their row filter: the same request shape must not share a statement.
    configPatch: (raw) => {
      raw.roles.openOrders = { tables: { Order: { read: { filter: { status: 'open' } } } } };
      raw.roles.paidOrders = { tables: { Order: { read: { filter: { status: 'paid' } } } } };
    },
  });
  S = buildSeed();
  await writeSeed(t.db, S);
});
afterAll(() => t?.close());

/** The ids of `status`'s orders in the order `sort=-total` gives (ties by id). */
function byTotal(status: string): number[] {
  return S.orders
    .filter((o) => o.status === status)
    .sort((a, b) => b.total - a.total || a.id - b.id)
    .map((o) => o.id);
}

async function page(path: string, key?: string) {
  const res = await t.request('GET', `${BASE}/${path}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body as { data: { id: number; status: string }[]; meta: { pagination: { nextCursor: string | null } } };
}

describe('filtered list statements kept per caller and shape', () => {
  it('compiles once for a shape, and each request gets the rows of its own values', async () => {
    await page('Order?status=equals.open&sort=-total&limit=2'); // compiled here
    compiles.count = 0;
    for (const status of ['paid', 'shipped', 'open', 'cancelled']) {
      const body = await page(`Order?status=equals.${status}&sort=-total&limit=2`);
      expect(body.data.map((r) => r.id)).toEqual(byTotal(status).slice(0, 2));
    }
    expect(compiles.count).toBe(0);
    // Another shape (a range added) is compiled once, then kept too.
    await page('Order?status=equals.paid&total=gte.1&sort=-total&limit=2');
    await page('Order?status=equals.open&total=gte.2&sort=-total&limit=2');
    expect(compiles.count).toBe(1);
  });

  it("binds each page's cursor to its own values: the next page continues that filter", async () => {
    const first = await page('Order?status=equals.shipped&sort=-total&limit=2');
    const next = await page(
      `Order?status=equals.shipped&sort=-total&limit=2&after=${first.meta.pagination.nextCursor}`,
    );
    expect(next.data.map((r) => r.id)).toEqual(byTotal('shipped').slice(2, 4));
    // The cursor of the shipped list is refused for the same shape with another value.
    const res = await t.request(
      'GET',
      `${BASE}/Order?status=equals.paid&sort=-total&limit=2&after=${first.meta.pagination.nextCursor}`,
    );
    expect(res.status).toBe(400);
  });

  it('another caller compiles its own statement', async () => {
    await page('Order?status=equals.open&sort=-total&limit=2');
    const other = await t.createKey(['admin']);
    compiles.count = 0;
    const body = await page('Order?status=equals.paid&sort=-total&limit=2', other.key);
    expect(body.data.map((r) => r.id)).toEqual(byTotal('paid').slice(0, 2));
    expect(compiles.count).toBe(1);
  });

  it('callers whose grants differ (other row filters) never share a statement: each gets its own rows', async () => {
    const open = await t.createKey(['openOrders']);
    const paid = await t.createKey(['paidOrders']);
    compiles.count = 0;
    for (const [key, status] of [
      [open.key, 'open'],
      [paid.key, 'paid'],
      [open.key, 'open'],
      [paid.key, 'paid'],
    ] as const) {
      const body = await page('Order?total=gte.0&sort=-total&limit=3', key);
      expect(body.data.map((r) => r.id)).toEqual(byTotal(status).slice(0, 3));
      expect(body.data.every((r) => r.status === status)).toBe(true);
    }
    // One statement each, kept: the second round compiles nothing.
    expect(compiles.count).toBe(2);
  });
});

describe('the page limit in the kept statement', () => {
  it('is part of the shape (a literal in the SQL): each limit compiles once, offsets only fill in', async () => {
    const key = (await t.createKey(['admin'])).key;
    const ids = S.orders.map((o) => o.id).sort((a, b) => a - b);
    compiles.count = 0;
    for (const [limit, offset] of [
      [2, 0],
      [3, 0],
      [2, 0],
      [3, 0],
      [2, 1],
      [2, 4],
      [3, 2],
      [3, 5],
    ] as const) {
      const body = await page(`Order?limit=${limit}&offset=${offset}`, key);
      expect(body.data.map((r) => r.id)).toEqual(ids.slice(offset, offset + limit));
      expect(body.meta.pagination.nextCursor).not.toBeNull();
    }
    // limit 2 and 3, each without and with an offset
    expect(compiles.count).toBe(4);
  });
});

describe('the select in the kept statement', () => {
  it('each kept select is its own statement: the same caller gets the fields it asked for each time', async () => {
    const key = (await t.createKey(['admin'])).key;
    const ids = S.orders.map((o) => o.id).sort((a, b) => a - b);
    compiles.count = 0;
    for (let round = 0; round < 2; round++) {
      const narrow = await page('Order?select=id&limit=2', key);
      expect(narrow.data).toEqual(ids.slice(0, 2).map((id) => ({ id })));
      const wide = await page('Order?select=id,status&limit=2&offset=1', key);
      expect(wide.data.map((r) => Object.keys(r))).toEqual([
        ['id', 'status'],
        ['id', 'status'],
      ]);
      expect(wide.data.map((r) => r.id)).toEqual(ids.slice(1, 3));
    }
    expect(compiles.count).toBe(2);
  });
});

async function graphql(key: string, query: string) {
  const res = await t.request('POST', '/gw/api/graphql', { key, body: { query } });
  expect(res.status, res.text).toBe(200);
  const body = res.body as { data?: Record<string, unknown>; errors?: unknown };
  expect(body.errors).toBeUndefined();
  return body.data!;
}

describe('GraphQL records by key and lists use the kept statements', () => {
  it('compiles a record by key once per caller and selection: each read gets its own record', async () => {
    const key = (await t.createKey(['admin'])).key;
    const [a, b, c] = S.orders;
    await graphql(key, `{ order(id: ${a!.id}) { id status } }`);
    compiles.count = 0;
    for (const o of [b!, c!, a!])
      expect(await graphql(key, `{ order(id: ${o.id}) { id status } }`)).toEqual({
        order: { id: o.id, status: o.status },
      });
    expect(compiles.count).toBe(0);
    // Another selection is another statement.
    expect(await graphql(key, `{ order(id: ${a!.id}) { id } }`)).toEqual({ order: { id: a!.id } });
    expect(compiles.count).toBe(1);
  });

  it('never shares a kept record read between callers whose row filters differ', async () => {
    const open = await t.createKey(['openOrders']);
    const paid = await t.createKey(['paidOrders']);
    const openOrder = S.orders.find((o) => o.status === 'open')!;
    const paidOrder = S.orders.find((o) => o.status === 'paid')!;
    compiles.count = 0;
    for (let round = 0; round < 2; round++) {
      for (const [key, mine, other] of [
        [open.key, openOrder, paidOrder],
        [paid.key, paidOrder, openOrder],
      ] as const) {
        expect(await graphql(key, `{ order(id: ${mine.id}) { id status } }`)).toEqual({
          order: { id: mine.id, status: mine.status },
        });
        expect(await graphql(key, `{ order(id: ${other.id}) { id status } }`)).toEqual({ order: null });
      }
    }
    expect(compiles.count).toBe(2);
  });

  it('compiles a list once per caller and shape; offsets and filter values only fill in', async () => {
    const key = (await t.createKey(['admin'])).key;
    const list = (status: string, offset: number) =>
      graphql(
        key,
        `{ orderList(where: { status: { equals: ${status} } }, orderBy: [{ total: DESC }], limit: 2, offset: ${offset}) { id } }`,
      );
    await list('open', 1);
    compiles.count = 0;
    for (const [status, offset] of [
      ['paid', 1],
      ['shipped', 3],
      ['open', 2],
    ] as const)
      expect(await list(status, offset)).toEqual({
        orderList: byTotal(status)
          .slice(offset, offset + 2)
          .map((id) => ({ id })),
      });
    expect(compiles.count).toBe(0);
  });
});
