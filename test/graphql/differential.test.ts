// The GraphQL API against the REST API (docs/graphql.md "Filters: `where`", "Order and pages", "Relations"): for the shapes of the
// REST tests (filters incl. relation filters and groups, sorts, offset and cursor pagination, embeds
// two levels deep, by key, aggregates), the GraphQL `data` equals the REST answer for the same
// caller: an admin key, a narrow-role key (catalog), a key whose role hides fields (noteless), and a
// signed-in `customer` whose orders are filtered to their own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { buildSeed, qs, writeSeed } from '../support/query-seed.ts';

let t: AuthTestServer;
let catalogKey: string;
let notelessKey: string;
let customer: Session;

type Caller = { key: string } | { token: string };
const callers: Record<string, () => Caller> = {
  admin: () => ({ key: t.adminKey }),
  catalog: () => ({ key: catalogKey }),
  noteless: () => ({ key: notelessKey }),
  customer: () => ({ token: customer.accessToken }),
};

beforeAll(async () => {
  t = await startAuthServer({
    configPatch: (raw) => {
      raw.roles.noteless = {
        tables: {
          Order: { read: { fields: ['id', 'total', 'status', 'customerId'] } },
          Customer: { read: true },
          City: { read: true },
          OrderItem: { read: true },
        },
      };
      raw.roles.paidnotes = { tables: { Order: { read: { filter: { status: 'paid' }, fields: ['id', 'note'] } } } };
    },
  });
  await writeSeed(t.db, buildSeed());
  catalogKey = (await t.createKey(['catalog'])).key;
  notelessKey = (await t.createKey(['noteless'])).key;
  customer = await t.signupConfirmed('buyer@example.com');
  // The signed-in customer's own rows: a Customer record with their id, and orders of it among others'.
  await t.db.query(
    `insert into env_master."Customer" (id, email, name, "cityId", "updatedAt") values ($1, 'buyer@example.com', 'Buyer', 1, now())`,
    [customer.user.id],
  );
  await t.db.query(
    `insert into env_master."Order" (id, status, total, "customerId", "updatedAt") values (501, 'open', 10.5, $1, now()), (502, 'paid', 99, $1, now()), (503, 'open', 3, $1, now())`,
    [customer.user.id],
  );
  await t.db.query(
    `insert into env_master."OrderItem" ("orderId", "productId", quantity, "updatedAt") values (501, 1, 2, now()), (501, 2, 1, now()), (502, 4, 5, now())`,
  );
});
afterAll(() => t?.close());

function headers(caller: Caller): Record<string, string> {
  return { authorization: `Bearer ${'key' in caller ? caller.key : caller.token}` };
}

async function rest(caller: Caller, path: string): Promise<any> {
  const res = await t.request('GET', `/gw/api/rest/${path}`, { key: false, headers: headers(caller) });
  expect(res.status, `${path}: ${res.text}`).toBe(200);
  return res.body.data;
}

async function graphql(caller: Caller, query: string, variables?: Record<string, unknown>): Promise<any> {
  const res = await t.request('POST', '/gw/api/graphql', {
    key: false,
    body: { query, variables },
    headers: { ...headers(caller), accept: 'application/graphql-response+json' },
  });
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toBe('application/graphql-response+json; charset=utf-8');
  expect(res.body.errors, res.text).toBeUndefined();
  return res.body.data;
}

interface Case {
  name: string;
  callers: (keyof typeof callers)[];
  rest: string;
  graphql: string;
  /** The GraphQL data → what REST answers (default: the only root field's value). */
  pick?: (data: any) => any;
}

