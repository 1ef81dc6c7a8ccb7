/**
 * A condition evaluated against one record in memory, with the SQL compiler's semantics
 * (./compile-condition.ts) for the operators it supports: three-valued logic (a comparison with a
 * NULL field is unknown, and NOT unknown stays unknown), `equals null` as IS NULL, `not_equals` as
 * IS DISTINCT FROM, `not_in` true for NULL, case-sensitive LIKE for contains/starts_with/ends_with;
 * each operator's two halves sit side by side in ./operator-implementations.ts.
 * Real-time subscriptions match each captured change against a subscriber's role filter and
 * `where` with it (docs/realtime.md), so no query runs per subscriber.
 *
 * What it cannot decide like PostgreSQL is refused up front by `unsupportedIn`: relation paths
 * (they need other rows), ordering on text (PostgreSQL orders by the database's collation), the
 * date helpers (they move with the clock), and BigInt, Decimal, Json and Bytes fields.
 */
import type { FieldSpec, Operator } from '../model/index.ts';
import type { CatalogTable } from './catalog.ts';
import type { Condition } from './description.ts';
import { OPERATOR_IMPLEMENTATIONS, type Truth } from './operator-implementations.ts';

/** A field the caller may not see on this record: every comparison with it is unknown (SQL's NULL of a CASE). */
export const HIDDEN: unique symbol = Symbol('hidden');

export type RecordValues = Readonly<Record<string, unknown>>;

const SUPPORTED_TYPES = new Set(['String', 'Int', 'Float', 'Boolean', 'DateTime']);

/**
 * Why `condition` cannot be evaluated in memory on `table`'s records (the first reason found), or
 * undefined when it can.
 */
export function unsupportedIn(table: CatalogTable, condition: Condition): string | undefined {
  switch (condition.kind) {
    case 'true':
    case 'false':
      return undefined;
    case 'not':
      return unsupportedIn(table, condition.item);
    case 'and':
    case 'or':
      for (const item of condition.items) {
        const reason = unsupportedIn(table, item);
        if (reason) return reason;
      }
      return undefined;
    case 'compare': {
      const name = condition.path.join('.');
      if (condition.path.length !== 1) return `the condition on ${name} goes through a relation`;
      const field = table.fields.get(condition.path[0]!);
      if (!field) return `${table.spec.name} has no field "${name}"`;
      const memory = OPERATOR_IMPLEMENTATIONS[condition.op].memory;
      if ('refusal' in memory) return `the operator ${condition.op} (on ${name}) depends on the clock`;
      const kind = field.enumValues ? 'enum' : field.type;
      if (kind !== 'enum' && !SUPPORTED_TYPES.has(kind)) return `${name} is a ${field.type} field`;
      if (memory.ordersText && (kind === 'String' || kind === 'enum'))
        return `${condition.op} on the text field ${name} follows the database's collation`;
      return undefined;
    }
  }
}

/** Whether `condition` holds for `record` (unknown counts as not holding, as in a WHERE clause). */
export function holds(table: CatalogTable, condition: Condition, record: RecordValues): boolean {
  return evaluate(table, condition, record) === true;
}

function evaluate(table: CatalogTable, condition: Condition, record: RecordValues): Truth {
  switch (condition.kind) {
    case 'true':
      return true;
    case 'false':
      return false;
    case 'not': {
      const t = evaluate(table, condition.item, record);
      return t === null ? null : !t;
    }
    case 'and': {
      let result: Truth = true;
      for (const item of condition.items) {
        const t = evaluate(table, item, record);
        if (t === false) return false;
        if (t === null) result = null;
      }
      return result;
    }
    case 'or': {
      let result: Truth = false;
      for (const item of condition.items) {
        const t = evaluate(table, item, record);
        if (t === true) return true;
        if (t === null) result = null;
      }
      return result;
    }
    case 'compare': {
      const field = table.fields.get(condition.path[0]!);
      if (!field || condition.path.length !== 1) throw new Error(`cannot evaluate ${condition.path.join('.')}`);
      const value = record[field.name];
      if (value === HIDDEN) return null;
      return compare(field, condition.op, value ?? null, condition.value);
    }
  }
}

