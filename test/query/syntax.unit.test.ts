// The text syntax of filters and selects (runtime/query/parse-filter.ts, parse-select.ts) under a
// caller's access, without a database: what parses to which description, and what is refused
// (docs/api.md "Filters", "Selecting fields and embedding relations"; docs/permissions.md
// "What the caller cannot read cannot shape an answer"). One row per case.
import { describe, expect, it } from 'vitest';
import {
  MAX_CONDITIONS,
  MAX_EMBEDS,
  MAX_GROUP_DEPTH,
  parseFilterParam,
  parseSelectText,
  QueryError,
  resolveSelect,
  type Condition,
  type FilterContext,
  type SelectItem,
} from '../../runtime/query/index.ts';
import { catalog, cmp, policyOf, roles, SHOP_ROLES, table, user } from '../support/query-unit.ts';

const policy = policyOf({
  ...SHOP_ROLES,
  ...roles({
    crm: {
      tables: {
        Order: { read: { filter: { status: 'paid' } } },
        Customer: { read: { fields: ['id', 'name', 'email'] } },
      },
    },
    reader: { tables: { Customer: { read: true }, Order: { read: { fields: ['id', 'status', 'customerId'] } } } },
  }),
});
const context = (names: string[], tableName: string): FilterContext => ({
  catalog,
  table: table(tableName),
  access: policy.access(user(names)),
  count: 0,
});

/** Runs `fn`, returning what it gave or the QueryError it threw (anything else fails the test). */
function outcome<T>(fn: () => T): T | QueryError {
  try {
    return fn();
  } catch (error) {
    if (error instanceof QueryError) return error;
    throw error;
  }
}

/** `want` a value, or a RegExp the QueryError message must match. */
function expectOutcome(got: unknown, want: unknown) {
  if (want instanceof RegExp) {
    expect(got).toBeInstanceOf(QueryError);
    expect((got as QueryError).message).toMatch(want);
  } else {
    expect(got).toEqual(want);
  }
}

/** `(status.equals.open)` inside `depth` nested groups: the text after `or=`. */
const nested = (depth: number, inner = 'status.equals.open') =>
  `(${'or('.repeat(depth - 1)}${inner}${')'.repeat(depth - 1)})`;
const or = (...items: Condition[]): Condition => ({ kind: 'or', items });
const and = (...items: Condition[]): Condition => ({ kind: 'and', items });

interface FilterCase {
  given: { param: string; value: string; roles?: string[]; table?: string };
  want: Condition | RegExp;
}

