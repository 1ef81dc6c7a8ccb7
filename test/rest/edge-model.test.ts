/**
 * A model with the awkward parts: BigInt keys, Bytes, Json, Decimal, lists, a self relation, a
 * client-side cuid() default, a mapped table name, and fields named count, sort and limit.
 * The project is generated and migrated from scratch here, through the same stages as the CLI.
 */
import { cp, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderProject, writeProject } from '../../generator/generate.ts';
import { migrationSqlBetween } from '../../generator/prisma/index.ts';
import { readFile } from 'node:fs/promises';
import { expectProblem, REPO, startTestServer, type TestServer } from '../support/server.ts';

const FIXTURE = path.join(REPO, 'test/fixtures/edge');
// Inside the repo so that the generated code resolves zod and svcgen/model like the example does.
const PROJECT = path.join(REPO, 'test/.generated/edge');
const BASE = '/gw/api/rest/Metric';

let t: TestServer;

beforeAll(async () => {
  await rm(PROJECT, { recursive: true, force: true });
  await mkdir(PROJECT, { recursive: true });
  for (const file of ['schema.prisma', 'svcgen.config.json'])
    await cp(path.join(FIXTURE, file), path.join(PROJECT, file));
  await writeFile(path.join(PROJECT, 'package.json'), '{ "private": true, "type": "module" }\n');
  await writeProject(PROJECT, await renderProject(PROJECT));
  const sql = await migrationSqlBetween(null, await readFile(path.join(PROJECT, 'schema.prisma'), 'utf8'));
  await mkdir(path.join(PROJECT, 'migrations/20260101000000_init'), { recursive: true });
  await writeFile(path.join(PROJECT, 'migrations/20260101000000_init/migration.sql'), sql);
  t = await startTestServer({ project: PROJECT });
}, 120_000);
afterAll(async () => {
  await t?.close();
  await rm(PROJECT, { recursive: true, force: true });
});

