// The generated typed client (examples/shop/generated/client.ts) against a live server, plus its
// types: the `expectTypeOf` and `@ts-expect-error` lines below are checked by `tsc --noEmit`
// (test/generator/golden.test.ts runs it), the last test compiles client.ts and client-runtime.ts alone as a browser would.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  createClient,
  ServiceError,
  type Client,
  type CustomerRecord,
  type ListResponse,
  type OperandOf,
  type Operator,
  type OrderRecord,
  type Problem,
} from '../../examples/shop/generated/client.ts';
import { readModel } from '../../generator/generate.ts';
import { renderFiles } from '../../generator/render/index.ts';
import { REPO, SHOP, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let db: Client;

beforeAll(async () => {
  t = await startTestServer();
  db = createClient({ baseUrl: t.url, projectId: 'shop', apiKey: t.adminKey });
});
afterAll(() => t?.close());

const newCustomer = async (name = 'client') =>
  (await db.Customer.create({ email: `${randomUUID()}@example.com`, name })).data;

/** The ServiceError a call rejects with (the test fails when it resolves or throws something else). */
async function serviceError(call: Promise<unknown>): Promise<ServiceError> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ServiceError);
  return error as ServiceError;
}

describe('records', () => {
  it('create, get, get with select, update (merge patch), delete, then get is a 404 ServiceError', async () => {
    const customer = await newCustomer('Ann');
    const created = await db.Order.create({ total: 12.5, customerId: customer.id, note: 'first' });
    expect(created.data).toMatchObject({
      total: 12.5,
      status: 'open',
      note: 'first',
      customerId: customer.id,
      placedAt: null,
    });

    expect((await db.Order.get(created.data.id)).data).toEqual(created.data);
    const narrow = await db.Order.get(created.data.id, { select: ['id', 'note'] });
    expect(narrow.data).toEqual({ id: created.data.id, note: 'first' });

    const updated = await db.Order.update(created.data.id, { note: null, status: 'paid' });
    expect(updated.data).toMatchObject({ id: created.data.id, note: null, status: 'paid', total: 12.5 });

    await expect(db.Order.delete(created.data.id)).resolves.toBeUndefined();
    const missing = await serviceError(db.Order.get(created.data.id));
    expect(missing.status).toBe(404);
    expect(missing.problem).toEqual({
      type: '/errors/not-found',
      title: 'Not Found',
      status: 404,
      detail: `no Order record with id "${created.data.id}"`,
      instance: `/gw/api/rest/Order/${created.data.id}`,
      errors: [],
    });
    expect(missing.message).toBe(`404 Not Found: no Order record with id "${created.data.id}"`);
  });

  it('a body the validator refuses is a 422 ServiceError naming the field', async () => {
    const customer = await newCustomer();
    // @ts-expect-error total is required: the server must say so too
    const error = await serviceError(db.Order.create({ customerId: customer.id }));
    expect(error.status).toBe(422);
    expect(error.problem).toMatchObject({ type: '/errors/validation', status: 422, instance: '/gw/api/rest/Order' });
    expect(error.problem.errors.map((e) => e.field)).toContain('total');
  });

  it('a wrong API key is a 401 ServiceError', async () => {
    const stranger = createClient({ baseUrl: t.url, projectId: 'shop', apiKey: 'not-a-key' });
    const error = await serviceError(stranger.City.list());
    expect(error.status).toBe(401);
    expect(error.problem.type).toBe('/errors/unauthorized');
  });
});