describe('parseFilterParam', () => {
  it.each<[string, FilterCase]>([
    ['an enum value', { given: { param: 'status', value: 'equals.open' }, want: cmp('status', 'equals', 'open') }],
    ['an Int value is typed', { given: { param: 'id', value: 'gt.5' }, want: cmp('id', 'gt', 5) }],
    ['a value with dots', { given: { param: 'total', value: 'lte.9.5' }, want: cmp('total', 'lte', 9.5) }],
    [
      'unquoted null is SQL NULL',
      { given: { param: 'note', value: 'equals.null' }, want: cmp('note', 'equals', null) },
    ],
    [
      'quoted "null" is text',
      { given: { param: 'note', value: 'equals."null"' }, want: cmp('note', 'equals', 'null') },
    ],
    [
      'quotes hold commas, dots and parentheses',
      { given: { param: 'note', value: 'equals."a,b.(c)"' }, want: cmp('note', 'equals', 'a,b.(c)') },
    ],
    [
      'inside quotes \\" and \\\\ escape',
      {
        given: { param: 'note', value: 'equals."say \\"hi\\" \\\\ ok"' },
        want: cmp('note', 'equals', 'say "hi" \\ ok'),
      },
    ],
    ['a stray quote', { given: { param: 'note', value: 'equals.a"b' }, want: /quote the whole value/ }],
    [
      'in without parentheses',
      { given: { param: 'status', value: 'in.open,paid' }, want: cmp('status', 'in', ['open', 'paid']) },
    ],
    [
      'in with parentheses and a quoted item',
      { given: { param: 'status', value: 'in.(open,"paid")' }, want: cmp('status', 'in', ['open', 'paid']) },
    ],
    ['not_in', { given: { param: 'id', value: 'not_in.(1,2)' }, want: cmp('id', 'not_in', [1, 2]) }],
    ['between', { given: { param: 'total', value: 'between.1,2' }, want: cmp('total', 'between', [1, 2]) }],
    ['between with one bound', { given: { param: 'total', value: 'between.1' }, want: /between takes two values/ }],
    ['is_empty', { given: { param: 'note', value: 'is_empty.true' }, want: cmp('note', 'is_empty', true) }],
    ['an unknown operator', { given: { param: 'status', value: 'like.open' }, want: /unknown operator "like"/ }],
    ['no operator', { given: { param: 'status', value: 'open' }, want: /write status=<operator>.<value>/ }],
    [
      'an operator that does not fit the field',
      { given: { param: 'status', value: 'gt.open' }, want: /gt needs a number, date or text field/ },
    ],
    ['a value that does not fit the field', { given: { param: 'id', value: 'equals.abc' }, want: /32-bit integer/ }],
    ['col. prefix', { given: { param: 'col.status', value: 'equals.open' }, want: cmp('status', 'equals', 'open') }],
    [
      'col. prefix of an unknown field',
      { given: { param: 'col.nope', value: 'equals.1' }, want: /Order has no field "nope"/ },
    ],
    [
      'a field is not a relation',
      { given: { param: 'status.x', value: 'equals.1' }, want: /status is a field, not a relation/ },
    ],
    [
      'a relation path',
      { given: { param: 'customer.name', value: 'starts_with.A' }, want: cmp('customer.name', 'starts_with', 'A') },
    ],
    [
      'col. after a relation',
      { given: { param: 'customer.col.name', value: 'equals.A' }, want: cmp('customer.name', 'equals', 'A') },
    ],
    [
      'three relations deep',
      {
        given: { param: 'items.order.items.quantity', value: 'gt.1' },
        want: cmp('items.order.items.quantity', 'gt', 1),
      },
    ],
    [
      'four relations deep',
      { given: { param: 'items.order.items.order.total', value: 'gt.1' }, want: /at most 3 relations deep/ },
    ],
    // What the caller cannot read does not exist for it: the same words as for an unknown name.
    [
      'an unreadable field',
      { given: { roles: ['customer'], param: 'note', value: 'equals.x' }, want: /^Order has no field "note"$/ },
    ],
    [
      'an unknown field',
      { given: { roles: ['customer'], param: 'nope', value: 'equals.x' }, want: /^Order has no field "nope"$/ },
    ],
    [
      'a relation to an unreadable table',
      {
        given: { roles: ['customer'], param: 'customer.name', value: 'equals.x' },
        want: /^Order has no field "customer"$/,
      },
    ],
    [
      'a to-many relation to an unreadable table',
      {
        given: { roles: ['customer'], table: 'Product', param: 'items.quantity', value: 'gt.3' },
        want: /^Product has no field "items"$/,
      },
    ],
    [
      'a followable relation, a readable field',
      {
        given: { roles: ['crm'], param: 'customer.name', value: 'equals.x' },
        want: cmp('customer.name', 'equals', 'x'),
      },
    ],
    [
      'a followable relation, an unreadable field',
      { given: { roles: ['crm'], param: 'customer.vip', value: 'equals.true' }, want: /^Customer has no field "vip"$/ },
    ],
    // Groups.
    [
      'or',
      {
        given: { param: 'or', value: '(status.equals.open,total.gt.5)' },
        want: or(cmp('status', 'equals', 'open'), cmp('total', 'gt', 5)),
      },
    ],
    [
      'and with a nested or',
      {
        given: { param: 'and', value: '(status.equals.open,or(total.gt.5,note.is_empty.true))' },
        want: and(cmp('status', 'equals', 'open'), or(cmp('total', 'gt', 5), cmp('note', 'is_empty', true))),
      },
    ],
    [
      'not of one condition',
      {
        given: { param: 'not', value: '(status.equals.open)' },
        want: { kind: 'not', item: cmp('status', 'equals', 'open') },
      },
    ],
    [
      'not of several: not(and)',
      {
        given: { param: 'not', value: '(status.equals.open,id.equals.1)' },
        want: { kind: 'not', item: and(cmp('status', 'equals', 'open'), cmp('id', 'equals', 1)) },
      },
    ],
    [
      'a group with a relation path and a list',
      {
        given: { param: 'or', value: '(customer.name.equals.x,status.in.(open,paid))' },
        want: or(cmp('customer.name', 'equals', 'x'), cmp('status', 'in', ['open', 'paid'])),
      },
    ],
    [
      'a quoted value with a comma inside a group',
      {
        given: { param: 'or', value: '(note.equals."a,b",id.equals.1)' },
        want: or(cmp('note', 'equals', 'a,b'), cmp('id', 'equals', 1)),
      },
    ],
    [
      'in a group a list needs parentheses',
      { given: { param: 'or', value: '(status.in.open)' }, want: /in takes a list/ },
    ],
    [
      'an unreadable field inside a group',
      {
        given: { roles: ['customer'], param: 'or', value: '(total.gt.1,note.equals.x)' },
        want: /^Order has no field "note"$/,
      },
    ],
    ['an empty group', { given: { param: 'or', value: '()' }, want: /needs at least one condition/ }],
    ['a group without parentheses', { given: { param: 'or', value: 'status.equals.open' }, want: /write or=\(/ }],
    [
      'unbalanced parentheses',
      { given: { param: 'or', value: '((status.equals.open)' }, want: /unbalanced parentheses/ },
    ],
    ['an unclosed quote', { given: { param: 'or', value: '(note.equals."a)' }, want: /not closed/ }],
    [
      `groups ${MAX_GROUP_DEPTH} deep`,
      { given: { param: 'or', value: nested(MAX_GROUP_DEPTH) }, want: expect.objectContaining({ kind: 'or' }) },
    ],
    [
      `groups ${MAX_GROUP_DEPTH} deep with a list innermost`,
      {
        given: { param: 'or', value: nested(MAX_GROUP_DEPTH, 'status.in.(open,paid)') },
        want: expect.objectContaining({ kind: 'or' }),
      },
    ],
    [
      `groups ${MAX_GROUP_DEPTH + 1} deep`,
      {
        given: { param: 'or', value: nested(MAX_GROUP_DEPTH + 1) },
        want: new RegExp(`nest at most ${MAX_GROUP_DEPTH} levels`),
      },
    ],
    [
      'groups thousands deep are refused before parsing',
      { given: { param: 'not', value: nested(5000) }, want: /nest at most/ },
    ],
  ])('%s', (_name, { given, want }) => {
    const got = outcome(() =>
      parseFilterParam(context(given.roles ?? ['admin'], given.table ?? 'Order'), given.param, given.value),
    );
    expectOutcome(got, want);
    if (got instanceof QueryError) expect(got.parameter).toBe(given.param);
  });

  it(`at most ${MAX_CONDITIONS} conditions per request, counted across parameters and inside groups`, () => {
    const ctx = context(['admin'], 'Order');
    const fifty = `(${Array.from({ length: 50 }, (_, i) => `id.equals.${i}`).join(',')})`;
    parseFilterParam(ctx, 'or', fifty);
    parseFilterParam(ctx, 'and', fifty);
    expect(ctx.count).toBe(MAX_CONDITIONS);
    expectOutcome(
      outcome(() => parseFilterParam(ctx, 'status', 'equals.open')),
      /at most 100 conditions/,
    );
  });
});

const f = (name: string, alias = name): SelectItem => ({ kind: 'field', field: name, alias });
const e = (relation: string, items: SelectItem[], alias = relation): SelectItem => ({
  kind: 'embed',
  relation,
  alias,
  items,
});
const embeds = (n: number) => Array.from({ length: n }, (_, i) => `customer:c${i}(name)`).join(',');

describe('select', () => {
  it.each<[string, { given: { text: string; roles?: string[]; table?: string }; want: SelectItem[] | RegExp }]>([
    ['fields', { given: { text: 'id,total' }, want: [f('id'), f('total')] }],
    ['an alias', { given: { text: 'id,total:amount' }, want: [f('id'), f('total', 'amount')] }],
    ['spaces around items', { given: { text: ' id , total ' }, want: [f('id'), f('total')] }],
    [
      '* is every readable field, in model order',
      {
        given: { roles: ['customer'], text: '*' },
        want: ['id', 'status', 'total', 'customerId', 'createdAt', 'updatedAt'].map((n) => f(n)),
      },
    ],
    [
      '* after a field keeps it once',
      {
        given: { roles: ['customer'], text: 'total,*' },
        want: ['total', 'id', 'status', 'customerId', 'createdAt', 'updatedAt'].map((n) => f(n)),
      },
    ],
    [
      'an unreadable field is left out silently',
      { given: { roles: ['customer'], text: 'id,note,placedAt:p' }, want: [f('id')] },
    ],
    [
      'an unknown field is an error',
      { given: { roles: ['customer'], text: 'id,nope' }, want: /^Order has no field "nope"$/ },
    ],
    ['an embed', { given: { text: 'id,customer(name)' }, want: [f('id'), e('customer', [f('name')])] }],
    [
      'an aliased embed with * and a nested embed',
      {
        given: { text: 'customer:buyer(name,city(*))' },
        want: [
          e(
            'customer',
            [
              f('name'),
              e(
                'city',
                ['id', 'name', 'country', 'createdAt', 'updatedAt'].map((n) => f(n)),
              ),
            ],
            'buyer',
          ),
        ],
      },
    ],
    [
      'an embed the caller cannot follow',
      { given: { roles: ['customer'], text: 'customer(name)' }, want: /^Order has no relation "customer"$/ },
    ],
    [
      'an unreadable field inside an embed is left out',
      { given: { roles: ['crm'], text: 'customer(name,vip)' }, want: [e('customer', [f('name')])] },
    ],
    [
      'a relation named as a field: a hint',
      { given: { text: 'customer' }, want: /^Order has no field "customer"; embed it as customer\(\.\.\.\)$/ },
    ],
    [
      '... but no hint for a relation the caller cannot follow',
      { given: { roles: ['customer'], text: 'customer' }, want: /^Order has no field "customer"$/ },
    ],
    ['a field named as an embed', { given: { text: 'note(x)' }, want: /^Order has no relation "note"$/ }],
    [
      'embeds 3 deep',
      {
        given: { text: 'items(order(items(quantity)))' },
        want: [e('items', [e('order', [e('items', [f('quantity')])])])],
      },
    ],
    ['embeds 4 deep', { given: { text: 'items(order(items(order(id))))' }, want: /nest at most 3 levels/ }],
    [
      `${MAX_EMBEDS} embeds`,
      { given: { text: embeds(MAX_EMBEDS) }, want: expect.arrayContaining([e('customer', [f('name')], 'c9')]) },
    ],
    [`${MAX_EMBEDS + 1} embeds`, { given: { text: embeds(MAX_EMBEDS + 1) }, want: /at most 10 embedded relations/ }],
    ['an alias twice', { given: { text: 'id,total:id' }, want: /"id" appears twice/ }],
    ['* takes no alias', { given: { text: '*:all' }, want: /\* takes no alias/ }],
    ['an alias that is no name', { given: { text: 'id:1x' }, want: /"1x" is not a valid alias/ }],
    ['an alias longer than 63', { given: { text: `id:${'a'.repeat(64)}` }, want: /is not a valid alias/ }],
    ['two colons', { given: { text: 'id:a:b' }, want: /must be <field> or <field>:<alias>/ }],
    ['a name that is no field name', { given: { text: 'id,"x"' }, want: /is not a field name/ }],
    ['empty', { given: { text: '' }, want: /needs at least one field/ }],
    ['an empty embed', { given: { text: 'customer()' }, want: /needs at least one field/ }],
    ['unbalanced', { given: { text: 'customer(name' }, want: /unbalanced parentheses/ }],
    ['text after an embed', { given: { text: 'customer(name)x' }, want: /must end with "\)"/ }],
  ])('%s', (_name, { given, want }) => {
    const access = policy.access(user(given.roles ?? ['admin']));
    expectOutcome(
      outcome(() => resolveSelect(catalog, table(given.table ?? 'Order'), parseSelectText(given.text), access)),
      want,
    );
  });

  it('parseSelectText gives the nodes before any model check', () => {
    expect(parseSelectText('a,b:c,d(e,f:g(*))')).toEqual([
      { field: 'a' },
      { field: 'b', alias: 'c' },
      { field: 'd', children: [{ field: 'e' }, { field: 'f', alias: 'g', children: [{ field: '*' }] }] },
    ]);
  });
});

describe('embed arguments: relation(fields;filter;sort=;limit=;offset=)', () => {
  const where = (relation: string, items: SelectItem[], args: Record<string, unknown>): SelectItem =>
    ({ ...(e(relation, items) as SelectItem & object), ...args }) as SelectItem;
  it.each<[string, { given: { text: string; roles?: string[]; table?: string }; want: SelectItem[] | RegExp }]>([
    [
      'a filter',
      {
        given: { text: 'orders(id;status=equals.open)' },
        want: [where('orders', [f('id')], { where: cmp('status', 'equals', 'open') })],
      },
    ],
    [
      'filters are ANDed, groups and lists as in a query string',
      {
        given: { text: 'orders(id;status=in.(open,paid);or=(total.gt.5,note.is_empty.true))' },
        want: [
          where('orders', [f('id')], {
            where: and(cmp('status', 'in', ['open', 'paid']), or(cmp('total', 'gt', 5), cmp('note', 'is_empty', true))),
          }),
        ],
      },
    ],
    [
      'a relation filter from the embedded table',
      {
        given: { text: 'orders(id;items.quantity=gt.3)' },
        want: [where('orders', [f('id')], { where: cmp('items.quantity', 'gt', 3) })],
      },
    ],
    [
      'col. names a field like a reserved word',
      {
        given: { text: 'orders(id;col.status=equals.open)' },
        want: [where('orders', [f('id')], { where: cmp('status', 'equals', 'open') })],
      },
    ],
    [
      'a quoted value may hold ; ) and ,',
      {
        given: { text: 'orders(id;note=equals."a;b),c")' },
        want: [where('orders', [f('id')], { where: cmp('note', 'equals', 'a;b),c') })],
      },
    ],
    [
      'sort, limit and offset',
      {
        given: { text: 'orders(id,total;sort=-total,id;limit=5;offset=10)' },
        want: [
          where('orders', [f('id'), f('total')], {
            orderBy: [
              { field: 'total', direction: 'desc' },
              { field: 'id', direction: 'asc' },
            ],
            limit: 5,
            offset: 10,
          }),
        ],
      },
    ],
    [
      'first and skip are limit and offset',
      {
        given: { text: 'orders(id;first=1000;skip=0)' },
        want: [where('orders', [f('id')], { limit: 1000, offset: 0 })],
      },
    ],
    [
      'nested embeds with arguments at each level',
      {
        given: { table: 'City', text: 'customers(name,orders(id;limit=2);name=starts_with.A)' },
        want: [
          where('customers', [f('name'), where('orders', [f('id')], { limit: 2 })], {
            where: cmp('name', 'starts_with', 'A'),
          }),
        ],
      },
    ],
    [
      'parentheses of arguments are not embeds (3 levels with lists at each)',
      {
        given: {
          table: 'City',
          text: 'customers(orders(items(quantity;quantity=in.(1,2));status=in.(open,paid));or=(name.equals.a,name.equals.b))',
        },
        want: expect.arrayContaining([expect.objectContaining({ relation: 'customers' })]),
      },
    ],
    [
      '... but embeds still nest at most 3 levels',
      { given: { table: 'City', text: 'customers(orders(items(order(id));limit=1))' }, want: /nest at most 3 levels/ },
    ],
    [
      'a to-one embed takes none',
      {
        given: { table: 'Order', text: 'customer(name;limit=1)' },
        want: /^Order\.customer is a to-one relation: filter, order and limit apply to to-many embeds$/,
      },
    ],
    [
      'a filter on a field the caller cannot read',
      {
        given: { roles: ['reader'], table: 'Customer', text: 'orders(id;total=gt.1)' },
        want: /^in orders\(\.\.\.\), total: Order has no field "total"$/,
      },
    ],
    [
      '... inside a group',
      {
        given: { roles: ['reader'], table: 'Customer', text: 'orders(id;or=(status.equals.open,total.gt.1))' },
        want: /^in orders\(\.\.\.\), or: Order has no field "total"$/,
      },
    ],
    [
      'a sort on a field the caller cannot read',
      {
        given: { roles: ['reader'], table: 'Customer', text: 'orders(id;sort=-total)' },
        want: /^in orders\(\.\.\.\), sort: Order has no field "total" to sort by$/,
      },
    ],
    [
      'a relation filter the caller cannot follow',
      {
        given: { roles: ['reader'], table: 'Customer', text: 'orders(id;items.quantity=gt.1)' },
        want: /^in orders\(\.\.\.\), items\.quantity: Order has no field "items"$/,
      },
    ],
    [
      'an unknown operator',
      { given: { text: 'orders(id;status=is.open)' }, want: /^in orders\(\.\.\.\), status: unknown operator "is"$/ },
    ],
    ['limit 0', { given: { text: 'orders(id;limit=0)' }, want: /^in orders\(\.\.\.\), limit: must be at least 1$/ }],
    [
      'limit 1001',
      { given: { text: 'orders(id;limit=1001)' }, want: /^in orders\(\.\.\.\), limit: must be at most 1000$/ },
    ],
    [
      'limit not a number',
      {
        given: { text: 'orders(id;limit=-1)' },
        want: /^in orders\(\.\.\.\), limit: must be a whole number from 1 to 1000$/,
      },
    ],
    [
      'offset too far',
      {
        given: { text: 'orders(id;offset=100000001)' },
        want: /^in orders\(\.\.\.\), offset: must be at most 100000000$/,
      },
    ],
    [
      'limit and first',
      { given: { text: 'orders(id;limit=1;first=2)' }, want: /^in orders\(\.\.\.\), first: send limit or first once$/ },
    ],
    [
      'sort twice',
      { given: { text: 'orders(id;sort=id;sort=total)' }, want: /^in orders\(\.\.\.\), sort: send sort once$/ },
    ],
    [
      'after has no meaning in an embed',
      {
        given: { text: 'orders(id;after=abc)' },
        want: /^in orders\(\.\.\.\), after: not available in an embed \(a field named after is filtered as col\.after\)$/,
      },
    ],
    [
      'a term without =',
      {
        given: { text: 'orders(id;limit)' },
        want: /^in orders\(\.\.\.\), write <filter>=<operator>\.<value>, sort=, limit= or offset= after ";", not "limit"$/,
      },
    ],
    [
      'arguments outside an embed',
      {
        given: { text: 'id;limit=5' },
        want: /^"id;limit=5": filters, sort and limit go inside an embed's parentheses, after its fields: relation\(a,b;limit=5\)$/,
      },
    ],
    [
      'an embed with arguments and no fields',
      { given: { text: 'orders(;limit=1)' }, want: /needs at least one field/ },
    ],
    [
      'the embed is named by its path of aliases',
      {
        given: { table: 'City', text: 'customers:c(orders(id;limit=x))' },
        want: /^in c\.orders\(\.\.\.\), limit: must be a whole number/,
      },
    ],
  ])('%s', (_name, { given, want }) => {
    const access = policy.access(user(given.roles ?? ['admin']));
    const got = outcome(() =>
      resolveSelect(catalog, table(given.table ?? 'Customer'), parseSelectText(given.text), access),
    );
    expectOutcome(got, want);
    if (got instanceof QueryError) expect(got.parameter).toBe('select');
  });

  it('parseSelectText keeps the terms after ";" in order', () => {
    expect(parseSelectText('orders(id;limit=5;status=equals.a=b)')).toEqual([
      {
        field: 'orders',
        children: [{ field: 'id' }],
        arguments: [
          ['limit', '5'],
          ['status', 'equals.a=b'],
        ],
      },
    ]);
  });

  it(`an embed's filters count toward the ${MAX_CONDITIONS} conditions of the request`, () => {
    const ctx = context(['admin'], 'Customer');
    const fifty = (field: string) => `(${Array.from({ length: 50 }, (_, i) => `${field}.equals.${i}`).join(',')})`;
    parseFilterParam(ctx, 'or', fifty('name'));
    const run = (text: string) =>
      outcome(() =>
        resolveSelect(catalog, ctx.table, parseSelectText(text), ctx.access, 'select', { conditions: ctx }),
      );
    expectOutcome(run(`orders(id;or=${fifty('id')})`), expect.any(Array));
    expect(ctx.count).toBe(MAX_CONDITIONS);
    expectOutcome(run('orders(id;status=equals.open)'), /at most 100 conditions/);
  });
});
