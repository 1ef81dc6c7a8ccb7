// The document and variable bounds of runtime/graphql/rules.ts, without a server: what each refuses,
// with which code and message, and that refusing a document built to be expensive is cheap.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { buildSchema, GraphQLError, getIntrospectionQuery, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { MAX_VARIABLE_LIST, parseBounded, refuseVariables } from '../../runtime/graphql/rules.ts';
import { SHOP } from '../support/server.ts';

const schema = buildSchema(readFileSync(path.join(SHOP, 'generated/schema.graphql'), 'utf8'));

function refusal(text: string): GraphQLError {
  try {
    parseBounded(text);
  } catch (error) {
    if (error instanceof GraphQLError) return error;
    throw error;
  }
  throw new Error('parsed');
}

describe('parseBounded: the cost bounds, before validation', () => {
  it.each([
    ['11 root fields', `{ ${'cityList { id } '.repeat(11)}}`, /^at most 10 root fields/],
    [
      '1200 same-named root fields (pairwise validation would take ~100 ms)',
      `{ ${'cityList { id } '.repeat(1200)}}`,
      /^at most 10 root fields/,
    ],
    [
      '600 aliases',
      `{ cityList { ${Array.from({ length: 600 }, (_, i) => `f${i}: id`).join(' ')} } }`,
      /^the operation selects more than 500 fields/,
    ],
    [
      'selections 9 deep',
      '{ cityList { customers { city { customers { city { customers { city { customers { id } } } } } } } } }',
      /^selections nest at most 8 levels$/,
    ],
    [
      'a fragment spread 2^40 times',
      `{ cityList { ...F0 } } ${Array.from({ length: 40 }, (_, i) => `fragment F${i} on City { ...F${i + 1} ...F${i + 1} }`).join(' ')} fragment F40 on City { id }`,
      /^the operation selects more than 500 fields/,
    ],
  ])('%s: QUERY_TOO_COMPLEX', (_, text, message) => {
    // A bound that catches an unbounded walk (2^40 spreads, 65,000 members named one by one), not a speed test:
    // a loaded CI machine took 53 ms for what takes 18 ms alone.
    const started = performance.now();
    const error = refusal(text);
    expect(performance.now() - started).toBeLessThan(1000);
    expect(error.message).toMatch(message);
    expect(error.extensions).toEqual({ code: 'QUERY_TOO_COMPLEX', type: '/errors/invalid-parameter', status: 400 });
  });

  it('a fragment cycle does not loop (validation reports it)', () => {
    expect(
      parseBounded('{ cityList { ...A } } fragment A on City { id ...B } fragment B on City { name ...A }').kind,
    ).toBe('Document');
  });
});