describe('list', () => {
  it('where (field, operator, relation, or/not), sort, select and limit become the query the server answers', async () => {
    const customer = await newCustomer('Lister');
    for (const total of [5, 10, 15, 20])
      await db.Order.create({ total, customerId: customer.id, note: total === 15 ? 'null' : null });
    const mine = { customerId: { equals: customer.id } };

    const page = await db.Order.list({
      where: { ...mine, total: { gte: 10 } },
      sort: ['-total'],
      select: ['id', 'total'],
      limit: 2,
    });
    expect(page.data.map((o) => o.total)).toEqual([20, 15]);
    expect(Object.keys(page.data[0]!).sort()).toEqual(['id', 'total']);
    expect(page.meta.pagination).toMatchObject({
      limit: 2,
      offset: 0,
      hasNextPage: true,
      hasPreviousPage: false,
      nextCursor: expect.any(String),
    });

    const totals = async (where: Parameters<Client['Order']['list']>[0] & object) =>
      (await db.Order.list({ ...where, sort: ['total'] })).data.map((o) => o.total);
    expect(await totals({ where: { ...mine, total: { between: [10, 15] } } })).toEqual([10, 15]);
    expect(await totals({ where: { ...mine, total: { in: [5, 20] } } })).toEqual([5, 20]);
    expect(await totals({ where: { ...mine, or: [{ total: { lt: 6 } }, { total: { gt: 19 } }] } })).toEqual([5, 20]);
    expect(await totals({ where: { ...mine, not: { total: { lt: 6 }, note: { is_empty: true } } } })).toEqual([
      10, 15, 20,
    ]);
    expect(
      await totals({
        where: { ...mine, or: [{ total: { equals: 5 } }, { total: { gte: 10 }, note: { not_equals: null } }] },
      }),
    ).toEqual([5, 15]);
    // null is NULL; the text "null" is the four letters
    expect(await totals({ where: { ...mine, note: { equals: null } } })).toEqual([5, 10, 20]);
    expect(await totals({ where: { ...mine, note: { equals: 'null' } } })).toEqual([15]);
    expect(await totals({ where: { customer: { email: { equals: customer.email } }, total: { lte: 10 } } })).toEqual([
      5, 10,
    ]);
    expect(
      await totals({
        where: { ...mine, placedAt: { is_empty: true }, createdAt: { lte: new Date(Date.now() + 60_000) } },
      }),
    ).toEqual([5, 10, 15, 20]);

    const counted = await db.Order.list({ where: mine, limit: 1, count: true });
    expect(counted.meta.pagination.totalCount).toBe(4);
  });

  it('follows nextCursor through every page; all() yields the same records', async () => {
    const customer = await newCustomer('Pager');
    const created = [];
    for (let i = 0; i < 7; i++)
      created.push((await db.Order.create({ total: 100 + i, customerId: customer.id })).data.id);
    const where = { customerId: { equals: customer.id } };
    const pages: number[][] = [];
    let cursor: string | null = null;
    do {
      const page: ListResponse<OrderRecord> = await db.Order.list({ where, sort: ['-total'], limit: 3, cursor });
      pages.push(page.data.map((o) => o.total));
      expect(page.meta.pagination.hasPreviousPage).toBe(cursor !== null);
      cursor = page.meta.pagination.nextCursor;
    } while (cursor !== null);
    expect(pages).toEqual([[106, 105, 104], [103, 102, 101], [100]]);

    const seen: number[] = [];
    for await (const order of db.Order.all({ where, sort: ['id'], limit: 2, select: ['id'] })) seen.push(order.id);
    expect(seen).toEqual(created);
  });

  it('a cursor from another query is a 400 ServiceError on after', async () => {
    const customer = await newCustomer();
    for (const total of [1, 2]) await db.Order.create({ total, customerId: customer.id });
    const first = await db.Order.list({ where: { customerId: { equals: customer.id } }, limit: 1 });
    const error = await serviceError(
      db.Order.list({ where: { total: { gte: 0 } }, limit: 1, cursor: first.meta.pagination.nextCursor }),
    );
    expect(error.status).toBe(400);
    expect(error.problem.errors.map((e) => e.field)).toEqual(['after']);
  });

  // Each name is created once and must come back, alone, from an equals filter (top-level and in a
  // group), and all together from one `in` list.
  const NAMES = [
    'a,b',
    'x(y)z',
    ')(',
    'dot.ted.',
    'say "hi"',
    'back\\slash',
    'null',
    '',
    'ünïcødé ✓ 日本',
    'a+b&c=d%20',
    ' spaced ',
    'in.(1,2)',
    'or=(x)',
  ];

  it('string values with commas, parentheses, dots, quotes, backslashes and unicode round-trip', async () => {
    const tag = randomUUID();
    const customers = new Map<string, CustomerRecord>();
    for (const name of NAMES)
      customers.set(
        name,
        (await db.Customer.create({ email: `${tag}-${String(customers.size).padStart(2, '0')}@example.com`, name }))
          .data,
      );
    const ours = { email: { starts_with: `${tag}-` } };
    for (const name of NAMES) {
      const top = await db.Customer.list({ where: { ...ours, name: { equals: name } } });
      expect(
        top.data.map((c) => c.name),
        JSON.stringify(name),
      ).toEqual([name]);
      const grouped = await db.Customer.list({
        where: { ...ours, or: [{ name: { equals: name } }, { name: { equals: 'no such name' } }] },
      });
      expect(
        grouped.data.map((c) => c.id),
        JSON.stringify(name),
      ).toEqual([customers.get(name)!.id]);
    }
    const all = await db.Customer.list({ where: { ...ours, name: { in: NAMES } }, sort: ['email'] });
    expect(all.data.map((c) => c.name)).toEqual(NAMES);
    const parens = await db.Customer.list({ where: { ...ours, name: { contains: '(' } }, sort: ['email'] });
    expect(parens.data.map((c) => c.name)).toEqual(['x(y)z', ')(', 'in.(1,2)', 'or=(x)']);
  });
});

