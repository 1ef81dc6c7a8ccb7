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
