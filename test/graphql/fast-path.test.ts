// The fast path of GraphQL queries (runtime/graphql/direct.ts, docs/graphql.md "How queries are
// answered"): for a battery of queries and callers, the answer with the fast path is byte for byte
// the answer graphql-js gives alone (status, content type, body), and the fast path served exactly
// the queries it should (lists and records by key of verbatim fields), falling back on the rest.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fastPathAnswers, setFastPath } from '../../runtime/graphql/direct.ts';
import { startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { buildSeed, writeSeed } from '../support/query-seed.ts';

let t: AuthTestServer;
const EXPONENT_LIKE_UUID = '0000001e-4000-4000-8000-000000000001';
const keys: Record<string, string> = {};

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
  const seed = buildSeed();
  await writeSeed(t.db, seed);
  // Floats PostgreSQL writes unlike JavaScript (1e+15, 1e-05, -0) and one it writes alike; notes
  // with characters JSON escapes.
  // A uuid with a number-like `1e-4` in its text: still written alike.
  await t.db.query(
    `insert into env_master."Customer" (id, email, name, "cityId", "updatedAt") values ($1, 'e@example.com', 'E', 1, now())`,
    [EXPONENT_LIKE_UUID],
  );
  await t.db.query(
    `insert into env_master."Order" (id, status, total, note, "customerId", "updatedAt") values
      (601, 'open', 1e15, $2, $1, now()), (602, 'paid', '-0', 'x', $1, now()),
      (603, 'open', 1e-5, null, $1, now()), (604, 'paid', 12.25, $3, $4, now())`,
    [
      seed.customers[0]!.id,
      'quote " backslash \\ newline \n tab \t bell \u0007 é 😀 \u2028',
      "a/b <c> & 'd'",
      EXPONENT_LIKE_UUID,
    ],
  );
  keys.admin = t.adminKey;
  keys.catalog = (await t.createKey(['catalog'])).key;
  keys.noteless = (await t.createKey(['noteless'])).key;
  keys.twoRoles = (await t.createKey(['noteless', 'paidnotes'])).key;
});
afterAll(() => {
  setFastPath(true);
  return t?.close();
});

type Request = { query: string; variables?: Record<string, unknown>; operationName?: string };

async function ask(key: string, request: Request, fast: boolean, get = false) {
  setFastPath(fast);
  try {
    const headers = { authorization: `Bearer ${key}`, accept: 'application/graphql-response+json' };
    const res = get
      ? await t.request('GET', `/gw/api/graphql?${new URLSearchParams({ query: request.query })}`, {
          key: false,
          headers,
        })
      : await t.request('POST', '/gw/api/graphql', { key: false, body: request, headers });
    return { status: res.status, type: res.headers.get('content-type'), text: res.text };
  } finally {
    setFastPath(true);
  }
}

interface Case {
  name: string;
  callers: string[];
  request: Request;
  /** Whether the fast path answers it (for every caller listed). */
  fast: boolean;
  get?: boolean;
}

