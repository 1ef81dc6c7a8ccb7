/**
 * Typed filter values: text from a query string (or JSON from a `_query` body) → the value the
 * SQL compiler binds, checked against the field's type and the operator.
 */
import { isOperator, OPERATOR_DEFINITIONS, OPERATORS, operatorMismatch, type FieldSpec } from '../model/index.ts';
import type { Catalog } from './catalog.ts';
import type { Operator } from './description.ts';

export { isOperator, OPERATORS, operatorMismatch };

/** Longest `in` list accepted (a bound on statement size, README "Limits"). */
export const MAX_IN_LIST = 1000;

export class FilterValueError extends Error {}

/** PostgreSQL timestamps take years 1 to 9999 here (JSON dates outside that range are refused). */
function inDateRange(iso: string): boolean {
  const year = new Date(iso).getUTCFullYear();
  return year >= 1 && year <= 9999;
}

/**
 * Whether the calendar date at the start of an ISO text exists: `Date` turns 2024-02-30 into
 * March 1st, where a body value of the same text is refused, so a filter refuses it too.
 */
function realCalendarDate(text: string): boolean {
  const [y, m, d] = text.slice(0, 10).split('-').map(Number) as [number, number, number];
  const date = new Date(Date.UTC(2000, m - 1, d));
  date.setUTCFullYear(y);
  return date.getUTCMonth() === m - 1 && date.getUTCDate() === d;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** One scalar of the field's type from text (query string) or JSON (`_query` body). */
export function scalarValue(field: FieldSpec, raw: unknown): unknown {
  const text = typeof raw === 'string' ? raw : undefined;
  switch (field.type) {
    case 'String':
      if (typeof raw !== 'string') throw new FilterValueError(`${field.name} takes text`);
      if (field.nativeType?.[0] === 'Uuid' && !UUID.test(raw)) throw new FilterValueError(`${field.name} takes a UUID`);
      if (raw.length > 10_000)
        throw new FilterValueError(`the value for ${field.name} is longer than 10000 characters`);
      if (raw.includes('\u0000')) throw new FilterValueError(`the value for ${field.name} contains a NUL character`);
      return raw;
    case 'Int': {
      const n = typeof raw === 'number' ? raw : text !== undefined && /^-?\d{1,10}$/.test(text) ? Number(text) : NaN;
      if (!Number.isInteger(n) || n < -2147483648 || n > 2147483647)
        throw new FilterValueError(`${field.name} takes a 32-bit integer`);
      return n;
    }
    case 'BigInt': {
      const s = typeof raw === 'number' && Number.isInteger(raw) ? String(raw) : text;
      if (s === undefined || !/^-?\d{1,19}$/.test(s) || BigInt(s) >= 2n ** 63n || BigInt(s) < -(2n ** 63n)) {
        throw new FilterValueError(`${field.name} takes a 64-bit integer`);
      }
      return s;
    }
    case 'Float':
    case 'Decimal': {
      const n =
        typeof raw === 'number'
          ? raw
          : text !== undefined && /^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)
            ? Number(text)
            : NaN;
      if (!Number.isFinite(n)) throw new FilterValueError(`${field.name} takes a number`);
      return field.type === 'Decimal' && text !== undefined ? text : n;
    }
    case 'Boolean':
      if (raw === true || raw === 'true') return true;
      if (raw === false || raw === 'false') return false;
      throw new FilterValueError(`${field.name} takes true or false`);
    case 'DateTime': {
      const match =
        typeof raw === 'string' ? /^\d{4}-\d{2}-\d{2}(?:[T ]([\d:.]+)(Z|[+-]\d{2}:?\d{2})?)?$/.exec(raw) : null;
      // A date-time without a zone is UTC, like the date helpers, whatever the server's time zone.
      const utc =
        match?.[1] !== undefined && match[2] === undefined
          ? `${match[0].slice(0, 10)}T${match[1]}Z`
          : (match?.[0] ?? '');
      if (!match || Number.isNaN(Date.parse(utc)) || !realCalendarDate(utc) || !inDateRange(utc)) {
        throw new FilterValueError(`${field.name} takes an ISO 8601 date or date-time (years 0001 to 9999)`);
      }
      return new Date(utc).toISOString();
    }
    case 'Enum':
      if (typeof raw !== 'string' || !field.enumValues?.includes(raw)) {
        throw new FilterValueError(`${field.name} takes one of ${field.enumValues?.join(', ')}`);
      }
      return raw;
    default:
      throw new FilterValueError(`${field.name} cannot be compared to a value`);
  }
}

/** A boolean flag value (`is_empty.true`, `today.true`). */
function flag(raw: unknown, op: string): boolean {
  if (raw === true || raw === 'true') return true;
  if (raw === false || raw === 'false') return false;
  throw new FilterValueError(`${op} takes true or false`);
}

/**
 * The bound value of `op` on `field`. `list` holds the already split items for in/not_in/between
 * (from `(a,b)` text or a JSON array).
 */
export function operandValue(field: FieldSpec, op: Operator, raw: unknown, list?: readonly unknown[]): unknown {
  const mismatch = operatorMismatch(field, op);
  if (mismatch) throw new FilterValueError(mismatch);
  const operand = OPERATOR_DEFINITIONS[op].operand;
  switch (operand.kind) {
    case 'list': {
      if (!list) throw new FilterValueError(`${op} takes a list: ${op}.(a,b)`);
      if (list.length === 0) throw new FilterValueError(`${op} needs at least one value`);
      if (list.length > MAX_IN_LIST) throw new FilterValueError(`${op} takes at most ${MAX_IN_LIST} values`);
      return list.map((v) => scalarValue(field, v));
    }
    case 'pair': {
      if (list?.length !== 2) throw new FilterValueError(`${op} takes two values: ${op}.<low>,<high>`);
      return [scalarValue(field, list[0]), scalarValue(field, list[1])];
    }
    case 'flag':
      return flag(raw, op);
    case 'true':
      if (!flag(raw, op)) throw new FilterValueError(`${op} takes the value true`);
      return true;
    case 'count': {
      // The bound keeps `now()` minus the interval a timestamp (about 1,900 years).
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\d{1,7}$/.test(raw) ? Number(raw) : NaN;
      if (!Number.isInteger(n) || n < 1 || n > operand.max)
        throw new FilterValueError(`${op} takes a whole number from 1 to ${operand.max}`);
      return n;
    }
    case 'nullable':
      return raw === null ? null : scalarValue(field, raw);
    case 'value':
      // On a list field (contains) the operand is one element.
      return scalarValue(field.list ? { ...field, list: false } : field, raw);
  }
}

/**
 * A role filter's operand as the SQL compiler binds it, for `path` (a field, or relations then a
 * field) from `table`; undefined when the value cannot be one of that field (e.g. `$user.id` against
 * an Int key, a `$context` string against a number): such a filter matches no row.
 */
export function roleOperand(
  catalog: Catalog,
  table: string,
  path: readonly string[],
  op: Operator,
  value: unknown,
): { value: unknown } | undefined {
  let current = catalog.get(table);
  for (const relation of path.slice(0, -1))
    current = current && catalog.get(current.relations.get(relation)?.target ?? '');
  const field = current?.fields.get(path[path.length - 1] ?? '');
  if (!field) return undefined;
  try {
    return { value: operandValue(field, op, value, Array.isArray(value) ? value : undefined) };
  } catch (error) {
    if (error instanceof FilterValueError) return undefined;
    throw error;
  }
}
