/**
 * The query language's vocabulary, shared by the runtime that parses requests and the generator
 * that documents them (OpenAPI, generated/client.ts), so neither can drift from the other:
 * operators and the fields each applies to, the parameter names a filter cannot take, and the
 * aggregate functions' field rules.
 */
import { isTextField, type FieldSpec } from './index.ts';

export const OPERATORS = [
  'equals',
  'not_equals',
  'gt',
  'gte',
  'lt',
  'lte',
  'contains',
  'starts_with',
  'ends_with',
  'in',
  'not_in',
  'between',
  'is_empty',
  'is_not_empty',
  'today',
  'yesterday',
  'this_week',
  'this_month',
  'last_days',
  'last_weeks',
  'last_months',
] as const;

export type Operator = (typeof OPERATORS)[number];

/** The date helpers: operators whose meaning depends on the clock when the statement runs. */
export const CLOCK_OPERATORS: ReadonlySet<Operator> = new Set<Operator>([
  'today',
  'yesterday',
  'this_week',
  'this_month',
  'last_days',
  'last_weeks',
  'last_months',
]);

/** Filter groups (`or=(...)`): read as groups before any field of that name. */
export const FILTER_GROUPS = ['and', 'not', 'or'] as const;

/**
 * The query parameters each filtering operation keeps for itself; a field with one of these names
 * (or a group's) is filtered as `col.<name>` (docs/api.md §5.5 "Reserved names").
 */
export const RESERVED_PARAMETERS = {
  list: ['after', 'first', 'limit', 'offset', 'project_id', 'select', 'skip', 'sort'],
  aggregate: ['fn', 'groupBy', 'having', 'limit', 'project_id', 'sort'],
  updateMany: ['project_id'],
} as const satisfies Record<string, readonly string[]>;

export type FilteringOperation = keyof typeof RESERVED_PARAMETERS;

/** Most rows an aggregate answers (docs/api.md §5.9, §7). */
export const MAX_AGGREGATE_ROWS = 10_000;

const NUMERIC = new Set(['Int', 'BigInt', 'Float', 'Decimal']);
const ORDERED = new Set([...NUMERIC, 'DateTime', 'String']);

/** Why `op` cannot apply to `field`, or undefined when it can. */
export function operatorMismatch(field: FieldSpec, op: Operator): string | undefined {
  const type = field.type;
  if (type === 'Json' || type === 'Bytes') {
    return op === 'is_empty' || op === 'is_not_empty'
      ? undefined
      : `${type} fields only take is_empty and is_not_empty`;
  }
  if (field.list) {
    return ['contains', 'is_empty', 'is_not_empty'].includes(op)
      ? undefined
      : 'list fields take contains, is_empty and is_not_empty';
  }
  switch (op) {
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte':
    case 'between':
      return ORDERED.has(type) ? undefined : `${op} needs a number, date or text field; ${field.name} is ${type}`;
    case 'contains':
    case 'starts_with':
    case 'ends_with':
      return isTextField(field)
        ? undefined
        : `${op} needs a text field; ${field.name} is ${field.nativeType?.[0] ?? type}`;
    case 'today':
    case 'yesterday':
    case 'this_week':
    case 'this_month':
    case 'last_days':
    case 'last_weeks':
    case 'last_months':
      return type === 'DateTime' ? undefined : `${op} needs a DateTime field; ${field.name} is ${type}`;
    default:
      return undefined;
  }
}

/** The operators `field` takes, in OPERATORS' order. */
export function fieldOperators(field: FieldSpec): Operator[] {
  return OPERATORS.filter((op) => operatorMismatch(field, op) === undefined);
}

export type AggregateFunction = 'count' | 'count_distinct' | 'sum' | 'avg' | 'min' | 'max';

/** Why the aggregate function `fn` cannot use `field`, or undefined when it can. */
export function aggregateMismatch(field: FieldSpec, fn: Exclude<AggregateFunction, 'count'>): string | undefined {
  if (field.list || field.type === 'Json' || field.type === 'Bytes') return `${fn} cannot use ${field.name}`;
  if ((fn === 'sum' || fn === 'avg') && !NUMERIC.has(field.type))
    return `${fn} needs a number field; ${field.name} is ${field.type}`;
  if ((fn === 'min' || fn === 'max') && !(ORDERED.has(field.type) && (field.type !== 'String' || isTextField(field)))) {
    return `${fn} needs a number, date or text field; ${field.name} is ${field.nativeType?.[0] ?? field.type}`;
  }
  return undefined;
}