const ALL = ['admin', 'noteless'];
const CASES: Case[] = [
  {
    name: 'a list with filter, sort and limit',
    callers: ALL,
    fast: true,
    request: {
      query:
        '{ orderList(where: { status: { in: [open, paid] }, total: { gt: 5 }, id: { lt: 600 } }, orderBy: [{ total: DESC }, { id: ASC }], limit: 7) { id total status } }',
    },
  },
  {
    name: 'embeds two levels deep (to-one and to-many), offset',
    callers: ALL,
    fast: true,
    request: {
      query:
        '{ orderList(orderBy: [{ id: ASC }], limit: 20, offset: 3) { id customer { name vip city { name country } } items { productId quantity } } }',
    },
  },
  {
    name: 'a to-many embed with its own arguments, two aliases of it',
    callers: ALL,
    fast: true,
    request: {
      query:
        '{ orderList(orderBy: [{ id: ASC }], limit: 30) { id items(where: { quantity: { gt: 1 } }, orderBy: [{ productId: DESC }], limit: 1, offset: 1) { productId quantity } one: items(orderBy: [{ quantity: ASC }], limit: 1) { productId } } }',
    },
  },
  {
    name: 'aliases, fragments, variables, @skip/@include, a field twice',
    callers: ALL,
    fast: true,
    request: {
      query:
        'query Q($no: Boolean = true, $n: Int!) { orderList(orderBy: [{ id: ASC }], limit: $n) { ...F amount: total status @skip(if: $no) customerId @include(if: false) ... on Order { buyer: customer { name } } id } } fragment F on Order { id buyer: customer { email } }',
      variables: { n: 5 },
    },
  },
  {
    name: 'several root fields, by key found and not found, dates, uuids',
    callers: ALL,
    fast: true,
    request: {
      query:
        '{ b: order(id: 7) { id total status customerId } orderItem(orderId: 3, productId: 2) { quantity createdAt } a: order(id: -1) { id } cityList { id name createdAt updatedAt } }',
    },
  },
  {
    name: 'Decimal digits and strings',
    callers: ['admin', 'catalog'],
    fast: true,
    request: { query: '{ productList(orderBy: [{ id: ASC }]) { id sku title price } }' },
  },
  {
    name: 'notes with escaped characters, a Float written alike',
    callers: ['admin'],
    fast: true,
    request: {
      query: '{ order(id: 604) { id total note customerId } orderList(where: { id: { in: [601, 604] } }) { id note } }',
    },
  },
  {
    name: 'a GET request',
    callers: ['admin'],
    fast: true,
    get: true,
    request: { query: '{ orderList(limit: 4) { id total placedAt } }' },
  },
  {
    name: 'an operation picked by name',
    callers: ['admin'],
    fast: true,
    request: {
      query: 'query A { cityList { id } } query B { orderList(limit: 2) { id } }',
      operationName: 'B',
    },
  },
  {
    name: 'nothing selected at the root',
    callers: ['admin'],
    fast: true,
    request: { query: '{ cityList @skip(if: true) { id } }' },
  },
  // graphql-js answers the rest.
  {
    name: 'Floats PostgreSQL writes unlike JavaScript (1e+15, 1e-05, -0)',
    callers: ['admin'],
    fast: false,
    request: { query: '{ orderList(where: { id: { in: [601, 602, 603] } }, orderBy: [{ id: ASC }]) { id total } }' },
  },
  {
    name: '__typename',
    callers: ['admin'],
    fast: false,
    request: { query: '{ orderList(limit: 2) { __typename id } }' },
  },
  {
    name: 'a list field (tags)',
    callers: ['catalog'],
    fast: false,
    request: { query: '{ productList { id tags } }' },
  },
  {
    name: 'a field hidden on some rows (two roles)',
    callers: ['twoRoles'],
    fast: false,
    request: { query: '{ orderList(orderBy: [{ id: ASC }], limit: 12) { id status note } }' },
  },
  {
    name: 'the same query without the hidden field (two roles)',
    callers: ['twoRoles'],
    fast: true,
    request: { query: '{ orderList(orderBy: [{ id: ASC }], limit: 12) { id status } }' },
  },
  {
    name: 'a page and an aggregate beside a list',
    callers: ['admin'],
    fast: false,
    request: {
      query:
        '{ cityList { id } orderPage(first: 2) { nodes { id } totalCount } orderAggregate(groupBy: [status]) { status count } }',
    },
  },
  {
    name: 'a root field that fails (limit out of range) beside one that answers',
    callers: ['admin'],
    fast: false,
    request: { query: '{ cityList { id } orderList(limit: 100000) { id } }' },
  },
  {
    name: 'a variable of the wrong type',
    callers: ['admin'],
    fast: false,
    request: { query: 'query($n: Int) { orderList(limit: $n) { id } }', variables: { n: 'x' } },
  },
  {
    name: 'a validation error',
    callers: ['admin'],
    fast: false,
    request: { query: '{ orderList { nope } }' },
  },
];

describe('the fast path answers as graphql-js does, byte for byte', () => {
  for (const c of CASES) {
    for (const who of c.callers) {
      it(`${c.name} (${who})`, async () => {
        const before = fastPathAnswers();
        const fast = await ask(keys[who]!, c.request, true, c.get);
        expect(fastPathAnswers() - before, 'fast path answers').toBe(c.fast ? 1 : 0);
        const slow = await ask(keys[who]!, c.request, false, c.get);
        expect(fastPathAnswers() - before).toBe(c.fast ? 1 : 0);
        expect(fast).toEqual(slow);
        if (c.fast) {
          expect(fast.status).toBe(200);
          expect(fast.text).not.toContain('"errors"');
        }
      });
    }
  }

  it('the battery holds records: escaped notes, Decimal digits, dates', async () => {
    const notes = await ask(keys.admin!, CASES[6]!.request, true);
    expect(notes.text).toContain('"note":"quote \\" backslash \\\\ newline \\n tab \\t bell \\u0007 é 😀 \u2028"');
    expect(notes.text).toContain('"total":12.25');
    expect(notes.text).toContain(`"customerId":"${EXPONENT_LIKE_UUID}"`);
    const products = await ask(keys.admin!, CASES[5]!.request, true);
    expect(products.text).toContain('"price":9.90');
    const empty = await ask(keys.admin!, CASES[9]!.request, true);
    expect(empty.text).toBe('{"data":{}}');
  });
});
