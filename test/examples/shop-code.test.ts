/**
 * The shop example's own code (examples/shop/svcgen.code.ts, docs/own-code.md), loaded from its code
 * entry as `svcgen serve` loads it: checkout (order, items, stock and receipt in one transaction,
 * 409 when short), the order status rules, the nightly clean-up and the sales report function.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadService } from '../../cli/project.ts';
import { codeCrontab } from '../../runtime/usercode/index.ts';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { SHOP } from '../support/server.ts';
import { until } from '../support/until.ts';

const REST = '/gw/api/rest';

let t: AuthTestServer;
let ann: Session;
let bob: Session;
let catalogKey: string;
/** Product ids by sku. */
const products: Record<string, number> = {};

async function addCustomer(id: string, email: string, name: string): Promise<void> {
  await t.db.query(`INSERT INTO env_master."Customer" (id, email, name, "updatedAt") VALUES ($1, $2, $3, now())`, [
    id,
    email,
    name,
  ]);
}

async function stockOf(sku: string): Promise<number> {
  const [row] = await t.db.query<{ stock: number }>(`SELECT stock FROM env_master."Product" WHERE sku = $1`, [sku]);
  return row!.stock;
}

async function orderCount(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM env_master."Order"`);
  return row!.n;
}

const checkout = (session: Session, body: unknown) =>
  t.asUser(session.accessToken, 'POST', `${REST}/checkout`, { body });

beforeAll(async () => {
  t = await startAuthServer({ code: 'entry' });
  ann = await t.signupConfirmed('ann@shop.test');
  bob = await t.signupConfirmed('bob@shop.test');
  // In the shop a customer's user id is their Customer id (the customer role's filters say so).
  await addCustomer(ann.user.id, 'ann@shop.test', 'Ann');
  await addCustomer(bob.user.id, 'bob@shop.test', 'Bob');
  for (const [sku, price, stock] of [
    ['mug', 12.5, 10],
    ['tee', 20, 3],
    ['cap', 9.99, 1],
  ] as const) {
    const res = await t.request('POST', `${REST}/Product`, { body: { sku, title: sku.toUpperCase(), price, stock } });
    expect(res.status, res.text).toBe(201);
    products[sku] = res.body.data.id;
  }
  catalogKey = (await t.createKey(['catalog'])).key;
}, 120_000);

afterAll(async () => {
  await t?.close();
});

describe('checkout', () => {
  it('creates the order and its items, takes the stock and mails the receipt', async () => {
    const res = await checkout(ann, {
      items: [
        { productId: products.mug, quantity: 2 },
        { productId: products.tee, quantity: 1 },
        { productId: products.mug, quantity: 1 },
      ],
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({ orderId: expect.any(Number), total: 57.5 });
    const { orderId } = res.body;

    const order = await t.asUser(ann.accessToken, 'GET', `${REST}/Order/${orderId}`);
    expect(order.body.data).toMatchObject({ id: orderId, customerId: ann.user.id, status: 'open', total: 57.5 });
    const items = await t.db.query(
      `SELECT "productId", quantity FROM env_master."OrderItem" WHERE "orderId" = $1 ORDER BY "productId"`,
      [orderId],
    );
    expect(items).toEqual(
      [
        { productId: products.mug, quantity: 3 },
        { productId: products.tee, quantity: 1 },
      ].sort((a, b) => a.productId! - b.productId!),
    );
    expect(await stockOf('mug')).toBe(7);
    expect(await stockOf('tee')).toBe(2);

    // The receipt job, queued in the checkout's transaction, mails the customer.
    const mail = await t.mail.nextMail('ann@shop.test', 30_000);
    expect(mail.subject).toBe(`Your order #${orderId}`);
    expect(mail.raw).toContain('3 =C3=97 MUG');
    expect(mail.raw).toContain('Total: 57.50');
  });

  it('answers 409 naming the item when the stock is short, and changes nothing', async () => {
    const orders = await orderCount();
    // The short product comes first in the caller's items but after the other in product order:
    // the refusal names its place in the items as sent.
    const res = await checkout(ann, {
      items: [
        { productId: products.tee, quantity: 5 },
        { productId: products.mug, quantity: 1 },
      ],
    });
    expect(res.status, res.text).toBe(409);
    expect(res.body).toEqual({
      type: '/errors/conflict',
      title: expect.any(String),
      status: 409,
      detail: `product ${products.tee} has 2 in stock, 5 asked`,
      instance: `${REST}/checkout`,
      errors: [{ field: 'items.0.quantity', rule: 'stock', message: 'only 2 in stock' }],
    });
    // The mug taken before the tee came up short is given back with the rest of the transaction.
    expect(await stockOf('mug')).toBe(7);
    expect(await stockOf('tee')).toBe(2);
    expect(await orderCount()).toBe(orders);
  });

  it('gives the last one to exactly one of two checkouts at once', async () => {
    const [a, b] = await Promise.all([
      checkout(ann, { items: [{ productId: products.cap, quantity: 1 }] }),
      checkout(bob, { items: [{ productId: products.cap, quantity: 1 }] }),
    ]);
    expect([a.status, b.status].sort()).toEqual([201, 409]);
    expect(await stockOf('cap')).toBe(0);
  });

  it("refuses an order for another customer, taking no stock (the customer role's create filter)", async () => {
    const orders = await orderCount();
    const res = await checkout(ann, { customerId: bob.user.id, items: [{ productId: products.mug, quantity: 1 }] });
    expect(res.status, res.text).toBe(403);
    expect(await stockOf('mug')).toBe(7);
    expect(await orderCount()).toBe(orders);
  });

  it('answers 422 for an unknown product and for bad input', async () => {
    const unknown = await checkout(ann, { items: [{ productId: 999_999, quantity: 1 }] });
    expect(unknown.status, unknown.text).toBe(422);
    expect(unknown.body.errors).toEqual([
      { field: 'items.0.productId', rule: 'refused', message: 'there is no product 999999' },
    ]);
    const empty = await checkout(ann, { items: [] });
    expect(empty.status, empty.text).toBe(422);
    expect(empty.body.errors.map((e: { field: string }) => e.field)).toEqual(['items']);
    const zero = await checkout(ann, { items: [{ productId: products.mug, quantity: 0 }] });
    expect(zero.status, zero.text).toBe(422);
    expect(zero.body.errors.map((e: { field: string }) => e.field)).toEqual(['items.0.quantity']);
    expect(await stockOf('mug')).toBe(7);
  });

  it('is for customers and admins only; an API key must name the customer', async () => {
    const anonymous = await t.request('POST', `${REST}/checkout`, { key: false, body: { items: [] } });
    expect(anonymous.status, anonymous.text).toBe(401);
    const catalog = await t.request('POST', `${REST}/checkout`, {
      key: catalogKey,
      body: { items: [{ productId: products.mug, quantity: 1 }] },
    });
    expect(catalog.status, catalog.text).toBe(403);
    expect(catalog.body.detail).toBe('your role may not call checkout');
    const admin = await t.request('POST', `${REST}/checkout`, {
      body: { items: [{ productId: products.mug, quantity: 1 }] },
    });
    expect(admin.status, admin.text).toBe(422);
    expect(admin.body.errors).toEqual([
      { field: 'customerId', rule: 'refused', message: 'required unless a signed-in customer checks out' },
    ]);
    const forBob = await t.request('POST', `${REST}/checkout`, {
      body: { customerId: bob.user.id, items: [{ productId: products.mug, quantity: 1 }] },
    });
    expect(forBob.status, forBob.text).toBe(201);
    expect(await stockOf('mug')).toBe(6);
  });
});

