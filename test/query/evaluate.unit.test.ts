// The in-memory condition evaluator (runtime/query/evaluate.ts) against the SQL compiler's
// semantics (runtime/query/compile-condition.ts): each expectation is what the compiled WHERE
// clause answers for the same row, NULL counting as "not matched".
import { describe, expect, it } from 'vitest';
import {
  containmentsOf,
  HIDDEN,
  holds,
  MAX_CONTAINMENTS,
  unsupportedIn,
  type Condition,
} from '../../runtime/query/index.ts';
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

describe('containmentsOf (what real-time capture narrows to)', () => {
  it.each<[string, Condition, ReturnType<typeof containmentsOf>]>([
    ['equals on a text field', cmp('status', 'equals', 'open'), [{ status: 'open' }]],
    ['equals on a number', cmp('total', 'equals', -1), [{ total: -1 }]],
    ['in: one object a value', cmp('status', 'in', ['open', 'paid']), [{ status: 'open' }, { status: 'paid' }]],
    [
      'and: every combination',
      { kind: 'and', items: [cmp('status', 'in', ['open', 'paid']), cmp('customerId', 'equals', 'c1')] },
      [
        { status: 'open', customerId: 'c1' },
        { status: 'paid', customerId: 'c1' },
      ],
    ],
    [
      'and: a conjunct it cannot narrow is left out (still every record that can hold)',
      { kind: 'and', items: [cmp('customerId', 'equals', 'c1'), cmp('total', 'gt', 10)] },
      [{ customerId: 'c1' }],
    ],
    [
      'and: combinations that disagree on a field are dropped',
      { kind: 'and', items: [cmp('status', 'in', ['open', 'paid']), cmp('status', 'equals', 'paid')] },
      [{ status: 'paid' }],
    ],
    [
      'and that can never hold: none',
      { kind: 'and', items: [cmp('status', 'equals', 'open'), cmp('status', 'equals', 'paid')] },
      [],
    ],
    ['false: none', { kind: 'false' }, []],
    ['true: every record', { kind: 'true' }, undefined],
    ['not: every record', not(cmp('status', 'equals', 'open')), undefined],
    ['a range: every record', cmp('total', 'gt', 1), undefined],
    ['equals null: every record', cmp('note', 'equals', null), undefined],
    [
      'a DateTime (spelled differently by PostgreSQL): every record',
      cmp('placedAt', 'equals', row.placedAt),
      undefined,
    ],
    ['through a relation: every record', cmp('customer.name', 'equals', 'x'), undefined],
    [
      'or with a branch it cannot narrow: every record',
      { kind: 'or', items: [cmp('status', 'equals', 'open'), cmp('total', 'gt', 1)] },
      undefined,
    ],
    [
      'more than MAX_CONTAINMENTS values: every record',
      cmp(
        'customerId',
        'in',
        Array.from({ length: MAX_CONTAINMENTS + 1 }, (_, i) => `c${i}`),
      ),
      undefined,
    ],
  ])('%s', (_name, condition, expected) => {
    expect(containmentsOf(order, condition)).toEqual(expected);
  });

  it('never leaves out a record the condition holds for (random conditions and records)', () => {
    let seed = 20261126;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const values: Record<string, readonly unknown[]> = {
      status: ['open', 'paid', 'shipped'],
      customerId: ['c1', 'c2', 'c3'],
      total: [-1, 0, 12.5],
      note: [null, 'x'],
    };
    const leaf = (): Condition => {
      const field = pick(Object.keys(values));
      const op = pick(['equals', 'in', 'not_equals', 'gt'] as const);
      if (op === 'in')
        return cmp(
          field,
          op,
          [pick(values[field]!), pick(values[field]!)].filter((v) => v !== null),
        );
      if (op === 'gt' && typeof values[field]![0] !== 'number') return cmp(field, 'equals', pick(values[field]!));
      return cmp(field, op, pick(values[field]!));
    };
    const condition = (depth: number): Condition => {
      const kind = depth === 0 ? 'leaf' : pick(['leaf', 'and', 'or', 'not', 'and'] as const);
      if (kind === 'leaf') return leaf();
      if (kind === 'not') return not(condition(depth - 1));
      return { kind, items: Array.from({ length: 1 + Math.floor(random() * 3) }, () => condition(depth - 1)) };
    };
    let narrowed = 0;
    for (let i = 0; i < 3000; i++) {
      const c = condition(3);
      const found = containmentsOf(order, c);
      if (found) narrowed++;
      for (let j = 0; j < 10; j++) {
        const record = { ...row, ...Object.fromEntries(Object.entries(values).map(([f, v]) => [f, pick(v)])) };
        if (!holds(order, c, record) || !found) continue;
        const contained = found.some((o) =>
          Object.entries(o).every(([f, v]) => record[f as keyof typeof record] === v),
        );
        expect(
          contained,
          `${JSON.stringify(c)} holds for ${JSON.stringify(record)}, not in ${JSON.stringify(found)}`,
        ).toBe(true);
      }
    }
    // The property is not vacuous: many random conditions do narrow.
    expect(narrowed).toBeGreaterThan(300);
  });
});
