// Bulk create and bulk delete (docs/api.md §5.15: default transactionMode, the envelope of either,
// the ALL_OR_NOTHING 422; §7 limits).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UUID, countRows, expectProblemAt, snapshot } from '../support/expect.ts';
import { startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
let keys: { catalog: string; customer: string };
/** Statements the server sent, for the tests that count them (reset by each). */
let statements: string[] = [];
const takerKey = async (customerId: string) =>
  (await t.createKey(['orderTaker'], { context: { customer: customerId } })).key;

beforeAll(async () => {
  t = await startTestServer({
    onQuery: (text) => void statements.push(text),
    configPatch: (raw) => {
      // Takes orders for the customer of its key's context (a create filter with a preset).
      raw.roles.orderTaker = {
        tables: {
          Order: {
            read: true,
            create: { filter: { customerId: '$context.customer' }, fields: ['total', 'customerId'] },
          },
        },
      };
    },
  });
  keys = { catalog: (await t.createKey(['catalog'])).key, customer: (await t.createKey(['customer'])).key };
});
afterAll(() => t?.close());

async function post(table: string, body: unknown) {
  const res = await t.request('POST', `${BASE}/${table}`, { body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}
const email = (tag: string) => `${tag}-${randomUUID()}@example.com`;
const customerItem = (tag = 'bulk') => ({ email: email(tag), name: tag });
const newCustomer = (tag = 'c') => post('Customer', customerItem(tag));
const newProduct = () => post('Product', { sku: `SKU-${randomUUID()}`, title: 'P', price: 2.5, tags: [] });

type Mode = 'ALL_OR_NOTHING' | 'BEST_EFFORT';
function envelope(mode: Mode, total: number, items: unknown[], errorIndexes: number[]) {
  const failed = errorIndexes.length > 0;
  const allOrNothingFailed = mode === 'ALL_OR_NOTHING' && failed;
  return {
    success: !failed,
    transactionMode: mode,
    totalRequested: total,
    totalSucceeded: allOrNothingFailed ? 0 : items.length,
    totalFailed: allOrNothingFailed ? total : errorIndexes.length,
    items: allOrNothingFailed ? [] : items,
    errors: errorIndexes.map((index) => ({ index, message: expect.any(String) })),
  };
}

/** The ALL_OR_NOTHING 422: a validation Problem whose `data` is the bulk envelope (docs/api.md §5.15). */
function expectBulkProblem(res: TestResponse, path: string, total: number, errorIndexes: number[]) {
  expect(res.status, res.text).toBe(422);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(Object.keys(res.body).sort(), res.text).toEqual([
    'data',
    'detail',
    'errors',
    'instance',
    'status',
    'title',
    'type',
  ]);
  expect(res.body).toMatchObject({ type: '/errors/validation', status: 422, instance: path.split('?')[0] });
  expect(res.body.data, res.text).toEqual(envelope('ALL_OR_NOTHING', total, [], errorIndexes));
  for (const e of res.body.data.errors) expect(e.message.length).toBeGreaterThan(0);
  expect(res.body.errors, res.text).toEqual(
    res.body.data.errors.map((e: { index: number; message: string }) => ({
      field: `items[${e.index}]`,
      rule: expect.any(String),
      message: e.message,
    })),
  );
}

function expectEnvelope(
  res: TestResponse,
  status: number,
  mode: Mode,
  total: number,
  items: unknown[],
  errorIndexes: number[],
) {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.body, res.text).toEqual({ data: envelope(mode, total, items, errorIndexes) });
}

describe('POST /<table>/_bulk', () => {
  it('201 with the exact envelope; default mode ALL_OR_NOTHING; every row inserted', async () => {
    const items = [customerItem('a'), customerItem('b'), customerItem('c')];
    const res = await t.request('POST', `${BASE}/Customer/_bulk`, { body: { items } });
    expectEnvelope(
      res,
      201,
      'ALL_OR_NOTHING',
      3,
      [0, 1, 2].map(() => ({ id: expect.stringMatching(UUID) })),
      [],
    );
    const rows = await t.db.query<{ id: string; email: string }>(
      `select id::text, email from env_master."Customer" where id = any($1::uuid[])`,
      [res.body.data.items.map((i: { id: string }) => i.id)],
    );
    const byId = new Map(rows.map((r) => [r.id, r.email]));
    expect(res.body.data.items.map((i: { id: string }) => byId.get(i.id))).toEqual(items.map((i) => i.email));
  });

  it('Int keys: items are { id: number } in request order', async () => {
    const res = await t.request('POST', `${BASE}/City/_bulk`, {
      body: {
        items: [
          { name: 'B1', country: 'B1' },
          { name: 'B2', country: 'B2' },
        ],
      },
    });
    expectEnvelope(res, 201, 'ALL_OR_NOTHING', 2, [{ id: expect.any(Number) }, { id: expect.any(Number) }], []);
    const rows = await t.db.query<{ id: number; name: string }>(
      `select id, name from env_master."City" where id = any($1::int[]) order by id`,
      [res.body.data.items.map((i: { id: number }) => i.id)],
    );
    expect(rows.map((r) => [r.id, r.name])).toEqual(
      res.body.data.items.map((i: { id: number }, n: number) => [i.id, `B${n + 1}`]),
    );
  });

  it('ALL_OR_NOTHING, one invalid item → 422 Problem with the envelope naming its index; nothing inserted', async () => {
    const before = await snapshot(t.db);
    const path = `${BASE}/Customer/_bulk`;
    const res = await t.request('POST', path, {
      body: { items: [customerItem(), { email: email('x'), name: 42 }, customerItem()] },
    });
    expectBulkProblem(res, path, 3, [1]);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('ALL_OR_NOTHING, every failing index is listed (validation and an unknown field)', async () => {
    const before = await snapshot(t.db);
    const path = `${BASE}/Customer/_bulk`;
    const res = await t.request('POST', path, {
      body: { items: [{ name: 'no email' }, customerItem(), { ...customerItem(), bogus: 1 }, 'not an object'] },
    });
    expectBulkProblem(res, path, 4, [0, 2, 3]);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('ALL_OR_NOTHING, a duplicate email within the batch (database failure) → 422, nothing inserted', async () => {
    const dup = email('dup');
    const path = `${BASE}/Customer/_bulk`;
    const res = await t.request('POST', path, {
      body: { items: [customerItem(), { email: dup, name: 'one' }, { email: dup, name: 'two' }] },
    });
    expectBulkProblem(res, path, 3, [2]);
    expect(res.body.data.errors[0].message).toMatch(/email/);
    expect(await countRows(t.db, 'Customer', 'master', 'email = $1', [dup])).toBe(0);
  });

  it('ALL_OR_NOTHING, a foreign key to a missing customer → 422, nothing inserted', async () => {
    const customer = await newCustomer();
    const before = await countRows(t.db, 'Order');
    const path = `${BASE}/Order/_bulk`;
    const res = await t.request('POST', path, {
      body: {
        items: [
          { total: 1, customerId: customer.id },
          { total: 2, customerId: randomUUID() },
        ],
      },
    });
    expectBulkProblem(res, path, 2, [1]);
    expect(res.body.data.errors[0].message).toMatch(/customerId/);
    expect(await countRows(t.db, 'Order')).toBe(before);
  });

  it.each([
    ['in the body', '', { transactionMode: 'BEST_EFFORT' }],
    ['as ?mode=', '?mode=BEST_EFFORT', {}],
  ])(
    'BEST_EFFORT %s → 207 with errors for the failing indexes only; the others are inserted',
    async (_how, query, extra) => {
      const customer = await newCustomer();
      const dup = email('dup');
      const items = [
        { email: dup, name: 'ok 0' },
        { email: dup, name: 'duplicate' },
        { email: email('ok2'), name: 'ok 2' },
        { email: email('bad'), name: 'bad', vip: 'yes' },
        { email: email('ok4'), name: 'ok 4', cityId: null },
      ];
      const before = await countRows(t.db, 'Customer');
      const res = await t.request('POST', `${BASE}/Customer/_bulk${query}`, { body: { items, ...extra } });
      expectEnvelope(
        res,
        207,
        'BEST_EFFORT',
        5,
        [0, 1, 2].map(() => ({ id: expect.stringMatching(UUID) })),
        [1, 3],
      );
      expect(await countRows(t.db, 'Customer')).toBe(before + 3);
      const emails = await t.db.query<{ email: string }>(
        `select email from env_master."Customer" where id = any($1::uuid[]) order by name`,
        [res.body.data.items.map((i: { id: string }) => i.id)],
      );
      expect(emails.map((r) => r.email)).toEqual([dup, items[2]!.email, items[4]!.email]);
      const orders = await t.request('POST', `${BASE}/Order/_bulk${query}`, {
        body: {
          items: [
            { total: 1, customerId: randomUUID() },
            { total: 2, customerId: customer.id },
          ],
          ...extra,
        },
      });
      expectEnvelope(orders, 207, 'BEST_EFFORT', 2, [{ id: expect.any(Number) }], [0]);
      expect(await countRows(t.db, 'Order', 'master', '"customerId" = $1', [customer.id])).toBe(1);
    },
  );

  it('BEST_EFFORT with every item valid → 201, success true', async () => {
    const res = await t.request('POST', `${BASE}/City/_bulk`, {
      body: { items: [{ name: 'Ok', country: 'OK' }], transactionMode: 'BEST_EFFORT' },
    });
    expectEnvelope(res, 201, 'BEST_EFFORT', 1, [{ id: expect.any(Number) }], []);
  });

  it('100 items pass; 101 items → 422 naming items, nothing inserted', async () => {
    const path = `${BASE}/City/_bulk`;
    const before = await snapshot(t.db);
    const tooMany = await t.request('POST', path, {
      body: { items: Array.from({ length: 101 }, (_, i) => ({ name: `Many ${i}`, country: 'MN' })) },
    });
    expectProblemAt(tooMany, 422, path, 'validation', 'items');
    expect(await snapshot(t.db)).toEqual(before);
    const hundred = await t.request('POST', path, {
      body: { items: Array.from({ length: 100 }, (_, i) => ({ name: `Hundred ${i}`, country: 'HU' })) },
    });
    expect(hundred.status, hundred.text).toBe(201);
    expect(hundred.body.data.totalSucceeded).toBe(100);
    expect(await countRows(t.db, 'City', 'master', `country = 'HU'`)).toBe(100);
  });

  it.each([
    ['empty items', 'items', { items: [] }],
    ['items not an array', 'items', { items: { name: 'x', country: 'XX' } }],
    ['items missing', 'items', { transactionMode: 'BEST_EFFORT' }],
    ['unknown top-level key', 'extra', { items: [{ name: 'x', country: 'XX' }], extra: true }],
    [
      'invalid transactionMode in the body',
      'transactionMode',
      { items: [{ name: 'x', country: 'XX' }], transactionMode: 'SOMETIMES' },
    ],
    [
      'transactionMode of the wrong type',
      'transactionMode',
      { items: [{ name: 'x', country: 'XX' }], transactionMode: 1 },
    ],
  ])('%s → 422 naming %s, nothing inserted', async (_name, field, body) => {
    const path = `${BASE}/City/_bulk`;
    const before = await snapshot(t.db);
    expectProblemAt(await t.request('POST', path, { body }), 422, path, 'validation', field);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('a body that is not an object → 422', async () => {
    const path = `${BASE}/City/_bulk`;
    expectProblemAt(await t.request('POST', path, { body: [{ name: 'x', country: 'XX' }] }), 422, path, 'validation');
  });

  it('invalid ?mode= → 400 naming mode, nothing inserted', async () => {
    const path = `${BASE}/City/_bulk?mode=SOMETIMES`;
    const before = await snapshot(t.db);
    expectProblemAt(
      await t.request('POST', path, { body: { items: [{ name: 'x', country: 'XX' }] } }),
      400,
      path,
      'invalid-parameter',
      'mode',
    );
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('composite key (OrderItem): items are key objects', async () => {
    const order = await post('Order', { total: 3, customerId: (await newCustomer()).id });
    const [p1, p2] = [await newProduct(), await newProduct()];
    const res = await t.request('POST', `${BASE}/OrderItem/_bulk`, {
      body: {
        items: [
          { orderId: order.id, productId: p1.id, quantity: 2 },
          { orderId: order.id, productId: p2.id },
        ],
      },
    });
    expectEnvelope(
      res,
      201,
      'ALL_OR_NOTHING',
      2,
      [
        { orderId: order.id, productId: p1.id },
        { orderId: order.id, productId: p2.id },
      ],
      [],
    );
    expect(await countRows(t.db, 'OrderItem', 'master', '"orderId" = $1', [order.id])).toBe(2);
  });

  it('an item with many problems names 5 of them and counts the rest (30 unknown fields, 2 missing ones)', async () => {
    const item = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`unknown${i}`, i]));
    const res = await t.request('POST', `${BASE}/City/_bulk`, {
      body: { items: [item], transactionMode: 'BEST_EFFORT' },
    });
    expect(res.status, res.text).toBe(207);
    const message: string = res.body.data.errors[0].message;
    expect(message.split('; ')).toHaveLength(6);
    expect(message).toMatch(/^City has no field "unknown0"; .*; … and 27 more$/);
  });

  it('a role without create on the table → 403, nothing inserted', async () => {
    const customer = await newCustomer();
    const path = `${BASE}/Order/_bulk`;
    const before = await snapshot(t.db);
    expectProblemAt(
      await t.request('POST', path, { key: keys.catalog, body: { items: [{ total: 1, customerId: customer.id }] } }),
      403,
      path,
      'forbidden',
    );
    expect(await snapshot(t.db)).toEqual(before);
  });

  it.each(['ALL_OR_NOTHING', 'BEST_EFFORT'])(
    '%s: a forbidden field in any item → 403 naming it, nothing inserted',
    async (transactionMode) => {
      const customer = await newCustomer();
      const key = await takerKey(customer.id);
      const path = `${BASE}/Order/_bulk`;
      const before = await snapshot(t.db);
      const items = [
        { total: 1, customerId: customer.id },
        { total: 2, customerId: customer.id, status: 'paid' },
      ];
      expectProblemAt(
        await t.request('POST', path, { key, body: { items, transactionMode } }),
        403,
        path,
        'forbidden',
        'status',
      );
      expect(await snapshot(t.db)).toEqual(before);
      const allowed = await t.request('POST', path, { key, body: { items: [items[0]], transactionMode } });
      expect(allowed.status, allowed.text).toBe(201);
    },
  );

  it('the create filter: items get the preset customer, an item for another customer fails (BEST_EFFORT 207, ALL_OR_NOTHING 422 and nothing inserted)', async () => {
    const [mine, other] = [await newCustomer(), await newCustomer()];
    const key = await takerKey(mine.id);
    const path = `${BASE}/Order/_bulk`;
    const items = [{ total: 1 }, { total: 2, customerId: other.id }, { total: 3, customerId: mine.id }];
    const message = "the Order record would not match your role's filter on customerId; nothing was changed";
    const before = await snapshot(t.db);
    const all = await t.request('POST', path, { key, body: { items } });
    expect(all.status, all.text).toBe(422);
    expect(all.body.data.errors).toEqual([{ index: 1, message }]);
    expect(await snapshot(t.db)).toEqual(before);
    const some = await t.request('POST', path, { key, body: { items, transactionMode: 'BEST_EFFORT' } });
    expect(some.status, some.text).toBe(207);
    expect(some.body.data).toMatchObject({ totalSucceeded: 2, totalFailed: 1, errors: [{ index: 1, message }] });
    expect(await countRows(t.db, 'Order', 'master', '"customerId" = $1', [mine.id])).toBe(2);
    expect(await countRows(t.db, 'Order', 'master', '"customerId" = $1', [other.id])).toBe(0);
  });
});

describe('bulk create as one statement', () => {
  /** The data statements (INSERTs into the shop's tables) the server sent for one request. */
  const inserts = () => statements.filter((s) => /INSERT INTO "env_master"\."(Customer|Order|City)"/.test(s));

  it('100 items → one INSERT, no savepoints; keys in item order; the rows as single creates write them', async () => {
    const customer = await newCustomer();
    const items = Array.from({ length: 100 }, (_, i) => ({
      total: i + 0.5,
      customerId: customer.id,
      ...(i % 3 === 0 ? { status: 'paid', note: `n${i}` } : {}),
    }));
    statements = [];
    const res = await t.request('POST', `${BASE}/Order/_bulk`, { body: { items } });
    expectEnvelope(
      res,
      201,
      'ALL_OR_NOTHING',
      100,
      items.map(() => ({ id: expect.any(Number) })),
      [],
    );
    expect(inserts()).toHaveLength(1);
    expect(statements.filter((s) => /SAVEPOINT/.test(s))).toEqual([]);
    const ids = res.body.data.items.map((i: { id: number }) => i.id);
    const rows = await t.db.query<{ id: number; total: number; status: string; note: string | null; same: boolean }>(
      `select id, total, status::text, note, "createdAt" = "updatedAt" as same from env_master."Order" where id = any($1::int[]) order by id`,
      [ids],
    );
    expect(rows.map((r) => r.id)).toEqual(ids);
    expect(rows.map((r) => [r.total, r.status, r.note])).toEqual(
      items.map((it, i) => [i + 0.5, it.status ?? 'open', it.note ?? null]),
    );
    // The record each id names reads like a single create of the same body.
    const single = await t.request('POST', `${BASE}/Order`, { body: items[1] });
    const read = await t.request('GET', `${BASE}/Order/${ids[1]}`);
    const strip = (r: Record<string, unknown>) => ({ ...r, id: 0, createdAt: 0, updatedAt: 0 });
    expect(strip(read.body.data)).toEqual(strip(single.body.data));
  });

  it('BEST_EFFORT: the valid items in one INSERT, the invalid one (item 4) in errors → 207', async () => {
    const items = Array.from({ length: 10 }, (_, i) => (i === 4 ? { name: 'no email' } : customerItem(`be${i}`)));
    statements = [];
    const res = await t.request('POST', `${BASE}/Customer/_bulk`, { body: { items, transactionMode: 'BEST_EFFORT' } });
    expectEnvelope(
      res,
      207,
      'BEST_EFFORT',
      10,
      Array.from({ length: 9 }, () => ({ id: expect.stringMatching(UUID) })),
      [4],
    );
    expect(inserts()).toHaveLength(1);
    const rows = await t.db.query<{ id: string; email: string }>(
      `select id::text, email from env_master."Customer" where id = any($1::uuid[])`,
      [res.body.data.items.map((i: { id: string }) => i.id)],
    );
    const byId = new Map(rows.map((r) => [r.id, r.email]));
    expect(res.body.data.items.map((i: { id: string }) => byId.get(i.id))).toEqual(
      items.filter((_, i) => i !== 4).map((i) => (i as { email: string }).email),
    );
  });

  it("under an Idempotency-Key (the key's transaction) a database refusal still names its item, in either mode", async () => {
    const dup = email('idem-dup');
    const items = [customerItem('i0'), { email: dup, name: 'one' }, { email: dup, name: 'two' }];
    const path = `${BASE}/Customer/_bulk`;
    const all = await t.request('POST', path, { body: { items }, headers: { 'idempotency-key': randomUUID() } });
    expectBulkProblem(all, path, 3, [2]);
    expect(await countRows(t.db, 'Customer', 'master', 'email = $1', [dup])).toBe(0);
    const some = await t.request('POST', path, {
      body: { items, transactionMode: 'BEST_EFFORT' },
      headers: { 'idempotency-key': randomUUID() },
    });
    expectEnvelope(
      some,
      207,
      'BEST_EFFORT',
      3,
      [{ id: expect.stringMatching(UUID) }, { id: expect.stringMatching(UUID) }],
      [2],
    );
    expect(await countRows(t.db, 'Customer', 'master', 'email = $1', [dup])).toBe(1);
  });

  it('mixed presets and defaults in one batch: the preset customer where the item has none, defaults where it has no value', async () => {
    const mine = await newCustomer();
    const key = await takerKey(mine.id);
    const items = [{ total: 1 }, { total: 2, customerId: mine.id }, { total: 3 }];
    const res = await t.request('POST', `${BASE}/Order/_bulk`, { key, body: { items } });
    expectEnvelope(
      res,
      201,
      'ALL_OR_NOTHING',
      3,
      items.map(() => ({ id: expect.any(Number) })),
      [],
    );
    const rows = await t.db.query<{
      id: number;
      total: number;
      customerId: string;
      status: string;
      note: string | null;
    }>(
      `select id, total, "customerId"::text, status::text, note from env_master."Order" where id = any($1::int[]) order by id`,
      [res.body.data.items.map((i: { id: number }) => i.id)],
    );
    expect(rows.map((r) => [r.total, r.customerId, r.status, r.note])).toEqual(
      items.map((i) => [i.total, mine.id, 'open', null]),
    );
    const customers = await t.request('POST', `${BASE}/Customer/_bulk`, {
      body: { items: [{ ...customerItem('m0'), vip: true, cityId: null }, customerItem('m1')] },
    });
    expect(customers.status, customers.text).toBe(201);
    const vips = await t.db.query<{ vip: boolean; cityId: number | null }>(
      `select vip, "cityId" from env_master."Customer" where id = any($1::uuid[]) order by vip desc`,
      [customers.body.data.items.map((i: { id: string }) => i.id)],
    );
    expect(vips).toEqual([
      { vip: true, cityId: null },
      { vip: false, cityId: null },
    ]);
  });

  it('chosen Int keys among database ones: the sequence moves past the highest, so later creates do not collide', async () => {
    const [{ max }] = await t.db.query<{ max: number }>(
      `select coalesce(max(id), 0)::int as max from env_master."City"`,
    );
    const chosen = max + 1000;
    const res = await t.request('POST', `${BASE}/City/_bulk`, {
      body: {
        items: [
          { id: chosen, name: 'K1', country: 'KY' },
          { id: chosen - 500, name: 'K2', country: 'KY' },
        ],
      },
    });
    expectEnvelope(res, 201, 'ALL_OR_NOTHING', 2, [{ id: chosen }, { id: chosen - 500 }], []);
    const later = await t.request('POST', `${BASE}/City`, { body: { name: 'K3', country: 'KY' } });
    expect(later.status, later.text).toBe(201);
    expect(later.body.data.id).toBeGreaterThan(chosen);
  });

  it("a row filter refusal on item 57 of 100 → the 422 names item 57 with the filter's message; nothing inserted", async () => {
    const [mine, other] = [await newCustomer(), await newCustomer()];
    const key = await takerKey(mine.id);
    const items = Array.from({ length: 100 }, (_, i) => (i === 57 ? { total: i, customerId: other.id } : { total: i }));
    const path = `${BASE}/Order/_bulk`;
    const before = await snapshot(t.db);
    const res = await t.request('POST', path, { key, body: { items } });
    const message = "the Order record would not match your role's filter on customerId; nothing was changed";
    expect(res.status, res.text).toBe(422);
    expect(res.body).toEqual({
      type: '/errors/validation',
      title: expect.any(String),
      status: 422,
      detail: '1 of 100 items failed; nothing was changed',
      instance: path,
      errors: [{ field: 'items[57]', rule: 'item', message }],
      data: {
        success: false,
        transactionMode: 'ALL_OR_NOTHING',
        totalRequested: 100,
        totalSucceeded: 0,
        totalFailed: 100,
        items: [],
        errors: [{ index: 57, message }],
      },
    });
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('a unique conflict on item 63 of 100 (an existing email) → the 422 names item 63 with the conflict; nothing inserted', async () => {
    const existing = await newCustomer('taken');
    const items = Array.from({ length: 100 }, (_, i) =>
      i === 63 ? { email: existing.email, name: 'again' } : customerItem(`u${i}`),
    );
    const path = `${BASE}/Customer/_bulk`;
    const before = await snapshot(t.db);
    const res = await t.request('POST', path, { body: { items } });
    const message = 'a Customer record with the same email already exists';
    expect(res.status, res.text).toBe(422);
    expect(res.body).toEqual({
      type: '/errors/validation',
      title: expect.any(String),
      status: 422,
      detail: '1 of 100 items failed; nothing was changed',
      instance: path,
      errors: [{ field: 'items[63]', rule: 'item', message }],
      data: {
        success: false,
        transactionMode: 'ALL_OR_NOTHING',
        totalRequested: 100,
        totalSucceeded: 0,
        totalFailed: 100,
        items: [],
        errors: [{ index: 63, message }],
      },
    });
    expect(await snapshot(t.db)).toEqual(before);
  });
});

describe('DELETE /<table>/_bulk', () => {
  const cities = async (n: number) => {
    const res = await t.request('POST', `${BASE}/City/_bulk`, {
      body: { items: Array.from({ length: n }, (_, i) => ({ name: `Del ${i}`, country: 'DL' })) },
    });
    expect(res.status, res.text).toBe(201);
    return res.body.data.items.map((i: { id: number }) => i.id) as number[];
  };
  const existing = async (ids: number[]) => countRows(t.db, 'City', 'master', 'id = any($1::int[])', [ids]);

  it('{ ids } all existing → 200 envelope with items [{ id }]; the rows are gone', async () => {
    const ids = await cities(3);
    const res = await t.request('DELETE', `${BASE}/City/_bulk`, { body: { ids } });
    expectEnvelope(
      res,
      200,
      'ALL_OR_NOTHING',
      3,
      ids.map((id) => ({ id })),
      [],
    );
    expect(await existing(ids)).toBe(0);
  });

  it('UUID ids as strings', async () => {
    const [a, b] = [await newCustomer(), await newCustomer()];
    const res = await t.request('DELETE', `${BASE}/Customer/_bulk`, { body: { ids: [a.id, b.id] } });
    expectEnvelope(res, 200, 'ALL_OR_NOTHING', 2, [{ id: a.id }, { id: b.id }], []);
    expect(await countRows(t.db, 'Customer', 'master', 'id = any($1::uuid[])', [[a.id, b.id]])).toBe(0);
  });

  it('ALL_OR_NOTHING with one missing id → 422 with its index; nothing deleted', async () => {
    const ids = await cities(2);
    const path = `${BASE}/City/_bulk`;
    const res = await t.request('DELETE', path, { body: { ids: [ids[0], 999_999_999, ids[1]] } });
    expectBulkProblem(res, path, 3, [1]);
    expect(await existing(ids)).toBe(2);
  });

  it('BEST_EFFORT with one missing id → 207 with that index in errors; the others deleted', async () => {
    const ids = await cities(2);
    const res = await t.request('DELETE', `${BASE}/City/_bulk`, {
      body: { ids: [ids[0], 999_999_998, ids[1]], transactionMode: 'BEST_EFFORT' },
    });
    expectEnvelope(res, 207, 'BEST_EFFORT', 3, [{ id: ids[0] }, { id: ids[1] }], [1]);
    expect(await existing(ids)).toBe(0);
  });

  it('a referenced row (Customer with orders; RESTRICT) → an error for that index, never a 500', async () => {
    const [free, referenced] = [await newCustomer(), await newCustomer()];
    await post('Order', { total: 1, customerId: referenced.id });
    const path = `${BASE}/Customer/_bulk`;
    const strict = await t.request('DELETE', path, { body: { ids: [free.id, referenced.id] } });
    expectBulkProblem(strict, path, 2, [1]);
    expect(await countRows(t.db, 'Customer', 'master', 'id = any($1::uuid[])', [[free.id, referenced.id]])).toBe(2);
    const lenient = await t.request('DELETE', `${path}?mode=BEST_EFFORT`, { body: { ids: [free.id, referenced.id] } });
    expectEnvelope(lenient, 207, 'BEST_EFFORT', 2, [{ id: free.id }], [1]);
    expect(lenient.body.data.errors[0].message).not.toMatch(/violates|constraint|env_master|SQL/i);
    expect(await countRows(t.db, 'Customer', 'master', 'id = any($1::uuid[])', [[free.id, referenced.id]])).toBe(1);
  });

  it('ids and filters together → 422, nothing deleted', async () => {
    const ids = await cities(1);
    const path = `${BASE}/City/_bulk`;
    expectProblemAt(
      await t.request('DELETE', path, { body: { ids, filters: [{ id: ids[0] }] } }),
      422,
      path,
      'validation',
    );
    expect(await existing(ids)).toBe(1);
  });

  it('composite key with ids → 422', async () => {
    const path = `${BASE}/OrderItem/_bulk`;
    const before = await snapshot(t.db);
    expectProblemAt(await t.request('DELETE', path, { body: { ids: ['1'] } }), 422, path, 'validation', 'ids');
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('composite key with filters → 200, items are the key objects; a filter missing a key field → error for its index', async () => {
    const order = await post('Order', { total: 3, customerId: (await newCustomer()).id });
    const [p1, p2, p3] = [await newProduct(), await newProduct(), await newProduct()];
    for (const p of [p1, p2, p3]) await post('OrderItem', { orderId: order.id, productId: p.id });
    const path = `${BASE}/OrderItem/_bulk`;
    const missing = await t.request('DELETE', path, {
      body: { filters: [{ orderId: order.id, productId: p1.id }, { orderId: order.id }] },
    });
    expectBulkProblem(missing, path, 2, [1]);
    expect(await countRows(t.db, 'OrderItem', 'master', '"orderId" = $1', [order.id])).toBe(3);
    const res = await t.request('DELETE', path, {
      body: {
        filters: [
          { orderId: order.id, productId: p1.id },
          { productId: p2.id, orderId: order.id },
        ],
      },
    });
    expectEnvelope(
      res,
      200,
      'ALL_OR_NOTHING',
      2,
      [
        { orderId: order.id, productId: p1.id },
        { productId: p2.id, orderId: order.id },
      ],
      [],
    );
    expect(await countRows(t.db, 'OrderItem', 'master', '"orderId" = $1', [order.id])).toBe(1);
    const extra = await t.request('DELETE', `${path}?mode=BEST_EFFORT`, {
      body: { filters: [{ orderId: order.id, productId: p3.id, quantity: 1 }, 'x', null] },
    });
    expectEnvelope(extra, 207, 'BEST_EFFORT', 3, [], [0, 1, 2]);
    expect(await countRows(t.db, 'OrderItem', 'master', '"orderId" = $1', [order.id])).toBe(1);
  });

  it.each([
    ['over 100 ids', 'ids', () => ({ ids: Array.from({ length: 101 }, (_, i) => i + 1) })],
    ['over 100 filters', 'filters', () => ({ filters: Array.from({ length: 101 }, (_, i) => ({ id: i + 1 })) })],
    ['empty ids', 'ids', () => ({ ids: [] })],
    ['ids not an array', 'ids', () => ({ ids: 1 })],
    ['neither ids nor filters', 'ids or filters', () => ({ transactionMode: 'BEST_EFFORT' })],
    ['unknown top-level key', 'where', () => ({ ids: [1], where: 'x' })],
    ['invalid transactionMode', 'transactionMode', () => ({ ids: [1], transactionMode: 'MAYBE' })],
  ])('%s → 422 naming %s, nothing deleted', async (_name, field, body) => {
    await cities(1);
    const path = `${BASE}/City/_bulk`;
    const before = await snapshot(t.db);
    expectProblemAt(
      await t.request('DELETE', path, { body: body() }),
      422,
      path,
      'validation',
      field === 'ids or filters' ? undefined : field,
    );
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('malformed ids (not a UUID, wrong types, huge numbers) → an error for each index, not a 500', async () => {
    const kept = await newCustomer();
    const path = `${BASE}/Customer/_bulk`;
    // biome-ignore lint/correctness/noPrecisionLoss: 1e309 is Infinity on purpose (JSON.stringify writes null)
    const ids = ['not-a-uuid', kept.id, 12, null, { id: kept.id }, `${kept.id}'; drop table "Customer"; --`, 1e309, ''];
    const before = await snapshot(t.db);
    // 1e309 is not JSON.stringify-able (it becomes null); send it as raw JSON text
    const raw = JSON.stringify({ ids: ids.map((id) => (id === Infinity ? '__INF__' : id)) }).replace(
      '"__INF__"',
      '1e309',
    );
    const res = await t.request('DELETE', `${path}?mode=BEST_EFFORT`, {
      raw,
      headers: { 'content-type': 'application/json' },
    });
    expectEnvelope(res, 207, 'BEST_EFFORT', ids.length, [{ id: kept.id }], [0, 2, 3, 4, 5, 6, 7]);
    expect(await countRows(t.db, 'Customer', 'master', 'id = $1', [kept.id])).toBe(0);
    const strict = await t.request('DELETE', path, { body: { ids: ['not-a-uuid', 'also-not'] } });
    expectBulkProblem(strict, path, 2, [0, 1]);
    const after = await snapshot(t.db);
    expect(after.Order).toEqual(before.Order);
  });

  it('a role without delete → 403, nothing deleted', async () => {
    const ids = await cities(1);
    const path = `${BASE}/City/_bulk`;
    expectProblemAt(await t.request('DELETE', path, { key: keys.catalog, body: { ids } }), 403, path, 'forbidden');
    expect(await existing(ids)).toBe(1);
  });
});
