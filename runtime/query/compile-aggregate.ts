/** Aggregate queries → one SELECT … GROUP BY … HAVING whose rows are JSON text. */
import { ident } from '../db/index.ts';
import type { FieldSpec } from '../model/index.ts';
import { canReadField, QueryError } from './access.ts';
import type { CatalogTable } from './catalog.ts';
import { compileCondition, newAlias, readableRows, visibleValue, type Scope } from './compile-condition.ts';
import { jsonValue } from './compile-read.ts';
import type { Condition } from './description.ts';

export type { AggregateFunction } from '../model/index.ts';
import type { AggregateFunction } from '../model/index.ts';

export interface AggregateTerm {
  readonly fn: AggregateFunction;
  /** Absent for count(*). */
  readonly field?: string;
  /** `count` or `<fn>_<field>`. */
  readonly alias: string;
}

export interface HavingTerm {
  readonly alias: string;
  readonly op: 'equals' | 'not_equals' | 'gt' | 'gte' | 'lt' | 'lte';
  /** A decimal number as text: compared as numeric, so no size can overflow the aggregate's type. */
  readonly value: string;
}

export interface AggregateQuery {
  readonly table: string;
  readonly terms: readonly AggregateTerm[];
  readonly groupBy: readonly string[];
  readonly where: Condition;
  readonly having: readonly HavingTerm[];
  /** Aliases or groupBy fields. */
  readonly orderBy: readonly { readonly name: string; readonly direction: 'asc' | 'desc' }[];
  readonly limit: number;
}

const HAVING_SQL = { equals: '=', not_equals: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/** A field the caller may aggregate or group by, as it sees it (null where hidden on a row). */
function readable(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  name: string,
  parameter: string,
): { field: FieldSpec; value: string } {
  const field = table.fields.get(name);
  if (!field || !canReadField(scope.access, table, name))
    throw new QueryError(parameter, `${table.spec.name} has no field "${name}"`);
  return { field, value: visibleValue(scope, table, alias, field) };
}

export function compileAggregate(scope: Scope, query: AggregateQuery): string {
  const table = scope.catalog.require(query.table);
  const alias = newAlias(scope);
  const expressions = new Map<string, string>();
  /** Aliases whose value is a number (min and max of text or dates are not): the ones having may compare. */
  const numeric = new Set<string>();
  const select: string[] = [];
  const groups = query.groupBy.map((name) => readable(scope, table, alias, name, 'groupBy'));
  for (const { field, value } of groups) select.push(`${jsonValue(field, value)} AS ${ident(field.name)}`);
  for (const term of query.terms) {
    const { field, value: col } = term.field
      ? readable(scope, table, alias, term.field, 'fn')
      : { field: undefined, value: '' };
    let expr: string;
    switch (term.fn) {
      case 'count':
        expr = 'count(*)::int';
        break;
      case 'count_distinct':
        expr = `count(DISTINCT ${col})::int`;
        break;
      case 'sum':
      case 'avg':
        expr = term.fn === 'avg' ? `avg(${col})::float8` : `sum(${col})`;
        break;
      case 'min':
      case 'max':
        expr =
          field!.type === 'DateTime'
            ? `to_char(${term.fn}(${col}), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
            : `${term.fn}(${col})`;
        if (field!.type === 'BigInt') expr += '::text';
        break;
    }
    expressions.set(term.alias, expr);
    if ((term.fn !== 'min' && term.fn !== 'max') || ['Int', 'BigInt', 'Float', 'Decimal'].includes(field!.type))
      numeric.add(term.alias);
    select.push(`${expr} AS ${ident(term.alias)}`);
  }
  const where = [compileCondition(scope, table, alias, query.where), readableRows(scope, table, alias)].join(' AND ');
  const groupBy = groups.length ? ` GROUP BY ${groups.map((g) => g.value).join(', ')}` : '';
  for (const h of query.having) {
    if (!expressions.has(h.alias)) throw new QueryError('having', `${h.alias} is not one of the aggregates`);
    if (!numeric.has(h.alias))
      throw new QueryError('having', `${h.alias} is not a number, and having compares numbers`);
  }
  const having = query.having.length
    ? ` HAVING ${query.having.map((h) => `${expressions.get(h.alias)} ${HAVING_SQL[h.op]} ${scope.params.add(h.value)}::numeric`).join(' AND ')}`
    : '';
  const orderTerms = query.orderBy.map((o) => {
    if (!expressions.has(o.name) && !query.groupBy.includes(o.name))
      throw new QueryError('sort', `sort by an aggregate or a groupBy field, not "${o.name}"`);
    return `${ident(o.name)} ${o.direction === 'desc' ? 'DESC' : 'ASC'} NULLS LAST`;
  });
  // Group fields last, so groups come out in a stable order whatever the requested sort.
  for (const n of query.groupBy)
    if (!query.orderBy.some((o) => o.name === n)) orderTerms.push(`${ident(n)} ASC NULLS LAST`);
  const orderBy = orderTerms.length ? ` ORDER BY ${orderTerms.join(', ')}` : '';
  return `SELECT row_to_json(r)::text FROM (SELECT ${select.join(', ')}
    FROM ${table.qualified(scope.environment)} ${alias} WHERE ${where}${groupBy}${having}${orderBy} LIMIT ${scope.params.add(query.limit)}) r`;
}
