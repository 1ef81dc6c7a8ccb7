// The data API of user code (docs/own-code.md "The context and the data API", "Acting as the
// system", "Transactions", "SQL"): ctx.data acts as the caller with every check of the REST API and
// answers the same status and body (as the generated client's ServiceError); ctx.asSystem() sees
// every row and field; ctx.transaction() commits or rolls back data calls and SQL together.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceError } from '../../examples/shop/generated/client.ts';
import { transactionDatabase } from '../../runtime/db/index.ts';
import { startTestServer, type TestServer } from '../support/server.ts';
import { codeHarness, keyPrincipal, type CodeHarness } from './support.ts';

let server: TestServer;
let harness: CodeHarness;
let clerk: { id: string; key: string };
let alice: string;
let bob: string;
let aliceOrder: number;
let bobOrder: number;

/** The ServiceError a promise rejects with. */
async function serviceError(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ServiceError);
  return error as ServiceError;
}

beforeAll(async () => {
  server = await startTestServer({
    configPatch: (raw) => {
      // A clerk serves one customer (its key's context): their orders, without the note.
      raw.roles.clerk = {
        tables: {
          Order: {
            read: { filter: { customerId: '$context.customer' }, fields: ['id', 'total', 'status', 'customerId'] },
            create: { filter: { customerId: '$context.customer' }, fields: ['total', 'customerId'] },
            update: { filter: { customerId: '$context.customer' }, fields: ['total'] },
          },
        },
      };
    },
  });
  const customer = async (name: string) =>
    (await server.request('POST', '/gw/api/rest/Customer', { body: { name, email: `${name}@example.com` } })).body.data
      .id as string;
  alice = await customer('alice');
  bob = await customer('bob');
  const order = async (customerId: string, note: string) =>
    (await server.request('POST', '/gw/api/rest/Order', { body: { customerId, total: 10, note } })).body.data
      .id as number;
  aliceOrder = await order(alice, 'alice secret');
  bobOrder = await order(bob, 'bob secret');
  clerk = await server.createKey(['clerk'], { context: { customer: alice } });
  harness = await codeHarness(server);
}, 60_000);

afterAll(async () => {
  await harness?.close();
  await server?.close();
});

// One principal object, as authentication caches one per credential.
let clerkPrincipal: ReturnType<typeof keyPrincipal> | undefined;
const asClerk = () => harness.context((clerkPrincipal ??= keyPrincipal(clerk.id, ['clerk'], { customer: alice })));

describe('ctx.data acts as the caller', () => {
  it('reads a record the role filter allows, with the fields the role lists only', async () => {
    const { data } = await asClerk().data.Order.get(aliceOrder);
    expect(data).toEqual({ id: aliceOrder, total: 10, status: 'open', customerId: alice });
  });

  it('answers 404 for a record outside the role filter, the same body as GET /Order/{id}', async () => {
    const error = await serviceError(asClerk().data.Order.get(bobOrder));
    const http = await server.request('GET', `/gw/api/rest/Order/${bobOrder}`, { key: clerk.key });
    expect(http.status).toBe(404);
    expect(error.status).toBe(404);
    expect(error.problem).toEqual(http.body);
  });

  it('lists only the rows of the role filter', async () => {
    const page = await asClerk().data.Order.list({ sort: ['id'] });
    expect(page.data.map((o) => o.id)).toEqual([aliceOrder]);
    expect(page.meta.pagination).toMatchObject({ hasNextPage: false, nextCursor: null });
  });

  it('refuses a field the role may not read in a filter, as REST does (400 naming it)', async () => {
    const error = await serviceError(asClerk().data.Order.list({ where: { note: { equals: 'bob secret' } } }));
    const http = await server.request('GET', '/gw/api/rest/Order?note=equals.bob%20secret', { key: clerk.key });
    expect(http.status).toBe(400);
    expect(error.problem).toEqual(http.body);
  });

  it('refuses a write of a field the role may not write: ServiceError 403 with the REST body', async () => {
    const input = { customerId: alice, total: 5, note: 'smuggled' };
    const error = await serviceError(asClerk().data.Order.create(input));
    const http = await server.request('POST', '/gw/api/rest/Order', { key: clerk.key, body: input });
    expect(http.status).toBe(403);
    expect(error.status).toBe(403);
    expect(error.problem).toEqual(http.body);
  });

  it('refuses an action the role has no grant for (403 forbidden)', async () => {
    const error = await serviceError(asClerk().data.Order.delete(aliceOrder));
    expect(error.problem).toMatchObject({
      type: '/errors/forbidden',
      status: 403,
      detail: 'your role may not delete Order records',
      instance: `/gw/api/rest/Order/${aliceOrder}`,
    });
    const error2 = await serviceError(asClerk().data.Customer.list());
    expect(error2.problem).toMatchObject({ status: 403, detail: 'your role may not read Customer records' });
  });

  it('cannot update a record outside the role filter (404) and validates input (422)', async () => {
    const outside = await serviceError(asClerk().data.Order.update(bobOrder, { total: 1 }));
    const http = await server.request('PATCH', `/gw/api/rest/Order/${bobOrder}`, {
      key: clerk.key,
      body: { total: 1 },
    });
    expect(outside.problem).toEqual(http.body);
    const invalid = await serviceError(asClerk().data.Order.update(aliceOrder, { total: 'ten' as unknown as number }));
    expect(invalid.status).toBe(422);
    expect(invalid.problem.errors.map((e) => e.field)).toEqual(['total']);
    const bobs = await server.db.query<{ total: number }>('SELECT total FROM env_master."Order" WHERE id = $1', [
      bobOrder,
    ]);
    expect(bobs[0]!.total).toBe(10);
  });

  it('writes as the caller: the role filter presets and checks the row', async () => {
    const created = await asClerk().data.Order.create({ customerId: alice, total: 7 });
    expect(created.data).toMatchObject({ customerId: alice, total: 7 });
    const foreign = await serviceError(asClerk().data.Order.create({ customerId: bob, total: 7 }));
    expect(foreign.status).toBe(403);
    await harness.context().data.Order.delete(created.data.id);
  });

  it("is shared by a caller's requests, so no code can change it for the others", () => {
    const data = asClerk().data as unknown as Record<string, Record<string, unknown>>;
    expect(asClerk().data).toBe(data);
    expect(() => {
      data.Order!.get = () => Promise.resolve({ data: 'forged' });
    }).toThrow(TypeError);
    expect(() => {
      data.Order = {};
    }).toThrow(TypeError);
  });

  it('reports the caller it acts for', () => {
    expect(asClerk().caller).toEqual({
      kind: 'apiKey',
      keyId: clerk.id,
      roles: ['clerk'],
      context: { customer: alice },
      environment: 'master',
    });
  });
});

