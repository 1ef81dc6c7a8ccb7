/**
 * Read queries → one SQL statement whose rows are finished JSON text (`row_to_json`), so records,
 * embeds and aliases are shaped by PostgreSQL and the server only joins strings into an envelope.
 */
import { ident } from '../db/index.ts';
import type { FieldSpec } from '../model/index.ts';
import type { CatalogTable } from './catalog.ts';
import { columnRef, compileCondition, joinCondition, newAlias, type Scope } from './compile-condition.ts';
import { and, type Condition, type Grant, type OrderTerm, type ReadQuery, type SelectItem } from './description.ts';

export interface ReadScope extends Scope {
  /** The caller's read grant for a table, or null when it may not read it at all. */
  readonly grantFor: (table: string) => Grant | null;
}

const ISO_FORMAT = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/** A field as it appears in JSON: ISO 8601 timestamps, BigInt as a string, Bytes as base64. */
export function fieldExpression(alias: string, field: FieldSpec): string {
  const col = columnRef(alias, field);
  const one = (x: string): string | undefined => {
    switch (field.type) {
      case 'DateTime':
        return `to_char(${x}, ${ISO_FORMAT})`;
      case 'BigInt':
        return `${x}::text`;
      case 'Bytes':
        return `translate(encode(${x}, 'base64'), E'\\n', '')`;
      default:
        return undefined;
    }
  };
  const converted = one(field.list ? 'x' : col);
  if (converted === undefined) return col;
  return field.list ? `ARRAY(SELECT ${converted} FROM unnest(${col}) AS x)` : converted;
}

function visibleFields(table: CatalogTable, grant: Grant): FieldSpec[] {
  return table.spec.fields.filter((f) => grant.fields === null || grant.fields.has(f.name));
}

function projection(scope: ReadScope, table: CatalogTable, alias: string, grant: Grant, select: readonly SelectItem[] | null): string {
  if (select === null) {
    const fields = visibleFields(table, grant);
    if (fields.length === 0) return ''; // PostgreSQL allows an empty select list: the record is {}
    return fields.map((f) => `${fieldExpression(alias, f)} AS ${ident(f.name)}`).join(', ');
  }
  const parts: string[] = [];
  for (const item of select) {
    if (item.kind === 'field') {
      if (grant.fields !== null && !grant.fields.has(item.field)) continue;
      parts.push(`${fieldExpression(alias, table.fields.get(item.field)!)} AS ${ident(item.alias)}`);
    } else {
      parts.push(`${embedExpression(scope, table, alias, item)} AS ${ident(item.alias)}`);
    }
  }
  return parts.join(', ');
}

function embedExpression(scope: ReadScope, table: CatalogTable, alias: string, item: SelectItem & { kind: 'embed' }): string {
  const relation = table.relations.get(item.relation)!;
  const targetAlias = newAlias(scope);
  const join = joinCondition(scope, table, alias, item.relation, targetAlias);
  const grant = scope.grantFor(relation.target);
  const rows = grant ? compileCondition(scope, join.target, targetAlias, grant.rows) : 'FALSE';
  const inner = `SELECT ${projection(scope, join.target, targetAlias, grant ?? { rows: { kind: 'false' }, fields: new Set() }, item.items)}
    FROM ${join.target.qualified(scope.environment)} ${targetAlias} WHERE ${join.sql} AND ${rows}`;
  const e = newAlias(scope);
  if (relation.kind === 'one') return `(SELECT row_to_json(${e}) FROM (${inner} LIMIT 1) ${e})`;
  const order = orderBySql(join.target, targetAlias, []);
  return `(SELECT coalesce(json_agg(${e}), '[]'::json) FROM (${inner} ORDER BY ${order}) ${e})`;
}

/** ORDER BY terms plus the primary key as the final tie breaker, so order is always stable. */
export function orderBySql(table: CatalogTable, alias: string, terms: readonly OrderTerm[]): string {
  const used = new Set(terms.map((t) => t.field));
  const all = [...terms, ...table.spec.primaryKey.filter((k) => !used.has(k)).map((field) => ({ field, direction: 'asc' as const }))];
  return all.map((t) => `${columnRef(alias, table.fields.get(t.field)!)} ${t.direction === 'desc' ? 'DESC' : 'ASC'}`).join(', ');
}

/**
 * SELECT returning one JSON text per record. `limit + 1` rows are asked for by list callers so
 * hasNextPage needs no count query.
 */
export function compileRead(scope: ReadScope, query: ReadQuery, grant: Grant, extra: Condition = { kind: 'true' }): string {
  const table = scope.catalog.require(query.table);
  const alias = newAlias(scope);
  const where = compileCondition(scope, table, alias, and(query.where, grant.rows, extra));
  const limit = scope.params.add(query.limit);
  const offset = query.offset > 0 ? ` OFFSET ${scope.params.add(query.offset)}` : '';
  return `SELECT row_to_json(r)::text FROM (SELECT ${projection(scope, table, alias, grant, query.select)}
    FROM ${table.qualified(scope.environment)} ${alias} WHERE ${where}
    ORDER BY ${orderBySql(table, alias, query.orderBy)} LIMIT ${limit}${offset}) r`;
}

/** The JSON projection of `table` under `grant`, for RETURNING-style statements over alias. */
export function recordProjection(scope: ReadScope, table: CatalogTable, alias: string, grant: Grant): string {
  return projection(scope, table, alias, grant, null);
}