describe('the order status rules', () => {
  async function newOrder(): Promise<number> {
    const res = await t.request('POST', `${REST}/Order`, { body: { customerId: ann.user.id, total: 5 } });
    expect(res.status, res.text).toBe(201);
    return res.body.data.id;
  }

  it('stamps placedAt when an order becomes paid, over REST and GraphQL', async () => {
    const id = await newOrder();
    const before = Date.now();
    const paid = await t.request('PATCH', `${REST}/Order/${id}`, { body: { status: 'paid' } });
    expect(paid.status, paid.text).toBe(200);
    expect(Date.parse(paid.body.data.placedAt)).toBeGreaterThanOrEqual(before - 1000);

    const other = await newOrder();
    const gql = await t.request('POST', '/gw/api/graphql', {
      body: { query: `mutation { updateOrder(id: ${other}, data: { status: paid }) { placedAt } }` },
    });
    expect(gql.status, gql.text).toBe(200);
    expect(gql.body.data.updateOrder.placedAt).toEqual(expect.any(String));

    const created = await t.request('POST', `${REST}/Order`, {
      body: { customerId: ann.user.id, total: 5, status: 'paid' },
    });
    expect(created.body.data.placedAt).toEqual(expect.any(String));
  });

  it('refuses paid → open on every path, changing nothing', async () => {
    const id = await newOrder();
    await t.request('PATCH', `${REST}/Order/${id}`, { body: { status: 'paid' } });
    const rest = await t.request('PATCH', `${REST}/Order/${id}`, { body: { status: 'open' } });
    expect(rest.status, rest.text).toBe(422);
    expect(rest.body.errors).toEqual([
      { field: 'status', rule: 'refused', message: 'a paid order cannot be reopened' },
    ]);
    const byFilter = await t.request('PATCH', `${REST}/Order?id=equals.${id}`, { body: { status: 'open' } });
    expect(byFilter.status, byFilter.text).toBe(422);
    const gql = await t.request('POST', '/gw/api/graphql', {
      body: { query: `mutation { updateOrder(id: ${id}, data: { status: open }) { status } }` },
    });
    expect(gql.body.errors[0].extensions).toMatchObject({ status: 422, errors: rest.body.errors });
    const [row] = await t.db.query<{ status: string }>(`SELECT status FROM env_master."Order" WHERE id = $1`, [id]);
    expect(row!.status).toBe('paid');
  });
});

