// Every operator of the table (runtime/model/operators.ts) through each way a condition is
// decided: REST filters, `_query` bodies and GraphQL `where` against PostgreSQL, and the in-memory
// evaluator of real-time subscriptions (runtime/query/evaluate.ts) over the same rows. Each row of
// OPERATOR_CASES must give the same records every way; adding an operator means adding a row here (the
// last test fails until every operator has one).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATORS, takesList, type Operator } from '../../runtime/model/index.ts';
import { holds, operandValue, unsupportedIn, type Condition } from '../../runtime/query/index.ts';
import { buildSeed, qs, uuid, writeSeed } from '../support/query-seed.ts';
import { table } from '../support/query-unit.ts';
import { expectProblem, startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;

/** Names that case folding, Unicode and LIKE's special characters tell apart. */
const EXTRA_NAMES = ['ÉLODIE Dupont', 'élodie dupont', 'Kelvin \u212a', '100% _Real\\deal', 'STRASSE', 'straße'];

beforeAll(async () => {
  t = await startTestServer();
  await writeSeed(t.db, buildSeed());
  for (const [i, name] of EXTRA_NAMES.entries()) {
    await t.db.query(`insert into env_master."Customer" (id, email, name, "updatedAt") values ($1, $2, $3, now())`, [
      uuid(101 + i),
      `x${i}@example.com`,
      name,
    ]);
  }
});
afterAll(() => t?.close());

interface Case {
  table: 'Customer' | 'Order' | 'Product';
  field: string;
  op: Operator;
  /** The operand as JSON (GraphQL, the evaluator); REST writes it as query text. */
  operand: unknown;
  /** The `name`s expected (Customer cases whose meaning this test pins down). */
  names?: string[];
}

const c = (table: Case['table'], field: string, op: Operator, operand: unknown, names?: string[]): Case => ({
  table,
  field,
  op,
  operand,
  names,
});

const OPERATOR_CASES: Case[] = [
  c('Customer', 'name', 'equals', 'Bob Smith', ['Bob Smith']),
  c('Customer', 'cityId', 'equals', null),
  c('Customer', 'cityId', 'not_equals', 1),
  c('Order', 'total', 'gt', 15),
  c('Order', 'total', 'gte', 15),
  c('Order', 'total', 'lt', 10),
  c('Order', 'total', 'lte', 10),
  c('Customer', 'name', 'lt', 'C'),
  c('Customer', 'name', 'contains', 'Martin', ['Alice Martin', 'Eve Martin']),
  c('Product', 'tags', 'contains', 'gift'),
  c('Customer', 'name', 'starts_with', 'alice', ['alice Cooper']),
  c('Customer', 'email', 'ends_with', '1@example.com'),
  c('Customer', 'name', 'iequals', 'ALICE MARTIN', ['Alice Martin']),
  c('Customer', 'name', 'iequals', 'strasse', ['STRASSE']),
  c('Customer', 'name', 'icontains', 'MARTIN', ['Alice Martin', 'Eve Martin']),
  // A-Z only: É is not folded, nor is the Kelvin sign, nor ß (docs/api.md §5.5 "Operators").
  c('Customer', 'name', 'icontains', 'élodie', ['élodie dupont']),
  c('Customer', 'name', 'icontains', 'KELVIN K', []),
  c('Customer', 'name', 'icontains', '% _r', ['100% _Real\\deal']),
  c('Customer', 'name', 'icontains', '\\D', ['100% _Real\\deal']),
  c('Customer', 'name', 'icontains', '_', ['100% _Real\\deal']),
  c('Customer', 'name', 'istarts_with', 'ALICE', ['Alice Martin', 'alice Cooper']),
  c('Customer', 'name', 'istarts_with', '100%', ['100% _Real\\deal']),
  c('Customer', 'name', 'iends_with', 'DUPONT', ['ÉLODIE Dupont', 'élodie dupont']),
  c('Customer', 'name', 'iends_with', 'IN)', ['Dave (Admin)']),
  c('Order', 'status', 'in', ['paid', 'open']),
  c('Order', 'note', 'not_in', ['note 1', 'note 2']),
  c('Order', 'total', 'between', [5, 15]),
  c('Order', 'note', 'is_empty', true),
  c('Order', 'note', 'is_empty', false),
  c('Order', 'note', 'is_not_empty', true),
  c('Order', 'placedAt', 'today', true),
  c('Order', 'placedAt', 'yesterday', true),
  c('Order', 'placedAt', 'this_week', true),
  c('Order', 'placedAt', 'this_month', true),
  c('Order', 'placedAt', 'last_days', 7),
  c('Order', 'placedAt', 'last_weeks', 2),
  c('Order', 'placedAt', 'last_months', 1),
];

/** The operand as filter text: quoted, so that commas, dots, parentheses and backslashes are literal. */
function restOperand(op: Operator, operand: unknown): string {
  const quote = (v: unknown) => `"${String(v).replace(/[\\"]/g, (ch) => `\\${ch}`)}"`;
  if (operand === null) return 'null';
  if (!takesList(op)) return quote(operand);
  const items = (operand as unknown[]).map(quote).join(',');
  return op === 'between' ? items : `(${items})`;
}

type Row = Record<string, unknown> & { id: string | number };

async function restRows(tableName: string, filter = ''): Promise<Row[]> {
  const res = await t.request('GET', `${BASE}/${tableName}?${filter ? `${filter}&` : ''}limit=1000&sort=id`);
  expect(res.status, `${filter}: ${res.text}`).toBe(200);
  return res.body.data;
}

/** The same condition as a `_query` body (docs/api.md §5.10). */
async function bodyIds(k: Case): Promise<unknown[]> {
  const res = await t.request('POST', `${BASE}/${k.table}/_query`, {
    body: {
      filter: [{ field: k.field, operator: k.op, value: k.operand }],
      sort: [{ field: 'id' }],
      pagination: { first: 1000 },
    },
  });
  expect(res.status, res.text).toBe(200);
  return res.body.data.map((r: Row) => r.id);
}

async function graphqlIds(k: Case): Promise<unknown[]> {
  const root = `${k.table.charAt(0).toLowerCase()}${k.table.slice(1)}List`;
  const res = await t.request('POST', '/gw/api/graphql', {
    body: {
      query: `query($w: ${k.table}Where) { ${root}(where: $w, limit: 1000, orderBy: [{ id: ASC }]) { id } }`,
      variables: { w: { [k.field]: { [k.op]: k.operand } } },
    },
  });
  expect(res.status, res.text).toBe(200);
  expect(res.body.errors, res.text).toBeUndefined();
  return res.body.data[root].map((r: Row) => r.id);
}

describe('each operator gives the same records through REST, _query, GraphQL and the in-memory evaluator', () => {
  it.each(OPERATOR_CASES)('$op on $table $field: $operand', async (k) => {
    const all = await restRows(k.table);
    const rest = await restRows(k.table, qs(`${k.field}=${k.op}.${restOperand(k.op, k.operand)}`));
    const restIds = rest.map((r) => r.id);
    expect(await graphqlIds(k)).toEqual(restIds);
    expect(await bodyIds(k)).toEqual(restIds);
    if (k.names) expect(rest.map((r) => r.name)).toEqual(k.names);
    // A test row that matches every record or none (unless pinned by names) tells nothing apart.
    else expect(restIds.length > 0 && restIds.length < all.length, `${restIds.length} of ${all.length}`).toBe(true);

    const catalogTable = table(k.table);
    const field = catalogTable.fields.get(k.field)!;
    const list = takesList(k.op) ? (k.operand as unknown[]) : undefined;
    const condition: Condition = {
      kind: 'compare',
      path: [k.field],
      op: k.op,
      value: operandValue(field, k.op, list ? undefined : k.operand, list),
    };
    const refused = unsupportedIn(catalogTable, condition);
    if (refused) {
      // Only what PostgreSQL decides by its collation or the clock is left out of the comparison.
      expect(refused).toMatch(/collation|clock/);
      return;
    }
    expect(all.filter((row) => holds(catalogTable, condition, row)).map((r) => r.id)).toEqual(restIds);
  });

  it('has a row for every operator', () => {
    expect(new Set(OPERATOR_CASES.map((k) => k.op))).toEqual(new Set(OPERATORS));
  });
});

describe('a case-insensitive operator on a field it does not fit is the 400 the others give', () => {
  it.each([
    ['icontains', 'contains', 'Order', 'total', '1', 'Float'],
    ['istarts_with', 'starts_with', 'Order', 'customerId', 'x', 'Uuid'],
    ['iequals', 'starts_with', 'Customer', 'vip', 'x', 'Boolean'],
    ['iends_with', 'ends_with', 'Product', 'tags', 'x', undefined],
  ])('%s (as %s) on %s.%s', async (op, twin, tableName, field, value, type) => {
    const res = await t.request('GET', `${BASE}/${tableName}?${qs(`${field}=${op}.${value}`)}`);
    const other = await t.request('GET', `${BASE}/${tableName}?${qs(`${field}=${twin}.${value}`)}`);
    expectProblem(res, 400, 'invalid-parameter', field);
    expect(res.status).toBe(other.status);
    expect(res.body.type).toBe(other.body.type);
    const detail =
      type === undefined
        ? 'list fields take contains, is_empty and is_not_empty'
        : `${op} needs a text field; ${field} is ${type}`;
    expect(res.body.errors).toEqual([{ field, rule: 'filter', message: detail }]);
    expect(other.body.errors[0].message).toBe(detail.replace(op, twin));
  });
});
