// The SQL compilers under a caller's access (runtime/query/compile-*.ts), without a database: the
// assertions read the structure of the statement text (substrings, parameter values), never whole
// statements. docs/permissions.md "Reading" and "Writing". One row per case.
import { describe, expect, it } from 'vitest';
import {
  compileAggregate,
  compileCondition,
  compileRead,
  compileWrite,
  createPresets,
  QueryError,
  WriteRefused,
  writeRules,
  type AggregateQuery,
  type Condition,
  type ReadQuery,
  type Scope,
  type SelectItem,
  type Write,
  type WriteResult,
} from '../../runtime/query/index.ts';
import {
  apiKey,
  cmp,
  policyOf,
  roles,
  scopeOf,
  SHOP_ROLES,
  table,
  TRUE,
  user,
  USER_ID,
} from '../support/query-unit.ts';

const policy = policyOf({
  ...SHOP_ROLES,
  ...roles({
    support: { tables: { Order: { read: { fields: ['id', 'status', 'customerId', 'total'] } } } },
    owner: { tables: { Order: { read: { filter: { customerId: '$user.id' } } } } },
    openOnly: { tables: { Order: { read: { filter: { status: 'open' }, fields: ['id', 'status'] } } } },
    ownerCrm: { tables: { Order: { read: { filter: { customerId: '$user.id' } } }, Customer: { read: true } } },
    crm: {
      tables: {
        Order: { read: { filter: { status: 'paid' } } },
        Customer: { read: { filter: { vip: true }, fields: ['id', 'name', 'email', 'cityId'] } },
        City: { read: { filter: { country: 'NL' } } },
      },
    },
    itemsOwner: {
      tables: { OrderItem: { read: { filter: { 'order.customerId': '$user.id' } } }, Product: { read: true } },
    },
    editor: {
      tables: {
        Order: {
          read: true,
          update: { filter: { status: 'open' }, fields: ['total', 'note'] },
          delete: { filter: { status: 'cancelled' } },
        },
      },
    },
    titles: { tables: { Product: { update: { fields: ['title'] } } } },
    skus: { tables: { Product: { update: { fields: ['sku'] } } } },
    purger: {
      tables: { Order: { read: { filter: { customerId: '$user.id' } }, delete: { filter: { status: 'cancelled' } } } },
    },
    noteWriter: { tables: { Order: { create: { fields: ['note'] } } } },
  }),
});

/** A fresh statement scope for a user holding `names`. */
const scopeFor = (names: string[], who = user(names)): Scope => scopeOf(policy.access(who));

interface SqlWant {
  /** QueryError / WriteRefused whose message matches. */
  error?: RegExp;
  contains?: string[];
  absent?: string[];
  /** Values that must be among the bound parameters. */
  params?: unknown[];
  /** Substrings that must occur at least this often. */
  atLeast?: Record<string, number>;
}

/** A bound value as the compared text shows it: `$n` → `<JSON of the value>`, whatever its number. */
const bound = (value: unknown) => `<${JSON.stringify(value)}>`;
const U = bound(USER_ID);

/** Checks compiled text (whitespace collapsed, parameters rendered by `bound`) against `want`. */
function check(run: (scope: Scope) => string, scope: Scope, want: SqlWant): string {
  if (want.error) {
    expect(() => run(scope)).toThrow(want.error);
    try {
      run(scope);
    } catch (error) {
      expect(error instanceof QueryError || error instanceof WriteRefused).toBe(true);
    }
    return '';
  }
  const sql = run(scope)
    .replace(/\s+/g, ' ')
    .replace(/\$(\d+)/g, (_, n: string) => bound(scope.params.values[Number(n) - 1]));
  for (const s of want.contains ?? []) expect(sql).toContain(s);
  for (const s of want.absent ?? []) expect(sql).not.toContain(s);
  for (const v of want.params ?? []) expect(scope.params.values).toContainEqual(v);
  for (const [s, n] of Object.entries(want.atLeast ?? {})) expect(sql.split(s).length - 1).toBeGreaterThanOrEqual(n);
  return sql;
}

