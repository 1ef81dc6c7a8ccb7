// Role permissions (runtime/query/policy.ts) and what a caller may name (access.ts), without a
// database: docs/permissions.md "Roles in `svcgen.config.json`", "Reading", "Several roles". One row per case.
import { describe, expect, it } from 'vitest';
import type { Principal } from '../../runtime/principal/index.ts';
import {
  canFollow,
  canReadField,
  followable,
  type Action,
  type Condition,
  type Grant,
  type RoleRule,
} from '../../runtime/query/index.ts';
import { presetsOf, writeDecision } from '../../runtime/query/policy.ts';
import {
  apiKey,
  catalog,
  cmp,
  FALSE,
  management,
  policyOf,
  roles,
  SHOP_ROLES,
  table,
  TRUE,
  user,
  USER_EMAIL,
  USER_ID,
} from '../support/query-unit.ts';

const ROLES = {
  ...SHOP_ROLES,
  ...roles({
    support: { tables: { Order: { read: { fields: ['id', 'status', 'customerId'] } } } },
    owner: {
      tables: {
        Order: {
          read: { filter: { customerId: '$user.id' } },
          create: { filter: { customerId: { equals: '$user.id' } } },
        },
      },
    },
    mailer: { tables: { Customer: { read: { filter: { email: '$user.email' }, fields: ['id', 'email', 'name'] } } } },
    tenant: {
      tables: {
        Customer: { read: { filter: { cityId: '$context.city' } }, create: { filter: { cityId: '$context.city' } } },
      },
    },
    ops: { tables: { Order: { read: { filter: { status: { in: ['open', 'paid'] }, total: { gte: 10 } } } } } },
    openOnly: { tables: { Order: { read: { filter: { status: 'open' }, fields: ['id', 'status'] } } } },
    noNote: { tables: { Order: { read: { filter: { note: null } } } } },
    itemsOwner: {
      tables: {
        OrderItem: {
          read: { filter: { 'order.customerId': '$user.id' } },
          create: { filter: { 'order.customerId': '$user.id' } },
        },
      },
    },
    intKey: { tables: { Order: { read: { filter: { id: '$user.id' } } } } },
    dateHelper: { tables: { Order: { read: { filter: { createdAt: { today: true } } } } } },
    caseless: { tables: { Customer: { read: { filter: { email: { iends_with: '@EXAMPLE.com' } } } } } },
    emptyOperator: { tables: { Order: { read: { filter: { customerId: {} } } } } },
    unknownOperator: { tables: { Order: { read: { filter: { customerId: { is: '$user.id' } } } } } },
    denier: { tables: { Order: { create: true }, '*': { read: true } } },
    noteById: { tables: { Order: { create: { filter: { customerId: '$user.id', note: '$user.id' } } } } },
    noteByEmail: { tables: { Order: { create: { filter: { customerId: '$user.id', note: '$user.email' } } } } },
    titles: { tables: { Product: { update: { fields: ['title'] } } } },
    prices: { tables: { Product: { update: { filter: { sku: { starts_with: 'P-' } }, fields: ['title', 'price'] } } } },
    // Link fields for canFollow: Order.items joins Order.id = OrderItem.orderId.
    itemReader: { tables: { Order: { read: { fields: ['id', 'total'] } }, OrderItem: { read: true } } },
    noOrderKey: { tables: { Order: { read: { fields: ['total'] } }, OrderItem: { read: true } } },
    noItemLink: { tables: { Order: { read: true }, OrderItem: { read: { fields: ['quantity', 'productId'] } } } },
  }),
};
const policy = policyOf(ROLES);
const ORDER_FIELDS = ['id', 'total', 'status', 'customerId', 'createdAt', 'updatedAt'];
const mine = cmp('customerId', 'equals', USER_ID);
const opsRows: Condition = { kind: 'and', items: [cmp('status', 'in', ['open', 'paid']), cmp('total', 'gte', 10)] };

interface GrantCase {
  given: { who: Principal; table: string; action: Action };
  /** null: denied. Otherwise the parts to compare (fieldRows as an object; fields sorted). */
  want: null | {
    rows?: Condition;
    fields?: string[] | null;
    fieldRows?: Record<string, Condition>;
    presets?: Record<string, unknown>[];
  };
}

