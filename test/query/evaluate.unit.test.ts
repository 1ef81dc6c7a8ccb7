// The in-memory condition evaluator (runtime/query/evaluate.ts) against the SQL compiler's
// semantics (runtime/query/compile-condition.ts): each expectation is what the compiled WHERE
// clause answers for the same row, NULL counting as "not matched".
import { describe, expect, it } from 'vitest';
import { HIDDEN, holds, unsupportedIn, type Condition } from '../../runtime/query/index.ts';
import { cmp, table } from '../support/query-unit.ts';

const order = table('Order');
const row = { id: 7, status: 'open', total: 12.5, note: null, placedAt: '2026-01-02T03:04:05.000Z', customerId: 'c1' };
const not = (item: Condition): Condition => ({ kind: 'not', item });

describe('holds (SQL semantics in memory)', () => {
  it.each<[string, Condition, boolean]>([
    ['equals', cmp('status', 'equals', 'open'), true],
    ['equals another value', cmp('status', 'equals', 'paid'), false],
    ['equals null is IS NULL', cmp('note', 'equals', null), true],
    ['equals on a NULL field is unknown', cmp('note', 'equals', 'x'), false],
    ['NOT (equals on a NULL field) stays unknown', not(cmp('note', 'equals', 'x')), false],
    ['not_equals is IS DISTINCT FROM: true for NULL', cmp('note', 'not_equals', 'x'), true],
    ['not_equals null is IS NOT NULL', cmp('note', 'not_equals', null), false],
    ['gt on a number', cmp('total', 'gt', 12), true],
    ['lte on a number', cmp('total', 'lte', 12), false],
    ['between is inclusive', cmp('total', 'between', [12.5, 13]), true],
    ['gt on a DateTime compares instants', cmp('placedAt', 'gt', '2026-01-02T03:04:04.999Z'), true],
    ['equals on a DateTime compares instants', cmp('placedAt', 'equals', '2026-01-02T04:04:05+01:00'), true],
    ['in', cmp('status', 'in', ['paid', 'open']), true],
    ['not_in', cmp('status', 'not_in', ['paid', 'open']), false],
    ['not_in is true for NULL', cmp('note', 'not_in', ['x']), true],
    ['in on a NULL field is unknown', cmp('note', 'in', ['x']), false],
    ['contains is case-sensitive (LIKE)', cmp('customerId', 'contains', 'C'), false],
    ['starts_with', cmp('customerId', 'starts_with', 'c'), true],
    ['ends_with', cmp('customerId', 'ends_with', '1'), true],
    ['is_empty on NULL text', cmp('note', 'is_empty', true), true],
    ['is_not_empty', cmp('customerId', 'is_not_empty', true), true],
    ['is_empty false means not empty', cmp('note', 'is_empty', false), false],
  ])('%s', (_name, condition, expected) => {
    expect(holds(order, condition, row)).toBe(expected);
  });

  it('and/or with unknown: FALSE OR NULL is NULL, TRUE OR NULL is TRUE, NOT (x AND NULL) stays NULL', () => {
    const unknown = cmp('note', 'equals', 'x');
    expect(holds(order, { kind: 'or', items: [cmp('status', 'equals', 'paid'), unknown] }, row)).toBe(false);
    expect(holds(order, { kind: 'or', items: [cmp('status', 'equals', 'open'), unknown] }, row)).toBe(true);
    expect(holds(order, not({ kind: 'and', items: [cmp('status', 'equals', 'open'), unknown] }), row)).toBe(false);
    expect(holds(order, not({ kind: 'and', items: [cmp('status', 'equals', 'paid'), unknown] }), row)).toBe(true);
  });

  it('a hidden field compares as unknown, even with equals null (CASE WHEN visible ... END)', () => {
    const hidden = { ...row, note: HIDDEN };
    expect(holds(order, cmp('note', 'equals', null), hidden)).toBe(false);
    expect(holds(order, not(cmp('note', 'equals', null)), hidden)).toBe(false);
  });
});

describe('unsupportedIn', () => {
  it.each<[Condition, string]>([
    [cmp('customer.name', 'equals', 'x'), 'the condition on customer.name goes through a relation'],
    [cmp('placedAt', 'today', true), 'the operator today (on placedAt) depends on the clock'],
    [cmp('customerId', 'gt', 'a'), "gt on the text field customerId follows the database's collation"],
    [cmp('status', 'between', ['a', 'b']), "between on the text field status follows the database's collation"],
  ])('refuses %j', (condition, reason) => {
    expect(unsupportedIn(order, { kind: 'and', items: [cmp('id', 'equals', 1), condition] })).toBe(reason);
  });

  it('accepts what it evaluates', () => {
    expect(
      unsupportedIn(order, { kind: 'or', items: [cmp('total', 'gt', 1), not(cmp('note', 'contains', 'x'))] }),
    ).toBe(undefined);
  });
});