describe('compileCondition', () => {
  it.each<[string, { given: { roles: string[]; table: string; condition: Condition }; want: SqlWant }]>([
    [
      'a readable field',
      {
        given: { roles: ['customer'], table: 'Order', condition: cmp('total', 'gt', 5) },
        want: { contains: ['t0."total" > <5>'] },
      },
    ],
    [
      'a field the caller cannot read is refused',
      {
        given: { roles: ['customer'], table: 'Order', condition: cmp('note', 'equals', 'x') },
        want: { error: /Order has no field "note"/ },
      },
    ],
    [
      '... worded as a field the table does not have',
      {
        given: { roles: ['customer'], table: 'Order', condition: cmp('nope', 'equals', 'x') },
        want: { error: /Order has no field "nope"/ },
      },
    ],
    [
      'refused inside groups too',
      {
        given: {
          roles: ['customer'],
          table: 'Order',
          condition: {
            kind: 'not',
            item: { kind: 'or', items: [cmp('total', 'gt', 1), cmp('placedAt', 'is_empty', true)] },
          },
        },
        want: { error: /no field "placedAt"/ },
      },
    ],
    [
      'a relation to a table the caller cannot read',
      {
        given: { roles: ['customer'], table: 'Order', condition: cmp('customer.name', 'equals', 'x') },
        want: { error: /Order has no relation "customer"/ },
      },
    ],
    [
      'a to-many relation the caller cannot follow',
      {
        given: { roles: ['customer'], table: 'Product', condition: cmp('items.quantity', 'gt', 3) },
        want: { error: /Product has no relation "items"/ },
      },
    ],
    [
      'an unreadable field behind a followable relation',
      {
        given: { roles: ['crm'], table: 'Order', condition: cmp('customer.vip', 'equals', true) },
        want: { error: /Customer has no field "vip"/ },
      },
    ],
    [
      'a caller path through a table it cannot read',
      {
        given: { roles: ['itemsOwner'], table: 'Product', condition: cmp('items.order.total', 'gt', 1) },
        want: { error: /OrderItem has no relation "order"/ },
      },
    ],
    [
      'a relation step ANDs the target readable rows',
      {
        given: { roles: ['crm'], table: 'Order', condition: cmp('customer.name', 'starts_with', 'A') },
        want: {
          contains: [
            'EXISTS (SELECT 1 FROM "env_master"."Customer" t1 WHERE t1."id" = t0."customerId" AND t1."vip" = <true> AND t1."name" LIKE <"A%">)',
          ],
        },
      },
    ],
    [
      'a role filter inside a relation step is not held to the caller access',
      {
        given: { roles: ['itemsOwner'], table: 'Product', condition: cmp('items.quantity', 'gt', 3) },
        want: {
          contains: [
            `FROM "env_master"."OrderItem" t1 WHERE t1."productId" = t0."id" AND EXISTS (SELECT 1 FROM "env_master"."Order" t2 WHERE t2."id" = t1."orderId" AND t2."customerId" = ${U}) AND t1."quantity" > <3>`,
          ],
        },
      },
    ],
    [
      'a field hidden on some rows: CASE … END, neither true nor false',
      {
        given: { roles: ['support', 'owner'], table: 'Order', condition: cmp('note', 'equals', 'x') },
        want: { contains: [`(CASE WHEN t0."customerId" = ${U} THEN t0."note" = <"x"> END)`] },
      },
    ],
    [
      'NOT of a hidden field stays unknown',
      {
        given: {
          roles: ['support', 'owner'],
          table: 'Order',
          condition: { kind: 'not', item: cmp('placedAt', 'is_empty', true) },
        },
        want: { contains: [`NOT (CASE WHEN t0."customerId" = ${U} THEN t0."placedAt" IS NULL END)`] },
      },
    ],
    [
      'a field every allowing role lists: no CASE',
      {
        given: { roles: ['support', 'owner'], table: 'Order', condition: cmp('total', 'gt', 1) },
        want: { contains: ['t0."total" > <1>'], absent: ['CASE'] },
      },
    ],
    [
      'a link field hidden on some rows links nothing from them (as a null foreign key)',
      {
        given: { roles: ['openOnly', 'ownerCrm'], table: 'Order', condition: cmp('customer.name', 'equals', 'x') },
        want: {
          contains: [
            `EXISTS (SELECT 1 FROM "env_master"."Customer" t1 WHERE t1."id" = t0."customerId" AND t0."customerId" = ${U} AND t1."name" = <"x">)`,
          ],
          absent: ['CASE'],
        },
      },
    ],
    [
      'operators: LIKE escapes % and _',
      {
        given: { roles: ['admin'], table: 'Order', condition: cmp('note', 'contains', '50%_off') },
        want: { contains: ['t0."note" LIKE <'], params: ['%50\\%\\_off%'] },
      },
    ],
    [
      'operators: icontains folds A-Z under the "C" collation on both sides, and escapes % and _',
      {
        given: { roles: ['admin'], table: 'Order', condition: cmp('note', 'icontains', '50%_OFF É') },
        want: { contains: ['lower(t0."note"::text COLLATE "C") LIKE <'], params: ['%50\\%\\_off É%'] },
      },
    ],
    [
      'operators: iequals compares the folded texts',
      {
        given: { roles: ['admin'], table: 'Order', condition: cmp('note', 'iequals', 'Paid') },
        want: { contains: ['lower(t0."note"::text COLLATE "C") = <"paid">'] },
      },
    ],
    [
      'operators: not_in keeps NULL',
      {
        given: { roles: ['admin'], table: 'Order', condition: cmp('note', 'not_in', ['a']) },
        want: { contains: ['(t0."note" IS NULL OR NOT (t0."note" = ANY(<["a"]>)))'] },
      },
    ],
    [
      'operators: is_empty on text',
      {
        given: { roles: ['admin'], table: 'Order', condition: cmp('note', 'is_empty', true) },
        want: { contains: [`(t0."note" IS NULL OR t0."note" = '')`] },
      },
    ],
    [
      'operators: a list contains an element',
      {
        given: { roles: ['admin'], table: 'Product', condition: cmp('tags', 'contains', 'red') },
        want: { contains: ['<"red"> = ANY(t0."tags")'] },
      },
    ],
    [
      'operators: last_days binds an int',
      {
        given: { roles: ['admin'], table: 'Order', condition: cmp('createdAt', 'last_days', 7) },
        want: { contains: ['make_interval(days => <7>::int)'] },
      },
    ],
    [
      'empty and / or',
      {
        given: {
          roles: ['admin'],
          table: 'Order',
          condition: {
            kind: 'or',
            items: [
              { kind: 'and', items: [] },
              { kind: 'or', items: [] },
            ],
          },
        },
        want: { contains: ['(TRUE OR FALSE)'] },
      },
    ],
  ])('%s', (_name, { given, want }) => {
    const scope = scopeFor(given.roles);
    scope.nextAlias.n = 1; // t0 is the row being filtered
    check((s) => compileCondition(s, table(given.table), 't0', given.condition), scope, want);
  });
});

