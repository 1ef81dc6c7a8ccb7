/**
 * The filter operators, each defined once (docs/api.md §5.5 "Operators"): the fields it applies
 * to, the operand it takes, whether role filters may use it, and how OpenAPI describes it. The
 * parsers, GraphQL filter inputs, OpenAPI parameters and the typed client all read this table; the
 * SQL and in-memory halves are runtime/query/operator-implementations.ts, a Record keyed by the
 * same `Operator`, so an operator missing there does not compile.
 */
import { isTextField, type FieldSpec } from './index.ts';

/** What a field is, as far as operators care. */
export type FieldKind = 'text' | 'string' | 'number' | 'date' | 'boolean' | 'enum' | 'list' | 'json' | 'bytes';

/**
 * The operand an operator takes: one value of the field (`nullable`: or null, meaning SQL NULL), a
 * list (`in.(a,b)`), a pair (`between.<low>,<high>`), a flag (`true` or `false`), `true` only, or
 * a whole number from 1 to `max`.
 */
export type OperandShape =
  | { readonly kind: 'value' | 'nullable' | 'list' | 'pair' | 'flag' | 'true' }
  | { readonly kind: 'count'; readonly max: number };

/** The fields an operator applies to, and how a refusal names what it needs. */
export interface FieldApplicability {
  readonly kinds: readonly FieldKind[];
  /** `needs <this>` in the 400 naming a field of another kind. */
  readonly needs: string;
  /** Whether the refusal names the field's native type (`Uuid`) rather than its Prisma type. */
  readonly nativeTypeInRefusal?: boolean;
}

export interface OperatorDefinition {
  readonly appliesTo: FieldApplicability;
  readonly operand: OperandShape;
  /** Role filters, webhook filters and bucket rules may use it (not what moves with the clock). */
  readonly inRoleFilters: boolean;
  /** Its meaning depends on the clock when the statement runs (the date helpers). */
  readonly clock: boolean;
  /** What it matches, for OpenAPI's filter description: a phrase without `;`. */
  readonly description: string;
}

const SCALAR: FieldApplicability = {
  kinds: ['text', 'string', 'number', 'date', 'boolean', 'enum'],
  needs: 'a scalar field',
};
const ORDERED: FieldApplicability = {
  kinds: ['text', 'string', 'number', 'date'],
  needs: 'a number, date or text field',
};
const TEXT: FieldApplicability = { kinds: ['text'], needs: 'a text field', nativeTypeInRefusal: true };
const TEXT_OR_LIST: FieldApplicability = { kinds: ['text', 'list'], needs: 'a text field', nativeTypeInRefusal: true };
const EVERY: FieldApplicability = { kinds: [...SCALAR.kinds, 'list', 'json', 'bytes'], needs: 'a field' };
const DATE: FieldApplicability = { kinds: ['date'], needs: 'a DateTime field' };

const VALUE = { kind: 'value' } as const;
const FLAG = { kind: 'flag' } as const;
const TRUE = { kind: 'true' } as const;

/** A comparison role filters may use. */
const compare = (appliesTo: FieldApplicability, operand: OperandShape, description: string) =>
  ({ appliesTo, operand, inRoleFilters: true, clock: false, description }) satisfies OperatorDefinition;
/** A date helper: moves with the clock, so role filters and subscriptions cannot use it. */
const dateHelper = (operand: OperandShape, description: string) =>
  ({ appliesTo: DATE, operand, inRoleFilters: false, clock: true, description }) satisfies OperatorDefinition;

