/** `sort=a,-b` or `sort=a.asc,b.desc` (docs/api.md §5.6), for a list and for an embed's own order. */
import { canReadField, QueryError } from './access.ts';
import type { OrderTerm } from './description.ts';
import type { FilterContext } from './parse-filter.ts';

export const MAX_SORT_TERMS = 10;

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
    if (spec.list || spec.type === 'Json' || spec.type === 'Bytes')
      throw new QueryError(parameter, `${field} cannot be sorted`);
    if (terms.some((t) => t.field === field)) throw new QueryError(parameter, `${field} appears twice`);
    terms.push({ field, direction });
  }
  if (terms.length > MAX_SORT_TERMS) throw new QueryError(parameter, `at most ${MAX_SORT_TERMS} sort fields`);
  return terms;
}
