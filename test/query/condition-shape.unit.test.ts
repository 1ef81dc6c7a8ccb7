// A filter's shape and values (runtime/query/condition-shape.ts): the list statement compiled once
// per caller and shape (runtime/query/kept-statements.ts keptPage) must be, once its slots are filled with a
// request's values, the very statement that request would have compiled itself.
import { describe, expect, it } from 'vitest';
import { OPERATORS } from '../../runtime/model/index.ts';
import { Slot } from '../../runtime/query/condition-shape.ts';
import { OPERATOR_IMPLEMENTATIONS } from '../../runtime/query/operator-implementations.ts';
import {
  compileCondition,
  compileRead,
  conditionShape,
  slotPositions,
  type Condition,
  type Operator,
} from '../../runtime/query/index.ts';
import { cmp, policyOf, scopeOf, SHOP_ROLES, table, TRUE, user } from '../support/query-unit.ts';

const policy = policyOf(SHOP_ROLES);
const admin = () => scopeOf(policy.access(user(['admin'])));
const customer = () => scopeOf(policy.access(user(['customer'])));

describe("each operator's placement says what its SQL does with a value", () => {
  // One row per operator: the field it is tried on and two values of that field.
  const rows: [Operator, string, unknown, unknown][] = [
    ['equals', 'status', 'open', 'paid'],
    ['not_equals', 'note', 'a', 'b'],
    ['gt', 'total', 1, 2],
    ['gte', 'total', 1, 2],
    ['lt', 'total', 1, 2],
    ['lte', 'total', 1, 2],
    ['contains', 'note', 'gift', 'wrap'],
    ['starts_with', 'note', 'gift', 'wrap'],
    ['ends_with', 'note', 'gift', 'wrap'],
    // Folded to lower case: upper-case letters show the value is changed.
    ['iequals', 'note', 'Gift', 'WRAP'],
    ['icontains', 'note', 'Gift', 'WRAP'],
    ['istarts_with', 'note', 'Gift', 'WRAP'],
    ['iends_with', 'note', 'Gift', 'WRAP'],
    ['in', 'status', ['open', 'paid'], ['shipped']],
    ['not_in', 'status', ['open', 'paid'], ['shipped']],
    ['between', 'total', [1, 2], [3, 4]],
    ['is_empty', 'note', true, false],
    ['is_not_empty', 'note', true, false],
    ['today', 'placedAt', true, true],
    ['yesterday', 'placedAt', true, true],
    ['this_week', 'placedAt', true, true],
    ['this_month', 'placedAt', true, true],
    ['last_days', 'placedAt', 3, 7],
    ['last_weeks', 'placedAt', 3, 7],
    ['last_months', 'placedAt', 3, 7],
  ];

  it('lists every operator', () => {
    expect(rows.map(([op]) => op).sort()).toEqual([...OPERATORS].sort());
  });

  it.each(rows)('%s', (op, field, value) => {
    const scope = admin();
    compileCondition(scope, table('Order'), 't0', cmp(field, op, value));
    const sent = scope.params.values;
    switch (OPERATOR_IMPLEMENTATIONS[op].placement) {
      case 'parameter':
        expect(sent).toEqual([value]);
        break;
      case 'pair':
        expect(sent).toEqual(value);
        break;
      case 'text':
        expect(sent).toEqual([]);
        break;
      case 'transformed':
        expect(sent).toHaveLength(1);
        expect(sent[0]).not.toEqual(value);
        break;
    }
  });
});

