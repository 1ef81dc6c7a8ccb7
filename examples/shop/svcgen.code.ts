/**
 * The shop's own code (docs/own-code.md): checkout, the rules of an order's status, the receipt
 * mailed after a checkout and the nightly clean-up of stale open orders. The sales report is a
 * database function (migrations/20261208000000_product_stock_sales_report, config `functions`).
 */
import { Problem } from 'svcgen';
import { z } from 'zod';
import { defineCode, defineEndpoint, defineJob, refuse } from './generated/code.ts';

/** Mails the customer what they ordered; queued by checkout in its transaction. */
const sendReceipt = defineJob({
  name: 'sendReceipt',
  payload: z.object({ orderId: z.number().int() }),
  async run({ orderId }, ctx) {
    // A job has no caller; it reads as the system, and only what the receipt shows.
    const data = ctx.asSystem();
    const { data: order } = await data.Order.get(orderId);
    const { data: customer } = await data.Customer.get(order.customerId);
    const { data: items } = await data.OrderItem.list({ where: { orderId: { equals: orderId } }, limit: 100 });
    const { data: products } = await data.Product.list({
      where: { id: { in: items.map((item) => item.productId) } },
      limit: 100,
    });
    const titles = new Map(products.map((product) => [product.id, product.title]));
    const lines = items.map(
      (item) => `${item.quantity} × ${titles.get(item.productId) ?? `product ${item.productId}`}`,
    );
    ctx.mail({
      to: customer.email,
      subject: `Your order #${order.id}`,
      text: `Hello ${customer.name},\n\nthank you for your order #${order.id}:\n\n${lines.join('\n')}\n\nTotal: ${order.total.toFixed(2)}\n`,
    });
    ctx.log.info('receipt sent', { orderId });
  },
});

/** Cancels the open orders older than `days` (the nightly schedule below). */
const cancelStaleOrders = defineJob({
  name: 'cancelStaleOrders',
  payload: z.object({ days: z.number().int().min(1).default(30) }),
  async run({ days }, ctx) {
    const before = new Date(Date.now() - days * 24 * 60 * 60 * 1000);
    // Through the data API, so that the Order hooks, webhooks and subscriptions see each cancellation.
    const { data } = await ctx
      .asSystem()
      .Order.updateWhere({ status: { equals: 'open' }, createdAt: { lt: before } }, { status: 'cancelled' });
    ctx.log.info('stale open orders cancelled', { days, count: data.count });
  },
});

const CheckoutInput = z.object({
  /** Whose order; a signed-in customer may leave it out (their user id is their Customer id). */
  customerId: z.uuid().optional(),
  items: z
    .array(z.object({ productId: z.number().int().positive(), quantity: z.number().int().min(1).max(1000) }))
    .min(1)
    .max(50),
});

/** Cents of `price × quantity`: PostgreSQL's numeric comes back as text, and floats do not add money. */
function cents(price: string, quantity: number): number {
  return Math.round(Number(price) * 100) * quantity;
}

/**
 * POST /gw/api/rest/checkout: the order and its items in one transaction, the stock taken (409 when
 * short), the receipt queued. Everything commits together or not at all.
 */
const checkout = defineEndpoint({
  name: 'checkout',
  method: 'POST',
  path: '/checkout',
  summary: 'Place an order: its items, the stock they take and a receipt by mail, in one transaction',
  access: { roles: ['customer', 'admin'] },
  input: CheckoutInput,
  output: z.object({ orderId: z.number().int(), total: z.number() }),
  status: 201,
  async handler(input, ctx) {
    const customerId = input.customerId ?? (ctx.caller.kind === 'user' ? ctx.caller.userId : undefined);
    if (customerId === undefined) throw refuse({ customerId: 'required unless a signed-in customer checks out' });
    // One line per product, in product order: two checkouts lock the same rows in the same order.
    // A refusal names the product's first place in the caller's `items`.
    const quantities = new Map<number, number>();
    const firstIndex = new Map<number, number>();
    for (const [index, { productId, quantity }] of input.items.entries()) {
      quantities.set(productId, (quantities.get(productId) ?? 0) + quantity);
      if (!firstIndex.has(productId)) firstIndex.set(productId, index);
    }
    const lines = [...quantities].sort(([a], [b]) => a - b).map(([productId, quantity]) => ({ productId, quantity }));

    return ctx.transaction(async (tx) => {
      let totalCents = 0;
      for (const { productId, quantity } of lines) {
        const index = firstIndex.get(productId)!;
        // Checked and taken in one statement, so two checkouts cannot both take the last one. SQL is
        // outside the permission layer (docs/own-code.md "SQL"): a customer may not write Product.
        const [taken] = await tx.sql<{ price: string }>`
          UPDATE "Product" SET stock = stock - ${quantity}, "updatedAt" = now()
          WHERE id = ${productId} AND stock >= ${quantity} RETURNING price`;
        if (!taken) {
          const [product] = await tx.sql<{ stock: number }>`SELECT stock FROM "Product" WHERE id = ${productId}`;
          if (!product) throw refuse({ [`items.${index}.productId`]: `there is no product ${productId}` });
          throw new Problem('conflict', `product ${productId} has ${product.stock} in stock, ${quantity} asked`, [
            { field: `items.${index}.quantity`, rule: 'stock', message: `only ${product.stock} in stock` },
          ]);
        }
        totalCents += cents(taken.price, quantity);
      }
      // As the caller: the customer role creates orders for its own customerId only (403 otherwise).
      const { data: order } = await tx.data.Order.create({ customerId, total: totalCents / 100 });
      // The items belong to the order just created, which the caller may create: written as the
      // system, since the customer role has no grant on OrderItem of its own.
      await tx.asSystem().OrderItem.bulkCreate(lines.map((line) => ({ orderId: order.id, ...line })));
      await sendReceipt.enqueue(tx, { orderId: order.id }, { jobKey: `receipt-${order.id}` });
      return { orderId: order.id, total: order.total };
    });
  },
});

export default defineCode({
  hooks: {
    Order: {
      beforeCreate({ input }) {
        if (input.status === 'paid' && input.placedAt == null) return { ...input, placedAt: new Date() };
      },
      beforeUpdate({ input, previous }) {
        if (input.status === 'open' && previous.status !== 'open')
          throw refuse({ status: `a ${previous.status} order cannot be reopened` });
        if (input.status === 'paid' && previous.status !== 'paid') return { ...input, placedAt: new Date() };
      },
    },
  },
  endpoints: [checkout],
  jobs: [sendReceipt, cancelStaleOrders],
  schedules: [{ name: 'nightlyCleanup', cron: '0 3 * * *', job: 'cancelStaleOrders', payload: { days: 30 } }],
});