/** A value made comparable: DateTime text as epoch milliseconds, anything else as is. */
function comparableValue(field: FieldSpec, value: unknown): unknown {
  if (field.type === 'DateTime' && typeof value === 'string') return Date.parse(value);
  return value;
}

function compare(field: FieldSpec, op: Operator, raw: unknown, operand: unknown): Truth {
  const memory = OPERATOR_IMPLEMENTATIONS[op].memory;
  if ('refusal' in memory) throw new Error(`cannot evaluate the operator ${op}`);
  const comparable = (x: unknown) => comparableValue(field, x);
  return memory.evaluate({ field, raw, value: comparable(raw), operand, comparable });
}

/** A JSON object a row must contain (PostgreSQL's `to_jsonb(row) @>`): column name → value. */
export type Containment = Readonly<Record<string, string | number | boolean>>;

/** Most objects one condition narrows to; past it the condition narrows nothing. */
export const MAX_CONTAINMENTS = 64;
/** Fields whose values PostgreSQL's `to_jsonb` of a row and a typed condition value spell alike. */
const CONTAINABLE_TYPES = new Set(['String', 'Int', 'Float', 'Boolean']);

/**
 * The rows `condition` can hold for, as JSON objects (by column) of which a row must contain one;
 * every row (undefined) when it cannot be narrowed that way, none ([]) when it never holds. A superset,
 * never fewer: equalities and `in` on plain scalar fields narrow, anything else (ranges, negations,
 * relations, dates) counts as true. Real-time capture (docs/realtime.md "What a write costs")
 * captures only the rows some subscriber's role filter and `where` can want, checked with it.
 */
export function containmentsOf(table: CatalogTable, condition: Condition): Containment[] | undefined {
  const found = narrow(table, condition);
  return found.some((c) => Object.keys(c).length === 0) ? undefined : found;
}

const EVERY: Containment[] = [{}];

function narrow(table: CatalogTable, condition: Condition): Containment[] {
  switch (condition.kind) {
    case 'true':
    case 'not':
      return EVERY;
    case 'false':
      return [];
    case 'or': {
      const all = condition.items.flatMap((item) => narrow(table, item));
      return all.length > MAX_CONTAINMENTS ? EVERY : distinct(all);
    }
    case 'and': {
      let product: Containment[] = EVERY;
      for (const item of condition.items) {
        const options = narrow(table, item);
        // Leaving out a conjunct that would narrow to too many objects still gives a superset.
        if (product.length * options.length > MAX_CONTAINMENTS) continue;
        product = distinct(
          product.flatMap((a) =>
            options.flatMap((b): Containment[] => {
              const both = merged(a, b);
              return both ? [both] : [];
            }),
          ),
        );
      }
      return product;
    }
    case 'compare': {
      const field = condition.path.length === 1 ? table.fields.get(condition.path[0]!) : undefined;
      if (!field || field.list || !(field.enumValues || CONTAINABLE_TYPES.has(field.type))) return EVERY;
      const values =
        condition.op === 'equals' ? [condition.value] : condition.op === 'in' ? condition.value : undefined;
      if (!Array.isArray(values) || values.length > MAX_CONTAINMENTS) return EVERY;
      if (!values.every((v) => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean')) return EVERY;
      return distinct(values.map((value) => ({ [field.column]: value as string | number | boolean })));
    }
  }
}

/** Both objects at once, or undefined when they disagree on a field (no record contains both). */
function merged(a: Containment, b: Containment): Containment | undefined {
  for (const key of Object.keys(b)) if (Object.hasOwn(a, key) && a[key] !== b[key]) return undefined;
  return { ...a, ...b };
}

function distinct(list: Containment[]): Containment[] {
  const seen = new Map<string, Containment>();
  for (const c of list) seen.set(containmentKey(c), c);
  return [...seen.values()];
}

/** One spelling per object (keys sorted): equal objects, equal keys. */
export function containmentKey(c: Containment): string {
  return JSON.stringify(Object.fromEntries(Object.entries(c).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))));
}
