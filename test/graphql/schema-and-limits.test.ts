// What each caller's schema shows (docs/graphql.md "Permissions"), and documents built to cost a lot:
// each answers a GraphQL error with a code (and the Problem type and status), never a 500.
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { buildClientSchema, getIntrospectionQuery, lexicographicSortSchema, printSchema } from 'graphql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildSeed, writeSeed } from '../support/query-seed.ts';
import { SHOP, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let catalogKey: string;
let notelessKey: string;
let customerKey: string;
let stagingAdminKey: string;
const statements: string[] = [];

beforeAll(async () => {
  t = await startTestServer({
    // The example's own code: its endpoint is a field of generated/schema.graphql, as served.
    code: 'entry',
    worker: false,
    onQuery: (text) => statements.push(text),
    configPatch: (raw) => {
      raw.roles.noteless = { tables: { Order: { read: { fields: ['id', 'total'] } } } };
      raw.graphql = { introspection: ['staging'] };
      raw.database = { ...raw.database, statementTimeoutMs: 1000 };
      raw.cors = { origins: ['https://app.example'] };
    },
  });
  await writeSeed(t.db, buildSeed());
  catalogKey = (await t.createKey(['catalog'])).key;
  notelessKey = (await t.createKey(['noteless'])).key;
  customerKey = (await t.createKey(['customer'], { environment: 'staging' })).key;
  stagingAdminKey = (await t.createKey(['admin'], { environment: 'staging' })).key;
});
afterAll(() => t?.close());

async function post(body: unknown, options: { key?: string; environment?: string; raw?: string } = {}) {
  return t.request('POST', '/gw/api/graphql', {
    key: options.key,
    environment: options.environment,
    ...(options.raw !== undefined
      ? {
          raw: options.raw,
          headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
        }
      : { body, headers: { accept: 'application/graphql-response+json' } }),
  });
}

/** A request error: 400, no data, each error with a code, the Problem type and status. */
function expectRefused(res: Awaited<ReturnType<typeof post>>, code: string, message?: RegExp) {
  expect(res.status, res.text).toBe(400);
  expect(res.headers.get('content-type')).toBe('application/graphql-response+json; charset=utf-8');
  expect(res.body.data).toBeUndefined();
  expect(res.body.errors.length).toBeGreaterThan(0);
  for (const e of res.body.errors)
    expect(e.extensions, res.text).toMatchObject({
      code: expect.any(String),
      type: expect.stringMatching(/^\/errors\//),
      status: expect.any(Number),
    });
  expect(res.body.errors.map((e: any) => e.extensions.code)).toContain(code);
  if (message) expect(res.body.errors.map((e: any) => e.message).join('\n')).toMatch(message);
}

/** A field error: 200, the field null, its error with the code. */
function expectFieldError(res: Awaited<ReturnType<typeof post>>, field: string, code: string, message?: RegExp) {
  expect(res.status, res.text).toBe(200);
  expect(res.body.data).toEqual({ [field]: null });
  expect(res.body.errors).toHaveLength(1);
  expect(res.body.errors[0].path).toEqual([field]);
  expect(res.body.errors[0].extensions, res.text).toMatchObject({
    code,
    type: expect.stringMatching(/^\/errors\//),
    status: expect.any(Number),
  });
  if (message) expect(res.body.errors[0].message).toMatch(message);
}

const ROOTS = '{ __schema { queryType { fields { name } } } }';
const rootNames = (res: any): string[] => res.body.data.__schema.queryType.fields.map((f: any) => f.name).sort();

describe('per-role schemas', () => {
  it('a role sees only what it may read; the admin sees every table', async () => {
    const admin = await post({ query: ROOTS }, { key: stagingAdminKey, environment: 'staging' });
    expect(rootNames(admin)).toEqual([
      'city',
      'cityAggregate',
      'cityList',
      'cityPage',
      'customer',
      'customerAggregate',
      'customerList',
      'customerPage',
      'order',
      'orderAggregate',
      'orderItem',
      'orderItemAggregate',
      'orderItemList',
      'orderItemPage',
      'orderList',
      'orderPage',
      'product',
      'productAggregate',
      'productList',
      'productPage',
      // The example's database function (STABLE: a query field), for admins only.
      'rpc_sales_report',
    ]);
    const catalogStaging = (await t.createKey(['catalog'], { environment: 'staging' })).key;
    expect(rootNames(await post({ query: ROOTS }, { key: catalogStaging, environment: 'staging' }))).toEqual([
      'city',
      'cityAggregate',
      'cityList',
      'cityPage',
      'product',
      'productAggregate',
      'productList',
      'productPage',
    ]);
  });

  it("the admin's schema, introspected, is generated/schema.graphql", async () => {
    const res = await post({ query: getIntrospectionQuery() }, { key: stagingAdminKey, environment: 'staging' });
    expect(res.status, res.text).toBe(200);
    const served = printSchema(lexicographicSortSchema(buildClientSchema(res.body.data)));
    const file = await readFile(path.join(SHOP, 'generated/schema.graphql'), 'utf8');
    expect(`${served}\n`).toBe(file.replace(/^(#.*\n)+\n/, ''));
  });

  it('hidden fields and relations are absent from a type; unreadable types do not exist', async () => {
    const res = await post(
      {
        query:
          '{ order: __type(name: "Order") { fields { name } } customer: __type(name: "Customer") { name } where: __type(name: "OrderWhere") { inputFields { name } } }',
      },
      { key: customerKey, environment: 'staging' },
    );
    expect(res.status, res.text).toBe(200);
    // customer reads Order's id, total, status, customerId, createdAt, updatedAt; not Customer nor OrderItem, so no relation either.
    expect(res.body.data.order.fields.map((f: any) => f.name).sort()).toEqual([
      'createdAt',
      'customerId',
      'id',
      'status',
      'total',
      'updatedAt',
    ]);
    expect(res.body.data.customer).toBeNull();
    expect(res.body.data.where.inputFields.map((f: any) => f.name).sort()).toEqual([
      'and',
      'createdAt',
      'customerId',
      'id',
      'not',
      'or',
      'status',
      'total',
      'updatedAt',
    ]);
  });

  it('asking for a hidden field is a validation error, as for a field that does not exist', async () => {
    expectRefused(
      await post({ query: '{ orderList { id note } }' }, { key: notelessKey }),
      'GRAPHQL_VALIDATION_FAILED',
      /Cannot query field "note" on type "Order"/,
    );
    expectRefused(
      await post({ query: '{ orderList(where: { note: { equals: "x" } }) { id } }' }, { key: notelessKey }),
      'GRAPHQL_VALIDATION_FAILED',
    );
    expectRefused(
      await post({ query: '{ orderList { id } }' }, { key: catalogKey }),
      'GRAPHQL_VALIDATION_FAILED',
      /Cannot query field "orderList"/,
    );
  });
});

describe('execution', () => {
  it('one SQL statement per root field, embeds and aliases included', async () => {
    await post({ query: '{ __typename }' }); // credentials and rate-limit state warmed up
    statements.length = 0;
    const res = await post({
      query:
        '{ a: orderList(limit: 2) { id customer { name city { name } } items { quantity } } b: orderList(limit: 1) { id } orderPage(first: 2) { nodes { id } pageInfo { hasNextPage } } orderAggregate { count } order(id: 3) { id } }',
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.errors).toBeUndefined();
    expect(statements.filter((s) => s.includes('"env_master".'))).toHaveLength(5);
  });

  it('a database fault in one root field: that field null with its code and Retry-After, the others answer', async () => {
    const locker = new pg.Client({ connectionString: t.database.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE env_master."Order" IN ACCESS EXCLUSIVE MODE');
      const res = await post({ query: '{ orderList(limit: 1) { id } cityList(limit: 1) { id } }' });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data).toEqual({ orderList: null, cityList: [{ id: 1 }] });
      expect(res.body.errors).toHaveLength(1);
      expect(res.body.errors[0]).toMatchObject({
        path: ['orderList'],
        extensions: { code: 'STATEMENT_TIMEOUT', type: '/errors/statement-timeout', status: 503, retryAfter: 1 },
      });
      expect(res.headers.get('retry-after')).toBe('1');
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      await locker.end();
    }
  });
});

describe('introspection switched off per environment', () => {
  it('master refuses __schema and __type with INTROSPECTION_DISABLED; __typename still works; staging answers', async () => {
    expectRefused(await post({ query: ROOTS }), 'INTROSPECTION_DISABLED');
    expectRefused(await post({ query: '{ __type(name: "Order") { name } }' }), 'INTROSPECTION_DISABLED');
    const typename = await post({ query: '{ __typename cityList(limit: 1) { __typename id } }' });
    expect(typename.status, typename.text).toBe(200);
    expect(typename.body).toEqual({ data: { __typename: 'Query', cityList: [{ __typename: 'City', id: 1 }] } });
    expect((await post({ query: ROOTS }, { key: stagingAdminKey, environment: 'staging' })).status).toBe(200);
  });
});

describe('hostile documents', () => {
  it('deep nesting: past the selection depth, and a 3000-level document stopped by the parser', async () => {
    expectRefused(
      await post({
        query: '{ cityList { customers { city { customers { city { customers { city { customers { id } } } } } } } } }',
      }),
      'QUERY_TOO_COMPLEX',
      /nest at most 8/,
    );
    // Refused by a linear scan before the (recursive) parser: thousands of levels would exhaust its stack.
    expectRefused(
      await post({ query: `{ ${'cityList { customers { '.repeat(1500)}id${' }'.repeat(3000)} }` }),
      'QUERY_TOO_COMPLEX',
      /more than 64 levels/,
    );
    expectRefused(
      await post({
        query: `{ cityList(where: ${'{ not: '.repeat(100)}{ id: { equals: 1 } }${' }'.repeat(100)}) { id } }`,
      }),
      'QUERY_TOO_COMPLEX',
      /more than 64 levels/,
    );
    // Within the token bound but many tokens: the parser stops at its bound.
    expectRefused(
      await post({ query: `{ cityList { ${Array.from({ length: 6000 }, () => 'id').join(' ')} } }` }),
      'GRAPHQL_PARSE_FAILED',
      /more that 5000 tokens/,
    );
    // Nested variables: bounded as every JSON body is.
    const nested = await post({
      query: 'query($w: CityWhere) { cityList(where: $w) { id } }',
      variables: { w: JSON.parse(`${'{"not":'.repeat(40)}{}${'}'.repeat(40)}`) },
    });
    expect(nested.status).toBe(400);
    expect(nested.body.errors[0].extensions).toEqual({
      code: 'BAD_REQUEST',
      type: '/errors/invalid-json',
      status: 400,
    });
    // Group nesting within JSON bounds but past the filter's: the REST limit.
    expectFieldError(
      await post({
        query: 'query($w: CityWhere) { cityList(where: $w) { id } }',
        variables: { w: JSON.parse(`${'{"not":'.repeat(12)}{"id":{"equals":1}}${'}'.repeat(12)}`) },
      }),
      'cityList',
      'INVALID_PARAMETER',
      /groups nest at most 8 levels/,
    );
  });

  it('embeds past REST limits (4 deep) are the field error REST would give', async () => {
    const res = await post({ query: '{ cityList { customers { city { customers { city { id } } } } } }' });
    expectFieldError(res, 'cityList', 'INVALID_PARAMETER', /nest at most 3 levels/);
    expect(res.body.errors[0].extensions).toMatchObject({ type: '/errors/invalid-parameter', status: 400 });
  });

  it('alias floods: too many root fields, too many selections', async () => {
    const roots = Array.from({ length: 11 }, (_, i) => `a${i}: cityList(limit: 1) { id }`).join(' ');
    expectRefused(await post({ query: `{ ${roots} }` }), 'QUERY_TOO_COMPLEX', /at most 10 root fields/);
    const fields = Array.from({ length: 600 }, (_, i) => `f${i}: id`).join(' ');
    expectRefused(await post({ query: `{ cityList { ${fields} } }` }), 'QUERY_TOO_COMPLEX', /more than 500/);
  });

  it('introspection nested to multiply its answer is refused (graphql-js MaxIntrospectionDepthRule)', async () => {
    expectRefused(
      await post(
        {
          query:
            '{ __schema { types { fields { type { fields { type { fields { type { fields { name } } } } } } } } } }',
        },
        { key: stagingAdminKey, environment: 'staging' },
      ),
      'GRAPHQL_VALIDATION_FAILED',
      /Maximum introspection depth exceeded/,
    );
  });

  it('fragment cycles are refused; a fragment bomb is counted as spread', async () => {
    expectRefused(
      await post({ query: '{ cityList { ...A } } fragment A on City { id ...B } fragment B on City { name ...A }' }),
      'GRAPHQL_VALIDATION_FAILED',
      /Cannot spread fragment "A" within itself/,
    );
    const levels = Array.from({ length: 12 }, (_, i) => `fragment F${i} on City { ...F${i + 1} ...F${i + 1} }`).join(
      ' ',
    );
    expectRefused(
      await post({ query: `{ cityList { ...F0 } } ${levels} fragment F12 on City { id }` }),
      'QUERY_TOO_COMPLEX',
      /more than 500/,
    );
  });

  it('huge and wrongly typed variables', async () => {
    // A list variable longer than any argument takes: refused before graphql-js walks it.
    const many = Array.from({ length: 5000 }, (_, i) => i);
    expectRefused(
      await post({
        query: 'query($ids: [Int!]) { cityList(where: { id: { in: $ids } }) { id } }',
        variables: { ids: many },
      }),
      'BAD_USER_INPUT',
      /^Variable "\$ids" got invalid value at "ids"; a list takes at most 1000 values, this one has 5000$/,
    );
    // A list written in the document: the filter's own bound (as REST's).
    expectFieldError(
      await post({ query: `{ cityList(where: { id: { in: [${many.slice(0, 1001).join(', ')}] } }) { id } }` }),
      'cityList',
      'INVALID_PARAMETER',
      /at most 1000 values/,
    );
    expectRefused(
      await post({ query: 'query($n: Int) { cityList(limit: $n) { id } }', variables: { n: 'ten' } }),
      'BAD_USER_INPUT',
      /\$n/,
    );
    expectRefused(
      await post({ query: 'query($w: CityWhere) { cityList(where: $w) { id } }', variables: { w: { nope: 1 } } }),
      'BAD_USER_INPUT',
      /^Variable "\$w" got invalid value at "w.nope"; Field "nope" is not defined by type "CityWhere".$/,
    );
    expectFieldError(
      await post({ query: '{ cityList(limit: 5000) { id } }' }),
      'cityList',
      'INVALID_PARAMETER',
      /limit: must be a whole number from 1 to 1000/,
    );
    expectFieldError(
      await post({ query: '{ orderList(where: { createdAt: { gt: "yesterday-ish" } }) { id } }' }),
      'orderList',
      'INVALID_PARAMETER',
      /createdAt/,
    );
    expectFieldError(
      await post({ query: '{ orderPage(after: "forged") { nodes { id } } }' }),
      'orderPage',
      'INVALID_PARAMETER',
      /after/,
    );
    // Larger than limits.bodyBytes: the pipeline's 413 Problem, before any GraphQL.
    const big = await post(undefined, {
      raw: JSON.stringify({ query: '{ __typename }', variables: { pad: 'x'.repeat(1_100_000) } }),
    });
    expect(big.status).toBe(413);
    expect(big.body.type).toBe('/errors/payload-too-large');
  });

  it('syntax errors, unknown operations, no credentials', async () => {
    expectRefused(await post({ query: '{ cityList { id ' }), 'GRAPHQL_PARSE_FAILED');
    expectRefused(await post({ query: 'mutation { x }' }), 'GRAPHQL_VALIDATION_FAILED');
    // Batching is off: an array of requests is not a GraphQL request.
    const batch = await post([{ query: '{ __typename }' }, { query: '{ __typename }' }]);
    expect(batch.status).toBe(400);
    expect(batch.body.data).toBeUndefined();
    expect(batch.body.errors[0].extensions).toMatchObject({ code: 'BAD_REQUEST', status: 400 });
    const anonymous = await t.request('POST', '/gw/api/graphql', { key: false, body: { query: '{ __typename }' } });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('content-type')).toBe('application/problem+json');
    const noProject = await t.request('POST', '/gw/api/graphql', { project: false, body: { query: '{ __typename }' } });
    expect(noProject.status).toBe(400);
    expect(noProject.body.type).toBe('/errors/missing-project');
  });

  it('browsers: CORS preflight and answers as for the data API', async () => {
    const preflight = await fetch(`${t.url}/gw/api/graphql`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,authorization,x-project-id',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(preflight.headers.get('access-control-allow-headers')).toBe('content-type,authorization,x-project-id');
    const res = await t.request('POST', '/gw/api/graphql', {
      body: { query: '{ __typename }' },
      headers: { origin: 'https://app.example' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(res.headers.get('access-control-expose-headers')).toContain('RateLimit-Remaining');
  });

  it('answers carry the rate-limit headers of data requests', async () => {
    const res = await post({ query: '{ __typename }' });
    expect(res.headers.get('ratelimit-limit')).toMatch(/^\d+$/);
    expect(res.headers.get('ratelimit-remaining')).toMatch(/^\d+$/);
  });
});
