/** Aggregate queries → one SELECT … GROUP BY … HAVING whose rows are JSON text. */
import { ident } from '../db/index.ts';
import { columnRef, compileCondition, newAlias } from './compile-condition.ts';
import { fieldExpression, type ReadScope } from './compile-read.ts';
import { and, type Condition, type Grant } from './description.ts';

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
  readonly value: number;
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

export function compileAggregate(scope: ReadScope, query: AggregateQuery, grant: Grant): string {
  const table = scope.catalog.require(query.table);
  const alias = newAlias(scope);
  const expressions = new Map<string, string>();
  const select: string[] = [];
  for (const name of query.groupBy) {
    select.push(`${fieldExpression(alias, table.fields.get(name)!)} AS ${ident(name)}`);
  }
  for (const term of query.terms) {
    const field = term.field ? table.fields.get(term.field)! : undefined;
    const col = field ? columnRef(alias, field) : '';
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
        expr = field!.type === 'DateTime' ? `to_char(${term.fn}(${col}), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')` : `${term.fn}(${col})`;
        if (field!.type === 'BigInt') expr += '::text';
        break;
    }
    expressions.set(term.alias, expr);
    select.push(`${expr} AS ${ident(term.alias)}`);
  }
  const where = compileCondition(scope, table, alias, and(query.where, grant.rows));
  const groupBy = query.groupBy.length ? ` GROUP BY ${query.groupBy.map((n) => columnRef(alias, table.fields.get(n)!)).join(', ')}` : '';
  const having = query.having.length
    ? ` HAVING ${query.having.map((h) => `${expressions.get(h.alias)} ${HAVING_SQL[h.op]} ${scope.params.add(h.value)}`).join(' AND ')}`
    : '';
  const orderTerms = query.orderBy.map((o) => `${ident(o.name)} ${o.direction === 'desc' ? 'DESC' : 'ASC'} NULLS LAST`);
  // Group fields last, so groups come out in a stable order whatever the requested sort.
  for (const n of query.groupBy) if (!query.orderBy.some((o) => o.name === n)) orderTerms.push(`${ident(n)} ASC NULLS LAST`);
  const orderBy = orderTerms.length ? ` ORDER BY ${orderTerms.join(', ')}` : '';
  return `SELECT row_to_json(r)::text FROM (SELECT ${select.join(', ')}
    FROM ${table.qualified(scope.environment)} ${alias} WHERE ${where}${groupBy}${having}${orderBy} LIMIT ${scope.params.add(query.limit)}) r`;
}