describe('parseBounded: introspection counted, one copy of the schema', () => {
  const ONE_COPY = (name: string, a: string, b: string) =>
    `introspection answers one copy of the schema: ${name} is selected as both "${a}" and "${b}" in one selection set; select it once`;

  it.each([
    ['the standard query', getIntrospectionQuery()],
    [
      'the standard query with every option (code generators)',
      getIntrospectionQuery({
        descriptions: true,
        specifiedByUrl: true,
        directiveIsRepeatable: true,
        schemaDescription: true,
        inputValueDeprecation: true,
        oneOf: true,
      }),
    ],
    ['several types by name', '{ a: __type(name: "City") { name } b: __type(name: "Order") { fields { name } } }'],
    ['one field selected twice under one key (merged)', '{ __schema { types { name } types { kind } } }'],
    [
      'aliases of data fields beside introspection',
      '{ a: cityList { id } b: cityList { id } __schema { queryType { name } } }',
    ],
  ])('accepted: %s', (_, text) => {
    expect(parseBounded(text).kind).toBe('Document');
  });

  const I = 'fragment I on __Type { name fields { name args { name type { name } } type { name } } }';
  it.each([
    [
      '700 aliases of types (12 kB, answered 51 MB before)',
      `{ __schema { ${Array.from({ length: 700 }, (_, i) => `a${i}: types { ...I }`).join(' ')} } } ${I}`,
      ONE_COPY('types', 'a0', 'a1'),
    ],
    [
      'two aliases of __schema',
      '{ a: __schema { types { name } } b: __schema { types { name } } }',
      ONE_COPY('__schema', 'a', 'b'),
    ],
    [
      'aliases merged in from two selections of one field',
      '{ __schema { types { a: fields { name } } types { b: fields { name } } } }',
      ONE_COPY('fields', 'a', 'b'),
    ],
    [
      'aliases through fragments and inline fragments',
      '{ __schema { ...S ... on __Schema { b: directives { name } } } } fragment S on __Schema { directives { name } }',
      ONE_COPY('directives', 'directives', 'b'),
    ],
    [
      'aliases inside __type',
      '{ __type(name: "City") { a: fields { name } b: fields { name } } }',
      ONE_COPY('fields', 'a', 'b'),
    ],
    [
      'a fragment of introspection spread past the selection bound',
      `{ __schema { types { ...F0 } } } ${Array.from({ length: 12 }, (_, i) => `fragment F${i} on __Type { ...F${i + 1} ...F${i + 1} }`).join(' ')} fragment F12 on __Type { name }`,
      'the operation selects more than 500 fields (fragments counted where they are spread, introspection included); split it',
    ],
    [
      'introspection nested 21 levels',
      `{ __schema { types { fields { type ${'{ ofType '.repeat(16)}{ name }${' }'.repeat(16)} } } } }`,
      'introspection selections nest at most 20 levels',
    ],
  ])('refused: %s', (_, text, message) => {
    const error = refusal(text);
    expect(error.message).toBe(message);
    expect(error.extensions).toEqual({ code: 'QUERY_TOO_COMPLEX', type: '/errors/invalid-parameter', status: 400 });
  });
});

describe('refuseVariables: the first variable graphql-js would answer slowly', () => {
  const run = (query: string, variableValues: Record<string, unknown>) =>
    refuseVariables({ schema, document: parse(query), variableValues });
  const cityWhere = 'query($w: CityWhere) { cityList(where: $w) { id } }';

  it('a member its input type does not have: named by its place, not printed whole', () => {
    const w = Object.fromEntries(Array.from({ length: 65_000 }, (_, i) => [`n${i}`, 1]));
    const started = performance.now();
    const result = run(cityWhere, { w });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(result?.errors?.map((e) => [e.message, e.extensions])).toEqual([
      [
        'Variable "$w" got invalid value at "w.n0"; Field "n0" is not defined by type "CityWhere".',
        { code: 'BAD_USER_INPUT', type: '/errors/invalid-parameter', status: 400 },
      ],
    ]);
    expect(run(cityWhere, { w: { and: [{ id: { equals: 1 } }, { name: { nope: 'x' } }] } })?.errors?.[0]?.message).toBe(
      'Variable "$w" got invalid value at "w.and[1].name.nope"; Field "nope" is not defined by type "StringFilter".',
    );
  });

  it(`a list of more than ${MAX_VARIABLE_LIST} values; up to that, graphql-js coerces as usual`, () => {
    const query = 'query($ids: [Int!]) { cityList(where: { id: { in: $ids } }) { id } }';
    const ids = (n: number) => Array.from({ length: n }, (_, i) => i);
    expect(run(query, { ids: ids(MAX_VARIABLE_LIST + 1) })?.errors?.[0]?.message).toBe(
      'Variable "$ids" got invalid value at "ids"; a list takes at most 1000 values, this one has 1001',
    );
    expect(run(query, { ids: ids(MAX_VARIABLE_LIST) })).toBeUndefined();
  });

  it('scalars of the wrong type, missing members and unknown variables are left to graphql-js', () => {
    expect(run('query($n: Int) { cityList(limit: $n) { id } }', { n: 'ten' })).toBeUndefined();
    expect(run(cityWhere, { w: { id: { equals: 'one' } } })).toBeUndefined();
    expect(run(cityWhere, { other: { nope: 1 } })).toBeUndefined();
    expect(run(cityWhere, { w: null })).toBeUndefined();
  });
});