describe('bulk and update by filter', () => {
  it('bulkCreate then bulkDelete by ids; BEST_EFFORT reports a failing item, ALL_OR_NOTHING throws with the envelope', async () => {
    const customer = await newCustomer('Bulk');
    const created = await db.Order.bulkCreate([
      { total: 1, customerId: customer.id },
      { total: 2, customerId: customer.id },
    ]);
    expect(created.data).toMatchObject({
      success: true,
      transactionMode: 'ALL_OR_NOTHING',
      totalRequested: 2,
      totalSucceeded: 2,
      totalFailed: 0,
      errors: [],
    });
    const ids = created.data.items.map((i) => i.id);
    expect(ids).toHaveLength(2);

    const bad = { total: 3, customerId: randomUUID() }; // no such customer: a foreign-key failure
    const partial = await db.Order.bulkCreate([{ total: 4, customerId: customer.id }, bad], {
      transactionMode: 'BEST_EFFORT',
    });
    expect(partial.data).toMatchObject({
      success: false,
      transactionMode: 'BEST_EFFORT',
      totalSucceeded: 1,
      totalFailed: 1,
      errors: [{ index: 1 }],
    });
    ids.push(partial.data.items[0]!.id);

    const error = await serviceError(db.Order.bulkCreate([{ total: 5, customerId: customer.id }, bad]));
    expect(error.status).toBe(422);
    expect(error.problem.data).toMatchObject({
      success: false,
      transactionMode: 'ALL_OR_NOTHING',
      totalSucceeded: 0,
      errors: [{ index: 1 }],
    });

    const deleted = await db.Order.bulkDelete({ ids });
    expect(deleted.data).toMatchObject({ success: true, totalSucceeded: 3, items: ids.map((id) => ({ id })) });
    expect((await db.Order.list({ where: { customerId: { equals: customer.id } } })).data).toEqual([]);
  });

  it('a composite-key table bulk-creates and bulk-deletes by key filters', async () => {
    const customer = await newCustomer();
    const order = (await db.Order.create({ total: 9, customerId: customer.id })).data;
    const product = (
      await db.Product.create({ sku: `SKU-${randomUUID()}`, title: 'Lamp', price: '19.90', tags: ['a,b', 'c'] })
    ).data;
    const created = await db.OrderItem.bulkCreate([{ orderId: order.id, productId: product.id, quantity: 3 }]);
    expect(created.data.items).toEqual([{ orderId: order.id, productId: product.id }]);
    expect(
      (await db.Product.list({ where: { id: { equals: product.id }, tags: { contains: 'a,b' } } })).data,
    ).toHaveLength(1);

    const listed = await db.OrderItem.list({ where: { order: { customerId: { equals: customer.id } } } });
    expect(listed.data).toMatchObject([{ orderId: order.id, productId: product.id, quantity: 3 }]);

    const deleted = await db.OrderItem.bulkDelete({ filters: [{ orderId: order.id, productId: product.id }] });
    expect(deleted.data).toMatchObject({ success: true, totalSucceeded: 1 });
    expect((await db.OrderItem.list({ where: { orderId: { equals: order.id } } })).data).toEqual([]);
  });

  it('updateWhere patches every match and answers the count; without a filter it is a 422 ServiceError', async () => {
    const customer = await newCustomer();
    for (const total of [1, 2, 30]) await db.Order.create({ total, customerId: customer.id });
    const result = await db.Order.updateWhere(
      { customerId: { equals: customer.id }, total: { lt: 10 } },
      { status: 'cancelled' },
    );
    expect(result).toEqual({ data: { count: 2 } });
    const statuses = (
      await db.Order.list({ where: { customerId: { equals: customer.id } }, sort: ['total'], select: ['status'] })
    ).data;
    expect(statuses).toEqual([{ status: 'cancelled' }, { status: 'cancelled' }, { status: 'open' }]);

    const error = await serviceError(db.Order.updateWhere({}, { status: 'paid' }));
    expect(error.status).toBe(422);
    expect(error.problem.errors).toEqual([
      { field: 'filter', rule: 'required', message: 'at least one filter is required' },
    ]);
  });

  it('aggregate groups, sums, filters groups by having and sorts by an alias', async () => {
    const customer = await newCustomer();
    for (const [total, status] of [
      [1, 'open'],
      [2, 'open'],
      [10, 'paid'],
    ] as const)
      await db.Order.create({ total, status, customerId: customer.id });
    const result = await db.Order.aggregate({
      fn: ['count', 'sum:total', 'max:total'],
      groupBy: ['status'],
      where: { customerId: { equals: customer.id } },
      having: { count: { gte: 1 } },
      sort: ['-sum_total'],
    });
    expect(result.data.aggregates).toEqual([
      { status: 'paid', count: 1, sum_total: 10, max_total: 10 },
      { status: 'open', count: 2, sum_total: 3, max_total: 2 },
    ]);
  });
});

