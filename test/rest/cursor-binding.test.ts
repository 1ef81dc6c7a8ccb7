// Cursors are bound to the caller they were given to (docs/api.md §5.8, docs/permissions.md
// "Reading"). A cursor carries the last row's sort values and key; it was bound to the table, order
// and filter only, so another caller's leaked cursor positioned that caller's page by values it
// might not read. Now caller B sending caller A's cursor gets exactly the 400 of a forged cursor,
// through REST and GraphQL, even when both hold the same roles; A's own cursor still works in both.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
const FOREIGN = 'the cursor was altered or comes from elsewhere';

let t: TestServer;
let a: string;
let b: string;
let customerId: string;

beforeAll(async () => {
  t = await startTestServer();
  a = (await t.createKey(['admin'])).key;
  b = (await t.createKey(['admin'])).key;
  const customer = await t.request('POST', `${BASE}/Customer`, { body: { email: 'cursors@example.com', name: 'C' } });
  expect(customer.status, customer.text).toBe(201);
  customerId = customer.body.data.id;
  for (const total of [5, 10, 15, 20]) {
    const order = await t.request('POST', `${BASE}/Order`, { body: { customerId, total, note: `note ${total}` } });
    expect(order.status, order.text).toBe(201);
  }
});
afterAll(() => t?.close());

const list = (key: string, after?: string) =>
  t.request(
    'GET',
    `${BASE}/Order?customerId=equals.${customerId}&sort=-note&limit=2&select=id,total${after ? `&after=${encodeURIComponent(after)}` : ''}`,
    { key },
  );

const PAGE = `query($c: String!, $a: String) {
  orderPage(first: 2, after: $a, where: { customerId: { equals: $c } }, orderBy: [{ note: DESC }]) {
    nodes { total } pageInfo { endCursor hasNextPage }
  }
}`;
const page = (key: string, after?: string) =>
  t.request('POST', '/gw/api/graphql', { key, body: { query: PAGE, variables: { c: customerId, a: after } } });

describe("another caller's cursor is refused as a forged one", () => {
  it("REST: B sending A's nextCursor → 400 naming after, exactly as a forged cursor; A's own continues", async () => {
    const first = await list(a);
    expect(first.status, first.text).toBe(200);
    expect(first.body.data.map((o: { total: number }) => o.total)).toEqual([5, 20]);
    const cursor = first.body.meta.pagination.nextCursor as string;

    const stolen = await list(b, cursor);
    expect(stolen.status, stolen.text).toBe(400);
    expect(stolen.headers.get('content-type')).toBe('application/problem+json');
    expect(stolen.body).toEqual({
      type: '/errors/invalid-parameter',
      title: expect.any(String),
      status: 400,
      detail: `after: ${FOREIGN}`,
      instance: `${BASE}/Order`,
      errors: [{ field: 'after', rule: 'cursor', message: FOREIGN }],
    });
    // The same answer as a cursor altered by one character: nothing says whose it is.
    const forged = await list(b, `${cursor.slice(0, -2)}${cursor.at(-2) === 'A' ? 'B' : 'A'}${cursor.at(-1)}`);
    expect(forged.body).toEqual(stolen.body);

    const own = await list(a, cursor);
    expect(own.status, own.text).toBe(200);
    expect(own.body.data.map((o: { total: number }) => o.total)).toEqual([15, 10]);
  });

  it("GraphQL: B sending A's endCursor (or A's REST nextCursor) → INVALID_PARAMETER naming after; A's continues in both front ends", async () => {
    const first = await page(a);
    expect(first.status, first.text).toBe(200);
    expect(first.body.data.orderPage.nodes).toEqual([{ total: 5 }, { total: 20 }]);
    const cursor = first.body.data.orderPage.pageInfo.endCursor as string;
    const restCursor = (await list(a)).body.meta.pagination.nextCursor as string;

    for (const stolen of [cursor, restCursor]) {
      const res = await page(b, stolen);
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({
        data: { orderPage: null },
        errors: [
          {
            message: `after: ${FOREIGN}`,
            locations: expect.any(Array),
            path: ['orderPage'],
            extensions: {
              code: 'INVALID_PARAMETER',
              type: '/errors/invalid-parameter',
              status: 400,
              // GraphQL names every refusal of the query layer with rule `filter` (REST says `cursor`).
              errors: [{ field: 'after', rule: 'filter', message: FOREIGN }],
            },
          },
        ],
      });
    }
    // B's REST list refuses A's GraphQL cursor too.
    expect((await list(b, cursor)).body.errors).toEqual([{ field: 'after', rule: 'cursor', message: FOREIGN }]);

    for (const own of [cursor, restCursor]) {
      const res = await page(a, own);
      expect(res.body.data.orderPage.nodes, res.text).toEqual([{ total: 15 }, { total: 10 }]);
    }
  });
});