const grantCases: [string, GrantCase][] = [
  [
    'one role: its filter and its fields',
    {
      given: { who: user(['customer']), table: 'Order', action: 'read' },
      want: { rows: mine, fields: ORDER_FIELDS, fieldRows: {} },
    },
  ],
  [
    'true: every row and every field',
    {
      given: { who: user(['customer']), table: 'City', action: 'read' },
      want: { rows: TRUE, fields: null, fieldRows: {} },
    },
  ],
  [
    '`*` stands for a table the role does not name',
    { given: { who: user(['admin']), table: 'Customer', action: 'delete' }, want: { rows: TRUE, fields: null } },
  ],
  [
    '`*` is not consulted for a table the role names',
    { given: { who: user(['denier']), table: 'Order', action: 'read' }, want: null },
  ],
  [
    '... but applies to the others',
    { given: { who: user(['denier']), table: 'City', action: 'read' }, want: { rows: TRUE, fields: null } },
  ],
  ['action false → null', { given: { who: user(['customer']), table: 'Order', action: 'delete' }, want: null }],
  ['action absent → null', { given: { who: user(['customer']), table: 'City', action: 'create' }, want: null }],
  [
    'table not named, no `*` → null',
    { given: { who: user(['customer']), table: 'Customer', action: 'read' }, want: null },
  ],
  ['no roles → null', { given: { who: user([]), table: 'City', action: 'read' }, want: null }],
  [
    'an unknown role name grants nothing',
    { given: { who: user(['constructor', 'nobody']), table: 'City', action: 'read' }, want: null },
  ],
  [
    'several roles: rows OR-ed, fields united, fieldRows for fields only some list',
    {
      given: { who: user(['openOnly', 'customer']), table: 'Order', action: 'read' },
      want: {
        rows: { kind: 'or', items: [cmp('status', 'equals', 'open'), mine] },
        fields: ORDER_FIELDS,
        fieldRows: { total: mine, customerId: mine, createdAt: mine, updatedAt: mine },
      },
    },
  ],
  [
    'several roles: a field every allowing role lists gets no fieldRows',
    {
      given: { who: user(['support', 'customer']), table: 'Order', action: 'read' },
      want: { rows: TRUE, fields: ORDER_FIELDS, fieldRows: { total: mine, createdAt: mine, updatedAt: mine } },
    },
  ],
  [
    'several roles: no fieldRows where a listing role allows every row (TRUE)',
    {
      given: { who: user(['support', 'openOnly']), table: 'Order', action: 'read' },
      want: { rows: TRUE, fields: ['customerId', 'id', 'status'], fieldRows: {} },
    },
  ],
  [
    'several roles without field lists: no fieldRows',
    {
      given: { who: user(['ops', 'owner']), table: 'Order', action: 'read' },
      want: { rows: { kind: 'or', items: [opsRows, mine] }, fields: null, fieldRows: {} },
    },
  ],
  [
    'several roles, one without a list: the others fields get its rows',
    {
      given: { who: user(['openOnly', 'owner']), table: 'Order', action: 'read' },
      want: {
        rows: { kind: 'or', items: [cmp('status', 'equals', 'open'), mine] },
        fields: null,
        fieldRows: {
          total: mine,
          note: mine,
          placedAt: mine,
          customerId: mine,
          invoiceId: mine,
          receiptId: mine,
          createdAt: mine,
          updatedAt: mine,
        },
      },
    },
  ],
  [
    'several roles, one allowing every row: TRUE, and no fieldRows',
    {
      given: { who: user(['customer', 'admin']), table: 'Order', action: 'read' },
      want: { rows: TRUE, fields: null, fieldRows: {} },
    },
  ],
  [
    '$user.email resolved',
    {
      given: { who: user(['mailer']), table: 'Customer', action: 'read' },
      want: { rows: cmp('email', 'equals', USER_EMAIL), fields: ['email', 'id', 'name'] },
    },
  ],
  [
    '$context.k resolved and typed (Int)',
    {
      given: { who: apiKey(['tenant'], { city: '3' }), table: 'Customer', action: 'read' },
      want: { rows: cmp('cityId', 'equals', 3) },
    },
  ],
  [
    'operator objects ({in}, {gte})',
    { given: { who: user(['ops']), table: 'Order', action: 'read' }, want: { rows: opsRows, presets: [{}] } },
  ],
  [
    'a literal null',
    { given: { who: user(['noNote']), table: 'Order', action: 'read' }, want: { rows: cmp('note', 'equals', null) } },
  ],
  [
    'a relation path',
    {
      given: { who: user(['itemsOwner']), table: 'OrderItem', action: 'read' },
      want: { rows: cmp('order.customerId', 'equals', USER_ID), presets: [{}] },
    },
  ],
  // Fail closed: the filter matches nothing, and fills nothing in.
  [
    'missing variable: an API key against $user.id',
    { given: { who: apiKey(['customer']), table: 'Order', action: 'create' }, want: { rows: FALSE, presets: [{}] } },
  ],
  [
    'missing variable: a user against $context.k',
    { given: { who: user(['tenant']), table: 'Customer', action: 'create' }, want: { rows: FALSE, presets: [{}] } },
  ],
  [
    'missing variable: a context without the key',
    { given: { who: apiKey(['tenant'], { town: '3' }), table: 'Customer', action: 'read' }, want: { rows: FALSE } },
  ],
  [
    'untypable: $user.id into an Int field',
    { given: { who: user(['intKey']), table: 'Order', action: 'read' }, want: { rows: FALSE } },
  ],
  [
    'untypable: a $context text into an Int field',
    {
      given: { who: apiKey(['tenant'], { city: 'north' }), table: 'Customer', action: 'create' },
      want: { rows: FALSE, presets: [{}] },
    },
  ],
  [
    'a case-insensitive text operator is a role operator',
    {
      given: { who: user(['caseless']), table: 'Customer', action: 'read' },
      want: { rows: { kind: 'compare', path: ['email'], op: 'iends_with', value: '@EXAMPLE.com' } },
    },
  ],
  [
    'a date helper (moves with the clock) is no role operator',
    { given: { who: user(['dateHelper']), table: 'Order', action: 'read' }, want: { rows: FALSE } },
  ],
  [
    'an unknown operator name',
    { given: { who: user(['unknownOperator']), table: 'Order', action: 'read' }, want: { rows: FALSE } },
  ],
  // Found while writing these tests: an operator object naming no operator used to add no condition (every row).
  [
    'an operator object naming no operator matches nothing',
    { given: { who: user(['emptyOperator']), table: 'Order', action: 'read' }, want: { rows: FALSE } },
  ],
  // Presets: `$...` equalities on direct fields only.
  [
    'preset from a $user.id equality',
    {
      given: { who: user(['customer']), table: 'Order', action: 'create' },
      want: { rows: mine, fields: ['customerId', 'total'], presets: [{ customerId: USER_ID }] },
    },
  ],
  [
    'preset from { equals: $user.id }',
    { given: { who: user(['owner']), table: 'Order', action: 'create' }, want: { presets: [{ customerId: USER_ID }] } },
  ],
  [
    'no preset from a literal',
    {
      given: { who: user(['customer']), table: 'Order', action: 'update' },
      want: { presets: [{ customerId: USER_ID }] },
    },
  ],
  // Found while writing these tests: the preset used to be the untyped variable ('3'), which the create validator refuses (422).
  [
    'a $context preset is typed for its field',
    {
      given: { who: apiKey(['tenant'], { city: '3' }), table: 'Customer', action: 'create' },
      want: { presets: [{ cityId: 3 }] },
    },
  ],
];

