/**
 * What a body value of each field must be, said in words (docs/api.md §6.1 "Record bodies"), and the
 * storage bounds the generated zod validators leave to the runtime: Decimal digits, the years a
 * timestamp holds, SmallInt range and NUL characters. Every 422 about a field value is built from
 * here, so a message never shows a regex or a zod default, and a value the database would refuse
 * is refused before the statement, naming the field.
 */
import type { FieldSpec } from '../model/index.ts';

const INT32 = [-2147483648, 2147483647] as const;
const SMALLINT = [-32768, 32767] as const;
/** Prisma's column type for a `Decimal` without `@db.Decimal(p, s)` on PostgreSQL. */
const DEFAULT_DECIMAL = { precision: 65, scale: 30 } as const;

/** Digits of a Decimal column, or undefined when the column takes any number of digits. */
export function decimalDigits(field: FieldSpec): { precision: number; scale: number } | undefined {
  if (field.type !== 'Decimal') return undefined;
  const [native, args = []] = field.nativeType ?? [];
  if (native === undefined) return DEFAULT_DECIMAL;
  if (native !== 'Decimal' || args.length === 0) return undefined;
  return { precision: Number(args[0]), scale: Number(args[1] ?? 0) };
}

function decimalExample(digits: { precision: number; scale: number }): string {
  const whole = digits.precision - digits.scale >= 2 ? '12' : digits.precision - digits.scale === 1 ? '1' : '0';
  return digits.scale === 0 ? whole : `${whole}.${'50'.slice(0, Math.min(digits.scale, 2))}`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** The value one field (one item, for a list) takes, e.g. "a whole number from -32768 to 32767". */
function scalarDescription(field: FieldSpec): string {
  const [native, args = []] = field.nativeType ?? [];
  switch (field.type) {
    case 'String':
      if (native === 'Uuid') return 'a UUID such as 123e4567-e89b-12d3-a456-426614174000';
      if ((native === 'VarChar' || native === 'Char') && args[0])
        return `a string of at most ${plural(Number(args[0]), 'character')}`;
      return 'a string';
    case 'Int': {
      const [low, high] = native === 'SmallInt' ? SMALLINT : INT32;
      return `a whole number from ${low} to ${high}`;
    }
    case 'BigInt':
      return 'a whole number from -9223372036854775808 to 9223372036854775807 (a JSON number or a string of digits)';
    case 'Float':
      return native === 'Real'
        ? 'a number that fits a 4-byte float (0, or a magnitude from about 1.2e-38 to 3.4e38)'
        : 'a number';
    case 'Decimal': {
      const digits = decimalDigits(field);
      if (!digits) return 'a decimal number such as 12.50 (a JSON number or a string)';
      const whole = digits.precision - digits.scale;
      const before =
        whole > 0 ? `at most ${plural(whole, 'digit')} before the decimal point` : 'no digits before the decimal point';
      const after =
        digits.scale > 0 ? `stored with ${plural(digits.scale, 'digit')} after it` : 'stored as a whole number';
      return `a decimal number such as ${decimalExample(digits)} (a JSON number or a string) with ${before} (${after})`;
    }
    case 'Boolean':
      return 'true or false';
    case 'DateTime':
      if (native === 'Date') return 'a date such as 2026-01-31';
      return 'a date-time such as 2026-01-31T12:00:00Z (Z or an offset such as +02:00) or a date such as 2026-01-31';
    case 'Json':
      return 'any JSON value';
    case 'Bytes':
      return 'base64 text such as aGVsbG8=';
    case 'Enum':
      return `one of ${(field.enumValues ?? []).join(', ')}`;
  }
}

/** What the field takes, in words: its scalar, or a JSON array of them for a list field. */
export function fieldDescription(field: FieldSpec): string {
  return field.list ? `a JSON array, each item ${scalarDescription(field)}` : scalarDescription(field);
}

/** What one item of a list field takes. */
export function itemDescription(field: FieldSpec): string {
  return scalarDescription(field);
}

/**
 * Whether a number, or decimal text, fits `precision` digits of which `scale` follow the point,
 * after PostgreSQL rounds it to `scale` places (half away from zero). Digit counting on the text,
 * so a long value costs no big-number arithmetic.
 */
export function decimalFits(value: number | string, precision: number, scale: number): boolean {
  const m = /^[-+]?(\d*)(?:\.(\d*))?(?:e([-+]?\d+))?$/i.exec(String(value));
  if (!m) return false;
  const digits = `${m[1]}${m[2] ?? ''}`.replace(/^0+/, '');
  if (digits === '') return true;
  // value = digits × 10^exponent; after rounding to `scale` places it has `kept` significant digits.
  const exponent = Number(m[3] ?? 0) - (m[2]?.length ?? 0);
  const kept = digits.length + exponent + scale;
  if (kept < precision) return true;
  if (kept > precision) return false;
  const carries = /^9+$/.test(digits.slice(0, kept).padEnd(kept, '0')) && (digits[kept] ?? '0') >= '5';
  return !carries;
}

export interface ValueProblem {
  /** Path below the field: '' for the field itself, `[3]` for an item of a list. */
  at: string;
  rule: string;
  message: string;
}

function hasNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (Array.isArray(value)) return value.some(hasNul);
  if (value !== null && typeof value === 'object')
    return Object.entries(value).some(([k, v]) => k.includes('\u0000') || hasNul(v));
  return false;
}

/** A storage bound one (zod-valid) scalar breaks, or undefined. */
function scalarProblem(field: FieldSpec, value: unknown): Omit<ValueProblem, 'at'> | undefined {
  if (value === null || value === undefined) return undefined;
  switch (field.type) {
    case 'String':
      return hasNul(value)
        ? { rule: 'format', message: 'expected a string without NUL characters (\\u0000)' }
        : undefined;
    case 'Json':
      return hasNul(value)
        ? { rule: 'format', message: 'expected JSON whose strings and keys have no NUL characters (\\u0000)' }
        : undefined;
    case 'Int':
      if (
        field.nativeType?.[0] === 'SmallInt' &&
        ((value as number) < SMALLINT[0] || (value as number) > SMALLINT[1])
      ) {
        return { rule: (value as number) < 0 ? 'min' : 'max', message: `expected ${scalarDescription(field)}` };
      }
      return undefined;
    case 'Decimal': {
      const digits = decimalDigits(field);
      if (digits && !decimalFits(value as number | string, digits.precision, digits.scale)) {
        return { rule: 'max', message: `expected ${scalarDescription(field)}` };
      }
      return undefined;
    }
    case 'DateTime': {
      const year = new Date(value as string).getUTCFullYear();
      if (year >= 1 && year <= 9999) return undefined;
      const kind = field.nativeType?.[0] === 'Date' ? 'a date' : 'a date-time';
      return { rule: year < 1 ? 'min' : 'max', message: `expected ${kind} in the years 0001 to 9999 (in UTC)` };
    }
    default:
      return undefined;
  }
}

/** Storage bounds a validated value of the field breaks: none, or one per offending list item. */
export function valueProblems(field: FieldSpec, value: unknown): ValueProblem[] {
  if (field.list && Array.isArray(value)) {
    const out: ValueProblem[] = [];
    value.forEach((item, index) => {
      const problem = scalarProblem(field, item);
      if (problem) out.push({ at: `[${index}]`, ...problem });
    });
    return out;
  }
  const problem = scalarProblem(field, value);
  return problem ? [{ at: '', ...problem }] : [];
}
