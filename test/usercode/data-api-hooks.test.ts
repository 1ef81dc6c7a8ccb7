// The data API inside a hook (docs/own-code.md "The context and the data API"): a hook's ctx.data
// acts as the caller of the write, in the write's transaction; asSystem() reads what the caller cannot.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCode, defineEndpoint, defineJob, refuse } from '../../examples/shop/generated/code.ts';
import { ServiceError } from '../../examples/shop/generated/client.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

// A job has no caller: its ctx.data is the system, which may write the note the clerk may not.
const annotate = defineJob({
  name: 'annotate',
  payload: z.object({ id: z.number().int() }),
  async run({ id }, ctx) {
    await ctx.data.Order.update(id, { note: `annotated as ${ctx.caller.kind}` });
  },
});

// Writes through ctx.data run the table's hooks as every other path does (docs/own-code.md "Hooks").
const addCity = defineEndpoint({
  name: 'addCity',
  method: 'POST',
  path: '/add-city',
  access: { roles: ['admin'] },
  input: z.object({ name: z.string(), country: z.string() }),
  output: z.object({ country: z.string() }),
  async handler(input, ctx) {
    const { data } = await ctx.data.City.create(input);
    return { country: data.country };
  },
});

let server: TestServer;
let clerk: string;
let alice: string;
const seen: { callerCustomers?: number | string; caller?: string; visible?: boolean } = {};

beforeAll(async () => {
  server = await startTestServer({
    configPatch: (raw) => {
      raw.roles.clerk = {
        tables: {
          Order: {
            read: { filter: { customerId: '$context.customer' } },
            create: { filter: { customerId: '$context.customer' }, fields: ['total', 'customerId', 'note'] },
          },
        },
      };
    },
    code: defineCode({
      jobs: [annotate],
      endpoints: [addCity],
      hooks: {
        City: {
          beforeCreate({ input }) {
            if (input.name === 'Nowhere') throw refuse({ name: 'no such place' });
            return { ...input, country: input.country.toUpperCase() };
          },
        },
        Order: {
          async beforeCreate({ input, ctx }) {
            seen.caller = ctx.caller.kind;
            // The caller may not read customers: refused as over REST.
            seen.callerCustomers = await ctx.data.Customer.list().then(
              (page) => page.data.length,
              (error: unknown) => (error instanceof ServiceError ? error.status : 'not a ServiceError'),
            );
            const { data: customer } = await ctx.asSystem().Customer.get(input.customerId, { select: ['name'] });
            return { ...input, note: `for ${customer.name}` };
          },
          async afterWrite({ record, ctx }) {
            // In the write's transaction: the new order is visible to the hook's own read.
            if (record && record.total === 21) await annotate.enqueue(ctx, { id: record.id });
            if (record && record.total === 13) {
              seen.visible = (await ctx.data.Order.get(record.id)).data.id === record.id;
              throw new Error('unlucky total');
            }
          },
        },
      },
    }),
  });
  const created = await server.request('POST', '/gw/api/rest/Customer', {
    body: { name: 'Alice', email: 'alice@example.com' },
  });
  alice = created.body.data.id;
  clerk = (await server.createKey(['clerk'], { context: { customer: alice } })).key;
}, 60_000);

afterAll(() => server?.close());

describe('ctx.data in a hook and a job', () => {
  it("a job's ctx.data acts as the system", async () => {
    const res = await server.request('POST', '/gw/api/rest/Order', {
      key: clerk,
      body: { customerId: alice, total: 21 },
    });
    expect(res.status, res.text).toBe(201);
    const rows = await until(
      () => server.db.query<{ note: string }>('SELECT note FROM env_master."Order" WHERE id = $1', [res.body.data.id]),
      (r) => r[0]?.note !== 'for Alice',
      20_000,
      'the job annotating the order',
    );
    expect(rows[0]!.note).toBe('annotated as system');
  });

  it('acts as the caller of the write, and asSystem() reads what the caller cannot', async () => {
    const res = await server.request('POST', '/gw/api/rest/Order', {
      key: clerk,
      body: { customerId: alice, total: 5 },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.note).toBe('for Alice');
    expect(seen).toEqual({ caller: 'apiKey', callerCustomers: 403 });
  });

  it("reads the write's own uncommitted row, and a throw after it rolls the write back", async () => {
    const res = await server.request('POST', '/gw/api/rest/Order', {
      key: clerk,
      body: { customerId: alice, total: 13 },
    });
    expect(res.status).toBe(500);
    expect(seen.visible).toBe(true);
    expect(res.text).not.toContain('unlucky');
    const rows = await server.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM env_master."Order" WHERE total = 13',
    );
    expect(rows[0]!.n).toBe(0);
  });

  it("a write through ctx.data runs the table's hooks: a change, and a refusal passed through", async () => {
    const res = await server.request('POST', '/gw/api/rest/add-city', { body: { name: 'Lyon', country: 'fr' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ country: 'FR' });
    const refused = await server.request('POST', '/gw/api/rest/add-city', { body: { name: 'Nowhere', country: 'fr' } });
    expect(refused.status, refused.text).toBe(422);
    expect(refused.body.errors).toEqual([{ field: 'name', rule: 'refused', message: 'no such place' }]);
  });
});