const list = (q: Partial<ReadQuery> & { table: string }): ReadQuery => ({
  select: null,
  where: TRUE,
  orderBy: [],
  limit: 10,
  offset: 0,
  ...q,
});
const embed = (relation: string, ...items: ReadQuery['select'] & object): SelectItem & { kind: 'embed' } => ({
  kind: 'embed',
  relation,
  alias: relation,
  items,
});
const field = (name: string) => ({ kind: 'field' as const, field: name, alias: name });

describe('compileRead', () => {
  it.each<[string, { given: { roles: string[]; query: ReadQuery; single?: boolean; count?: boolean }; want: SqlWant }]>(
    [
      [
        'the readable rows of the top table',
        {
          given: { roles: ['customer'], query: list({ table: 'Order' }) },
          want: {
            contains: [`WHERE t0."customerId" = ${U}`, 'row_to_json(t1)'],
            absent: ['"note"', '"placedAt"', 'string_agg'],
          },
        },
      ],
      [
        'every field for an unrestricted role',
        {
          given: { roles: ['admin'], query: list({ table: 'Order' }) },
          want: { contains: ['t0."note" AS "note"', 'WHERE TRUE'] },
        },
      ],
      [
        'unreadable fields named in select are left out',
        {
          given: {
            roles: ['customer'],
            query: list({
              table: 'Order',
              select: [field('id'), field('note'), { kind: 'field', field: 'total', alias: 'amount' }],
            }),
          },
          want: { contains: ['t0."id" AS "id"', 't0."total" AS "amount"'], absent: ['"note"'] },
        },
      ],
      [
        'a single record: its key and the readable rows',
        {
          given: { roles: ['customer'], query: list({ table: 'Order', key: cmp('id', 'equals', 7) }), single: true },
          want: { contains: [`WHERE t0."id" = <7> AND t0."customerId" = ${U} LIMIT 1`] },
        },
      ],
      [
        'the count carries the readable rows too',
        {
          given: { roles: ['customer'], query: list({ table: 'Order' }), count: true },
          want: { contains: ['count(*)::int AS total'], atLeast: { [`"customerId" = ${U}`]: 2 } },
        },
      ],
      [
        'the readable rows of every embed',
        {
          given: {
            roles: ['crm'],
            query: list({
              table: 'Order',
              select: [field('id'), embed('customer', field('name'), embed('city', field('name')))],
            }),
          },
          want: {
            contains: [
              'FROM "env_master"."Customer" t',
              '"vip" = <true>',
              'FROM "env_master"."City" t',
              '"country" = <"NL">',
              'WHERE t0."status" = <"paid">',
            ],
          },
        },
      ],
      [
        'a to-many embed keeps the target readable rows',
        {
          given: {
            roles: ['crm'],
            query: list({ table: 'Customer', select: [field('name'), embed('orders', field('id'))] }),
          },
          want: {
            contains: [
              "coalesce('[' || string_agg(row_to_json(",
              "::text, ',') || ']', '[]')::json",
              'FROM "env_master"."Order" t',
              '"status" = <"paid">',
            ],
            absent: ['json_agg('],
          },
        },
      ],
      [
        'an embed the caller cannot follow is refused',
        {
          given: { roles: ['customer'], query: list({ table: 'Order', select: [embed('customer', field('name'))] }) },
          want: { error: /no relation "customer"/ },
        },
      ],
      [
        'fields hidden on some rows: the record is built key by key',
        {
          given: { roles: ['support', 'owner'], query: list({ table: 'Order' }) },
          want: {
            contains: [
              "coalesce('{' || string_agg(kv.member, ',' ORDER BY kv.o) || '}', '{}')::json",
              `(0, <"\\"id\\":">::text || coalesce(to_json(t0."id")::text, 'null'), TRUE)`,
              `(3, <"\\"note\\":">::text || coalesce(to_json(t0."note")::text, 'null'), t0."customerId" = ${U})`,
              'WHERE kv.shown',
            ],
            absent: ['json_object_agg'],
          },
        },
      ],
      [
        'only fields every role lists: row_to_json',
        {
          given: {
            roles: ['support', 'owner'],
            query: list({ table: 'Order', select: [field('id'), field('status')] }),
          },
          want: { contains: ['row_to_json('], absent: ['string_agg'] },
        },
      ],
      [
        'sorting by an unreadable field is refused',
        {
          given: {
            roles: ['customer'],
            query: list({ table: 'Order', orderBy: [{ field: 'note', direction: 'asc' }] }),
          },
          want: { error: /no field "note" to sort by/ },
        },
      ],
      [
        'a field hidden on some rows sorts as null there',
        {
          given: {
            roles: ['support', 'owner'],
            query: list({ table: 'Order', orderBy: [{ field: 'note', direction: 'desc' }] }),
          },
          want: {
            contains: [
              `ORDER BY (CASE WHEN t0."customerId" = ${U} THEN t0."note" END) DESC NULLS FIRST, t0."id" ASC NULLS LAST`,
            ],
          },
        },
      ],
      [
        'a filter on an unreadable field is refused',
        {
          given: { roles: ['customer'], query: list({ table: 'Order', where: cmp('note', 'is_empty', true) }) },
          want: { error: /Order has no field "note"/ },
        },
      ],
      [
        'a to-many embed: its filter ANDed with the readable rows, its order, limit and offset',
        {
          given: {
            roles: ['crm'],
            query: list({
              table: 'Customer',
              select: [
                field('name'),
                {
                  ...embed('orders', field('id')),
                  where: cmp('total', 'gt', 5),
                  orderBy: [{ field: 'total', direction: 'desc' }],
                  limit: 3,
                  offset: 1,
                },
              ],
            }),
          },
          want: {
            contains: [
              'WHERE t2."customerId" = t0."id" AND t2."status" = <"paid"> AND t2."total" > <5> ORDER BY t2."total" DESC NULLS FIRST, t2."id" ASC NULLS LAST LIMIT 3 OFFSET 1) t3',
            ],
          },
        },
      ],
      [
        'an embed filter through a relation: EXISTS over the readable rows of that table too',
        {
          given: {
            roles: ['crm'],
            query: list({
              table: 'City',
              select: [{ ...embed('customers', field('id')), where: cmp('orders.total', 'gt', 5) }],
            }),
          },
          want: {
            contains: [
              'EXISTS (SELECT 1 FROM "env_master"."Order" t3 WHERE t3."customerId" = t2."id" AND t3."status" = <"paid"> AND t3."total" > <5>)',
            ],
          },
        },
      ],
      [
        'an embed without arguments is not cut',
        {
          given: { roles: ['crm'], query: list({ table: 'Customer', select: [embed('orders', field('id'))] }) },
          want: { contains: ['t2."id" ASC NULLS LAST) t3'], absent: ['OFFSET'] },
        },
      ],
      [
        'an embed filter on an unreadable field is refused',
        {
          given: {
            roles: ['crm'],
            query: list({
              table: 'City',
              select: [{ ...embed('customers', field('id')), where: cmp('vip', 'equals', true) }],
            }),
          },
          want: { error: /^Customer has no field "vip"$/ },
        },
      ],
      [
        'an embed filter through a relation the caller cannot follow is refused',
        {
          given: {
            roles: ['ownerCrm'],
            query: list({
              table: 'Customer',
              select: [{ ...embed('orders', field('id')), where: cmp('items.quantity', 'gt', 1) }],
            }),
          },
          want: { error: /^Order has no relation "items"$/ },
        },
      ],
      [
        'an embed order on an unreadable field is refused',
        {
          given: {
            roles: ['crm'],
            query: list({
              table: 'City',
              select: [{ ...embed('customers', field('id')), orderBy: [{ field: 'vip', direction: 'asc' }] }],
            }),
          },
          want: { error: /^Customer has no field "vip" to sort by$/ },
        },
      ],
      [
        'an embed order on a field hidden on some rows sorts as null there',
        {
          given: {
            roles: ['support', 'ownerCrm'],
            query: list({
              table: 'Customer',
              select: [{ ...embed('orders', field('id')), orderBy: [{ field: 'note', direction: 'desc' }] }],
            }),
          },
          want: {
            contains: [
              `ORDER BY (CASE WHEN t2."customerId" = ${U} THEN t2."note" END) DESC NULLS FIRST, t2."id" ASC NULLS LAST) t3`,
            ],
          },
        },
      ],
      [
        'an embed filter on a field hidden on some rows is unknown there',
        {
          given: {
            roles: ['support', 'ownerCrm'],
            query: list({
              table: 'Customer',
              select: [{ ...embed('orders', field('id')), where: cmp('note', 'equals', 'x') }],
            }),
          },
          want: { contains: [`(CASE WHEN t2."customerId" = ${U} THEN t2."note" = <"x"> END)`] },
        },
      ],
      ...(['where', 'orderBy', 'limit', 'offset'] as const).map(
        (key): [string, { given: { roles: string[]; query: ReadQuery }; want: SqlWant }] => [
          `a to-one embed with ${key} is refused`,
          {
            given: {
              roles: ['admin'],
              query: list({
                table: 'Order',
                select: [
                  { ...embed('customer', field('id')), [key]: key === 'where' ? TRUE : key === 'orderBy' ? [] : 1 },
                ],
              }),
            },
            want: { error: /^Order\.customer is a to-one relation: filter, order and limit apply to to-many embeds$/ },
          },
        ],
      ),
      ...([0, 1001, 2.5, Number.NaN] as const).map(
        (limit): [string, { given: { roles: string[]; query: ReadQuery }; want: SqlWant }] => [
          `an embed limit of ${limit} is refused`,
          {
            given: {
              roles: ['admin'],
              query: list({ table: 'Customer', select: [{ ...embed('orders', field('id')), limit }] }),
            },
            want: { error: /^the limit of orders must be a whole number from 1 to 1000$/ },
          },
        ],
      ),
      [
        'an embed offset out of range is refused',
        {
          given: {
            roles: ['admin'],
            query: list({ table: 'Customer', select: [{ ...embed('orders', field('id')), offset: -1 }] }),
          },
          want: { error: /^the offset of orders must be a whole number from 0 to 100000000$/ },
        },
      ],
    ],
  )('%s', (_name, { given, want }) => {
    check(
      (s) => compileRead(s, given.query, { single: given.single, count: given.count }).sql,
      scopeFor(given.roles),
      want,
    );
  });

  // The compilers refuse what a front end forgot to check (access.ts): a select item naming no field
  // of the table is left out or a QueryError, never a TypeError (a 500).
  it.each([['admin'], ['customer']])('a select item the table does not have (%s)', (role) => {
    const run = () => compileRead(scopeFor([role]), list({ table: 'Order', select: [field('id'), field('nope')] })).sql;
    let sql = '';
    try {
      sql = run();
    } catch (error) {
      expect(error).toBeInstanceOf(QueryError);
      return;
    }
    expect(sql).not.toContain('nope');
  });
});