const ORDER_CALLERS = ['admin', 'noteless', 'customer'] as const;
const CASES: Case[] = [
  {
    name: 'filter (in, gt), sort desc, limit',
    callers: [...ORDER_CALLERS],
    rest: `Order?${qs('status=in.(open,paid)&total=gt.5&sort=-total,id&limit=7&select=id,total,status')}`,
    graphql:
      '{ orderList(where: { status: { in: [open, paid] }, total: { gt: 5 } }, orderBy: [{ total: DESC }, { id: ASC }], limit: 7) { id total status } }',
  },
  {
    name: 'relation filter two relations deep',
    callers: ['admin', 'noteless'],
    rest: `Order?${qs('customer.city.name=equals.Paris&sort=id&select=id,customerId')}`,
    graphql:
      '{ orderList(where: { customer: { city: { name: { equals: "Paris" } } } }, orderBy: [{ id: ASC }]) { id customerId } }',
  },
  {
    name: 'or / not groups with null',
    callers: ['admin', 'noteless'],
    rest: `Customer?${qs('or=(vip.equals.true,not(cityId.equals.null))&name=contains.a&sort=name&select=id,name,vip')}`,
    graphql:
      '{ customerList(where: { or: [{ vip: { equals: true } }, { not: { cityId: { equals: null } } }], name: { contains: "a" } }, orderBy: [{ name: ASC }]) { id name vip } }',
  },
  {
    name: 'offset pagination',
    callers: [...ORDER_CALLERS],
    rest: `Order?${qs('sort=total,id&limit=3&offset=2&select=id,total')}`,
    graphql: '{ orderList(orderBy: [{ total: ASC }, { id: ASC }], limit: 3, offset: 2) { id total } }',
  },
  {
    name: 'embeds two levels deep (to-one and to-many)',
    callers: ['admin', 'noteless'],
    rest: `Order?${qs('sort=id&limit=20&select=id,customer(name,city(name)),items(productId,quantity)')}`,
    graphql:
      '{ orderList(orderBy: [{ id: ASC }], limit: 20) { id customer { name city { name } } items { productId quantity } } }',
  },
  {
    name: 'to-many embed with its own filter, sort, limit and offset',
    callers: ['admin', 'noteless'],
    rest: `Order?${qs('sort=id&limit=30&select=id,items(productId,quantity;quantity=gt.1;sort=-productId;limit=1;offset=1),items:one(productId;sort=quantity;limit=1)')}`,
    graphql:
      '{ orderList(orderBy: [{ id: ASC }], limit: 30) { id items(where: { quantity: { gt: 1 } }, orderBy: [{ productId: DESC }], limit: 1, offset: 1) { productId quantity } one: items(orderBy: [{ quantity: ASC }], limit: 1) { productId } } }',
  },
  {
    name: 'to-many embed for the customer (their own orders and items)',
    callers: ['customer'],
    rest: `Order?${qs('sort=id&select=id,total')}`,
    graphql: '{ orderList(orderBy: [{ id: ASC }]) { id total } }',
  },
  {
    name: 'aliases, fragments, @skip/@include',
    callers: ['admin', 'noteless'],
    rest: `Order?${qs('sort=id&limit=5&select=id,total:amount,customer:buyer(name)')}`,
    graphql:
      'query Q($no: Boolean = true) { orderList(orderBy: [{ id: ASC }], limit: 5) { ...F amount: total status @skip(if: $no) customerId @include(if: false) ... on Order { buyer: customer { name } } } } fragment F on Order { id }',
  },
  {
    name: 'catalog key: products with list and decimal fields',
    callers: ['catalog', 'customer', 'admin'],
    rest: `Product?${qs('tags=contains.gift&sort=price&select=id,sku,price,tags')}`,
    graphql: '{ productList(where: { tags: { contains: "gift" } }, orderBy: [{ price: ASC }]) { id sku price tags } }',
  },
  {
    name: 'catalog key: cities by country',
    callers: ['catalog', 'admin'],
    rest: `City?${qs('country=equals.FR&sort=-name&select=id,name,country')}`,
    graphql: '{ cityList(where: { country: { equals: "FR" } }, orderBy: [{ name: DESC }]) { id name country } }',
  },
  {
    name: 'aggregate grouped, with having and sort',
    callers: [...ORDER_CALLERS],
    rest: `Order/_aggregate?${qs('fn=count,sum:total,avg:total,max:total&groupBy=status&having=count.gt.1&sort=-count,status')}`,
    graphql:
      '{ orderAggregate(groupBy: [status], having: { count: { gt: 1 } }, orderBy: [{ count: DESC }, { status: ASC }]) { status count sum_total avg_total max_total } }',
    pick: (d) => ({ aggregates: d.orderAggregate }),
  },
  {
    name: 'aggregate with a filter, no groups',
    callers: ['admin', 'catalog'],
    rest: `Product/_aggregate?${qs('fn=count,min:price,max:title&price=gte.5')}`,
    graphql: '{ productAggregate(where: { price: { gte: "5" } }) { count min_price max_title } }',
    pick: (d) => ({ aggregates: d.productAggregate }),
  },
];

