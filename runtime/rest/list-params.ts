/**
 * GET /<table> query parameters → a read query (docs/api.md §5.4-§5.8).
 * Every parameter not reserved here is a filter.
 */
import { Problem } from '../http/index.ts';
import { LIMITS, RESERVED_PARAMETERS } from '../model/index.ts';
import {
  and,
  parseFilterParam,
  parseSelectText,
  parseSort,
  resolveSelect,
  PerCallerCache,
  type CatalogTable,
  type Condition,
  type FilterContext,
  type OrderTerm,
  type SelectItem,
} from '../query/index.ts';

export { MAX_SORT_TERMS, parseSort } from '../query/index.ts';

export const DEFAULT_LIMIT = LIMITS.defaultPageSize;
export const MAX_LIMIT = LIMITS.maxPageSize;

export interface ListParams {
  where: Condition;
  orderBy: OrderTerm[];
  select: SelectItem[] | null;
  limit: number;
  offset: number;
  after: string | undefined;
}

export const LIST_RESERVED: ReadonlySet<string> = new Set(RESERVED_PARAMETERS.list);

function invalid(name: string, message: string): Problem {
  return new Problem('invalid-parameter', `${name}: ${message}`, [{ field: name, rule: 'invalid', message }]);
}

function integerParam(
  query: URLSearchParams,
  names: readonly string[],
  fallback: number,
  max: number,
  min = 0,
): number {
  const present = names.filter((n) => query.has(n));
  if (present.length === 0) return fallback;
  if (present.length > 1 || query.getAll(present[0]!).length > 1)
    throw invalid(present[0]!, `send ${names.join(' or ')} once`);
  const name = present[0]!;
  const raw = query.get(name)!;
  if (!/^\d{1,10}$/.test(raw)) throw invalid(name, `must be a whole number from ${min} to ${max}`);
  const value = Number(raw);
  if (value > max) throw invalid(name, `must be at most ${max}`);
  if (value < min) throw invalid(name, `must be at least ${min}`);
  return value;
}

export function parsePaging(query: URLSearchParams): { limit: number; offset: number; after: string | undefined } {
  const limit = integerParam(query, ['limit', 'first'], DEFAULT_LIMIT, MAX_LIMIT, 1);
  const offset = integerParam(query, ['offset', 'skip'], 0, 100_000_000);
  const after = query.get('after') ?? undefined;
  if (after !== undefined && offset > 0) throw invalid('after', 'a cursor and an offset cannot be combined');
  return { limit, offset, after };
}

/** The filters of a query string, ANDed; `reserved` are the parameters that are not filters. */
export function parseFilters(ctx: FilterContext, query: URLSearchParams, reserved: ReadonlySet<string>): Condition {
  const conditions: Condition[] = [];
  for (const [name, value] of query) {
    if (reserved.has(name)) continue;
    conditions.push(parseFilterParam(ctx, name, value));
  }
  return and(...conditions);
}

export function parseListParams(ctx: FilterContext, table: CatalogTable, query: URLSearchParams): ListParams {
  const paging = parsePaging(query);
  const selectText = query.get('select');
  return {
    where: parseFilters(ctx, query, LIST_RESERVED),
    orderBy: parseSort(ctx, query.get('sort')),
    select: selectText === null ? null : selectOf(ctx, table, selectText),
    ...paging,
  };
}

// A select resolves the same way for one caller every time (the fields it may read, the relations
// it may follow), so the resolved items of a select text are kept per caller, unless its embeds
// carry filters (those count towards the request's conditions). Kept items are frozen: that
// caller's later requests share them.
const keptSelects = new PerCallerCache<readonly SelectItem[]>(1_000);
/** Longer select texts are resolved afresh each time (a bound on what the cache holds). */
const MAX_KEPT_SELECT_CHARS = 1_000;

function selectOf(ctx: FilterContext, table: CatalogTable, text: string): SelectItem[] {
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