const aggregate = (q: Partial<AggregateQuery>): AggregateQuery => ({
  table: 'Order',
  terms: [{ fn: 'count', alias: 'count' }],
  groupBy: [],
  where: TRUE,
  having: [],
  orderBy: [],
  limit: 100,
  ...q,
});

describe('compileAggregate', () => {
  it.each<[string, { given: { roles: string[]; query: AggregateQuery }; want: SqlWant }]>([
    [
      'count over the readable rows',
      {
        given: { roles: ['customer'], query: aggregate({}) },
        want: { contains: ['count(*)::int AS "count"', `WHERE TRUE AND t0."customerId" = ${U}`] },
      },
    ],
    [
      'an unreadable groupBy field is refused',
      {
        given: { roles: ['customer'], query: aggregate({ groupBy: ['note'] }) },
        want: { error: /Order has no field "note"/ },
      },
    ],
    [
      'an unreadable function field is refused',
      {
        given: {
          roles: ['customer'],
          query: aggregate({ terms: [{ fn: 'max', field: 'placedAt', alias: 'max_placedAt' }] }),
        },
        want: { error: /Order has no field "placedAt"/ },
      },
    ],
    [
      'an unreadable filter field is refused',
      {
        given: { roles: ['customer'], query: aggregate({ where: cmp('note', 'equals', 'x') }) },
        want: { error: /no field "note"/ },
      },
    ],
    [
      'having binds its value as numeric text',
      {
        given: {
          roles: ['customer'],
          query: aggregate({
            terms: [{ fn: 'sum', field: 'total', alias: 'sum_total' }],
            groupBy: ['status'],
            having: [{ alias: 'sum_total', op: 'gte', value: '99999999999999999999.5' }],
          }),
        },
        want: { contains: ['GROUP BY t0."status"', 'HAVING sum(t0."total") >= <"99999999999999999999.5">::numeric'] },
      },
    ],
    [
      'a field hidden on some rows groups and counts as null there',
      {
        given: {
          roles: ['support', 'owner'],
          query: aggregate({
            terms: [{ fn: 'count_distinct', field: 'placedAt', alias: 'count_distinct_placedAt' }],
            groupBy: ['note'],
          }),
        },
        want: {
          contains: [
            `count(DISTINCT (CASE WHEN t0."customerId" = ${U} THEN t0."placedAt" END))`,
            `GROUP BY (CASE WHEN t0."customerId" = ${U} THEN t0."note" END)`,
          ],
        },
      },
    ],
  ])('%s', (_name, { given, want }) => {
    check((s) => compileAggregate(s, given.query), scopeFor(given.roles), want);
  });
});