function shape(grant: Grant) {
  return {
    rows: grant.rows,
    fields: grant.fields === null ? null : [...grant.fields].sort(),
    fieldRows: Object.fromEntries(grant.fieldRows),
    presets: grant.rules.map((r) => r.presets),
  };
}

describe('Policy.grant', () => {
  it.each(grantCases)('%s', (_name, { given, want }) => {
    const grant = policy.grant(given.who, given.table, given.action);
    if (want === null) return expect(grant).toBeNull();
    expect(grant).not.toBeNull();
    const got = shape(grant!);
    const expected = { ...want, ...(want.fields ? { fields: [...want.fields].sort() } : {}) };
    expect(Object.fromEntries(Object.keys(expected).map((k) => [k, got[k as keyof typeof got]]))).toEqual(expected);
  });

  it('the filterFields of each rule are the keys of its filter', () => {
    expect(policy.grant(user(['customer']), 'Order', 'update')!.rules.map((r) => r.filterFields)).toEqual([
      ['customerId', 'status'],
    ]);
    expect(policy.grant(user(['itemsOwner']), 'OrderItem', 'read')!.rules.map((r) => r.filterFields)).toEqual([
      ['order.customerId'],
    ]);
    expect(policy.grant(user(['admin']), 'Order', 'update')!.rules.map((r) => r.filterFields)).toEqual([[]]);
  });

  it('management principals get no grant at all', () => {
    for (const action of ['read', 'create', 'update', 'delete'] as const)
      expect(policy.grant(management, 'City', action)).toBeNull();
  });

  it('grants are built once per principal and action', () => {
    const carol = user(['customer']);
    const first = policy.grant(carol, 'Order', 'read');
    expect(policy.grant(carol, 'Order', 'read')).toBe(first);
    expect(policy.access(carol).grant('Order', 'read')).toBe(first);
    expect(policy.grant(carol, 'Order', 'update')).not.toBe(first);
    const dave = user(['customer'], '0b9a8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d');
    expect(policy.grant(dave, 'Order', 'read')!.rows).toEqual(
      cmp('customerId', 'equals', '0b9a8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d'),
    );
    expect(policy.grant(carol, 'Order', 'read')).toBe(first);
  });
});