/** In the order the API lists them (OpenAPI, GraphQL inputs, the client's unions). */
const DEFINITIONS = {
  equals: compare(SCALAR, { kind: 'nullable' }, 'equal to the value (`null`: the field is NULL)'),
  not_equals: compare(SCALAR, { kind: 'nullable' }, 'not equal to the value, NULL included (`null`: not NULL)'),
  gt: compare(ORDERED, VALUE, 'greater than the value'),
  gte: compare(ORDERED, VALUE, 'greater than or equal to the value'),
  lt: compare(ORDERED, VALUE, 'less than the value'),
  lte: compare(ORDERED, VALUE, 'less than or equal to the value'),
  contains: compare(TEXT_OR_LIST, VALUE, 'text containing the value (case-sensitive), or a list holding the element'),
  starts_with: compare(TEXT, VALUE, 'text starting with the value (case-sensitive)'),
  ends_with: compare(TEXT, VALUE, 'text ending with the value (case-sensitive)'),
  iequals: compare(TEXT, VALUE, 'text equal to the value, ignoring the case of A-Z'),
  icontains: compare(TEXT, VALUE, 'text containing the value, ignoring the case of A-Z'),
  istarts_with: compare(TEXT, VALUE, 'text starting with the value, ignoring the case of A-Z'),
  iends_with: compare(TEXT, VALUE, 'text ending with the value, ignoring the case of A-Z'),
  in: compare(SCALAR, { kind: 'list' }, 'one of the listed values'),
  not_in: compare(SCALAR, { kind: 'list' }, 'none of the listed values (NULL included)'),
  between: compare(ORDERED, { kind: 'pair' }, 'from the low to the high value, both included'),
  is_empty: compare(EVERY, FLAG, 'NULL, empty text or an empty list (`false`: the opposite)'),
  is_not_empty: compare(EVERY, FLAG, 'neither NULL, empty text nor an empty list (`false`: the opposite)'),
  today: dateHelper(TRUE, 'during the current UTC day'),
  yesterday: dateHelper(TRUE, 'during the previous UTC day'),
  this_week: dateHelper(TRUE, 'during the current ISO week (from Monday, UTC)'),
  this_month: dateHelper(TRUE, 'during the current UTC month'),
  last_days: dateHelper({ kind: 'count', max: 700_000 }, 'within the last n×24 hours up to now'),
  last_weeks: dateHelper({ kind: 'count', max: 100_000 }, 'within the last n weeks up to now'),
  last_months: dateHelper({ kind: 'count', max: 23_000 }, 'within the last n months up to now'),
} satisfies Record<string, OperatorDefinition>;

export type Operator = keyof typeof DEFINITIONS;

/** Every operator's definition; a Record, so code keyed by `Operator` must handle each one. */
export const OPERATOR_DEFINITIONS: Readonly<Record<Operator, OperatorDefinition>> = DEFINITIONS;

export const OPERATORS = Object.keys(DEFINITIONS) as readonly Operator[];

const OPERATOR_NAMES: ReadonlySet<string> = new Set(OPERATORS);

export function isOperator(name: string): name is Operator {
  return OPERATOR_NAMES.has(name);
}

/** The date helpers: operators whose meaning depends on the clock when the statement runs. */
export const CLOCK_OPERATORS: ReadonlySet<Operator> = new Set(OPERATORS.filter((op) => OPERATOR_DEFINITIONS[op].clock));

/** Whether `op`'s operand is written as several values (`in.(a,b)`, `between.<low>,<high>`; an array in JSON). */
export function takesList(op: Operator): boolean {
  const kind = OPERATOR_DEFINITIONS[op].operand.kind;
  return kind === 'list' || kind === 'pair';
}

export function fieldKind(field: FieldSpec): FieldKind {
  if (field.type === 'Json') return 'json';
  if (field.type === 'Bytes') return 'bytes';
  if (field.list) return 'list';
  switch (field.type) {
    case 'String':
      return isTextField(field) ? 'text' : 'string';
    case 'Int':
    case 'BigInt':
    case 'Float':
    case 'Decimal':
      return 'number';
    case 'DateTime':
      return 'date';
    case 'Boolean':
      return 'boolean';
    case 'Enum':
      return 'enum';
  }
}

/** `a, b and c`. */
export function listed(names: readonly string[]): string {
  return names.length < 2 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}

/** The operators a kind of field takes, in the table's order. */
function operatorsOfKind(kind: FieldKind): Operator[] {
  return OPERATORS.filter((op) => OPERATOR_DEFINITIONS[op].appliesTo.kinds.includes(kind));
}

/** Why `op` cannot apply to `field`, or undefined when it can. */
export function operatorMismatch(field: FieldSpec, op: Operator): string | undefined {
  const kind = fieldKind(field);
  const applies = OPERATOR_DEFINITIONS[op].appliesTo;
  if (applies.kinds.includes(kind)) return undefined;
  // Fields that take few operators name them all; a scalar names what the operator needs.
  if (kind === 'json' || kind === 'bytes') return `${field.type} fields only take ${listed(operatorsOfKind(kind))}`;
  if (kind === 'list') return `list fields take ${listed(operatorsOfKind(kind))}`;
  const type = applies.nativeTypeInRefusal ? (field.nativeType?.[0] ?? field.type) : field.type;
  return `${op} needs ${applies.needs}; ${field.name} is ${type}`;
}

/** The operators `field` takes, in the table's order. */
export function fieldOperators(field: FieldSpec): Operator[] {
  return operatorsOfKind(fieldKind(field));
}