describe('writeRules and createPresets', () => {
  it.each<
    [
      string,
      {
        given: { roles: string[]; table: string; action: 'create' | 'update' | 'delete'; fields: string[] };
        want: { refused?: string[]; rules?: number; rowsVary?: string[] };
      },
    ]
  >([
    [
      'no grant: refused, no fields',
      { given: { roles: ['customer'], table: 'Order', action: 'delete', fields: [] }, want: { refused: [] } },
    ],
    [
      'no grant for the table',
      { given: { roles: ['catalog'], table: 'Order', action: 'create', fields: ['total'] }, want: { refused: [] } },
    ],
    [
      'a forbidden field: named',
      {
        given: { roles: ['customer'], table: 'Order', action: 'create', fields: ['total', 'note', 'status'] },
        want: { refused: ['note', 'status'] },
      },
    ],
    // CONTRACT §5: no single role need cover the fields; each is writable on the rows of the roles listing it.
    [
      'no single role covers the fields: both decide (neither has a filter: writable everywhere)',
      {
        given: { roles: ['titles', 'skus'], table: 'Product', action: 'update', fields: ['title', 'sku'] },
        want: { rules: 2, rowsVary: [] },
      },
    ],
    [
      'each alone is fine',
      {
        given: { roles: ['titles', 'skus'], table: 'Product', action: 'update', fields: ['sku'] },
        want: { rules: 1, rowsVary: [] },
      },
    ],
    [
      'a role without a list decides with the others',
      {
        given: { roles: ['titles', 'catalog'], table: 'Product', action: 'update', fields: ['title'] },
        want: { rules: 2, rowsVary: [] },
      },
    ],
    [
      'allowed',
      {
        given: { roles: ['customer'], table: 'Order', action: 'update', fields: ['total'] },
        want: { rules: 1, rowsVary: [] },
      },
    ],
  ])('writeRules: %s', (_name, { given, want }) => {
    const run = () => writeRules(scopeFor(given.roles), table(given.table), given.action, given.fields);
    if (want.refused) {
      expect(run).toThrow(WriteRefused);
      try {
        run();
      } catch (error) {
        expect((error as WriteRefused).fields).toEqual(want.refused);
      }
    } else {
      expect(run().rules).toHaveLength(want.rules!);
      expect([...run().fieldRows.keys()]).toEqual(want.rowsVary);
    }
  });

  it('createPresets fills in what the body leaves out', () => {
    expect(createPresets(scopeFor(['customer']), table('Order'), ['total'])).toEqual({ customerId: USER_ID });
    expect(createPresets(scopeFor(['customer']), table('Order'), ['total', 'customerId'])).toEqual({});
    expect(createPresets(scopeOf(policy.access(apiKey(['customer']))), table('Order'), ['total'])).toEqual({});
    expect(() => createPresets(scopeFor(['customer']), table('Order'), ['note'])).toThrow(WriteRefused);
  });
});