const rule = (presets: Record<string, unknown>, fields: string[] | null = null): RoleRule => ({
  rows: TRUE,
  fields: fields && new Set(fields),
  presets,
  filterFields: Object.keys(presets),
});

describe('writeDecision and presetsOf', () => {
  // titles: update title of every product; prices: title and price of products whose sku starts with P-.
  const products = policy.grant(user(['titles', 'prices']), 'Product', 'update')!;
  const [titles, prices] = products.rules as [RoleRule, RoleRule];
  const everywhere: Condition = { kind: 'true' };
  it.each<
    [
      string,
      {
        given: string[];
        want: { rows: Condition; fieldRows: [string, Condition][]; rules: RoleRule[] };
      },
    ]
  >([
    [
      'a field both list: writable on every row either allows',
      { given: ['title'], want: { rows: everywhere, fieldRows: [], rules: [titles, prices] } },
    ],
    [
      'a field one lists: writable on its rows only',
      { given: ['price'], want: { rows: prices.rows, fieldRows: [['price', prices.rows]], rules: [prices] } },
    ],
    // CONTRACT §5: a row's writable fields are the union of the lists of the roles allowing it there.
    [
      'fields of different roles together: each on its own rows',
      {
        given: ['title', 'price'],
        want: { rows: prices.rows, fieldRows: [['price', prices.rows]], rules: [titles, prices] },
      },
    ],
    [
      'a field none lists: no row',
      { given: ['sku'], want: { rows: { kind: 'false' }, fieldRows: [['sku', { kind: 'false' }]], rules: [] } },
    ],
    [
      'no fields: every row some rule allows',
      { given: [], want: { rows: everywhere, fieldRows: [], rules: [titles, prices] } },
    ],
  ])('writeDecision: %s', (_name, { given, want }) => {
    const decision = writeDecision(products, given);
    expect(decision.rows).toEqual(want.rows);
    expect(decision.anyRows).toEqual(everywhere);
    expect([...decision.fieldRows]).toEqual(want.fieldRows);
    expect(decision.rules).toEqual(want.rules);
  });

  it('writeDecision: field lists decided alike share a key, others do not', () => {
    const key = (fields: string[]) => writeDecision(products, fields).key;
    expect(key(['price', 'title'])).toBe(key(['title', 'price']));
    expect(key(['price'])).not.toBe(key(['title']));
    expect(key([])).not.toBe(key(['title']));
  });

  it.each<[string, { given: RoleRule[]; want: Record<string, unknown> }]>([
    ['one rule', { given: [rule({ a: 1 })], want: { a: 1 } }],
    ['agreeing rules', { given: [rule({ a: 1 }), rule({ a: 1, b: 2 })], want: { a: 1, b: 2 } }],
    ['conflicting presets are dropped', { given: [rule({ a: 1, b: 2 }), rule({ a: 3 })], want: { b: 2 } }],
    ['dropped even when a third agrees again', { given: [rule({ a: 1 }), rule({ a: 3 }), rule({ a: 1 })], want: {} }],
    ['no rules', { given: [], want: {} }],
  ])('presetsOf: %s', (_name, { given, want }) => {
    expect(presetsOf(given)).toEqual(want);
  });

  it('two roles presetting one field differently: neither applies', () => {
    const grant = policy.grant(user(['noteById', 'noteByEmail']), 'Order', 'create')!;
    expect(grant.rules.map((r) => r.presets)).toEqual([
      { customerId: USER_ID, note: USER_ID },
      { customerId: USER_ID, note: USER_EMAIL },
    ]);
    expect(presetsOf(grant.rules)).toEqual({ customerId: USER_ID });
  });

  it('a $context preset passes the create validator of its table', () => {
    const grant = policy.grant(apiKey(['tenant'], { city: '3' }), 'Customer', 'create')!;
    const body = { ...presetsOf(grant.rules), email: 'a@example.com', name: 'A' };
    expect(table('Customer').module.validators.create.safeParse(body).success).toBe(true);
  });
});

