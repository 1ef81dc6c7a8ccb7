// Role permissions on the data API for signed-in users (docs/permissions.md; docs/api.md §5.17):
// everything API keys get (test/query/permissions.test.ts) works the same way with user access tokens,
// plus the variables `$user.id` and `$user.email`. Every request goes through real HTTP with an
// access token from /auth; rows are arranged with the admin API key.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { countRows, expectListEnvelope, expectProblemAt, problemFields, snapshot } from '../support/expect.ts';
import type { TestResponse } from '../support/server.ts';

const BASE = '/gw/api/rest';
const ALL_ROWS = { limit: 100, offset: 0, hasNextPage: false, hasPreviousPage: false };
/** The read field list of the shop's customer role on Order. */
const ORDER_FIELDS = ['id', 'total', 'status', 'customerId', 'createdAt', 'updatedAt'];
const VIP_FIELDS = ['id', 'name', 'vip', 'createdAt', 'updatedAt'];
const OPEN_PAID_FIELDS = ['id', 'status', 'total'];

let t: AuthTestServer;

// ---------------------------------------------------------------------------------------------
// helpers

let counter = 0;
const unique = (name: string) => `${name}-${++counter}-${randomUUID().slice(0, 8)}`;

interface User {
  id: string;
  email: string;
  roles: string[];
  token: string;
}

function tokenClaims(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
}

/**
 * A confirmed user holding `roles`: signs up with the first signup role among them (or customer),
 * then, when the roles differ, sets them in the database and logs in again (roles are in the token).
 */
async function makeUser(name: string, roles: string[]): Promise<User> {
  const email = `${unique(name)}@example.com`;
  const signupRole = roles.find((r) => r in t.config.roles && t.config.roles[r]!.signup) ?? 'customer';
  const session = await t.signupConfirmed(email, { roleId: signupRole });
  expect(session.user.roles).toEqual([signupRole]);
  let token = session.accessToken;
  if (roles.length !== 1 || roles[0] !== signupRole) {
    await t.db.query(`update svcgen.users set roles = $2::text[] where id = $1`, [session.user.id, roles]);
    const login = await t.auth('POST', '/auth/login', { body: { email, password: PASSWORD } });
    expect(login.status, login.text).toBe(200);
    expect(login.body.user.roles).toEqual(roles);
    token = login.body.accessToken;
  }
  expect(tokenClaims(token)).toMatchObject({ sub: session.user.id, email, roles });
  return { id: session.user.id, email, roles, token };
}

async function adminPost(table: string, body: Record<string, unknown>): Promise<any> {
  const res = await t.request('POST', `${BASE}/${table}`, { body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

/** A Customer row with the user's id and e-mail (the usual way to tie a user to data). */
const customerOf = (u: User, extra: Record<string, unknown> = {}) =>
  adminPost('Customer', { id: u.id, email: u.email, name: unique('Cust'), ...extra });
const order = (customerId: string, extra: Record<string, unknown> = {}) =>
  adminPost('Order', { total: 1, customerId, ...extra });

/** Every row of a table as the admin sees it (the oracle: a role sees a subset of these). */
async function adminAll(table: string): Promise<any[]> {
  return expectListEnvelope(await t.request('GET', `${BASE}/${table}?limit=1000`), { ...ALL_ROWS, limit: 1000 });
}

function pick(row: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).filter(([k]) => fields.includes(k)));
}

interface Req {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

const send = (u: User, r: Req) =>
  t.request(r.method, r.path, {
    key: false,
    body: r.body,
    headers: { ...r.headers, authorization: `Bearer ${u.token}` },
  });
const get = (path: string): Req => ({ method: 'GET', path });

type Want<F> =
  | { list: (f: F) => unknown[] | Promise<unknown[]>; pagination?: Record<string, unknown> }
  | { data: (f: F) => unknown | Promise<unknown>; status?: number }
  | { aggregates: (f: F) => unknown[] }
  | { problem: number; kind: string; fields?: string[]; fieldPattern?: RegExp }
  | { check: (res: TestResponse, f: F) => void };

async function expectWant<F>(res: TestResponse, req: Req, want: Want<F>, f: F): Promise<void> {
  if ('list' in want) {
    // `totalCount` (Prefer: count=exact) is part of the exact pagination object when asked for
    expect(expectListEnvelope(res, { ...ALL_ROWS, ...want.pagination } as typeof ALL_ROWS)).toEqual(await want.list(f));
  } else if ('data' in want) {
    expect(res.status, res.text).toBe(want.status ?? 200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ data: await want.data(f) });
  } else if ('aggregates' in want) {
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { aggregates: want.aggregates(f) } });
  } else if ('check' in want) {
    want.check(res, f);
  } else {
    expectProblemAt(res, want.problem, req.path, want.kind);
    for (const field of want.fields ?? []) expect(problemFields(res), res.text).toContain(field);
    if (want.fieldPattern)
      expect(
        problemFields(res).some((x) => want.fieldPattern!.test(x)),
        res.text,
      ).toBe(true);
  }
}

// ---------------------------------------------------------------------------------------------
// roles for this file, next to the shop's admin, customer and catalog

beforeAll(async () => {
  t = await startAuthServer({
    passwordCost: 4,
    configPatch: (raw) => {
      raw.roles.self = {
        signup: true,
        tables: {
          Customer: {
            read: { filter: { email: '$user.email' } },
            update: { filter: { id: '$user.id' }, fields: ['name'] },
          },
        },
      };
      raw.roles.vipReader = {
        signup: true,
        tables: { Customer: { read: { filter: { vip: true }, fields: VIP_FIELDS } } },
      };
      raw.roles.openPaid = {
        signup: true,
        tables: { Order: { read: { filter: { status: { in: ['open', 'paid'] } }, fields: OPEN_PAID_FIELDS } } },
      };
      raw.roles.tenantScoped = { signup: true, tables: { Order: { read: { filter: { note: '$context.tenant' } } } } };
      raw.roles.noteReader = {
        signup: true,
        tables: { Order: { read: { filter: { customerId: '$user.id' }, fields: ['id', 'note'] } } },
      };
      raw.roles.ownByOperator = {
        signup: true,
        tables: {
          Order: { read: { filter: { customerId: { equals: '$user.id' }, status: { not_equals: 'cancelled' } } } },
        },
      };
      raw.roles.cityMaker = { signup: true, tables: { City: { read: true, create: true } } };
      raw.roles.ownDeleter = {
        signup: true,
        tables: {
          Order: { read: { filter: { customerId: '$user.id' } }, delete: { filter: { customerId: '$user.id' } } },
        },
      };
    },
  });
}, 120_000);
afterAll(() => t?.close());

// ---------------------------------------------------------------------------------------------
// reads: one shared arrangement, never changed by the tests that read it