const order = table('Order');
const product = table('Product');
interface WriteCase {
  given: { roles: string[]; write: Write; result?: WriteResult; capture?: boolean; apiKey?: boolean };
  want: SqlWant & { filterFields?: string[] };
}

describe('compileWrite', () => {
  it.each<[string, WriteCase]>([
    [
      'update: the target holds the key, the readable rows and the action rows; checked after',
      {
        given: {
          roles: ['customer'],
          write: { kind: 'update', table: order, where: TRUE, key: cmp('id', 'equals', 7), patch: { total: 5 } },
        },
        want: {
          contains: [
            'UPDATE "env_master"."Order" AS t0 SET "total" = <5>',
            `WHERE t0."id" = <7> AND t0."customerId" = ${U} AND (t0."customerId" = ${U} AND t0."status" = <"open">)`,
            `svcgen.row_filter_check((t0."customerId" = ${U} AND t0."status" = <"open">))`,
          ],
          filterFields: ['customerId', 'status'],
        },
      },
    ],
    [
      'update with capture: the check runs on the after-image',
      {
        given: {
          roles: ['customer'],
          write: { kind: 'update', table: order, where: TRUE, patch: { total: 5 } },
          capture: true,
        },
        want: {
          contains: [
            'FOR UPDATE OF t0',
            `svcgen.row_filter_check((t1."customerId" = ${U} AND t1."status" = <"open">))`,
            'svcgen.capture_events(',
          ],
          filterFields: ['customerId', 'status'],
        },
      },
    ],
    [
      'update by a role without a filter: no check',
      {
        given: {
          roles: ['catalog'],
          write: { kind: 'update', table: product, where: cmp('sku', 'equals', 'P-1'), patch: { title: 'x' } },
        },
        want: { contains: ['WHERE t0."sku" = <"P-1"> RETURNING'], absent: ['row_filter_check'], filterFields: [] },
      },
    ],
    [
      'update: a table the caller cannot read: no row is reachable, whatever the action allows',
      {
        given: {
          roles: ['owner', 'titles'],
          write: { kind: 'update', table: product, where: TRUE, patch: { title: 'x' } },
        },
        want: { contains: ['WHERE FALSE RETURNING'] },
      },
    ],
    [
      'update: a caller filter on an unreadable field is refused',
      {
        given: {
          roles: ['customer'],
          write: { kind: 'update', table: order, where: cmp('note', 'equals', 'x'), patch: { total: 5 } },
        },
        want: { error: /Order has no field "note"/ },
      },
    ],
    [
      'update: a forbidden field',
      {
        given: { roles: ['customer'], write: { kind: 'update', table: order, where: TRUE, patch: { status: 'paid' } } },
        want: { error: /may not write status/ },
      },
    ],
    [
      'an empty patch writes nothing but still reaches only allowed rows',
      {
        given: { roles: ['customer'], write: { kind: 'update', table: order, where: TRUE, patch: {} } },
        want: {
          contains: [
            `SELECT t0.* FROM "env_master"."Order" t0 WHERE t0."customerId" = ${U} AND (t0."customerId" = ${U} AND t0."status" = <"open">)`,
          ],
          absent: ['UPDATE', 'row_filter_check'],
        },
      },
    ],
    [
      'delete: readable rows and the delete filter, never a check',
      {
        given: { roles: ['editor'], write: { kind: 'delete', table: order, where: TRUE, key: cmp('id', 'equals', 9) } },
        want: {
          contains: [
            'DELETE FROM "env_master"."Order" AS t0 WHERE t0."id" = <9> AND t0."status" = <"cancelled"> RETURNING',
          ],
          absent: ['row_filter_check'],
          filterFields: [],
        },
      },
    ],
    [
      'delete: the readable rows AND the delete filter',
      {
        given: { roles: ['purger'], write: { kind: 'delete', table: order, where: cmp('total', 'lt', 1) } },
        want: {
          contains: [`WHERE t0."total" < <1> AND t0."customerId" = ${U} AND t0."status" = <"cancelled"> RETURNING`],
          absent: ['row_filter_check'],
        },
      },
    ],
    [
      'delete: denied',
      {
        given: { roles: ['customer'], write: { kind: 'delete', table: order, where: TRUE } },
        want: { error: /may not delete Order/ },
      },
    ],
    [
      'insert: checked against the create filter',
      {
        given: {
          roles: ['customer'],
          write: { kind: 'insert', table: order, values: { total: 5, customerId: USER_ID }, written: ['total'] },
        },
        want: {
          contains: ['INSERT INTO "env_master"."Order" AS t0 (', `svcgen.row_filter_check(t0."customerId" = ${U})`],
          params: [5, USER_ID],
          filterFields: ['customerId'],
        },
      },
    ],
    [
      'insert: without a variable the check fails every row',
      {
        given: {
          roles: ['customer'],
          apiKey: true,
          write: {
            kind: 'insert',
            table: order,
            values: { total: 5, customerId: USER_ID },
            written: ['total', 'customerId'],
          },
        },
        want: { contains: ['svcgen.row_filter_check(FALSE)'], filterFields: ['customerId'] },
      },
    ],
    [
      'insert: a deciding role without a filter makes the check TRUE (none)',
      {
        given: {
          roles: ['customer', 'admin'],
          write: { kind: 'insert', table: order, values: { total: 5, customerId: USER_ID }, written: ['total'] },
        },
        want: { absent: ['row_filter_check'], filterFields: ['customerId'] },
      },
    ],
    [
      'insert: a role that does not cover the body does not decide',
      {
        given: {
          roles: ['customer', 'noteWriter'],
          write: { kind: 'insert', table: order, values: { total: 5, customerId: USER_ID }, written: ['total'] },
        },
        want: { contains: [`svcgen.row_filter_check(t0."customerId" = ${U})`], filterFields: ['customerId'] },
      },
    ],
    [
      'insert by a role without a filter: no check',
      {
        given: {
          roles: ['catalog'],
          write: {
            kind: 'insert',
            table: product,
            values: { sku: 'P-1', title: 't', price: 1 },
            written: ['sku', 'title', 'price'],
          },
        },
        want: { contains: ['INSERT INTO "env_master"."Product"'], absent: ['row_filter_check'], filterFields: [] },
      },
    ],
    [
      'insert: a forbidden field',
      {
        given: {
          roles: ['customer'],
          write: { kind: 'insert', table: order, values: { total: 5, note: 'x' }, written: ['total', 'note'] },
        },
        want: { error: /may not write note/ },
      },
    ],
    [
      'the answered record follows the read rules',
      {
        given: {
          roles: ['customer'],
          write: { kind: 'update', table: order, where: TRUE, patch: { total: 5 } },
          result: { kind: 'record' },
        },
        want: {
          contains: [`SELECT CASE WHEN t2."customerId" = ${U} THEN (SELECT row_to_json(t3)`],
          absent: ['"note"', '"placedAt"'],
        },
      },
    ],
  ])('%s', (_name, { given, want }) => {
    const scope = scopeOf(policy.access(given.apiKey ? apiKey(given.roles) : user(given.roles)));
    let filterFields: readonly string[] = [];
    check(
      (s) => {
        const compiled = compileWrite(s, given.write, given.result ?? { kind: 'count' }, given.capture ?? false);
        filterFields = compiled.filterFields;
        return compiled.sql;
      },
      scope,
      want,
    );
    if (want.filterFields) expect(filterFields).toEqual(want.filterFields);
  });
});