describe('access: canReadField, canFollow, followable', () => {
  const access = (...names: string[]) => policy.access(user(names));
  it.each<[string, { given: { roles: string[]; table: string; field: string }; want: boolean }]>([
    ['a listed field', { given: { roles: ['customer'], table: 'Order', field: 'total' }, want: true }],
    ['a field the role does not list', { given: { roles: ['customer'], table: 'Order', field: 'note' }, want: false }],
    [
      'a table the caller cannot read',
      { given: { roles: ['customer'], table: 'Customer', field: 'name' }, want: false },
    ],
    ['read: true lists every field', { given: { roles: ['customer'], table: 'City', field: 'country' }, want: true }],
    ['a field the table does not have', { given: { roles: ['admin'], table: 'Order', field: 'nope' }, want: false }],
    ['a relation is not a field', { given: { roles: ['admin'], table: 'Order', field: 'customer' }, want: false }],
    [
      'several roles: the union',
      { given: { roles: ['openOnly', 'support'], table: 'Order', field: 'customerId' }, want: true },
    ],
    [
      'several roles: still not an unlisted field',
      { given: { roles: ['openOnly', 'support'], table: 'Order', field: 'total' }, want: false },
    ],
    [
      'a role whose filter fails closed still lists its fields',
      { given: { roles: ['intKey'], table: 'Order', field: 'note' }, want: true },
    ],
  ])('canReadField: %s', (_name, { given, want }) => {
    expect(canReadField(access(...given.roles), table(given.table), given.field)).toBe(want);
  });

  it.each<[string, { given: { roles: string[]; table: string; relation: string }; want: boolean }]>([
    ['target and links readable', { given: { roles: ['admin'], table: 'Order', relation: 'customer' }, want: true }],
    ['target not readable', { given: { roles: ['customer'], table: 'Order', relation: 'customer' }, want: false }],
    [
      'to-many, target not readable',
      { given: { roles: ['customer'], table: 'Product', relation: 'items' }, want: false },
    ],
    [
      'key and foreign key readable',
      { given: { roles: ['itemReader'], table: 'Order', relation: 'items' }, want: true },
    ],
    ['... and the other way', { given: { roles: ['itemReader'], table: 'OrderItem', relation: 'order' }, want: true }],
    [
      'the source key not readable',
      { given: { roles: ['noOrderKey'], table: 'Order', relation: 'items' }, want: false },
    ],
    [
      'the target key not readable',
      { given: { roles: ['noOrderKey'], table: 'OrderItem', relation: 'order' }, want: false },
    ],
    [
      'the foreign key not readable (to-many)',
      { given: { roles: ['noItemLink'], table: 'Order', relation: 'items' }, want: false },
    ],
    [
      'the foreign key not readable (to-one)',
      { given: { roles: ['noItemLink'], table: 'OrderItem', relation: 'order' }, want: false },
    ],
    [
      'the other side of the pair readable, target not',
      { given: { roles: ['itemReader'], table: 'OrderItem', relation: 'product' }, want: false },
    ],
    [
      'two roles together cover the links',
      { given: { roles: ['noOrderKey', 'noItemLink'], table: 'Order', relation: 'items' }, want: true },
    ],
  ])('canFollow: %s', (_name, { given, want }) => {
    const t = table(given.table);
    expect(canFollow(access(...given.roles), catalog, t, t.relations.get(given.relation)!)).toBe(want);
    expect(followable(access(...given.roles), catalog, t, given.relation)).toBe(
      want ? t.relations.get(given.relation) : undefined,
    );
  });

  it('followable: a name that is no relation', () => {
    expect(followable(access('admin'), catalog, table('Order'), 'total')).toBeUndefined();
    expect(followable(access('admin'), catalog, table('Order'), 'nope')).toBeUndefined();
  });
});
