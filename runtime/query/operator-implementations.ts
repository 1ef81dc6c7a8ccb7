/**
 * How each operator of runtime/model/operators.ts runs: its SQL (./compile-condition.ts) and its
 * evaluation against one record in memory (./evaluate.ts, for real-time subscriptions), side by
 * side so the two cannot drift. A Record keyed by `Operator`: a new operator does not compile until
 * it has both halves.
 *
 * The case-insensitive operators fold A-Z only, as `lower()` does under the "C" collation whatever
 * the database's locale, so the in-memory side answers exactly as the SQL does (docs/api.md §5.5
 * "Operators"): PostgreSQL's `lower()`/`ILIKE` under the database's collation depend on its
 * locale provider and version, which JavaScript's `toLowerCase()` cannot reproduce.
 */
import { isTextField, type FieldSpec, type Operator } from '../model/index.ts';

/** true, false, or null for unknown (SQL NULL). */
export type Truth = boolean | null;

export interface SqlComparison {
  /** The column (or expression) compared. */
  readonly column: string;
  readonly field: FieldSpec;
  /** The typed operand (runtime/query/operands.ts). */
  readonly value: unknown;
  /** Binds a value and answers its placeholder. */
  readonly param: (value: unknown) => string;
}

export interface MemoryComparison {
  readonly field: FieldSpec;
  /** The record's value as stored (null: SQL NULL). */
  readonly raw: unknown;
  /** The record's value made comparable (DateTime text as epoch milliseconds). */
  readonly value: unknown;
  /** The typed operand, as written. */
  readonly operand: unknown;
  /** A value made comparable as `value` is. */
  readonly comparable: (x: unknown) => unknown;
}

export type MemoryEvaluation =
  | {
      readonly evaluate: (c: MemoryComparison) => Truth;
      /** PostgreSQL orders text by the database's collation: not decidable in memory on text or enums. */
      readonly ordersText?: boolean;
    }
  /** Moves with the clock: a captured change cannot be matched later as the statement would have. */
  | { readonly refusal: 'clock' };

/**
 * How `sql` puts a non-null operand into the statement: as one parameter, unchanged
 * ('parameter'); as two, the elements of a [low, high] pair ('pair'); not at all, or in the SQL
 * text ('text'); or changed first, e.g. into a LIKE pattern or folded ('transformed'). A list
 * statement compiled once per filter shape (./condition-shape.ts) takes the operands of the first
 * two kinds from each request, so this must say what `sql` does (test/query/condition-shape.unit.test.ts).
 */
export type ValuePlacement = 'parameter' | 'pair' | 'text' | 'transformed';

/**
 * What a B-tree index on the compared field does for the operator (runtime/data/cost.ts decides
 * from it which lists are expensive): 'one' pins the field to one value (rows found keep the
 * index's order on the next fields), 'few' to a few values, 'range' bounds it; 'none': no index
 * serves it (the rows are scanned).
 */
export type IndexUse = 'one' | 'few' | 'range' | 'none';

export interface OperatorImplementation {
  readonly sql: (c: SqlComparison) => string;
  readonly placement: ValuePlacement;
  readonly index: IndexUse;
  readonly memory: MemoryEvaluation;
}

/** What an index does for `op` (OperatorImplementation.index). */
export function indexUse(op: Operator): IndexUse {
  return OPERATOR_IMPLEMENTATIONS[op].index;
}

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** A-Z to a-z, nothing else: `lower()` under the "C" collation (see the file comment). */
export function foldAscii(text: string): string {
  return text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}

const folded = (column: string) => `lower(${column}::text COLLATE "C")`;

/** Unknown on a NULL value, as any SQL comparison with NULL. */
function strict(evaluate: (c: MemoryComparison) => boolean): MemoryEvaluation {
  return { evaluate: (c) => (c.raw === null ? null : evaluate(c)) };
}

function ordering(sqlOperator: string, holds: (a: number, b: number) => boolean): OperatorImplementation {
  return {
    sql: (c) => `${c.column} ${sqlOperator} ${c.param(c.value)}`,
    placement: 'parameter',
    index: 'range',
    memory: { ...strict((c) => holds(c.value as number, c.comparable(c.operand) as number)), ordersText: true },
  };
}

/** A LIKE pattern around the operand (`%x%`, `x%`, `%x`), `%`, `_` and `\` literal. */
function like(before: string, after: string, holds: (text: string, part: string) => boolean): OperatorImplementation {
  return {
    sql: (c) => `${c.column} LIKE ${c.param(`${before}${escapeLike(String(c.value))}${after}`)}`,
    placement: 'transformed',
    index: 'none',
    memory: strict((c) => holds(String(c.raw), String(c.operand))),
  };
}

/** The same, with A-Z folded on both sides. */
function foldedLike(before: string, after: string, holds: (text: string, part: string) => boolean) {
  return {
    sql: (c) => `${folded(c.column)} LIKE ${c.param(`${before}${escapeLike(foldAscii(String(c.value)))}${after}`)}`,
    placement: 'transformed',
    index: 'none',
    memory: strict((c) => holds(foldAscii(String(c.raw)), foldAscii(String(c.operand)))),
  } satisfies OperatorImplementation;
}

function emptiness(column: string, field: FieldSpec): string {
  if (field.list) return `(${column} IS NULL OR cardinality(${column}) = 0)`;
  return isTextField(field) ? `(${column} IS NULL OR ${column} = '')` : `${column} IS NULL`;
}