describe('the nightly clean-up', () => {
  it('is a crontab entry per environment at 03:00 UTC', async () => {
    const { code, config } = await loadService(SHOP);
    expect(code.schedules).toEqual([
      { name: 'nightlyCleanup', cron: '0 3 * * *', job: 'cancelStaleOrders', payload: { days: 30 } },
    ]);
    expect(codeCrontab(code, config.environments).map((item) => [item.identifier, item.task, item.payload])).toEqual([
      [
        'svcgen.code.nightlyCleanup@master',
        'svcgen.code.cancelStaleOrders',
        { environment: 'master', payload: { days: 30 } },
      ],
      [
        'svcgen.code.nightlyCleanup@staging',
        'svcgen.code.cancelStaleOrders',
        { environment: 'staging', payload: { days: 30 } },
      ],
    ]);
  });

  it('cancels the open orders older than 30 days and leaves the others', async () => {
    const make = async (status: string, daysAgo: number) => {
      const [row] = await t.db.query<{ id: number }>(
        `INSERT INTO env_master."Order" (status, total, "customerId", "createdAt", "updatedAt")
         VALUES ($1, 1, $2, now() - make_interval(days => $3), now()) RETURNING id`,
        [status, ann.user.id, daysAgo],
      );
      return row!.id;
    };
    const stale = await make('open', 40);
    const recent = await make('open', 2);
    const paid = await make('paid', 40);
    // What the schedule queues at 03:00: the job with the schedule's payload, in each environment.
    await t.db.query(`SELECT svcgen_worker.add_job('svcgen.code.cancelStaleOrders', $1::json)`, [
      JSON.stringify({ environment: 'master', payload: { days: 30 } }),
    ]);
    const statusOf = async (id: number) =>
      (await t.db.query<{ status: string }>(`SELECT status FROM env_master."Order" WHERE id = $1`, [id]))[0]!.status;
    await until(
      () => statusOf(stale),
      (status) => status === 'cancelled',
      30_000,
      'the stale order cancelled',
    );
    expect(await statusOf(recent)).toBe('open');
    expect(await statusOf(paid)).toBe('paid');
  });
});

describe('the sales report function', () => {
  it('sums the paid orders per day for admins, and refuses customers', async () => {
    const res = await t.request('POST', `${REST}/rpc/sales_report`, { body: { since: '2000-01-01' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.length).toBeGreaterThan(0);
    for (const row of res.body.data) expect(Object.keys(row).sort()).toEqual(['day', 'orders', 'revenue']);
    const [expected] = await t.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM env_master."Order" WHERE status IN ('paid', 'shipped') AND "placedAt" IS NOT NULL`,
    );
    expect(res.body.data.reduce((sum: number, row: { orders: number }) => sum + row.orders, 0)).toBe(expected!.n);

    const customer = await t.asUser(ann.accessToken, 'POST', `${REST}/rpc/sales_report`, {
      body: { since: '2000-01-01' },
    });
    expect(customer.status, customer.text).toBe(403);
  });
});
