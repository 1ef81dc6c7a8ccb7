/**
 * GET /<table> query parameters → a read query (docs/api.md §5.4-§5.8).
 * Every parameter not reserved here is a filter.
 */
import { Problem } from '../http/index.ts';
import { LIMITS, RESERVED_PARAMETERS } from '../model/index.ts';
import { and, canReadField, parseFilterParam, parseSelectText, QueryError, resolveSelect, type CatalogTable, type Condition, type FilterContext, type OrderTerm, type SelectItem } from '../query/index.ts';

export const DEFAULT_LIMIT = LIMITS.defaultPageSize;
export const MAX_LIMIT = LIMITS.maxPageSize;
export const MAX_SORT_TERMS = 10;

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

function integerParam(query: URLSearchParams, names: readonly string[], fallback: number, max: number, min = 0): number {
  const present = names.filter((n) => query.has(n));
  if (present.length === 0) return fallback;
  if (present.length > 1 || query.getAll(present[0]!).length > 1) throw invalid(present[0]!, `send ${names.join(' or ')} once`);
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

/** `sort=a,-b` or `sort=a.asc,b.desc`. */
export function parseSort(ctx: FilterContext, text: string | null, parameter = 'sort'): OrderTerm[] {
  if (text === null) return [];
  const terms: OrderTerm[] = [];
  for (const raw of text.split(',')) {
    let field = raw.trim();
    let direction: 'asc' | 'desc' = 'asc';
    if (field.startsWith('-')) {
      direction = 'desc';
      field = field.slice(1);
    } else if (field.endsWith('.desc') || field.endsWith('.asc')) {
      direction = field.endsWith('.desc') ? 'desc' : 'asc';
      field = field.slice(0, field.lastIndexOf('.'));
    }
    if (field.startsWith('col.')) field = field.slice(4);
    if (!canReadField(ctx.access, ctx.table, field)) {
      throw new QueryError(parameter, `${ctx.table.spec.name} has no field "${field}" to sort by`);
    }
    const spec = ctx.table.fields.get(field)!;
    if (spec.list || spec.type === 'Json' || spec.type === 'Bytes') throw new QueryError(parameter, `${field} cannot be sorted`);
    if (terms.some((t) => t.field === field)) throw new QueryError(parameter, `${field} appears twice`);
    terms.push({ field, direction });
  }
  if (terms.length > MAX_SORT_TERMS) throw new QueryError(parameter, `at most ${MAX_SORT_TERMS} sort fields`);
  return terms;
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
    select: selectText === null ? null : resolveSelect(ctx.catalog, table, parseSelectText(selectText), ctx.access),
    ...paging,
  };
}