interface Fx {
  bob: User; // customer
  alice: User; // customer + vipReader
  vera: User; // vipReader
  carol: User; // self; her Customer row has her id and e-mail
  dave: User; // self; his Customer row has his e-mail but another id
  sam: User; // self + vipReader
  olga: User; // openPaid
  olive: User; // openPaid + vipReader
  tess: User; // tenantScoped
  nick: User; // customer + noteReader
  vic: User; // customer + vipReader; her Customer row is not vip
  otto: User; // ownByOperator
  nora: User; // no roles
  ghost: User; // a role the config does not define
  cust: Record<'bob' | 'alice' | 'carol' | 'dave' | 'sam' | 'nick' | 'otto' | 'vic' | 'stranger', any>;
  orders: Record<
    | 'bOpen'
    | 'bCancelled'
    | 'aOpen'
    | 'aPaid'
    | 'aShipped'
    | 'sPaid'
    | 'sOpen'
    | 'nOpen'
    | 'oOpen'
    | 'oCancelled'
    | 'vOpen',
    any
  >;
  city: any;
  product: any;
}

const fx = {} as Fx;

beforeAll(async () => {
  const [bob, alice, vera, carol, dave, sam, olga, olive, tess, nick, otto, nora, ghost, vic] = await Promise.all([
    makeUser('bob', ['customer']),
    makeUser('alice', ['customer', 'vipReader']),
    makeUser('vera', ['vipReader']),
    makeUser('carol', ['self']),
    makeUser('dave', ['self']),
    makeUser('sam', ['self', 'vipReader']),
    makeUser('olga', ['openPaid']),
    makeUser('olive', ['openPaid', 'vipReader']),
    makeUser('tess', ['tenantScoped']),
    makeUser('nick', ['customer', 'noteReader']),
    makeUser('otto', ['ownByOperator']),
    makeUser('nora', []),
    makeUser('ghost', ['noSuchRole']),
    makeUser('vic', ['customer', 'vipReader']),
  ]);
  Object.assign(fx, { bob, alice, vera, carol, dave, sam, olga, olive, tess, nick, otto, nora, ghost, vic });
  fx.cust = {
    bob: await customerOf(bob, { vip: false }),
    alice: await customerOf(alice, { vip: true }),
    carol: await customerOf(carol),
    // $user.email matches this row, $user.id does not
    dave: await adminPost('Customer', { email: dave.email, name: unique('Dave') }),
    sam: await customerOf(sam),
    nick: await customerOf(nick),
    otto: await customerOf(otto),
    vic: await customerOf(vic, { vip: false }),
    stranger: await adminPost('Customer', {
      email: `${unique('stranger')}@example.com`,
      name: unique('Stranger'),
      vip: true,
    }),
  };
  const c = fx.cust;
  fx.orders = {
    bOpen: await order(c.bob.id, { total: 30, note: 'bob note' }),
    bCancelled: await order(c.bob.id, { total: 40, status: 'cancelled' }),
    aOpen: await order(c.alice.id, { total: 10, note: 'alice note' }),
    aPaid: await order(c.alice.id, { total: 20, status: 'paid' }),
    aShipped: await order(c.alice.id, { total: 25, status: 'shipped', placedAt: '2024-05-01T10:00:00.000Z' }),
    sPaid: await order(c.stranger.id, { total: 50, status: 'paid' }),
    // a literal that looks like the variable: it must not match `$context.tenant`
    sOpen: await order(c.stranger.id, { total: 60, note: '$context.tenant' }),
    nOpen: await order(c.nick.id, { total: 70, note: 'nick note' }),
    oOpen: await order(c.otto.id, { total: 80 }),
    oCancelled: await order(c.otto.id, { total: 90, status: 'cancelled' }),
    vOpen: await order(c.vic.id, { total: 95 }),
  };
  fx.city = await adminPost('City', { name: unique('Permville'), country: 'PV' });
  fx.product = await adminPost('Product', { sku: unique('SKU'), title: 'Perm', price: 3, tags: [] });
}, 120_000);

const O = (f: Fx) => f.orders;
const ownOrders = (f: Fx, u: User) => Object.values(f.orders).filter((o) => o.customerId === u.id);
const qs = (s: string) => s.replace(/[(),]/g, (ch) => encodeURIComponent(ch));

type ReadRow = [
  string,
  { user: keyof Omit<Fx, 'cust' | 'orders' | 'city' | 'product'>; request: (f: Fx) => Req; want: Want<Fx> },
];

