// The operator table (runtime/model/operators.ts) and its SQL and in-memory halves
// (runtime/query/operator-implementations.ts): an operator missing from either is a type error,
// checked by `tsc --noEmit` (an unused @ts-expect-error fails it), and what the rest of the code
// derives from the table holds.
import { describe, expect, it } from 'vitest';
import {
  CLOCK_OPERATORS,
  fieldOperators,
  OPERATOR_DEFINITIONS,
  OPERATORS,
  operatorMismatch,
  type Operator,
  type OperatorDefinition,
} from '../../runtime/model/index.ts';
import {
  foldAscii,
  OPERATOR_IMPLEMENTATIONS,
  type OperatorImplementation,
} from '../../runtime/query/operator-implementations.ts';
import { table } from '../support/query-unit.ts';

describe('the operator table', () => {
  it('a new operator without an entry does not compile; neither does a table missing one', () => {
    const { icontains: _definition, ...definitions } = OPERATOR_DEFINITIONS;
    const { icontains: _implementation, ...implementations } = OPERATOR_IMPLEMENTATIONS;
    // @ts-expect-error icontains has no definition
    const missingDefinition: Record<Operator, OperatorDefinition> = definitions;
    // @ts-expect-error icontains has no SQL and in-memory halves
    const missingImplementation: Record<Operator, OperatorImplementation> = implementations;
    // @ts-expect-error an operator added to the type has no implementation
    const newOperator: Record<Operator | 'imatches', OperatorImplementation> = OPERATOR_IMPLEMENTATIONS;
    expect(Object.keys(missingDefinition)).not.toContain('icontains');
    expect(Object.keys(missingImplementation)).not.toContain('icontains');
    expect(Object.keys(newOperator)).not.toContain('imatches');
    expect(Object.keys(OPERATOR_IMPLEMENTATIONS)).toEqual([...OPERATORS]);
  });

  it('says what an index does for each operator (runtime/data/cost.ts reads it): equality pins, ranges bound, the rest scan', () => {
    const by = (use: string) => OPERATORS.filter((op) => OPERATOR_IMPLEMENTATIONS[op].index === use);
    expect(by('one')).toEqual(['equals']);
    expect(by('few')).toEqual(['in']);
    expect(by('range')).toEqual(['gt', 'gte', 'lt', 'lte', 'between']);
    expect(by('none')).toEqual(
      OPERATORS.filter((op) => !['equals', 'in', 'gt', 'gte', 'lt', 'lte', 'between'].includes(op)),
    );
  });

  it('role filters take every operator but the date helpers, which are the clock operators', () => {
    const forRoles = OPERATORS.filter((op) => OPERATOR_DEFINITIONS[op].inRoleFilters);
    expect(OPERATORS.filter((op) => !forRoles.includes(op))).toEqual([...CLOCK_OPERATORS]);
    expect([...CLOCK_OPERATORS]).toEqual([
      'today',
      'yesterday',
      'this_week',
      'this_month',
      'last_days',
      'last_weeks',
      'last_months',
    ]);
    for (const op of CLOCK_OPERATORS) expect(OPERATOR_IMPLEMENTATIONS[op].memory).toEqual({ refusal: 'clock' });
  });

  it.each<[string, { given: { table: string; field: string }; want: Operator[] }]>([
    [
      'text: the case-insensitive operators beside the case-sensitive ones',
      {
        given: { table: 'Customer', field: 'name' },
        want: [
          'equals',
          'not_equals',
          'gt',
          'gte',
          'lt',
          'lte',
          'contains',
          'starts_with',
          'ends_with',
          'iequals',
          'icontains',
          'istarts_with',
          'iends_with',
          'in',
          'not_in',
          'between',
          'is_empty',
          'is_not_empty',
        ],
      },
    ],
    [
      'a UUID: no text operators',
      {
        given: { table: 'Customer', field: 'id' },
        want: ['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'between', 'is_empty', 'is_not_empty'],
      },
    ],
    ['a list', { given: { table: 'Product', field: 'tags' }, want: ['contains', 'is_empty', 'is_not_empty'] }],
  ])('%s', (_name, { given, want }) => {
    expect(fieldOperators(table(given.table).fields.get(given.field)!)).toEqual(want);
  });

  it.each<[string, { given: { table: string; field: string; op: Operator }; want: string }]>([
    [
      'icontains on a number',
      {
        given: { table: 'Order', field: 'total', op: 'icontains' },
        want: 'icontains needs a text field; total is Float',
      },
    ],
    [
      'iequals on a UUID',
      {
        given: { table: 'Order', field: 'customerId', op: 'iequals' },
        want: 'iequals needs a text field; customerId is Uuid',
      },
    ],
    [
      'gt on a Boolean',
      {
        given: { table: 'Customer', field: 'vip', op: 'gt' },
        want: 'gt needs a number, date or text field; vip is Boolean',
      },
    ],
    [
      'today on text',
      {
        given: { table: 'Customer', field: 'name', op: 'today' },
        want: 'today needs a DateTime field; name is String',
      },
    ],
    [
      'a list',
      {
        given: { table: 'Product', field: 'tags', op: 'istarts_with' },
        want: 'list fields take contains, is_empty and is_not_empty',
      },
    ],
  ])('refuses %s with the message of the 400', (_name, { given, want }) => {
    expect(operatorMismatch(table(given.table).fields.get(given.field)!, given.op)).toBe(want);
  });

  it.each<[string, { given: string; want: string }]>([
    ['A-Z fold', { given: 'Alice MARTIN', want: 'alice martin' }],
    [
      'other letters stay as written (lower() under the "C" collation)',
      { given: 'ÉLODIE İ \u212a SS ß', want: 'Élodie İ \u212a ss ß' },
    ],
    ['LIKE characters are untouched', { given: '100% _A\\B', want: '100% _a\\b' }],
  ])('foldAscii: %s', (_name, { given, want }) => {
    expect(foldAscii(given)).toBe(want);
  });
});