describe('requests as sent', () => {
  /** A fetch that records the request and answers `status` with `body`. */
  function recorder(status: number, body: string, contentType = 'application/json') {
    const calls: { url: string; init: RequestInit }[] = [];
    const fetch = async (url: string | URL | Request, init?: RequestInit) => {
      calls.push({ url: String(url), init: init ?? {} });
      return new Response(status === 204 ? null : body, {
        status,
        statusText: status === 502 ? 'Bad Gateway' : '',
        headers: { 'content-type': contentType },
      });
    };
    return { calls, fetch: fetch as typeof globalThis.fetch };
  }

  it('writes filters in the query-string syntax of docs/api.md §5.5, with the project, environment and key headers', async () => {
    const r = recorder(200, '{"data":[],"meta":{"pagination":{}}}');
    const client = createClient({
      baseUrl: 'https://api.example.com/',
      projectId: 'shop',
      environment: 'staging',
      apiKey: 'k1',
      fetch: r.fetch,
      headers: { 'X-Trace': 't' },
    });
    await client.Order.list({
      where: { total: { gte: 10 }, status: { in: ['open', 'paid'] }, note: { equals: 'a,b' } },
      sort: ['-total', 'id'],
      select: ['id'],
      limit: 5,
    });
    const url = new URL(r.calls[0]!.url);
    expect(url.origin + url.pathname).toBe('https://api.example.com/gw/api/rest/Order');
    expect([...url.searchParams]).toEqual([
      ['total', 'gte.10'],
      ['status', 'in.(open,paid)'],
      ['note', 'equals."a,b"'],
      ['sort', '-total,id'],
      ['select', 'id'],
      ['limit', '5'],
    ]);
    expect(r.calls[0]!.init.headers).toMatchObject({
      'x-project-id': 'shop',
      environment: 'staging',
      authorization: 'Bearer k1',
      'x-trace': 't',
    });
  });

  it('a field named like a parameter (sort, limit) is written col.<name> (test/fixtures/edge)', async () => {
    const { tables } = await readModel(path.join(REPO, 'test/fixtures/edge'));
    const dir = await mkdtemp(path.join(tmpdir(), 'svcgen-client-'));
    try {
      const file = path.join(dir, 'client.ts');
      const files = renderFiles(tables, { title: 'edge', version: '1', schemaSha256: '' });
      await writeFile(file, files.get('client.ts')!);
      await writeFile(path.join(dir, 'client-runtime.ts'), files.get('client-runtime.ts')!);
      const edge = await import(pathToFileURL(file).href);
      const r = recorder(200, '{"data":{"count":0}}');
      await edge.createClient({ baseUrl: 'https://x', projectId: 'edge', fetch: r.fetch }).Metric.updateWhere(
        {
          sort: { equals: 'z' },
          limit: { gt: 10 },
          count: { gte: 1 },
          or: [{ sort: { equals: 'y' } }, { limit: { is_empty: true } }],
        },
        { ratio: 1 },
      );
      expect([...new URL(r.calls[0]!.url).searchParams]).toEqual([
        ['col.sort', 'equals.z'],
        ['col.limit', 'gt.10'],
        ['count', 'gte.1'],
        ['or', '(sort.equals.y,limit.is_empty.true)'],
      ]);
      expect(r.calls[0]!.init).toMatchObject({
        method: 'PATCH',
        body: '{"ratio":1}',
        headers: { 'content-type': 'application/merge-patch+json' },
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a non-Problem error body still throws a ServiceError with an about:blank Problem', async () => {
    const r = recorder(502, '<html>upstream down</html>', 'text/html');
    const error = await serviceError(
      createClient({ baseUrl: 'https://x', projectId: 'shop', fetch: r.fetch }).City.get(1),
    );
    expect(error.problem).toEqual({
      type: 'about:blank',
      title: 'Bad Gateway',
      status: 502,
      detail: '<html>upstream down</html>',
      instance: '/gw/api/rest/City/1',
      errors: [],
    });
  });
});

describe('client.ts itself', () => {
  const file = path.join(SHOP, 'generated/client.ts');

  it('imports only client-runtime.ts, which imports nothing, and the two compile alone under strict browser settings (DOM lib, no Node types)', () => {
    const runtime = path.join(SHOP, 'generated/client-runtime.ts');
    const imports = (source: string) =>
      [...source.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+'([^']+)'|\brequire\(/gm)].map((m) => m[1]);
    expect(imports(readFileSync(file, 'utf8'))).toEqual(['./client-runtime.ts', './client-runtime.ts']);
    expect(imports(readFileSync(runtime, 'utf8'))).toEqual([]);
    // Copied verbatim: only the generated header is added.
    expect(readFileSync(runtime, 'utf8')).toBe(
      readFileSync(path.join(REPO, 'templates/header.txt'), 'utf8') +
        readFileSync(path.join(REPO, 'templates/client-runtime.ts'), 'utf8'),
    );
    const program = ts.createProgram([file], {
      allowImportingTsExtensions: true,
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      noImplicitOverride: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
      types: [],
      skipLibCheck: true,
    });
    const messages = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(messages).toEqual([]);
  });
});

// Checked by tsc, never run: each line states what the types allow or refuse.
function typeTests(db: Client) {
  // the runtime's operand table covers exactly the generated operators (runtime/model OPERATORS)
  expectTypeOf<keyof OperandOf<unknown>>().toEqualTypeOf<Operator>();
  const whole = () => db.Order.list({ where: { total: { gte: 1 } } });
  expectTypeOf<Awaited<ReturnType<typeof whole>>['data']>().toEqualTypeOf<OrderRecord[]>();
  const selected = () => db.Order.list({ select: ['id', 'total'] });
  expectTypeOf<Awaited<ReturnType<typeof selected>>['data'][number]>().toEqualTypeOf<{ id: number; total: number }>();
  const one = () => db.Customer.get('id', { select: ['email'] });
  expectTypeOf<Awaited<ReturnType<typeof one>>['data']>().toEqualTypeOf<{ email: string }>();
  expectTypeOf<Problem['errors'][number]>().toEqualTypeOf<{ field: string; rule: string; message: string }>();

  // operators per field type
  void db.Order.list({
    where: { total: { gte: 10 }, status: { in: ['open', 'paid'] }, note: { equals: null, contains: 'x' } },
  });
  // @ts-expect-error no gte on a boolean
  void db.Customer.list({ where: { vip: { gte: true } } });
  // @ts-expect-error no contains on a number
  void db.Order.list({ where: { total: { contains: 1 } } });
  // @ts-expect-error an enum takes only its values
  void db.Order.list({ where: { status: { equals: 'lost' } } });
  // @ts-expect-error total is not nullable, so it never equals null
  void db.Order.list({ where: { total: { equals: null } } });
  // @ts-expect-error a list field takes contains, not equals
  void db.Product.list({ where: { tags: { equals: 'a' } } });
  // @ts-expect-error date helpers only on DateTime fields
  void db.Order.list({ where: { total: { today: true } } });
  // @ts-expect-error unknown field
  void db.Order.list({ where: { nope: { equals: 1 } } });
  void db.Order.list({ where: { placedAt: { last_days: 7 }, customer: { vip: { equals: true } } } });

  // sort and select take field names
  void db.Order.list({ sort: ['-total', 'createdAt'] });
  // @ts-expect-error not a field
  void db.Order.list({ sort: ['-nope'] });
  // @ts-expect-error not a field
  void db.Order.list({ select: ['id', 'nope'] });

  // create input requiredness
  void db.Order.create({ total: 1, customerId: 'c' });
  // @ts-expect-error customerId is required
  void db.Order.create({ total: 1 });
  // @ts-expect-error createdAt is set by the server
  void db.Order.create({ total: 1, customerId: 'c', createdAt: '2024-01-01' });
  void db.Order.update(1, { note: null });
  // @ts-expect-error total is not nullable
  void db.Order.update(1, { total: null });

  // composite keys: no /<id> routes, bulk delete by key filters only
  // @ts-expect-error OrderItem has no get
  void db.OrderItem.get(1);
  // @ts-expect-error ids need a single-field key
  void db.OrderItem.bulkDelete({ ids: [1] });
  void db.OrderItem.bulkDelete({ filters: [{ orderId: 1, productId: 2 }] });

  // aggregate rows follow the functions asked for
  const agg = () => db.Order.aggregate({ fn: ['count', 'avg:total'], groupBy: ['status'] });
  expectTypeOf<Awaited<ReturnType<typeof agg>>['data']['aggregates'][number]>().toEqualTypeOf<
    Pick<OrderRecord, 'status'> & { count: number; avg_total: number | null }
  >();
  // @ts-expect-error sum needs a number field
  void db.Order.aggregate({ fn: ['sum:status'] });
}
void typeTests;
