/** Condition tree → SQL boolean expression. Relation paths become EXISTS semi-joins. */
import { ident } from '../db/index.ts';
import { isTextField, type FieldSpec } from '../model/index.ts';
import type { Catalog, CatalogTable } from './catalog.ts';
import type { Condition } from './description.ts';
import type { Params } from './sql.ts';

export interface Scope {
  readonly catalog: Catalog;
  readonly environment: string;
  readonly params: Params;
  /** Next free table alias number (t0, t1, ...), shared by the whole statement. */
  nextAlias: { n: number };
}

export function newAlias(scope: Scope): string {
  return `t${scope.nextAlias.n++}`;
}

function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}

export function columnRef(alias: string, field: FieldSpec): string {
  return `${alias}.${ident(field.column)}`;
}

/** `a.x = b.y AND ...` for a relation from `alias` (of table) to `targetAlias`. */
export function joinCondition(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  relationName: string,
  targetAlias: string,
): { target: CatalogTable; sql: string } {
  const relation = table.relations.get(relationName)!;
  const target = scope.catalog.require(relation.target);
  const parts = relation.fields.map((local, i) => {
    const localField = table.fields.get(local)!;
    const targetField = target.fields.get(relation.targetFields[i]!)!;
    return `${columnRef(targetAlias, targetField)} = ${columnRef(alias, localField)}`;
  });
  return { target, sql: parts.join(' AND ') };
}

function compareSql(scope: Scope, column: string, field: FieldSpec, op: string, value: unknown): string {
  const p = (v: unknown) => scope.params.add(v);
  const isText = !field.list && isTextField(field);
  switch (op) {
    case 'equals':
      return value === null ? `${column} IS NULL` : `${column} = ${p(value)}`;
    case 'not_equals':
      return value === null ? `${column} IS NOT NULL` : `${column} IS DISTINCT FROM ${p(value)}`;
    case 'gt':
      return `${column} > ${p(value)}`;
    case 'gte':
      return `${column} >= ${p(value)}`;
    case 'lt':
      return `${column} < ${p(value)}`;
    case 'lte':
      return `${column} <= ${p(value)}`;
    case 'contains':
      if (field.list) return `${p(value)} = ANY(${column})`;
      return `${column} LIKE ${p(`%${escapeLike(String(value))}%`)}`;
    case 'starts_with':
      return `${column} LIKE ${p(`${escapeLike(String(value))}%`)}`;
    case 'ends_with':
      return `${column} LIKE ${p(`%${escapeLike(String(value))}`)}`;
    case 'in':
      return `${column} = ANY(${p(value)})`;
    case 'not_in':
      return `(${column} IS NULL OR NOT (${column} = ANY(${p(value)})))`;
    case 'between': {
      const [low, high] = value as [unknown, unknown];
      return `${column} BETWEEN ${p(low)} AND ${p(high)}`;
    }
    case 'is_empty':
    case 'is_not_empty': {
      const empty = field.list
        ? `(${column} IS NULL OR cardinality(${column}) = 0)`
        : isText
          ? `(${column} IS NULL OR ${column} = '')`
          : `${column} IS NULL`;
      const wantEmpty = (op === 'is_empty') === (value !== false);
      return wantEmpty ? empty : `NOT ${empty}`;
    }
    // Date helpers: UTC days, ISO weeks from Monday (the session time zone is UTC).
    case 'today':
      return `(${column} >= current_date AND ${column} < current_date + 1)`;
    case 'yesterday':
      return `(${column} >= current_date - 1 AND ${column} < current_date)`;
    case 'this_week':
      return `(${column} >= date_trunc('week', now()) AND ${column} < date_trunc('week', now()) + interval '1 week')`;
    case 'this_month':
      return `(${column} >= date_trunc('month', now()) AND ${column} < date_trunc('month', now()) + interval '1 month')`;
    case 'last_days':
      return `(${column} >= now() - make_interval(days => ${p(value)}::int) AND ${column} <= now())`;
    case 'last_weeks':
      return `(${column} >= now() - make_interval(weeks => ${p(value)}::int) AND ${column} <= now())`;
    case 'last_months':
      return `(${column} >= now() - make_interval(months => ${p(value)}::int) AND ${column} <= now())`;
    default:
      throw new Error(`unsupported operator ${op}`);
  }
}

export function compileCondition(scope: Scope, table: CatalogTable, alias: string, condition: Condition): string {
  switch (condition.kind) {
    case 'true':
      return 'TRUE';
    case 'false':
      return 'FALSE';
    case 'and':
    case 'or':
      if (condition.items.length === 0) return condition.kind === 'and' ? 'TRUE' : 'FALSE';
      return `(${condition.items.map((c) => compileCondition(scope, table, alias, c)).join(condition.kind === 'and' ? ' AND ' : ' OR ')})`;
    case 'not':
      return `NOT ${compileCondition(scope, table, alias, condition.item)}`;
    case 'compare': {
      const [head, ...rest] = condition.path;
      if (rest.length === 0) {
        const field = table.fields.get(head!)!;
        return compareSql(scope, columnRef(alias, field), field, condition.op, condition.value);
      }
      // A relation step: "some related record matches" (to-many) or "the related record matches".
      const targetAlias = newAlias(scope);
      const join = joinCondition(scope, table, alias, head!, targetAlias);
      const inner = compileCondition(scope, join.target, targetAlias, { ...condition, path: rest });
      return `EXISTS (SELECT 1 FROM ${join.target.qualified(scope.environment)} ${targetAlias} WHERE ${join.sql} AND ${inner})`;
    }
  }
}