describe('conditionShape', () => {
  const and = (...items: Condition[]): Condition => ({ kind: 'and', items });
  const or = (...items: Condition[]): Condition => ({ kind: 'or', items });
  const not = (item: Condition): Condition => ({ kind: 'not', item });

  it.each<[string, { a: Condition; b: Condition; same: boolean }]>([
    [
      'other values of a parameter',
      { a: cmp('status', 'equals', 'open'), b: cmp('status', 'equals', 'paid'), same: true },
    ],
    ['other bounds of a pair', { a: cmp('total', 'between', [1, 2]), b: cmp('total', 'between', [5, 9]), same: true }],
    ['another in-list', { a: cmp('status', 'in', ['open']), b: cmp('status', 'in', ['open', 'paid']), same: true }],
    ['a null (IS NULL) and a value', { a: cmp('note', 'equals', null), b: cmp('note', 'equals', 'x'), same: false }],
    [
      'is_empty.true and is_empty.false',
      { a: cmp('note', 'is_empty', true), b: cmp('note', 'is_empty', false), same: false },
    ],
    ['another field', { a: cmp('total', 'gt', 1), b: cmp('id', 'gt', 1), same: false }],
    ['another operator', { a: cmp('total', 'gt', 1), b: cmp('total', 'gte', 1), same: false }],
    [
      'a relation path and a field',
      { a: cmp('customer.name', 'equals', 'x'), b: cmp('note', 'equals', 'x'), same: false },
    ],
    [
      'groups with other values',
      {
        a: and(cmp('status', 'equals', 'open'), or(cmp('total', 'gt', 1), not(cmp('customer.vip', 'equals', true)))),
        b: and(cmp('status', 'equals', 'paid'), or(cmp('total', 'gt', 7), not(cmp('customer.vip', 'equals', false)))),
        same: true,
      },
    ],
    [
      'and and or of the same terms',
      {
        a: and(cmp('total', 'gt', 1), cmp('id', 'gt', 1)),
        b: or(cmp('total', 'gt', 1), cmp('id', 'gt', 1)),
        same: false,
      },
    ],
  ])('%s', (_, { a, b, same }) => {
    const x = conditionShape(a)!;
    const y = conditionShape(b)!;
    if (same) expect(x.key).toBe(y.key);
    else expect(x.key).not.toBe(y.key);
  });

  it('takes the values out in order, leaving slots', () => {
    const shape = conditionShape(
      and(cmp('status', 'equals', 'open'), cmp('total', 'between', [1, 2]), cmp('note', 'equals', null)),
    )!;
    expect(shape.values).toEqual(['open', 1, 2]);
    expect(shape.template).toEqual(
      and(
        cmp('status', 'equals', new Slot(0)),
        cmp('total', 'between', [new Slot(1), new Slot(2)]),
        cmp('note', 'equals', null),
      ),
    );
  });

  it('has no shape for a value the statement holds transformed (a LIKE pattern)', () => {
    expect(conditionShape(and(cmp('status', 'equals', 'open'), cmp('note', 'contains', 'gift')))).toBeUndefined();
  });
});

describe('a statement compiled from the shape, its slots filled, is the one compiled from the filter', () => {
  const list = (where: Condition, count = false) =>
    [
      {
        table: 'Order',
        select: null,
        where,
        orderBy: [{ field: 'total', direction: 'desc' as const }],
        limit: 21,
        offset: 40,
      },
      { count },
    ] as const;
  it.each<[string, { scope: typeof admin; where: Condition; count?: boolean }]>([
    ['no filter', { scope: admin, where: TRUE }],
    ['an equality', { scope: admin, where: cmp('status', 'equals', 'open') }],
    [
      'the row permission of the caller (customer) with its parameters, a null and a total count',
      {
        scope: customer,
        where: {
          kind: 'and',
          items: [
            cmp('status', 'in', ['open', 'paid']),
            cmp('total', 'between', [3, 90]),
            cmp('customerId', 'equals', null),
          ],
        },
        count: true,
      },
    ],
    [
      'a relation path and groups',
      {
        scope: admin,
        where: {
          kind: 'or',
          items: [cmp('customer.city.name', 'equals', 'Paris'), { kind: 'not', item: cmp('placedAt', 'last_days', 3) }],
        },
      },
    ],
  ])('%s', (_, { scope, where, count = false }) => {
    const shape = conditionShape(where)!;
    const fresh = scope();
    const want = compileRead(fresh, ...list(where, count));
    const kept = scope();
    const got = compileRead(kept, ...list(shape.template, count));
    const values = kept.params.values.slice();
    for (const [at, slot] of slotPositions(values)) values[at] = shape.values[slot];
    expect(got).toEqual(want);
    expect(values).toEqual(fresh.params.values);
  });
});