describe('ctx.asSystem() and contexts without a caller', () => {
  it('reads every row and every field, with no role filter', async () => {
    const system = asClerk().asSystem();
    const { data } = await system.Order.get(bobOrder);
    expect(data).toMatchObject({ id: bobOrder, customerId: bob, note: 'bob secret' });
    const page = await system.Order.list({ sort: ['id'], select: ['id', 'note'] });
    expect(page.data).toEqual([
      { id: aliceOrder, note: 'alice secret' },
      { id: bobOrder, note: 'bob secret' },
    ]);
    const customers = await system.Customer.aggregate();
    expect(customers.data.aggregates).toEqual([{ count: 2 }]);
  });

  it('reads and creates each table by its own statement, one table after another', async () => {
    // The system has one grant per table and action: with one grant object for every table, a
    // statement kept for Order's by-id read answered City's, and a kept insert went to the wrong table.
    const system = harness.context().data;
    const { data: city } = await system.City.create({ name: 'Lyon', country: 'FR' });
    expect((await system.Order.get(bobOrder)).data).toMatchObject({ id: bobOrder, customerId: bob });
    expect((await system.City.get(city.id)).data).toMatchObject({ id: city.id, name: 'Lyon' });
    expect((await system.Customer.get(alice)).data).toMatchObject({ id: alice, name: 'alice' });
    const missing = await serviceError(system.City.get(bobOrder + 1_000));
    expect(missing.status).toBe(404);
    const { data: other } = await system.Product.create({ sku: 'lyon-mug', title: 'Lyon', price: 1 });
    const [row] = await server.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM env_master."Product" WHERE id = $1`,
      [other.id],
    );
    expect(row!.n).toBe(1);
  });

  it('is what a job acts as: caller kind system, ctx.data is the system', async () => {
    const job = harness.context();
    expect(job.caller).toEqual({ kind: 'system', roles: [], environment: 'master' });
    const { data } = await job.data.Order.get(bobOrder, { select: ['note'] });
    expect(data).toEqual({ note: 'bob secret' });
  });

  it('still validates what it writes and answers 404 for what does not exist', async () => {
    const system = harness.context().data;
    const missing = await serviceError(system.Order.get(999_999));
    expect(missing.problem).toMatchObject({ status: 404, instance: '/gw/api/rest/Order/999999' });
    const invalid = await serviceError(system.Order.create({ customerId: 'not-a-uuid', total: 1 }));
    expect(invalid.status).toBe(422);
    expect(invalid.problem.errors.map((e) => e.field)).toEqual(['customerId']);
  });

  it('runs bulk writes, updates by filter and deletes', async () => {
    const system = harness.context().data;
    const bulk = await system.Order.bulkCreate([
      { customerId: bob, total: 1, note: 'bulk' },
      { customerId: bob, total: 2, note: 'bulk' },
    ]);
    expect(bulk.data).toMatchObject({ success: true, totalSucceeded: 2 });
    const updated = await system.Order.updateWhere({ note: { equals: 'bulk' } }, { total: 3 });
    expect(updated.data).toEqual({ count: 2 });
    const deleted = await system.Order.bulkDelete({ ids: bulk.data.items.map((i) => i.id) });
    expect(deleted.data).toMatchObject({ success: true, totalSucceeded: 2 });
  });
});

describe('an anonymous caller (a public endpoint without credentials)', () => {
  it('is no system: its ctx.data holds no grant on any table', async () => {
    const ctx = harness.context('anonymous');
    expect(ctx.caller).toEqual({ kind: 'anonymous', roles: [], environment: 'master' });
    const read = await serviceError(ctx.data.Order.get(aliceOrder));
    expect(read.problem).toMatchObject({ status: 403, detail: 'your role may not read Order records' });
    const write = await serviceError(ctx.data.City.create({ name: 'Lyon', country: 'FR' }));
    expect(write.problem).toMatchObject({ status: 403, detail: 'your role may not create City records' });
    // Only when the code says so.
    expect((await ctx.asSystem().Order.get(aliceOrder)).data.id).toBe(aliceOrder);
  });
});

describe('ctx.transaction() and ctx.sql', () => {
  const count = async (note: string) =>
    (
      await server.db.query<{ n: number }>('SELECT count(*)::int AS n FROM env_master."Order" WHERE note = $1', [note])
    )[0]!.n;

  it('rolls back data calls and SQL together when the work throws', async () => {
    const failure = new Error('changed my mind');
    const ctx = harness.context();
    await expect(
      ctx.transaction(async (tx) => {
        await tx.data.Order.create({ customerId: bob, total: 1, note: 'rolled back' });
        await tx.sql`INSERT INTO env_master."Order" ("customerId", total, note, "updatedAt") VALUES (${bob}::uuid, 2, ${'rolled back'}, now())`;
        // Inside, both are visible to the transaction's own reads.
        const page = await tx.data.Order.list({ where: { note: { equals: 'rolled back' } } });
        expect(page.data).toHaveLength(2);
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await count('rolled back')).toBe(0);
  });

  it('rolls back earlier writes when a later data call is refused', async () => {
    const ctx = asClerk();
    const error = await serviceError(
      ctx.transaction(async (tx) => {
        await tx.data.Order.create({ customerId: alice, total: 1 });
        await tx.sql`UPDATE env_master."Order" SET note = 'partly' WHERE id = ${aliceOrder}`;
        await tx.data.Order.create({ customerId: bob, total: 1 });
      }),
    );
    expect(error.status).toBe(403);
    const notes = await server.db.query<{ note: string }>('SELECT note FROM env_master."Order" WHERE id = $1', [
      aliceOrder,
    ]);
    expect(notes[0]!.note).toBe('alice secret');
  });

  it('commits data calls and SQL together', async () => {
    const ctx = harness.context();
    const id = await ctx.transaction(async (tx) => {
      const { data } = await tx.data.Order.create({ customerId: bob, total: 1, note: 'committed' });
      await tx.sql`UPDATE env_master."Order" SET total = ${42} WHERE id = ${data.id}`;
      return data.id;
    });
    expect((await ctx.data.Order.get(id)).data).toMatchObject({ total: 42, note: 'committed' });
    await ctx.data.Order.delete(id);
  });

  it('nests: an inner transaction that throws undoes only its own work', async () => {
    const ctx = harness.context();
    await ctx.transaction(async (tx) => {
      await tx.data.Order.create({ customerId: bob, total: 1, note: 'outer' });
      await tx
        .transaction(async (inner) => {
          await inner.data.Order.create({ customerId: bob, total: 1, note: 'inner' });
          throw new Error('inner fails');
        })
        .catch(() => {});
    });
    expect([await count('outer'), await count('inner')]).toEqual([1, 0]);
    await ctx.sql`DELETE FROM env_master."Order" WHERE note = ${'outer'}`;
  });

  it("names the tables of the context's environment, and leaves the search_path as it was", async () => {
    const ctx = harness.context();
    const [master] = await ctx.sql<{ n: number }>`SELECT count(*)::int AS n FROM "Order" WHERE note = 'alice secret'`;
    expect(master!.n).toBe(1);
    const [path] = await ctx.sql<{ p: string }>`SELECT current_setting('search_path') AS p`;
    expect(path!.p).toBe('"env_master"');
    const staging = harness.context(undefined, { environment: 'staging' });
    const [other] = await staging.sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM "Order" WHERE note = 'alice secret'`;
    expect(other!.n).toBe(0);
    // In a transaction the path is set for the statement only: what the transaction runs next sees its own.
    const db = harness.services.db;
    await db.transaction(async (tx) => {
      const [before] = await tx.query<{ search_path: string }>('SHOW search_path');
      const inTx = harness.context(undefined, { db: transactionDatabase(db.pool, tx) });
      const [counted] = await inTx.sql<{ n: number }>`SELECT count(*)::int AS n FROM "Order" WHERE note = 'bob secret'`;
      expect(counted!.n).toBe(1);
      expect(await tx.query('SHOW search_path')).toEqual([before]);
    });
  });

  it('passes each interpolated value as a parameter, never as SQL text', async () => {
    const ctx = harness.context();
    const hostile = `'); DROP TABLE env_master."Order"; --`;
    const rows = await ctx.sql<{ v: string; n: number }>`SELECT ${hostile}::text AS v, ${2}::int + 1 AS n`;
    expect(rows).toEqual([{ v: hostile, n: 3 }]);
    expect(await count('alice secret')).toBe(1);
  });
});
