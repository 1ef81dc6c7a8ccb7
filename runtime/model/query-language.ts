/**
 * The query language's vocabulary, shared by the runtime that parses requests and the generator
 * that documents them (OpenAPI, generated/client.ts), so neither can drift from the other: the
 * parameter names a filter cannot take and the aggregate functions' field rules (the operators are
 * ./operators.ts).
 */
import { isTextField, type FieldSpec } from './index.ts';

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