describe('GraphQL data equals the REST answer', () => {
  for (const c of CASES) {
    for (const who of c.callers) {
      it(`${c.name} (${who})`, async () => {
        const caller = callers[who]!();
        const expected = await rest(caller, c.rest);
        const data = await graphql(caller, c.graphql);
        expect(c.pick ? c.pick(data) : Object.values(data)[0]).toEqual(expected);
        if (Array.isArray(expected))
          expect(expected.length, 'a case that selects nothing proves nothing').toBeGreaterThan(0);
      });
    }
  }

  it('by key: one record, null where REST answers 404 (unknown or not the caller’s)', async () => {
    for (const who of ORDER_CALLERS) {
      const caller = callers[who]!();
      const id = who === 'customer' ? 502 : 7;
      expect(await graphql(caller, `{ order(id: ${id}) { id total status } }`)).toEqual({
        order: await rest(caller, `Order/${id}?${qs('select=id,total,status')}`),
      });
    }
    // Order 7 is not the customer's: REST says 404, GraphQL null.
    const res = await t.request('GET', '/gw/api/rest/Order/7', { key: false, headers: headers(callers.customer!()) });
    expect(res.status).toBe(404);
    expect(await graphql(callers.customer!(), '{ order(id: 7) { id } }')).toEqual({ order: null });
    // A composite key, which REST has no /<id> route for.
    expect(
      await graphql(callers.admin!(), '{ orderItem(orderId: 501, productId: 2) { quantity order { id } } }'),
    ).toEqual({ orderItem: { quantity: 1, order: { id: 501 } } });
  });

  it('cursor pages: the same opaque cursors as REST, in both directions', async () => {
    for (const who of ['admin', 'customer'] as const) {
      const caller = callers[who]!();
      const first = await graphql(
        caller,
        '{ orderPage(first: 2, orderBy: [{ total: ASC }]) { nodes { id total } pageInfo { endCursor hasNextPage } } }',
      );
      expect(first.orderPage.nodes).toEqual(await rest(caller, `Order?${qs('sort=total&limit=2&select=id,total')}`));
      expect(first.orderPage.pageInfo.hasNextPage).toBe(true);
      // GraphQL's cursor continues the REST list...
      const next = await rest(
        caller,
        `Order?${qs(`sort=total&limit=2&select=id,total&after=${first.orderPage.pageInfo.endCursor}`)}`,
      );
      const second = await graphql(
        caller,
        'query($a: String) { orderPage(first: 2, after: $a, orderBy: [{ total: ASC }]) { nodes { id total } } }',
        { a: first.orderPage.pageInfo.endCursor },
      );
      expect(second.orderPage.nodes).toEqual(next);
      // ...and REST's nextCursor continues the GraphQL page.
      const restPage = await t.request('GET', `/gw/api/rest/Order?${qs('sort=total&limit=2&select=id,total')}`, {
        key: false,
        headers: headers(caller),
      });
      const viaRest = await graphql(
        caller,
        'query($a: String) { orderPage(first: 2, after: $a, orderBy: [{ total: ASC }]) { nodes { id total } } }',
        { a: restPage.body.meta.pagination.nextCursor },
      );
      expect(viaRest.orderPage.nodes).toEqual(next);
    }
  });

  it('a field visible on some rows only (two roles): null in GraphQL where REST leaves the key out', async () => {
    const caller = { key: (await t.createKey(['noteless', 'paidnotes'])).key };
    const expected = await rest(caller, `Order?${qs('sort=id&limit=12&select=id,status,note')}`);
    expect(expected.some((r: any) => !('note' in r))).toBe(true);
    expect(expected.some((r: any) => r.status === 'paid' && typeof r.note === 'string')).toBe(true);
    const data = await graphql(caller, '{ orderList(orderBy: [{ id: ASC }], limit: 12) { id status note } }');
    expect(data.orderList).toEqual(expected.map((r: any) => ({ note: null, ...r })));
  });

  it("a page's totalCount is REST's Prefer: count=exact, on the first page and after a cursor, and 0 when nothing matches", async () => {
    for (const who of ['admin', 'customer'] as const) {
      const caller = callers[who]!();
      const res = await t.request(
        'GET',
        `/gw/api/rest/Order?${qs('status=equals.open&sort=total&limit=2&select=id')}`,
        { key: false, headers: { ...headers(caller), prefer: 'count=exact' } },
      );
      expect(res.status, res.text).toBe(200);
      const first = await graphql(
        caller,
        '{ orderPage(first: 2, where: { status: { equals: open } }, orderBy: [{ total: ASC }]) { nodes { id } totalCount pageInfo { endCursor } } }',
      );
      expect(first.orderPage.nodes).toEqual(res.body.data);
      expect(first.orderPage.totalCount).toBe(res.body.meta.pagination.totalCount);
      expect(first.orderPage.totalCount).toBeGreaterThan(1);
      const next = await graphql(
        caller,
        'query($a: String) { orderPage(first: 2, after: $a, where: { status: { equals: open } }, orderBy: [{ total: ASC }]) { totalCount } }',
        { a: first.orderPage.pageInfo.endCursor },
      );
      expect(next.orderPage.totalCount).toBe(first.orderPage.totalCount);
    }
    expect(
      await graphql(
        callers.admin!(),
        '{ orderPage(where: { id: { equals: -1 } }) { nodes { id } totalCount pageInfo { hasNextPage endCursor } } }',
      ),
    ).toEqual({
      orderPage: { nodes: [], totalCount: 0, pageInfo: { hasNextPage: false, endCursor: null } },
    });
  });

  it('Decimal values are written digit for digit as REST writes them (9.90, 19.00), also in aggregates', async () => {
    const caller = callers.catalog!();
    const restText = (
      await t.request('GET', `/gw/api/rest/Product?${qs('sort=id&select=id,price')}`, {
        key: false,
        headers: headers(caller),
      })
    ).text;
    const res = await t.request('POST', '/gw/api/graphql', {
      key: false,
      body: { query: '{ productList(orderBy: [{ id: ASC }]) { id price } productAggregate { sum_price max_price } }' },
      headers: headers(caller),
    });
    expect(res.status, res.text).toBe(200);
    const prices = (text: string) => [...text.matchAll(/"price":(-?[0-9.]+)/g)].map((m) => m[1]);
    expect(prices(restText)).toEqual(['9.90', '19.00', '1.50', '35.00']);
    expect(prices(res.text)).toEqual(prices(restText));
    const aggregate = (
      await t.request('GET', `/gw/api/rest/Product/_aggregate?${qs('fn=sum:price,max:price')}`, {
        key: false,
        headers: headers(caller),
      })
    ).text;
    expect(aggregate).toContain('"sum_price":65.40');
    expect(res.text).toContain('"sum_price":65.40');
    expect(res.text).toContain('"max_price":35.00');
    // In an embed too.
    const admin = callers.admin!();
    const embedded = (
      await t.request('GET', `/gw/api/rest/OrderItem?${qs('sort=orderId,productId&limit=6&select=product(price)')}`, {
        key: false,
        headers: headers(admin),
      })
    ).text;
    const viaGraphql = await t.request('POST', '/gw/api/graphql', {
      key: false,
      body: {
        query: '{ orderItemList(orderBy: [{ orderId: ASC }, { productId: ASC }], limit: 6) { product { price } } }',
      },
      headers: headers(admin),
    });
    expect(prices(embedded)).toHaveLength(6);
    expect(prices(embedded).some((p) => p!.endsWith('0'))).toBe(true);
    expect(prices(viaGraphql.text)).toEqual(prices(embedded));
  });

  it('two aliases of one relation with different arguments each get their own rows', async () => {
    const data = await graphql(
      callers.admin!(),
      '{ orderList(where: { id: { in: [501, 502] } }, orderBy: [{ id: ASC }]) { id big: items(where: { quantity: { gt: 1 } }) { productId } all: items(orderBy: [{ productId: DESC }]) { productId } } }',
    );
    expect(data.orderList).toEqual([
      { id: 501, big: [{ productId: 1 }], all: [{ productId: 2 }, { productId: 1 }] },
      { id: 502, big: [{ productId: 4 }], all: [{ productId: 4 }] },
    ]);
  });
});