describe('a create compiled once per caller and record shape (compileWrite)', () => {
  const customer = table('Customer');
  const create = (values: Record<string, unknown>, written: string[] = Object.keys(values)): Write => ({
    kind: 'insert',
    table: order,
    values,
    written,
  });

  it('gives the same text with the second record’s own values, then the caller’s', () => {
    const access = policy.access(user(['customer']));
    const first = scopeOf(access);
    const a = compileWrite(first, create({ total: 5, customerId: USER_ID }, ['total']), { kind: 'record' }, false);
    const second = scopeOf(access);
    const b = compileWrite(second, create({ total: 7, customerId: USER_ID }, ['total']), { kind: 'record' }, false);
    expect(b).toBe(a); // kept, not compiled again
    expect(b.filterFields).toEqual(a.filterFields);
    expect(second.params.values).toEqual(first.params.values.map((v) => (v === 5 ? 7 : v)));
    expect(second.params.values.slice(0, 2)).toEqual([7, USER_ID]);
    expect(second.nextAlias.n).toBe(first.nextAlias.n);
  });

  it('compiles another shape, another caller and a statement with capture anew', () => {
    const access = policy.access(user(['customer']));
    const base = compileWrite(scopeOf(access), create({ total: 5 }), { kind: 'record' }, false).sql;
    const withNote = scopeOf(policy.access(user(['customer', 'admin'])));
    const other = compileWrite(withNote, create({ total: 5, note: 'n' }), { kind: 'record' }, false);
    expect(other.sql).toContain('"note"');
    expect(withNote.params.values.slice(0, 2)).toEqual([5, 'n']);
    // The same shape by a caller of other roles: its own rules, no row filter check.
    expect(
      compileWrite(scopeOf(policy.access(user(['admin']))), create({ total: 5 }), { kind: 'record' }, false).sql,
    ).not.toBe(base);
    expect(compileWrite(scopeOf(access), create({ total: 5 }), { kind: 'record' }, true).sql).toContain('capture');
    expect(compileWrite(scopeOf(access), create({ total: 5 }), { kind: 'record' }, false).sql).toBe(base);
  });

  it('still refuses a field the caller may not write', () => {
    const access = policy.access(user(['customer']));
    compileWrite(scopeOf(access), create({ total: 5 }), { kind: 'record' }, false);
    expect(() => compileWrite(scopeOf(access), create({ total: 5, note: 'x' }), { kind: 'record' }, false)).toThrow(
      WriteRefused,
    );
  });

  it('gives a client-side default a new value on every create', () => {
    const access = policy.access(user(['admin']));
    const write: Write = {
      kind: 'insert',
      table: customer,
      values: { email: 'a@b.c', name: 'A' },
      written: ['email', 'name'],
    };
    const first = scopeOf(access);
    const second = scopeOf(access);
    expect(compileWrite(second, write, { kind: 'key' }, false).sql).toBe(
      compileWrite(first, write, { kind: 'key' }, false).sql,
    );
    const ids = [first, second].map((s) =>
      s.params.values.find((v) => typeof v === 'string' && /^[0-9a-f-]{36}$/.test(v)),
    );
    expect(ids[0]).toBeDefined();
    expect(ids[1]).toBeDefined();
    expect(ids[1]).not.toBe(ids[0]);
  });
});
