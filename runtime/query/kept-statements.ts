/**
 * Compiled statements and resolved selects kept per caller, beside the compilers that make them,
 * so that a caller's repeated shapes (a next page, a GET by id, the same select) compile once.
 * Every value such a statement takes from its caller (row permissions of every table it reads,
 * embeds included) is that principal's own and never changes while its Access and Grants live
 * (runtime/query/policy.ts keeps both per principal, for as long as its credential is cached).
 */
import type { CatalogTable } from './catalog.ts';
import { compileRead, type CompiledRead } from './compile-read.ts';
import type { Scope } from './compile-condition.ts';
import { conditionShape, slotPositions } from './condition-shape.ts';
import type { Condition, Grant, ReadQuery, SelectItem } from './description.ts';
import { parseSelectText, resolveSelect } from './parse-select.ts';
import type { FilterContext } from './parse-filter.ts';
import { PerCallerCache } from './per-caller.ts';

// A select resolves the same way for one caller every time (the fields it may read, the relations
// it may follow), so the resolved items of a select text are kept per caller, unless its embeds
// carry filters (those count towards the request's conditions). Kept items are frozen: that
// caller's later requests share them.
const keptSelects = new PerCallerCache<readonly SelectItem[]>(1_000);
/** Longer select texts are resolved afresh each time (a bound on what the cache holds). */
const MAX_KEPT_SELECT_CHARS = 1_000;

/** The items of a select text, resolved for the caller of `ctx` (once per caller and text when it can be kept). */
export function keptSelect(ctx: FilterContext, table: CatalogTable, text: string): SelectItem[] {
  const key = `${table.spec.name}\n${text}`;
  const kept = keptSelects.get(ctx.access, key);
  if (kept) return kept as SelectItem[];
  const conditionsBefore = ctx.count;
  const items = resolveSelect(ctx.catalog, table, parseSelectText(text), ctx.access, 'select', { conditions: ctx });
  if (ctx.count === conditionsBefore && text.length <= MAX_KEPT_SELECT_CHARS)
    keptSelects.set(ctx.access, key, deepFreeze(items));
  return items;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}

// The text of a kept select (frozen: keptSelect's items), for the keys of kept statements: a list
// with embeds has a long one, written once instead of once per request.
const selectTexts = new WeakMap<readonly SelectItem[], string>();

function selectText(select: readonly SelectItem[] | null): string {
  if (select === null) return 'null';
  let text = selectTexts.get(select);
  if (text === undefined) {
    text = JSON.stringify(select);
    if (Object.isFrozen(select)) selectTexts.set(select, text);
  }
  return text;
}

/** A compiled statement with its parameters. */
export interface KeptStatement {
  readonly sql: string;
  readonly values: unknown[];
  /** The record may hold jsonb text to compact (CompiledRead.jsonb). */
  readonly jsonb: boolean;
}

/** A whole-record read by key compiled for a grant and environment, with the key's value left out. */
interface KeyedRead extends KeptStatement {
  /** Where the key's value goes in `values`. */
  keyAt: number;
}

const keyedReads = new WeakMap<Grant, Map<CatalogTable, Map<string, KeyedRead | null>>>();
const KEY_PLACEHOLDER = Symbol('key');

/**
 * The whole-record read of the record `key` names (in a fresh scope), compiled once per grant (the read grant of the
 * caller on the table) and environment; undefined when it cannot be kept (compile it afresh).
 */
export function keptKeyedRead(
  fresh: Scope,
  grant: Grant,
  table: CatalogTable,
  key: Condition & { kind: 'compare' },
): KeptStatement | undefined {
  const { environment } = fresh;
  // By table too: a grant is one table's, but a cache that says so cannot be misread.
  let byTable = keyedReads.get(grant);
  if (!byTable) keyedReads.set(grant, (byTable = new Map()));
  let byEnvironment = byTable.get(table);
  if (!byEnvironment) byTable.set(table, (byEnvironment = new Map()));
  let keyed = byEnvironment.get(environment);
  if (keyed === undefined) {
    const compiled = compileRead(
      fresh,
      {
        table: table.spec.name,
        select: null,
        where: { kind: 'true' },
        key: { ...key, value: KEY_PLACEHOLDER },
        orderBy: [],
        limit: 1,
        offset: 0,
      },
      { single: true },
    );
    const keyAt = fresh.params.values.indexOf(KEY_PLACEHOLDER);
    // A row permission that is FALSE leaves the key out of the statement: nothing to keep.
    keyed = keyAt === -1 ? null : { sql: compiled.sql, values: fresh.params.values, jsonb: compiled.jsonb, keyAt };
    byEnvironment.set(environment, keyed);
  }
  if (!keyed) return undefined;
  const values = keyed.values.slice();
  values[keyed.keyAt] = key.value;
  return { sql: keyed.sql, values, jsonb: keyed.jsonb };
}