async function create(body: Record<string, unknown>) {
  const res = await t.request('POST', BASE, { body });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

describe('scalar types round-trip', () => {
  it('BigInt keys are strings, Bytes base64, Json as is, Decimal a number, lists arrays', async () => {
    const row = await create({
      count: 3,
      sort: 'b',
      payload: { nested: [1, 'two', null] },
      blob: Buffer.from('hello').toString('base64'),
      amount: '12.3456',
      labels: ['x', 'y'],
    });
    expect(row).toMatchObject({
      count: 3,
      sort: 'b',
      limit: null,
      payload: { nested: [1, 'two', null] },
      blob: 'aGVsbG8=',
      amount: 12.3456,
      ratio: 0.5,
      labels: ['x', 'y'],
    });
    expect(row.id).toMatch(/^\d+$/);
    expect(row.code).toMatch(/^c[0-9a-z]{24}$/);
    const again = await t.request('GET', `${BASE}/${row.id}`);
    expect(again.body.data).toEqual(row);
    expect((await t.db.query('select count(*)::int as n from env_master.metrics'))[0]).toEqual({ n: 1 });
  });

  it('a BigInt id may be sent as a number or a string', async () => {
    const a = await create({ id: 900, count: 1, sort: 'a', amount: 1 });
    const b = await create({ id: '901', count: 1, sort: 'a', amount: 1 });
    expect([a.id, b.id]).toEqual(['900', '901']);
  });
});

describe('JSON output (docs/api.md §5.2)', () => {
  it('is compact: embedded arrays and Json values have no whitespace outside strings; Json comes back as jsonb keeps it, Decimal with its scale', async () => {
    const parent = await create({
      count: 1,
      sort: 'p',
      amount: '1',
      payload: { b: [1, 2, { c: 'x, y: z' }], a: 1.5, big: 2 ** 60 },
    });
    await create({ count: 2, sort: 'c1', amount: 2, parentId: parent.id, payload: { k: 'v', kk: [true, false] } });
    await create({ count: 3, sort: 'c2', amount: 3.25, parentId: parent.id });
    const one = await t.request('GET', `${BASE}/${parent.id}?select=payload,amount,children(sort,payload,amount)`);
    const list = await t.request(
      'GET',
      `${BASE}?col.sort=equals.p&limit=5&select=payload,amount,children(sort,payload,amount)`,
    );
    const record =
      // Json numbers are read as JavaScript numbers: 2^60 is written as JSON.stringify writes it.
      '{"payload":{"a":1.5,"b":[1,2,{"c":"x, y: z"}],"big":1152921504606847000},"amount":1.0000,' +
      '"children":[{"sort":"c1","payload":{"k":"v","kk":[true,false]},"amount":2.0000},{"sort":"c2","payload":null,"amount":3.2500}]}';
    expect(one.text).toBe(`{"data":${record}}`);
    expect(list.text).toBe(
      `{"data":[${record}],"meta":{"pagination":{"limit":5,"offset":0,"hasNextPage":false,"hasPreviousPage":false,"nextCursor":null}}}`,
    );
    // A write answers the record the same way.
    const patched = await t.request('PATCH', `${BASE}/${parent.id}`, {
      body: { payload: { z: 'a b', y: [1, { x: null }] } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.text).toContain('"payload":{"y":[1,{"x":null}],"z":"a b"}');
    expect(patched.text).not.toMatch(/[\n]|, |": /);
  });
});

describe('reserved names and the col. prefix', () => {
  beforeAll(async () => {
    await create({ count: 10, sort: 'z', limit: 5, amount: 2 });
    await create({ count: 20, sort: 'y', limit: 50, amount: 3 });
  });

  it('col.sort, col.limit and count filter fields named like parameters', async () => {
    const bySort = await t.request('GET', `${BASE}?col.sort=equals.z&select=count`);
    expect(bySort.body.data).toEqual([{ count: 10 }]);
    const byLimit = await t.request('GET', `${BASE}?col.limit=gt.10&select=count`);
    expect(byLimit.body.data).toEqual([{ count: 20 }]);
    const byCount = await t.request('GET', `${BASE}?count=gte.10&sort=-count&select=count,sort`);
    expect(byCount.body.data).toEqual([
      { count: 20, sort: 'y' },
      { count: 10, sort: 'z' },
    ]);
  });

  it('sort=sort sorts by the field named sort', async () => {
    const res = await t.request('GET', `${BASE}?count=gte.10&sort=sort&select=sort`);
    expect(res.body.data).toEqual([{ sort: 'y' }, { sort: 'z' }]);
  });

  it('a groupBy field named like an aggregate alias → 400 naming groupBy', async () => {
    expectProblem(
      await t.request('GET', `${BASE}/_aggregate?fn=count&groupBy=count`),
      400,
      'invalid-parameter',
      'groupBy',
    );
    const ok = await t.request(
      'GET',
      `${BASE}/_aggregate?fn=sum:count&groupBy=sort&sort=sort&col.limit=is_not_empty.true`,
    );
    expect(ok.body.data.aggregates).toEqual([
      { sort: 'y', sum_count: 20 },
      { sort: 'z', sum_count: 10 },
    ]);
  });

  it('Json and Bytes fields take only is_empty / is_not_empty', async () => {
    expectProblem(await t.request('GET', `${BASE}?payload=equals.1`), 400, 'invalid-parameter', 'payload');
    const empty = await t.request('GET', `${BASE}?blob=is_empty.true&count=gte.10`);
    expect(empty.body.data).toHaveLength(2);
  });
});

describe('self relation', () => {
  it('embeds parent and children of the same table, and filters through them', async () => {
    const root = await create({ count: 100, sort: 'root', amount: 0 });
    await create({ count: 101, sort: 'leaf-a', amount: 0, parentId: root.id });
    await create({ count: 102, sort: 'leaf-b', amount: 0, parentId: root.id });
    const tree = await t.request('GET', `${BASE}/${root.id}?select=sort,children(sort,parent(sort))`);
    expect(tree.body.data).toEqual({
      sort: 'root',
      children: [
        { sort: 'leaf-a', parent: { sort: 'root' } },
        { sort: 'leaf-b', parent: { sort: 'root' } },
      ],
    });
    const leaves = await t.request('GET', `${BASE}?parent.sort=equals.root&select=sort&sort=sort`);
    expect(leaves.body.data).toEqual([{ sort: 'leaf-a' }, { sort: 'leaf-b' }]);
    const withChildren = await t.request('GET', `${BASE}?children.sort=starts_with.leaf&select=sort`);
    expect(withChildren.body.data).toEqual([{ sort: 'root' }]);
  });
});

describe('bad values of these types', () => {
  it.each([
    [
      'BigInt out of range',
      { id: '9223372036854775808', count: 1, sort: 'a', amount: 1 },
      'id',
      'max',
      'id: expected a whole number from -9223372036854775808 to 9223372036854775807 (a JSON number or a string of digits)',
    ],
    [
      'BigInt not digits (was a 500)',
      { id: '1.5', count: 1, sort: 'a', amount: 1 },
      'id',
      'type',
      'id: expected a whole number from -9223372036854775808 to 9223372036854775807 (a JSON number or a string of digits)',
    ],
    [
      'Bytes not base64',
      { count: 1, sort: 'a', amount: 1, blob: '***' },
      'blob',
      'format',
      'blob: expected base64 text such as aGVsbG8=',
    ],
    [
      'Decimal not a number',
      { count: 1, sort: 'a', amount: 'abc' },
      'amount',
      'format',
      'amount: expected a decimal number such as 12.50 (a JSON number or a string) with at most 8 digits before the decimal point (stored with 4 digits after it)',
    ],
    [
      'Decimal(12,4) with 9 digits before the point',
      { count: 1, sort: 'a', amount: 123456789 },
      'amount',
      'max',
      'amount: expected a decimal number such as 12.50 (a JSON number or a string) with at most 8 digits before the decimal point (stored with 4 digits after it)',
    ],
    [
      'list of the wrong type',
      { count: 1, sort: 'a', amount: 1, labels: [1] },
      'labels[0]',
      'type',
      'labels[0]: expected a string',
    ],
  ])('%s → 422 naming the field, in words', async (_, body, field, rule, message) => {
    const res = await t.request('POST', BASE, { body });
    expectProblem(res, 422, 'validation', field);
    expect(res.body.detail).toBe(message);
    expect(res.body.errors).toEqual([{ field, rule, message }]);
  });
});

describe('BigInt keys in Location and bulk items', () => {
  it('are written exactly, as strings', async () => {
    const big = '9007199254740993'; // 2^53 + 1: a JSON number would lose it
    const res = await t.request('POST', BASE, { body: { id: big, count: 1, sort: 'big', amount: 1 } });
    expect(res.headers.get('location')).toBe(`${BASE}/${big}`);
    const bulk = await t.request('POST', `${BASE}/_bulk`, {
      body: { items: [{ id: '9007199254740995', count: 1, sort: 'big', amount: 1 }] },
    });
    expect(bulk.status, bulk.text).toBe(201);
    expect(bulk.body.data.items).toEqual([{ id: '9007199254740995' }]);
  });
});