function isEmpty(raw: unknown, field: FieldSpec): boolean {
  return raw === null || (field.list ? (raw as unknown[]).length === 0 : raw === '' && field.type === 'String');
}

/** is_empty (`wanted` true) / is_not_empty; the operand `false` asks for the opposite. */
function presence(wanted: boolean): OperatorImplementation {
  return {
    sql: (c) => ((c.value !== false) === wanted ? emptiness(c.column, c.field) : `NOT ${emptiness(c.column, c.field)}`),
    // The flag chooses the SQL text.
    placement: 'text',
    index: 'none',
    memory: { evaluate: (c) => ((c.operand !== false) === wanted) === isEmpty(c.raw, c.field) },
  };
}

const CLOCK: MemoryEvaluation = { refusal: 'clock' };
/** A date helper's window; UTC days, ISO weeks from Monday (the session time zone is UTC). */
const window = (sql: (column: string) => string): OperatorImplementation => ({
  sql: (c) => sql(c.column),
  placement: 'text',
  index: 'none',
  memory: CLOCK,
});
const lastUnits = (unit: string): OperatorImplementation => ({
  sql: (c) => `(${c.column} >= now() - make_interval(${unit} => ${c.param(c.value)}::int) AND ${c.column} <= now())`,
  placement: 'parameter',
  index: 'none',
  memory: CLOCK,
});

export const OPERATOR_IMPLEMENTATIONS: Readonly<Record<Operator, OperatorImplementation>> = {
  equals: {
    sql: (c) => (c.value === null ? `${c.column} IS NULL` : `${c.column} = ${c.param(c.value)}`),
    placement: 'parameter',
    index: 'one',
    memory: {
      evaluate: (c) =>
        c.operand === null ? c.raw === null : c.raw === null ? null : c.value === c.comparable(c.operand),
    },
  },
  not_equals: {
    sql: (c) => (c.value === null ? `${c.column} IS NOT NULL` : `${c.column} IS DISTINCT FROM ${c.param(c.value)}`),
    placement: 'parameter',
    index: 'none',
    memory: {
      evaluate: (c) => (c.operand === null ? c.raw !== null : c.raw === null || c.value !== c.comparable(c.operand)),
    },
  },
  gt: ordering('>', (a, b) => a > b),
  gte: ordering('>=', (a, b) => a >= b),
  lt: ordering('<', (a, b) => a < b),
  lte: ordering('<=', (a, b) => a <= b),
  contains: {
    sql: (c) =>
      c.field.list
        ? `${c.param(c.value)} = ANY(${c.column})`
        : `${c.column} LIKE ${c.param(`%${escapeLike(String(c.value))}%`)}`,
    // A pattern, or (on a list field) the value itself: which one depends on the field.
    placement: 'transformed',
    index: 'none',
    memory: strict((c) =>
      c.field.list
        ? (c.raw as unknown[]).some((item) => c.comparable(item) === c.comparable(c.operand))
        : String(c.raw).includes(String(c.operand)),
    ),
  },
  starts_with: like('', '%', (text, part) => text.startsWith(part)),
  ends_with: like('%', '', (text, part) => text.endsWith(part)),
  iequals: {
    sql: (c) => `${folded(c.column)} = ${c.param(foldAscii(String(c.value)))}`,
    placement: 'transformed',
    index: 'none',
    memory: strict((c) => foldAscii(String(c.raw)) === foldAscii(String(c.operand))),
  },
  icontains: foldedLike('%', '%', (text, part) => text.includes(part)),
  istarts_with: foldedLike('', '%', (text, part) => text.startsWith(part)),
  iends_with: foldedLike('%', '', (text, part) => text.endsWith(part)),
  in: {
    sql: (c) => `${c.column} = ANY(${c.param(c.value)})`,
    placement: 'parameter',
    index: 'few',
    memory: strict((c) => (c.operand as unknown[]).some((o) => c.comparable(o) === c.value)),
  },
  not_in: {
    sql: (c) => `(${c.column} IS NULL OR NOT (${c.column} = ANY(${c.param(c.value)})))`,
    placement: 'parameter',
    index: 'none',
    memory: { evaluate: (c) => c.raw === null || !(c.operand as unknown[]).some((o) => c.comparable(o) === c.value) },
  },
  between: {
    sql: (c) => {
      const [low, high] = c.value as [unknown, unknown];
      return `${c.column} BETWEEN ${c.param(low)} AND ${c.param(high)}`;
    },
    placement: 'pair',
    index: 'range',
    memory: {
      ...strict((c) => {
        const [low, high] = (c.operand as [unknown, unknown]).map(c.comparable) as [number, number];
        return (c.value as number) >= low && (c.value as number) <= high;
      }),
      ordersText: true,
    },
  },
  is_empty: presence(true),
  is_not_empty: presence(false),
  today: window((col) => `(${col} >= current_date AND ${col} < current_date + 1)`),
  yesterday: window((col) => `(${col} >= current_date - 1 AND ${col} < current_date)`),
  this_week: window(
    (col) => `(${col} >= date_trunc('week', now()) AND ${col} < date_trunc('week', now()) + interval '1 week')`,
  ),
  this_month: window(
    (col) => `(${col} >= date_trunc('month', now()) AND ${col} < date_trunc('month', now()) + interval '1 month')`,
  ),
  last_days: lastUnits('days'),
  last_weeks: lastUnits('weeks'),
  last_months: lastUnits('months'),
};