const reads: ReadRow[] = [
  // customer: Order read filter customerId = $user.id, fields list
  [
    'customer lists only own orders; fields outside the list (note, placedAt) are left out',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order`),
      want: { list: (f) => [O(f).bOpen, O(f).bCancelled].map((o) => pick(o, ORDER_FIELDS)) },
    },
  ],
  [
    'customer reads an own order: 200 without the omitted fields',
    {
      user: 'bob',
      request: (f) => get(`${BASE}/Order/${O(f).bOpen.id}`),
      want: { data: (f) => pick(O(f).bOpen, ORDER_FIELDS) },
    },
  ],
  [
    "customer reads another user's order → 404",
    {
      user: 'bob',
      request: (f) => get(`${BASE}/Order/${O(f).aOpen.id}`),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'customer reads an order of a customer with no user → 404',
    {
      user: 'bob',
      request: (f) => get(`${BASE}/Order/${O(f).sPaid.id}`),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'select of readable fields returns just those',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order?select=id,total`),
      want: { list: (f) => [O(f).bOpen, O(f).bCancelled].map((o) => ({ id: o.id, total: o.total })) },
    },
  ],
  [
    'select naming a field outside the list leaves it out silently (200)',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order?select=id,note,total`),
      want: { list: (f) => [O(f).bOpen, O(f).bCancelled].map((o) => ({ id: o.id, total: o.total })) },
    },
  ],
  [
    'a filter on a field outside the list → 400 naming it (as for API keys)',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order?note=equals.${encodeURIComponent('bob note')}`),
      want: { problem: 400, kind: 'invalid-parameter', fields: ['note'] },
    },
  ],
  [
    'an embed of a table the role cannot read → 400 naming select (as for API keys)',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order?select=id,customer(id)`),
      want: { problem: 400, kind: 'invalid-parameter', fields: ['select'] },
    },
  ],
  [
    'sort on a field outside the list → 400 naming sort',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order?sort=note`),
      want: { problem: 400, kind: 'invalid-parameter', fields: ['sort'] },
    },
  ],
  [
    'an aggregate of a field outside the list → 400 naming fn',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order/_aggregate?fn=count_distinct:note`),
      want: { problem: 400, kind: 'invalid-parameter', fields: ['fn'] },
    },
  ],
  [
    'groupBy a field outside the list → 400 naming groupBy',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order/_aggregate?groupBy=note&fn=count`),
      want: { problem: 400, kind: 'invalid-parameter', fields: ['groupBy'] },
    },
  ],
  [
    '_query filtering on a field outside the list → 400 naming filter[0]',
    {
      user: 'bob',
      request: () => ({
        method: 'POST',
        path: `${BASE}/Order/_query`,
        body: { filter: [{ field: 'note', operator: 'is_empty', value: true }] },
      }),
      want: { problem: 400, kind: 'invalid-parameter', fieldPattern: /^filter(\[0\]|\.0)/ },
    },
  ],
  [
    'Prefer: count=exact counts only own rows',
    {
      user: 'bob',
      request: () => ({ method: 'GET', path: `${BASE}/Order?limit=1`, headers: { prefer: 'count=exact' } }),
      want: {
        list: (f) => [pick(O(f).bOpen, ORDER_FIELDS)],
        pagination: { limit: 1, hasNextPage: true, totalCount: 2 },
      },
    },
  ],
  [
    "a filter on another user's id cannot widen the rows: empty list",
    {
      user: 'bob',
      request: (f) => get(`${BASE}/Order?customerId=equals.${f.alice.id}`),
      want: { list: () => [] },
    },
  ],
  [
    'an or= filter cannot widen the rows past the role filter',
    {
      user: 'bob',
      request: (f) => get(`${BASE}/Order?or=${qs(`(customerId.equals.${f.alice.id},total.gt.0)`)}`),
      want: { list: (f) => [O(f).bOpen, O(f).bCancelled].map((o) => pick(o, ORDER_FIELDS)) },
    },
  ],
  [
    'aggregates count only own rows',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order/_aggregate?fn=count,sum:total`),
      want: { aggregates: () => [{ count: 2, sum_total: 70 }] },
    },
  ],
  [
    'aggregates grouped by customerId show only the own group',
    {
      user: 'bob',
      request: () => get(`${BASE}/Order/_aggregate?groupBy=customerId&fn=count`),
      want: { aggregates: (f) => [{ customerId: f.bob.id, count: 2 }] },
    },
  ],
  [
    '_query returns only own rows, without the omitted fields',
    {
      user: 'bob',
      request: () => ({ method: 'POST', path: `${BASE}/Order/_query`, body: {} }),
      want: { list: (f) => [O(f).bOpen, O(f).bCancelled].map((o) => pick(o, ORDER_FIELDS)) },
    },
  ],
  [
    "_query filtering on another user's orders: empty list",
    {
      user: 'bob',
      request: (f) => ({
        method: 'POST',
        path: `${BASE}/Order/_query`,
        body: { filter: [{ field: 'customerId', operator: 'equals', value: f.alice.id }] },
      }),
      want: { list: () => [] },
    },
  ],
  [
    'customer reads City (read: true): every row',
    {
      user: 'bob',
      request: () => get(`${BASE}/City`),
      want: { list: () => adminAll('City') },
    },
  ],
  [
    'customer reads a Product (read: true)',
    {
      user: 'bob',
      request: (f) => get(`${BASE}/Product/${f.product.id}`),
      want: { data: (f) => f.product },
    },
  ],
  [
    'customer lists Customer (a table the role does not name) → 403',
    {
      user: 'bob',
      request: () => get(`${BASE}/Customer`),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer reads its own Customer row (table not named) → 403',
    {
      user: 'bob',
      request: (f) => get(`${BASE}/Customer/${f.bob.id}`),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer aggregates Customer → 403',
    {
      user: 'bob',
      request: () => get(`${BASE}/Customer/_aggregate?fn=count`),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer _query on Customer → 403',
    {
      user: 'bob',
      request: () => ({ method: 'POST', path: `${BASE}/Customer/_query`, body: {} }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer lists OrderItem (not named) → 403',
    {
      user: 'bob',
      request: () => get(`${BASE}/OrderItem`),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],

  // $user.email (self)
  [
    'self: Customer read filter email = $user.email → only the own row, every field',
    {
      user: 'carol',
      request: () => get(`${BASE}/Customer`),
      want: { list: (f) => [f.cust.carol] },
    },
  ],
  [
    'self: own Customer row by id → 200',
    {
      user: 'carol',
      request: (f) => get(`${BASE}/Customer/${f.carol.id}`),
      want: { data: (f) => f.cust.carol },
    },
  ],
  [
    'self: $user.email matches a row whose id is not the user id',
    {
      user: 'dave',
      request: () => get(`${BASE}/Customer`),
      want: { list: (f) => [f.cust.dave] },
    },
  ],
  [
    "self: another customer's row → 404",
    {
      user: 'carol',
      request: (f) => get(`${BASE}/Customer/${f.cust.dave.id}`),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'self: Order (not named) → 403',
    {
      user: 'carol',
      request: () => get(`${BASE}/Order`),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],

  // literal filter with a field list (vipReader)
  [
    'vipReader: only vip customers, fields outside the list (email, cityId) left out',
    {
      user: 'vera',
      request: () => get(`${BASE}/Customer`),
      want: { list: async () => (await adminAll('Customer')).filter((c) => c.vip).map((c) => pick(c, VIP_FIELDS)) },
    },
  ],
  [
    'vipReader: a non-vip customer → 404',
    {
      user: 'vera',
      request: (f) => get(`${BASE}/Customer/${f.cust.bob.id}`),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'vipReader: aggregate count counts only vip customers',
    {
      user: 'vera',
      request: () => get(`${BASE}/Customer/_aggregate?fn=count`),
      want: { aggregates: () => [{ count: 2 }] },
    },
  ],

  // two roles (customer + vipReader): the union
  [
    'customer + vipReader: Customer rows of vipReader',
    {
      user: 'alice',
      request: () => get(`${BASE}/Customer`),
      want: { list: async () => (await adminAll('Customer')).filter((c) => c.vip).map((c) => pick(c, VIP_FIELDS)) },
    },
  ],
  [
    'customer + vipReader: Order rows of customer (own only)',
    {
      user: 'alice',
      request: () => get(`${BASE}/Order`),
      want: { list: (f) => [O(f).aOpen, O(f).aPaid, O(f).aShipped].map((o) => pick(o, ORDER_FIELDS)) },
    },
  ],
  [
    'embed: own Customer with orders(id,total) → only own orders',
    {
      user: 'alice',
      request: (f) => get(`${BASE}/Customer/${f.alice.id}?select=id,orders(id,total)`),
      want: {
        data: (f) => ({
          id: f.alice.id,
          orders: [O(f).aOpen, O(f).aPaid, O(f).aShipped].map((o) => ({ id: o.id, total: o.total })),
        }),
      },
    },
  ],
  [
    "embed: another vip customer's orders are left out → []",
    {
      user: 'alice',
      request: (f) => get(`${BASE}/Customer/${f.cust.stranger.id}?select=id,orders(id,total)`),
      want: { data: (f) => ({ id: f.cust.stranger.id, orders: [] }) },
    },
  ],
  [
    'embed in a list: each vip customer with only the own orders',
    {
      user: 'alice',
      request: () => get(`${BASE}/Customer?select=id,name,orders(id,status)`),
      want: {
        list: async (f) =>
          (await adminAll('Customer'))
            .filter((c) => c.vip)
            .map((c) => ({
              id: c.id,
              name: c.name,
              orders:
                c.id === f.alice.id
                  ? [O(f).aOpen, O(f).aPaid, O(f).aShipped].map((o) => ({ id: o.id, status: o.status }))
                  : [],
            })),
      },
    },
  ],
  [
    'embed naming an Order field outside the list (note) leaves it out',
    {
      user: 'alice',
      request: (f) => get(`${BASE}/Customer?select=id,orders(id,note)&id=equals.${f.alice.id}`),
      want: {
        list: (f) => [{ id: f.alice.id, orders: [O(f).aOpen, O(f).aPaid, O(f).aShipped].map((o) => ({ id: o.id })) }],
      },
    },
  ],
  [
    'embed to-one: own orders with customer(id,name) through the vipReader filter',
    {
      user: 'alice',
      request: () => get(`${BASE}/Order?select=id,customer(id,name)`),
      want: {
        list: (f) =>
          [O(f).aOpen, O(f).aPaid, O(f).aShipped].map((o) => ({
            id: o.id,
            customer: { id: f.alice.id, name: f.cust.alice.name },
          })),
      },
    },
  ],
  [
    'embed to-one naming a Customer field outside the list (email) leaves it out',
    {
      user: 'alice',
      request: (f) => get(`${BASE}/Order/${O(f).aPaid.id}?select=id,customer(id,email)`),
      want: { data: (f) => ({ id: O(f).aPaid.id, customer: { id: f.alice.id } }) },
    },
  ],
  [
    'embed to-one outside the filter of the embedded table → null (customer + vipReader, a non-vip customer)',
    {
      user: 'vic',
      request: (f) => get(`${BASE}/Order/${O(f).vOpen.id}?select=id,customer(id,name)`),
      want: { data: (f) => ({ id: O(f).vOpen.id, customer: null }) },
    },
  ],
  [
    'a relation filter through the embedded table counts only its readable rows (customer + vipReader, a non-vip customer)',
    {
      user: 'vic',
      request: (f) => get(`${BASE}/Order?customer.id=equals.${f.vic.id}`),
      want: { list: () => [] },
    },
  ],
  [
    "embed through a link field the role cannot read → 400 (openPaid + vipReader: Order.customerId is not in openPaid's list)",
    {
      user: 'olive',
      request: (f) => get(`${BASE}/Order/${O(f).aPaid.id}?select=id,customer(id,name)`),
      want: { problem: 400, kind: 'invalid-parameter', fields: ['select'] },
    },
  ],
  [
    'self + vipReader: Customer rows are the union (own by e-mail, and every vip)',
    {
      user: 'sam',
      request: () => get(`${BASE}/Customer?select=id`),
      want: {
        list: async (f) =>
          (await adminAll('Customer')).filter((c) => c.vip || c.id === f.sam.id).map((c) => ({ id: c.id })),
      },
    },
  ],
  [
    'customer + noteReader (same rows): fields are the union (note is back)',
    {
      user: 'nick',
      request: () => get(`${BASE}/Order`),
      want: { list: (f) => [pick(O(f).nOpen, [...ORDER_FIELDS, 'note'])] },
    },
  ],
  [
    'customer + noteReader: single read shows the union of fields',
    {
      user: 'nick',
      request: (f) => get(`${BASE}/Order/${O(f).nOpen.id}`),
      want: { data: (f) => pick(O(f).nOpen, [...ORDER_FIELDS, 'note']) },
    },
  ],

  // operator filters
  [
    'openPaid: filter { status: { in: [open, paid] } } over every customer, with its field list',
    {
      user: 'olga',
      request: () => get(`${BASE}/Order`),
      want: {
        list: async () =>
          (await adminAll('Order'))
            .filter((o) => o.status === 'open' || o.status === 'paid')
            .map((o) => pick(o, OPEN_PAID_FIELDS)),
      },
    },
  ],
  [
    'openPaid: a cancelled order → 404',
    {
      user: 'olga',
      request: (f) => get(`${BASE}/Order/${O(f).bCancelled.id}`),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'openPaid: a paid order of someone else → 200 with its field list',
    {
      user: 'olga',
      request: (f) => get(`${BASE}/Order/${O(f).sPaid.id}`),
      want: { data: (f) => pick(O(f).sPaid, OPEN_PAID_FIELDS) },
    },
  ],
  [
    'openPaid: aggregates grouped by status have only open and paid',
    {
      user: 'olga',
      request: () => get(`${BASE}/Order/_aggregate?groupBy=status&fn=count&sort=status`),
      want: {
        aggregates: () => [
          { status: 'open', count: 6 },
          { status: 'paid', count: 2 },
        ],
      },
    },
  ],
  [
    'ownByOperator: { customerId: { equals: $user.id }, status: { not_equals: cancelled } }',
    {
      user: 'otto',
      request: () => get(`${BASE}/Order`),
      want: { list: (f) => [O(f).oOpen] },
    },
  ],
  [
    'ownByOperator: own cancelled order → 404',
    {
      user: 'otto',
      request: (f) => get(`${BASE}/Order/${O(f).oCancelled.id}`),
      want: { problem: 404, kind: 'not-found' },
    },
  ],

  // $context for users: fail closed
  [
    'tenantScoped: $context.tenant for a user (no context) → no rows, 200 empty list',
    {
      user: 'tess',
      request: () => get(`${BASE}/Order`),
      want: { list: () => [] },
    },
  ],
  [
    'tenantScoped: even the row whose note is the literal "$context.tenant" → 404',
    {
      user: 'tess',
      request: (f) => get(`${BASE}/Order/${O(f).sOpen.id}`),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'tenantScoped: aggregate count is 0',
    {
      user: 'tess',
      request: () => get(`${BASE}/Order/_aggregate?fn=count`),
      want: { aggregates: () => [{ count: 0 }] },
    },
  ],
  [
    'tenantScoped: _query → empty list',
    {
      user: 'tess',
      request: () => ({ method: 'POST', path: `${BASE}/Order/_query`, body: {} }),
      want: { list: () => [] },
    },
  ],

  // no roles, unknown roles
  [
    'no roles: GET /City → 403',
    { user: 'nora', request: () => get(`${BASE}/City`), want: { problem: 403, kind: 'forbidden' } },
  ],
  [
    'no roles: GET /Order → 403',
    { user: 'nora', request: () => get(`${BASE}/Order`), want: { problem: 403, kind: 'forbidden' } },
  ],
  [
    'no roles: GET /Product/<id> → 403',
    { user: 'nora', request: (f) => get(`${BASE}/Product/${f.product.id}`), want: { problem: 403, kind: 'forbidden' } },
  ],
  [
    'a role the config does not define grants nothing: GET /City → 403',
    {
      user: 'ghost',
      request: () => get(`${BASE}/City`),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
];

describe('reads', () => {
  it('cursor paging as a user walks exactly the own rows', async () => {
    const seen: number[] = [];
    let path = `${BASE}/Order?limit=1`;
    for (let page = 0; page < 5; page++) {
      const res = await send(fx.bob, get(path));
      expect(res.status, res.text).toBe(200);
      seen.push(...res.body.data.map((o: { id: number }) => o.id));
      const next = res.body.meta.pagination.nextCursor;
      if (next === null) break;
      path = `${BASE}/Order?limit=1&after=${encodeURIComponent(next)}`;
    }
    expect(seen).toEqual([fx.orders.bOpen.id, fx.orders.bCancelled.id]);
  });

  it('the arrangement: counts the rows below rely on', async () => {
    const orders = await adminAll('Order');
    expect(orders.filter((o) => o.status === 'open').length).toBe(6);
    expect(orders.filter((o) => o.status === 'paid').length).toBe(2);
    expect(
      (await adminAll('Customer'))
        .filter((c) => c.vip)
        .map((c) => c.id)
        .sort(),
    ).toEqual([fx.alice.id, fx.cust.stranger.id].sort());
    expect(ownOrders(fx, fx.bob).length).toBe(2);
  });

  it.each(reads)('%s', async (_name, row) => {
    const req = row.request(fx);
    const before = await snapshot(t.db);
    await expectWant(await send(fx[row.user], req), req, row.want, fx);
    expect(await snapshot(t.db)).toEqual(before);
  });
});

// ---------------------------------------------------------------------------------------------
// writes: each row gets its own user and rows

interface W {
  me: User;
  mine: any; // my Customer row (id = my user id)
  open: any; // my open order
  paid: any; // my paid order
  other: any; // another Customer with the same name as mine
  otherOpen: any; // its open order
}

async function writeFixture(roles: string[]): Promise<W> {
  const me = await makeUser('writer', roles);
  const name = unique('Same');
  const mine = await customerOf(me, { name });
  const other = await adminPost('Customer', { email: `${unique('other')}@example.com`, name });
  return {
    me,
    mine,
    other,
    open: await order(mine.id, { total: 5, note: 'my note' }),
    paid: await order(mine.id, { total: 6, status: 'paid' }),
    otherOpen: await order(other.id, { total: 7 }),
  };
}

const orderRow = async (id: number) =>
  (await t.db.query<any>(`select total, status, note from env_master."Order" where id = $1`, [id]))[0];
const customerName = async (id: string) =>
  (await t.db.query<{ name: string }>(`select name from env_master."Customer" where id = $1`, [id]))[0]?.name;

type WriteRow = [
  string,
  {
    roles: string[];
    request: (w: W) => Req;
    /** 201/200 answers: status and the exact body (`data`); problems: status, kind and the fields named. */
    want: Want<W>;
    /** What the database holds afterwards; when absent the request must have changed nothing. */
    after?: (w: W, res: TestResponse) => Promise<void>;
  },
];

const writes: WriteRow[] = [
  [
    'customer creates an Order with the allowed fields → 201, the answer shows what the role may read',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'POST', path: `${BASE}/Order`, body: { total: 7.5, customerId: w.me.id } }),
      want: {
        status: 201,
        data: () => ({
          id: expect.any(Number),
          total: 7.5,
          status: 'open',
          customerId: expect.any(String),
          createdAt: expect.any(String),
          updatedAt: expect.any(String),
        }),
      },
      after: async (w, res) => {
        expect(res.body.data.customerId).toBe(w.me.id);
        expect(res.headers.get('location')).toBe(`${BASE}/Order/${res.body.data.id}`);
        expect(await orderRow(res.body.data.id)).toEqual({ total: 7.5, status: 'open', note: null });
      },
    },
  ],
  [
    'customer create naming note → 403 naming note',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'POST', path: `${BASE}/Order`, body: { total: 1, customerId: w.me.id, note: 'hi' } }),
      want: { problem: 403, kind: 'forbidden', fields: ['note'] },
    },
  ],
  [
    'customer create naming status → 403 naming status',
    {
      roles: ['customer'],
      request: (w) => ({
        method: 'POST',
        path: `${BASE}/Order`,
        body: { total: 1, customerId: w.me.id, status: 'paid' },
      }),
      want: { problem: 403, kind: 'forbidden', fields: ['status'] },
    },
  ],
  [
    'customer create naming note and placedAt → 403 naming both',
    {
      roles: ['customer'],
      request: (w) => ({
        method: 'POST',
        path: `${BASE}/Order`,
        body: { total: 1, customerId: w.me.id, note: 'x', placedAt: '2024-01-01T00:00:00Z' },
      }),
      want: { problem: 403, kind: 'forbidden', fields: ['note', 'placedAt'] },
    },
  ],
  [
    'customer create with a forbidden field and a wrong type → 403 naming only the field (permission before validation)',
    {
      roles: ['customer'],
      request: () => ({ method: 'POST', path: `${BASE}/Order`, body: { total: 'abc', note: 5 } }),
      want: {
        check: (res) => {
          expectProblemAt(res, 403, `${BASE}/Order`, 'forbidden', 'note');
          expect(problemFields(res)).toEqual(['note']);
        },
      },
    },
  ],
  [
    'customer updates a missing order naming a forbidden field → 403 (permission before existence)',
    {
      roles: ['customer'],
      request: () => ({ method: 'PATCH', path: `${BASE}/Order/999999999`, body: { note: 'x' } }),
      want: { problem: 403, kind: 'forbidden', fields: ['note'] },
    },
  ],
  [
    'customer updates the allowed field of an own open order → 200',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Order/${w.open.id}`, body: { total: 99 } }),
      want: { data: (w) => ({ ...pick(w.open, ORDER_FIELDS), total: 99, updatedAt: expect.any(String) }) },
      after: async (w) => expect(await orderRow(w.open.id)).toEqual({ total: 99, status: 'open', note: 'my note' }),
    },
  ],
  [
    'customer updates an own order outside the update filter (paid) → 404',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Order/${w.paid.id}`, body: { total: 50 } }),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'customer updates a forbidden field (note) → 403 naming it',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Order/${w.open.id}`, body: { note: 'changed' } }),
      want: { problem: 403, kind: 'forbidden', fields: ['note'] },
    },
  ],
  [
    'customer updates a forbidden field (status) next to an allowed one → 403 naming status',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Order/${w.open.id}`, body: { total: 3, status: 'paid' } }),
      want: { problem: 403, kind: 'forbidden', fields: ['status'] },
    },
  ],
  [
    'customer deletes an own order (delete: false) → 403',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'DELETE', path: `${BASE}/Order/${w.open.id}` }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer creates a Customer (table not named) → 403',
    {
      roles: ['customer'],
      request: () => ({
        method: 'POST',
        path: `${BASE}/Customer`,
        body: { email: `${unique('x')}@example.com`, name: 'X' },
      }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer updates its own Customer row (table not named) → 403',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Customer/${w.me.id}`, body: { name: 'X' } }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer deletes its own Customer row (table not named) → 403',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'DELETE', path: `${BASE}/Customer/${w.me.id}` }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer creates a City (read only) → 403',
    {
      roles: ['customer'],
      request: () => ({ method: 'POST', path: `${BASE}/City`, body: { name: 'No', country: 'NO' } }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'self updates the own name (update filter id = $user.id) → 200 with the whole row',
    {
      roles: ['self'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Customer/${w.me.id}`, body: { name: 'Renamed' } }),
      want: { data: (w) => ({ ...w.mine, name: 'Renamed', updatedAt: expect.any(String) }) },
      after: async (w) => {
        expect(await customerName(w.me.id)).toBe('Renamed');
        expect(await customerName(w.other.id)).toBe(w.other.name);
      },
    },
  ],
  [
    'self updates a field outside the list (email) → 403 naming it',
    {
      roles: ['self'],
      request: (w) => ({
        method: 'PATCH',
        path: `${BASE}/Customer/${w.me.id}`,
        body: { email: `${unique('new')}@example.com` },
      }),
      want: { problem: 403, kind: 'forbidden', fields: ['email'] },
    },
  ],
  [
    "self updates another customer's name → 404",
    {
      roles: ['self'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Customer/${w.other.id}`, body: { name: 'Hijacked' } }),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'self updates by filter: only the own row among the matches changes ({ count: 1 })',
    {
      roles: ['self'],
      request: (w) => ({
        method: 'PATCH',
        path: `${BASE}/Customer?name=equals.${encodeURIComponent(w.mine.name)}`,
        body: { name: 'Bulk renamed' },
      }),
      want: { data: () => ({ count: 1 }) },
      after: async (w) => {
        expect(await customerName(w.me.id)).toBe('Bulk renamed');
        expect(await customerName(w.other.id)).toBe(w.other.name);
      },
    },
  ],
  [
    'self deletes the own row (no delete rule) → 403',
    {
      roles: ['self'],
      request: (w) => ({ method: 'DELETE', path: `${BASE}/Customer/${w.me.id}` }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'self creates a Customer (no create rule) → 403',
    {
      roles: ['self'],
      request: () => ({
        method: 'POST',
        path: `${BASE}/Customer`,
        body: { email: `${unique('x')}@example.com`, name: 'X' },
      }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer bulk create with the allowed fields → 201 envelope, rows inserted',
    {
      roles: ['customer'],
      request: (w) => ({
        method: 'POST',
        path: `${BASE}/Order/_bulk`,
        body: {
          items: [
            { total: 11, customerId: w.me.id },
            { total: 12, customerId: w.me.id },
          ],
        },
      }),
      want: {
        status: 201,
        data: () => ({
          success: true,
          transactionMode: 'ALL_OR_NOTHING',
          totalRequested: 2,
          totalSucceeded: 2,
          totalFailed: 0,
          items: [{ id: expect.any(Number) }, { id: expect.any(Number) }],
          errors: [],
        }),
      },
      after: async (w) =>
        expect(await countRows(t.db, 'Order', 'master', '"customerId" = $1 and total > 10', [w.me.id])).toBe(2),
    },
  ],
  [
    'customer bulk create with a forbidden field in one item → 403 naming it, nothing inserted',
    {
      roles: ['customer'],
      request: (w) => ({
        method: 'POST',
        path: `${BASE}/Order/_bulk`,
        body: {
          items: [
            { total: 1, customerId: w.me.id },
            { total: 2, customerId: w.me.id, status: 'paid' },
          ],
        },
      }),
      want: { problem: 403, kind: 'forbidden', fields: ['status'] },
    },
  ],
  [
    'customer bulk delete (delete: false) → 403',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'DELETE', path: `${BASE}/Order/_bulk`, body: { ids: [w.open.id] } }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'customer update by filter outside the update filter (status paid) → { count: 0 }, nothing changed',
    {
      roles: ['customer'],
      request: () => ({ method: 'PATCH', path: `${BASE}/Order?status=equals.paid`, body: { total: 1 } }),
      want: { data: () => ({ count: 0 }) },
    },
  ],
  [
    'customer update by filter naming a forbidden field → 403 naming it',
    {
      roles: ['customer'],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Order?id=equals.${w.open.id}`, body: { note: 'x' } }),
      want: { problem: 403, kind: 'forbidden', fields: ['note'] },
    },
  ],
  [
    'ownDeleter deletes an own order (delete filter customerId = $user.id) → 204',
    {
      roles: ['ownDeleter'],
      request: (w) => ({ method: 'DELETE', path: `${BASE}/Order/${w.open.id}` }),
      want: {
        check: (res) => {
          expect(res.status, res.text).toBe(204);
          expect(res.text).toBe('');
        },
      },
      after: async (w) => {
        expect(await orderRow(w.open.id)).toBeUndefined();
        expect(await orderRow(w.otherOpen.id)).toBeDefined();
      },
    },
  ],
  [
    "ownDeleter deletes another customer's order → 404",
    {
      roles: ['ownDeleter'],
      request: (w) => ({ method: 'DELETE', path: `${BASE}/Order/${w.otherOpen.id}` }),
      want: { problem: 404, kind: 'not-found' },
    },
  ],
  [
    'ownDeleter bulk delete own + other, ALL_OR_NOTHING → 422 naming index 1, nothing deleted',
    {
      roles: ['ownDeleter'],
      request: (w) => ({ method: 'DELETE', path: `${BASE}/Order/_bulk`, body: { ids: [w.open.id, w.otherOpen.id] } }),
      want: {
        check: (res) => {
          // docs/api.md §5.15: a validation Problem that also carries the bulk envelope as `data`
          expect(res.status, res.text).toBe(422);
          expect(res.headers.get('content-type')).toBe('application/problem+json');
          expect(Object.keys(res.body).sort()).toEqual([
            'data',
            'detail',
            'errors',
            'instance',
            'status',
            'title',
            'type',
          ]);
          expect(res.body).toMatchObject({ type: '/errors/validation', status: 422, instance: `${BASE}/Order/_bulk` });
          expect(res.body.errors).toEqual([
            { field: 'items[1]', rule: expect.any(String), message: res.body.data.errors[0].message },
          ]);
          expect(res.body.data).toEqual({
            success: false,
            transactionMode: 'ALL_OR_NOTHING',
            totalRequested: 2,
            totalSucceeded: 0,
            totalFailed: 2,
            items: [],
            errors: [{ index: 1, message: expect.any(String) }],
          });
        },
      },
    },
  ],
  [
    'ownDeleter bulk delete own + other, BEST_EFFORT → 207, only the own row deleted',
    {
      roles: ['ownDeleter'],
      request: (w) => ({
        method: 'DELETE',
        path: `${BASE}/Order/_bulk`,
        body: { ids: [w.open.id, w.otherOpen.id], transactionMode: 'BEST_EFFORT' },
      }),
      want: {
        status: 207,
        data: (w) => ({
          success: false,
          transactionMode: 'BEST_EFFORT',
          totalRequested: 2,
          totalSucceeded: 1,
          totalFailed: 1,
          items: [{ id: w.open.id }],
          errors: [{ index: 1, message: expect.any(String) }],
        }),
      },
      after: async (w) => {
        expect(await orderRow(w.open.id)).toBeUndefined();
        expect(await orderRow(w.otherOpen.id)).toEqual({ total: 7, status: 'open', note: null });
      },
    },
  ],
  [
    'no roles: POST /City → 403',
    {
      roles: [],
      request: () => ({ method: 'POST', path: `${BASE}/City`, body: { name: 'No', country: 'NO' } }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
  [
    'no roles: PATCH an own order → 403',
    {
      roles: [],
      request: (w) => ({ method: 'PATCH', path: `${BASE}/Order/${w.open.id}`, body: { total: 2 } }),
      want: { problem: 403, kind: 'forbidden' },
    },
  ],
];

describe('list pages kept per caller (runtime/rest/read.ts keptPage)', () => {
  // A list without filters or cursor is compiled once per caller and page shape, and later pages
  // only change its limit and offset. alice and vic hold the same roles (customer + vipReader), so
  // a statement kept per role set instead of per user would show one of them the other's orders.
  it('users with the same roles walking the same page shapes, interleaved, each see only their own orders', async () => {
    const walkers = [fx.alice, fx.vic, fx.bob];
    const own = new Map(walkers.map((u) => [u, ownOrders(fx, u).sort((a, b) => a.total - b.total)]));
    const shapes = [
      { query: 'sort=total', fields: ORDER_FIELDS, count: false },
      { query: 'sort=total&select=id,total', fields: ['id', 'total'], count: false },
      { query: 'sort=total', fields: ORDER_FIELDS, count: true },
    ];
    for (const shape of shapes) {
      for (let offset = 0; offset <= 3; offset++) {
        for (const u of walkers) {
          const path = `${BASE}/Order?${qs(shape.query)}&limit=1${offset ? `&offset=${offset}` : ''}`;
          const res = await t.request('GET', path, {
            key: false,
            headers: { authorization: `Bearer ${u.token}`, ...(shape.count ? { prefer: 'count=exact' } : {}) },
          });
          expect(res.status, res.text).toBe(200);
          const mine = own.get(u)!;
          expect(res.body.data, `${u.email} ${path}`).toEqual(
            mine.slice(offset, offset + 1).map((o) => pick(o, shape.fields)),
          );
          expect(res.body.meta.pagination).toMatchObject({
            limit: 1,
            offset,
            hasNextPage: offset + 1 < mine.length,
            ...(shape.count ? { totalCount: mine.length } : {}),
          });
        }
      }
    }
  });

  it("a select kept for one caller is not another caller's: note is shown to nick (noteReader) only", async () => {
    for (const u of [fx.bob, fx.nick, fx.bob, fx.nick]) {
      const res = await t.request('GET', `${BASE}/Order?${qs('select=id,note&sort=total')}`, {
        key: false,
        headers: { authorization: `Bearer ${u.token}` },
      });
      expect(res.status, res.text).toBe(200);
      const fields = u === fx.nick ? ['id', 'note'] : ['id'];
      expect(res.body.data, u.email).toEqual(
        ownOrders(fx, u)
          .sort((a, b) => a.total - b.total)
          .map((o) => pick(o, fields)),
      );
    }
  });
});

describe('writes', () => {
  it.each(writes)('%s', async (_name, row) => {
    const w = await writeFixture(row.roles);
    const req = row.request(w);
    const before = await snapshot(t.db);
    const res = await send(w.me, req);
    await expectWant(res, req, row.want, w);
    if (row.after) await row.after(w, res);
    else expect(await snapshot(t.db)).toEqual(before);
  });

  it('self: a row matched by $user.email but not by $user.id is readable and not updatable (404)', async () => {
    const u = await makeUser('dave2', ['self']);
    const row = await adminPost('Customer', { email: u.email, name: unique('Dave2') });
    expect((await t.asUser(u.token, 'GET', `${BASE}/Customer/${row.id}`)).body).toEqual({ data: row });
    const path = `${BASE}/Customer/${row.id}`;
    expectProblemAt(await t.asUser(u.token, 'PATCH', path, { body: { name: 'Nope' } }), 404, path, 'not-found');
    expect(await customerName(row.id)).toBe(row.name);
  });

  it("customer cannot create an order for someone else's customer id (403 row_filter, nothing written)", async () => {
    const w = await writeFixture(['customer']);
    const before = await snapshot(t.db);
    const res = await send(w.me, { method: 'POST', path: `${BASE}/Order`, body: { total: 4, customerId: w.other.id } });
    expectProblemAt(res, 403, `${BASE}/Order`, 'forbidden');
    expect(res.body.errors).toEqual([
      { field: 'customerId', rule: 'row_filter', message: "customerId must match your role's filter" },
    ]);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('customer creating an order without customerId gets it preset to their own id (201)', async () => {
    const w = await writeFixture(['customer']);
    const res = await send(w.me, { method: 'POST', path: `${BASE}/Order`, body: { total: 6 } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ total: 6, status: 'open', customerId: w.me.id });
    const id = Number(res.headers.get('location')!.split('/').at(-1));
    expect(await orderRow(id)).toEqual({ total: 6, status: 'open', note: null });
  });
});

// ---------------------------------------------------------------------------------------------
// Idempotency-Key for users: replayed per caller

describe('Idempotency-Key as a user', () => {
  const postCity = (token: string | undefined, key: string, body: unknown) =>
    t.request('POST', `${BASE}/City`, {
      body,
      key: token === undefined ? undefined : false,
      headers: { 'idempotency-key': key, ...(token ? { authorization: `Bearer ${token}` } : {}) },
    });
  const cities = (name: string) => countRows(t.db, 'City', 'master', 'name = $1', [name]);

  it('the same user and key replay the first answer with Idempotency-Replayed: true; one row', async () => {
    const u = await makeUser('maker', ['cityMaker']);
    const key = `idem-${randomUUID()}`;
    const body = { name: unique('Idemville'), country: 'ID' };
    const first = await postCity(u.token, key, body);
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    expect(first.headers.get('location')).toBe(`${BASE}/City/${first.body.data.id}`);
    const second = await postCity(u.token, key, body);
    expect(second.status, second.text).toBe(201);
    expect(second.headers.get('idempotency-replayed')).toBe('true');
    expect(second.headers.get('location')).toBe(first.headers.get('location'));
    expect(second.text).toBe(first.text);
    expect(await cities(body.name)).toBe(1);
  });

  it('the same user in a new session (new access token) is the same caller: replay', async () => {
    const u = await makeUser('maker', ['cityMaker']);
    const key = `idem-${randomUUID()}`;
    const body = { name: unique('Idemville'), country: 'ID' };
    const first = await postCity(u.token, key, body);
    expect(first.status, first.text).toBe(201);
    const login = await t.auth('POST', '/auth/login', { body: { email: u.email, password: PASSWORD } });
    expect(login.status, login.text).toBe(200);
    expect(login.body.accessToken).not.toBe(u.token);
    const again = await postCity(login.body.accessToken, key, body);
    expect(again.status, again.text).toBe(201);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.text).toBe(first.text);
    expect(await cities(body.name)).toBe(1);
  });

  it('another user (or an API key) with the same key and body creates a new record', async () => {
    const [p, q] = await Promise.all([makeUser('maker', ['cityMaker']), makeUser('maker', ['cityMaker'])]);
    const key = `idem-${randomUUID()}`;
    const body = { name: unique('Idemville'), country: 'ID' };
    const first = await postCity(p.token, key, body);
    expect(first.status, first.text).toBe(201);
    const other = await postCity(q.token, key, body);
    expect(other.status, other.text).toBe(201);
    expect(other.headers.get('idempotency-replayed')).toBeNull();
    expect(other.body.data.id).not.toBe(first.body.data.id);
    expect(await cities(body.name)).toBe(2);
    const byKey = await postCity(undefined, key, body);
    expect(byKey.status, byKey.text).toBe(201);
    expect(byKey.headers.get('idempotency-replayed')).toBeNull();
    expect(await cities(body.name)).toBe(3);
    // and each caller still gets its own first answer back
    const replayP = await postCity(p.token, key, body);
    expect(replayP.headers.get('idempotency-replayed')).toBe('true');
    expect(replayP.text).toBe(first.text);
    const replayQ = await postCity(q.token, key, body);
    expect(replayQ.headers.get('idempotency-replayed')).toBe('true');
    expect(replayQ.text).toBe(other.text);
    expect(await cities(body.name)).toBe(3);
  });

  it('the same user, same key, another body → 422 naming Idempotency-Key; nothing created', async () => {
    const u = await makeUser('maker', ['cityMaker']);
    const key = `idem-${randomUUID()}`;
    const body = { name: unique('Idemville'), country: 'ID' };
    expect((await postCity(u.token, key, body)).status).toBe(201);
    const changed = { ...body, name: unique('Other') };
    const res = await postCity(u.token, key, changed);
    expectProblemAt(res, 422, `${BASE}/City`, 'validation', 'Idempotency-Key');
    expect(await cities(changed.name)).toBe(0);
  });

  it('a user whose role may not create City gets 403 with an Idempotency-Key, both times; nothing created', async () => {
    const u = await makeUser('reader', ['customer']);
    const key = `idem-${randomUUID()}`;
    const body = { name: unique('Idemville'), country: 'ID' };
    expectProblemAt(await postCity(u.token, key, body), 403, `${BASE}/City`, 'forbidden');
    expectProblemAt(await postCity(u.token, key, body), 403, `${BASE}/City`, 'forbidden');
    expect(await cities(body.name)).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// a variable whose value cannot be a value of the filtered field: no row can match (fail closed)

describe('role filter variables that do not fit the field type', () => {
  let u: AuthTestServer;
  beforeAll(async () => {
    u = await startAuthServer({
      passwordCost: 4,
      configPatch: (raw) => {
        raw.roles.mismatch = {
          signup: true,
          tables: {
            City: { read: { filter: { id: '$user.id' } } }, // Int field, uuid value
            Order: { read: { filter: { customerId: '$user.email' } } }, // uuid field, e-mail value
            Customer: { read: { filter: { cityId: '$context.city' } } }, // Int field, an API key's context value
          },
        };
      },
    });
    await u.request('POST', `${BASE}/City`, { body: { name: 'Typeville', country: 'TY' } });
  }, 120_000);
  afterAll(() => u?.close());

  it.each([
    ['GET /City ($user.id against an Int id)', 'GET', `${BASE}/City`],
    ['GET /Order ($user.email against a uuid)', 'GET', `${BASE}/Order`],
    ['POST /Order/_query', 'POST', `${BASE}/Order/_query`],
  ])('%s → 200 with no rows, never a 500', async (_name, method, path) => {
    const s = await u.signupConfirmed(`${unique('mismatch')}@example.com`, { roleId: 'mismatch' });
    const res = await u.asUser(s.accessToken, method, path, { body: method === 'POST' ? {} : undefined });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual([]);
  });

  it('the same with an API key: context { city: "Paris" } against the Int cityId → 200 with no rows', async () => {
    const { key } = await u.createKey(['mismatch'], { context: { city: 'Paris' } });
    const res = await u.request('GET', `${BASE}/Customer`, { key });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual([]);
  });

  it('GET /City/<id> → 404, GET /Order/_aggregate?fn=count → count 0', async () => {
    const s = await u.signupConfirmed(`${unique('mismatch')}@example.com`, { roleId: 'mismatch' });
    const city = (await u.request('GET', `${BASE}/City`)).body.data[0];
    const one = await u.asUser(s.accessToken, 'GET', `${BASE}/City/${city.id}`);
    expectProblemAt(one, 404, `${BASE}/City/${city.id}`, 'not-found');
    const agg = await u.asUser(s.accessToken, 'GET', `${BASE}/Order/_aggregate?fn=count`);
    expect(agg.status, agg.text).toBe(200);
    expect(agg.body).toEqual({ data: { aggregates: [{ count: 0 }] } });
  });
});