/** A page statement: its text, parameters and the number of cursor columns after the record. */
export interface PageStatement extends KeptStatement {
  readonly keyColumns: number;
}

/** A page statement kept for its shape, with the filter's values and the offset left to each page. */
interface KeptPage {
  readonly compiled: CompiledRead;
  readonly values: readonly unknown[];
  /** [parameter index, slot index]: where each value of the filter goes (ConditionShape.values). */
  readonly slots: readonly [number, number][];
  readonly offsetAt: number | undefined;
}

const keptPages = new PerCallerCache<KeptPage>(1_000);
/** Longer statements (very wide selects) are compiled afresh each time (a bound on what the cache holds). */
const MAX_KEPT_PAGE_CHARS = 20_000;

/**
 * The page statement of a read without a cursor (a first page, or a page by offset): compiled
 * once per caller (its Access, `scope.access`) and shape, the filter's shape included
 * (./condition-shape.ts) and limit (a literal in the SQL: compile-read.ts pageLimit), then only
 * the filter's values and the offset change.
 * Undefined when the filter has no shape (a value the SQL holds transformed): compile it afresh.
 */
export function keptPage(scope: Scope, query: ReadQuery, count: boolean): PageStatement | undefined {
  const shape = conditionShape(query.where);
  if (!shape) return undefined;
  const key = `${query.table}\n${scope.environment}\n${count}\n${query.limit}\n${query.offset > 0}\n${selectText(query.select)}\n${JSON.stringify(query.orderBy)}\n${shape.key}`;
  let kept = keptPages.get(scope.access, key);
  if (!kept) {
    const compiled = compileRead(scope, { ...query, where: shape.template }, { count });
    const values = scope.params.values;
    kept = { compiled, values, slots: slotPositions(values), offsetAt: compiled.offsetAt };
    if (compiled.sql.length <= MAX_KEPT_PAGE_CHARS) keptPages.set(scope.access, key, kept);
  }
  const values = kept.values.slice();
  for (const [at, slot] of kept.slots) values[at] = shape.values[slot];
  if (kept.offsetAt !== undefined) values[kept.offsetAt] = query.offset;
  return { sql: kept.compiled.sql, values, keyColumns: kept.compiled.keyColumns, jsonb: kept.compiled.jsonb };
}

/** A record read by key kept for its shape: the key's values (and any other slot) left to each read. */
interface KeptRecord {
  readonly sql: string;
  readonly values: readonly unknown[];
  readonly slots: readonly [number, number][];
  readonly jsonb: boolean;
}

const keptRecords = new PerCallerCache<KeptRecord>(1_000);

/**
 * The read of the one record `key` addresses (a table's key condition), with `select`: compiled
 * once per caller (its Access, `scope.access`), table, environment, select and key shape, then only
 * the key's values change (GraphQL's record by key, REST's GET by id with a select). Undefined when
 * the key has no shape (./condition-shape.ts): compile it afresh.
 */
export function keptRecordRead(
  scope: Scope,
  table: CatalogTable,
  key: Condition,
  select: readonly SelectItem[] | null,
): KeptStatement | undefined {
  const shape = conditionShape(key);
  if (!shape) return undefined;
  const cacheKey = `${table.spec.name}\n${scope.environment}\n${selectText(select)}\n${shape.key}`;
  let kept = keptRecords.get(scope.access, cacheKey);
  if (!kept) {
    const compiled = compileRead(
      scope,
      {
        table: table.spec.name,
        select,
        where: { kind: 'true' },
        key: shape.template,
        orderBy: [],
        limit: 1,
        offset: 0,
      },
      { single: true },
    );
    const values = scope.params.values;
    kept = { sql: compiled.sql, values, slots: slotPositions(values), jsonb: compiled.jsonb };
    if (compiled.sql.length <= MAX_KEPT_PAGE_CHARS) keptRecords.set(scope.access, cacheKey, kept);
  }
  const values = kept.values.slice();
  for (const [at, slot] of kept.slots) values[at] = shape.values[slot];
  return { sql: kept.sql, values, jsonb: kept.jsonb };
}
