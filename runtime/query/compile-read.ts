/**
 * Read queries → one SQL statement whose rows are finished JSON text (`row_to_json`), so records,
 * embeds and aliases are shaped by PostgreSQL and the server only joins strings into an envelope.
 */
import { ident } from '../db/index.ts';
import type { FieldSpec } from '../model/index.ts';
import type { CatalogTable } from './catalog.ts';
import { columnRef, compileCondition, joinCondition, newAlias, type Scope } from './compile-condition.ts';
import { and, type Grant, type OrderTerm, type ReadQuery, type SelectItem } from './description.ts';

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

/** The order terms with the primary key appended as the final tie breaker: the order is total. */
export function fullOrder(table: CatalogTable, terms: readonly OrderTerm[]): OrderTerm[] {
  const used = new Set(terms.map((t) => t.field));
  return [...terms, ...table.spec.primaryKey.filter((k) => !used.has(k)).map((field) => ({ field, direction: 'asc' as const }))];
}

/** NULLS LAST ascending, NULLS FIRST descending (PostgreSQL's defaults, written out for keysets). */
export function orderBySql(table: CatalogTable, alias: string, terms: readonly OrderTerm[]): string {
  return fullOrder(table, terms)
    .map((t) => `${columnRef(alias, table.fields.get(t.field)!)} ${t.direction === 'desc' ? 'DESC NULLS FIRST' : 'ASC NULLS LAST'}`)
    .join(', ');
}

/**
 * Rows strictly after the keyset position `after` in the order `terms` (nullable columns included).
 * A non-nullable leading column also gets a plain range bound, which an index can use.
 */
function keysetCondition(scope: Scope, table: CatalogTable, alias: string, terms: readonly OrderTerm[], after: readonly (string | null)[]): string {
  const ors: string[] = [];
  const equals: string[] = [];
  let bound = '';
  terms.forEach((term, i) => {
    const field = table.fields.get(term.field)!;
    const col = columnRef(alias, field);
    const v = after[i] ?? null;
    const orNull = field.nullable ? ` OR ${col} IS NULL` : '';
    let later: string;
    if (term.direction === 'asc') later = v === null ? 'FALSE' : `(${col} > ${scope.params.add(v)}${orNull})`;
    else later = v === null ? `${col} IS NOT NULL` : `${col} < ${scope.params.add(v)}`;
    if (i === 0 && !field.nullable && v !== null) bound = `${col} ${term.direction === 'asc' ? '>=' : '<='} ${scope.params.add(v)} AND `;
    ors.push(equals.length ? `(${equals.join(' AND ')} AND ${later})` : later);
    if (i < terms.length - 1) equals.push(v === null ? `${col} IS NULL` : `${col} = ${scope.params.add(v)}`);
  });
  return `(${bound}(${ors.join(' OR ')}))`;
}

export interface CompiledRead {
  sql: string;
  /** Columns after the JSON one: the keyset values (as text) of each row, then the count if asked. */
  keyColumns: number;
}

/**
 * One statement for a page: each row is the record's JSON text followed by its keyset values as
 * text (for the next cursor). With `count`, the statement also carries the total of matching rows
 * (every row repeats it; an empty page still yields one row whose JSON is null).
 */
export function compileRead(
  scope: ReadScope,
  query: ReadQuery,
  grant: Grant,
  options: { count?: boolean; single?: boolean } = {},
): CompiledRead {
  const table = scope.catalog.require(query.table);
  const alias = newAlias(scope);
  const x = newAlias(scope);
  const keyOrder = fullOrder(table, query.orderBy);
  const filters = and(query.where, grant.rows);
  const conditions = [compileCondition(scope, table, alias, filters)];
  if (query.after) conditions.push(keysetCondition(scope, table, alias, keyOrder, query.after));
  if (options.single) {
    // One record by its key: no page to cut, no order to keep.
    return {
      sql: `SELECT row_to_json(${x})::text AS j FROM ${table.qualified(scope.environment)} ${alias}
        CROSS JOIN LATERAL (SELECT ${projection(scope, table, alias, grant, query.select)}) ${x}
        WHERE ${conditions.join(' AND ')} LIMIT 1`,
      keyColumns: 0,
    };
  }
  const keys = keyOrder.map((t) => `${columnRef(alias, table.fields.get(t.field)!)}::text`);
  const limit = scope.params.add(query.limit);
  const offset = query.offset > 0 ? ` OFFSET ${scope.params.add(query.offset)}` : '';
  // The page is cut first and only its rows are turned into JSON (embeds included): rows skipped
  // by OFFSET never pay for the projection.
  const order = orderBySql(table, alias, query.orderBy);
  const page = `SELECT row_to_json(${x})::text AS j${keys.map((k, i) => `, ${k} AS k${i}`).join('')}
    FROM (SELECT * FROM ${table.qualified(scope.environment)} ${alias} WHERE ${conditions.join(' AND ')}
      ORDER BY ${order} LIMIT ${limit}${offset}) ${alias}
    CROSS JOIN LATERAL (SELECT ${projection(scope, table, alias, grant, query.select)}) ${x}
    ORDER BY ${order}`;
  if (!options.count) return { sql: page, keyColumns: keys.length };
  const c = newAlias(scope);
  const total = `SELECT count(*)::int AS total FROM ${table.qualified(scope.environment)} ${c} WHERE ${compileCondition(scope, table, c, filters)}`;
  return {
    sql: `SELECT p.*, n.total FROM (${total}) n LEFT JOIN LATERAL (${page}) p ON TRUE`,
    keyColumns: keys.length,
  };
}

/** The JSON projection of `table` under `grant`, for RETURNING-style statements over alias. */
export function recordProjection(scope: ReadScope, table: CatalogTable, alias: string, grant: Grant): string {
  return projection(scope, table, alias, grant, null);
}
