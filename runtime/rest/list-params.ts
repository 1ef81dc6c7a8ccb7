/**
 * GET /<table> query parameters → a read query (docs/api.md §5.4-§5.8).
 * Every parameter not reserved here is a filter.
 */
import { Problem } from '../http/index.ts';
import { LIMITS, RESERVED_PARAMETERS } from '../model/index.ts';
import {
  and,
  keptSelect,
  parseFilterParam,
  parseSort,
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
    select: selectText === null ? null : keptSelect(ctx, table, selectText),
    ...paging,
  };
}
