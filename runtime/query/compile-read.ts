/**
 * Read queries → one SQL statement whose rows are finished JSON text (`row_to_json`), so records,
 * embeds and aliases are shaped by PostgreSQL and the server only joins strings into an envelope.
 * Every table read goes through here with the caller's access: its readable rows, its visible fields.
 * The text is compact: arrays and key-by-key objects are joined with string_agg, since json_agg and
 * json_object_agg put spaces (and json_agg of records newlines) between members. Json fields are
 * jsonb, whose text is spaced too: reads say when they hold one, and the caller compacts those
 * records with compactJson (json-text.ts).
 */
import { ident } from '../db/index.ts';
import { LIMITS, type FieldSpec } from '../model/index.ts';
import { canReadField, followable, QueryError } from './access.ts';
import type { CatalogTable } from './catalog.ts';
import {
  columnRef,
  compileCondition,
  compileRoleCondition,
  fieldVisibility,
  joinCondition,
  newAlias,
  readableRows,
  visibleValue,
  type Scope,
} from './compile-condition.ts';
import type { OrderTerm, ReadQuery, SelectItem } from './description.ts';
import { MAX_EMBED_OFFSET } from './parse-select.ts';

const ISO_FORMAT = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`;

/** A value as it appears in JSON: ISO 8601 timestamps, BigInt as a string, Bytes as base64. */
export function jsonValue(field: FieldSpec, column: string): string {
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
  const converted = one(field.list ? 'x' : column);
  if (converted === undefined) return column;
  return field.list ? `ARRAY(SELECT ${converted} FROM unnest(${column}) AS x)` : converted;
}

/** A field of the row `alias` as it appears in JSON. */
export function fieldExpression(alias: string, field: FieldSpec): string {
  return jsonValue(field, columnRef(alias, field));
}

/**
 * The select list of a record and how to get its JSON from a row of it. Fields the caller cannot
 * read are left out (docs/permissions.md: silently); a field hidden on some rows is left out of
 * those records, which then are built key by key.
 */
interface RecordShape {
  /** The select list, without SELECT (may be empty: the record is then {}). */
  readonly list: string;
  /** The record's JSON from the row alias `e` of a subquery selecting `list`. */
  json(e: string): string;
  /** Whether a Json field's value may be in it (spaced jsonb text, see compactJson). */
  readonly jsonb: boolean;
}

/** A JSON array of the json values `value` in input order, compact ('[]' when there are none). */
function compactArray(value: string): string {
  return `coalesce('[' || string_agg(${value}::text, ',') || ']', '[]')::json`;
}

function recordShape(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  select: readonly SelectItem[] | null,
): RecordShape {
  const items = select ?? table.spec.fields.map((f): SelectItem => ({ kind: 'field', field: f.name, alias: f.name }));
  const grant = scope.access.grant(table.spec.name, 'read');
  const parts: { alias: string; value: string; visible?: string }[] = [];
  let jsonb = false;
  for (const item of items) {
    if (item.kind === 'field') {
      if (!table.fields.has(item.field))
        throw new QueryError('select', `${table.spec.name} has no field "${item.field}"`);
      if (!grant || (grant.fields !== null && !grant.fields.has(item.field))) continue;
      const rows = grant.fieldRows.get(item.field);
      const field = table.fields.get(item.field)!;
      jsonb ||= field.type === 'Json';
      parts.push({
        alias: item.alias,
        value: fieldExpression(alias, field),
        visible: rows && compileRoleCondition(scope, table, alias, rows),
      });
    } else {
      const embed = embedExpression(scope, table, alias, item);
      jsonb ||= embed.jsonb;
      parts.push({ alias: item.alias, value: embed.sql });
    }
  }
  if (parts.every((p) => p.visible === undefined)) {
    return {
      list: parts.map((p) => `${p.value} AS ${ident(p.alias)}`).join(', '),
      json: (e) => `row_to_json(${e})`,
      jsonb,
    };
  }
  // Key by key, in select order, each present only where visible; the key is written here, once.
  const rows = parts.map(
    (p, i) =>
      `(${i}, ${scope.params.add(`${JSON.stringify(p.alias)}:`)}::text || coalesce(to_json(${p.value})::text, 'null'), ${p.visible ?? 'TRUE'})`,
  );
  return {
    list: `(SELECT coalesce('{' || string_agg(kv.member, ',' ORDER BY kv.o) || '}', '{}')::json FROM (VALUES ${rows.join(', ')}) kv(o, member, shown) WHERE kv.shown) AS j`,
    json: (e) => `${e}.j`,
    jsonb,
  };
}

/** Refuses embed arguments the model or the bounds do not allow, before any SQL is written. */
function checkEmbedArguments(table: CatalogTable, item: SelectItem & { kind: 'embed' }, toOne: boolean): void {
  const given =
    item.where !== undefined || item.orderBy !== undefined || item.limit !== undefined || item.offset !== undefined;
  if (toOne && given) {
    throw new QueryError(
      'select',
      `${table.spec.name}.${item.relation} is a to-one relation: filter, order and limit apply to to-many embeds`,
    );
  }
  if (
    item.limit !== undefined &&
    !(Number.isInteger(item.limit) && item.limit >= 1 && item.limit <= LIMITS.maxPageSize)
  ) {
    throw new QueryError(
      'select',
      `the limit of ${item.relation} must be a whole number from 1 to ${LIMITS.maxPageSize}`,
    );
  }
  if (
    item.offset !== undefined &&
    !(Number.isInteger(item.offset) && item.offset >= 0 && item.offset <= MAX_EMBED_OFFSET)
  ) {
    throw new QueryError(
      'select',
      `the offset of ${item.relation} must be a whole number from 0 to ${MAX_EMBED_OFFSET}`,
    );
  }
}

/**
 * A related record (to-one) or the array of related records (to-many). Only rows of the target the
 * caller may read take part; a to-many embed's own filter, order and limit (held to the read list
 * like a top-level query's) only narrow and arrange those.
 */
function embedExpression(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  item: SelectItem & { kind: 'embed' },
): { sql: string; jsonb: boolean } {
  const relation = followable(scope.access, scope.catalog, table, item.relation);
  if (!relation) throw new QueryError('select', `${table.spec.name} has no relation "${item.relation}"`);
  checkEmbedArguments(table, item, relation.kind === 'one');
  const targetAlias = newAlias(scope);
  const join = joinCondition(scope, table, alias, item.relation, targetAlias);
  const linkedOn = [
    ...relation.fields.map((f) => fieldVisibility(scope, table, alias, f)),
    ...relation.targetFields.map((f) => fieldVisibility(scope, join.target, targetAlias, f)),
  ];
  const filter = item.where && compileCondition(scope, join.target, targetAlias, item.where);
  const where = [join.sql, readableRows(scope, join.target, targetAlias), ...linkedOn, filter]
    .filter((c) => c !== undefined && c !== 'TRUE')
    .join(' AND ');
  const shape = recordShape(scope, join.target, targetAlias, item.items);
  const inner = `SELECT ${shape.list} FROM ${join.target.qualified(scope.environment)} ${targetAlias} WHERE ${where}`;
  const e = newAlias(scope);
  if (relation.kind === 'one')
    return { sql: `(SELECT ${shape.json(e)} FROM (${inner} LIMIT 1) ${e})`, jsonb: shape.jsonb };
  const order = orderBySql(scope, join.target, targetAlias, item.orderBy ?? [], 'select');
  // Literals, not parameters (checked whole numbers above): see pageLimit.
  const limit = item.limit !== undefined ? ` LIMIT ${item.limit}` : '';
  const offset = item.offset ? ` OFFSET ${item.offset}` : '';
  // string_agg keeps the order of the ordered subquery, as json_agg did.
  return {
    sql: `(SELECT ${compactArray(shape.json(e))} FROM (${inner} ORDER BY ${order}${limit}${offset}) ${e})`,
    jsonb: shape.jsonb,
  };
}

/** The order terms with the primary key appended as the final tie breaker: the order is total. */
export function fullOrder(table: CatalogTable, terms: readonly OrderTerm[]): OrderTerm[] {
  const used = new Set(terms.map((t) => t.field));
  return [
    ...terms,
    ...table.spec.primaryKey.filter((k) => !used.has(k)).map((field) => ({ field, direction: 'asc' as const })),
  ];
}

/** Whether a sort key reads as null on rows where the caller may not see it (several roles, different field lists). */
function maskedOnSomeRows(scope: Scope, table: CatalogTable, term: OrderTerm): boolean {
  return scope.access.grant(table.spec.name, 'read')?.fieldRows.has(term.field) ?? false;
}

/**
 * A sort key as the caller sees it: a field it cannot read is refused, one hidden on a row sorts as
 * null there. Each call compiles it afresh (its parameters belong to the place it is written).
 */
function orderValue(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  term: OrderTerm,
  tieBreaker: boolean,
  parameter: string,
): string {
  const field = table.fields.get(term.field)!;
  // The key that ends every order only makes it total: it is not the caller's sort.
  if (tieBreaker) return columnRef(alias, field);
  if (!canReadField(scope.access, table, term.field))
    throw new QueryError(parameter, `${table.spec.name} has no field "${term.field}" to sort by`);
  if (field.list || field.type === 'Json' || field.type === 'Bytes')
    throw new QueryError(parameter, `${term.field} cannot be sorted`);
  return visibleValue(scope, table, alias, field);
}

function orderColumns(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  terms: readonly OrderTerm[],
  parameter = 'sort',
) {
  return fullOrder(table, terms).map((term, i) => ({
    term,
    value: () => orderValue(scope, table, alias, term, i >= terms.length, parameter),
  }));
}

/** NULLS LAST ascending, NULLS FIRST descending (PostgreSQL's defaults, written out for keysets). */
export function orderBySql(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  terms: readonly OrderTerm[],
  parameter = 'sort',
): string {
  return orderColumns(scope, table, alias, terms, parameter)
    .map((c) => `${c.value()} ${c.term.direction === 'desc' ? 'DESC NULLS FIRST' : 'ASC NULLS LAST'}`)
    .join(', ');
}

/**
 * Rows strictly after the keyset position `after` in the order `terms` (nullable values included).
 * A non-nullable leading column also gets a plain range bound, which an index can use.
 */
function keysetCondition(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  terms: readonly OrderTerm[],
  after: readonly (string | null)[],
): string {
  const ors: string[] = [];
  const equals: string[] = [];
  let bound = '';
  orderColumns(scope, table, alias, terms).forEach(({ term, value: col }, i, all) => {
    const field = table.fields.get(term.field)!;
    // A value hidden on some rows reads as null there, like a nullable column.
    const nullable = field.nullable || (i < terms.length && maskedOnSomeRows(scope, table, term));
    const v = after[i] ?? null;
    let later: string;
    if (term.direction === 'asc')
      later = v === null ? 'FALSE' : `(${col()} > ${scope.params.add(v)}${nullable ? ` OR ${col()} IS NULL` : ''})`;
    else later = v === null ? `${col()} IS NOT NULL` : `${col()} < ${scope.params.add(v)}`;
    if (i === 0 && !nullable && v !== null)
      bound = `${col()} ${term.direction === 'asc' ? '>=' : '<='} ${scope.params.add(v)} AND `;
    ors.push(equals.length ? `(${equals.join(' AND ')} AND ${later})` : later);
    if (i < all.length - 1) equals.push(v === null ? `${col()} IS NULL` : `${col()} = ${scope.params.add(v)}`);
  });
  return `(${bound}(${ors.join(' OR ')}))`;
}

export interface CompiledRead {
  sql: string;
  /** Columns after the JSON one: the keyset values (as text) of each row, then the count if asked. */
  keyColumns: number;
  /** The JSON may hold a Json field's spaced jsonb text: pass each row's through compactJson. */
  jsonb: boolean;
  /** Where the page's offset (when one was given) is among the scope's parameters: a statement kept for its shape takes the next page's there. */
  offsetAt?: number;
}

/**
 * A page's limit, written into the statement as a literal: with LIMIT $n, PostgreSQL's generic plan
 * of a prepared statement guesses the limit (a tenth of the rows), costs far more than a custom one
 * and is never chosen, so every execution is planned again; with the literal, a statement run for
 * the same limit again (kept-statements.ts keys kept pages by it) is planned once per connection.
 */
function pageLimit(limit: number): string {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new Error(`a page limit must be a whole number, not ${limit}`);
  return String(limit);
}

/** The caller's filter and address on rows `alias`, with the rows it may read. */
function rowsWhere(scope: Scope, table: CatalogTable, alias: string, query: Pick<ReadQuery, 'where' | 'key'>): string {
  const parts = [compileCondition(scope, table, alias, query.where), readableRows(scope, table, alias)];
  if (query.key) parts.unshift(compileRoleCondition(scope, table, alias, query.key));
  return parts.filter((p) => p !== 'TRUE').join(' AND ') || 'TRUE';
}

/**
 * One statement for a page: each row is the record's JSON text followed by its keyset values as
 * text (for the next cursor). With `count`, the statement also carries the total of matching rows
 * (every row repeats it; an empty page still yields one row whose JSON is null).
 */
export function compileRead(
  scope: Scope,
  query: ReadQuery,
  options: { count?: boolean; single?: boolean } = {},
): CompiledRead {
  const table = scope.catalog.require(query.table);
  const alias = newAlias(scope);
  const x = newAlias(scope);
  const conditions = [rowsWhere(scope, table, alias, query)];
  if (query.after) conditions.push(keysetCondition(scope, table, alias, query.orderBy, query.after));
  const shape = recordShape(scope, table, alias, query.select);
  if (options.single) {
    // One record by its key: no page to cut, no order to keep.
    return {
      sql: `SELECT ${shape.json(x)}::text AS j FROM ${table.qualified(scope.environment)} ${alias}
        CROSS JOIN LATERAL (SELECT ${shape.list}) ${x}
        WHERE ${conditions.join(' AND ')} LIMIT 1`,
      keyColumns: 0,
      jsonb: shape.jsonb,
    };
  }
  const keys = orderColumns(scope, table, alias, query.orderBy).map((c) => `${c.value()}::text`);
  const limit = pageLimit(query.limit);
  const offset = query.offset > 0 ? ` OFFSET ${scope.params.add(query.offset)}` : '';
  const offsetAt = query.offset > 0 ? scope.params.values.length - 1 : undefined;
  // The page is cut first and only its rows are turned into JSON (embeds included): rows skipped
  // by OFFSET never pay for the projection.
  const order = orderBySql(scope, table, alias, query.orderBy);
  const page = `SELECT ${shape.json(x)}::text AS j${keys.map((k, i) => `, ${k} AS k${i}`).join('')}
    FROM (SELECT * FROM ${table.qualified(scope.environment)} ${alias} WHERE ${conditions.join(' AND ')}
      ORDER BY ${order} LIMIT ${limit}${offset}) ${alias}
    CROSS JOIN LATERAL (SELECT ${shape.list}) ${x}
    ORDER BY ${order}`;
  if (!options.count) return { sql: page, keyColumns: keys.length, jsonb: shape.jsonb, offsetAt };
  const c = newAlias(scope);
  const total = `SELECT count(*)::int AS total FROM ${table.qualified(scope.environment)} ${c} WHERE ${rowsWhere(scope, table, c, query)}`;
  return {
    sql: `SELECT p.*, n.total FROM (${total}) n LEFT JOIN LATERAL (${page}) p ON TRUE`,
    keyColumns: keys.length,
    jsonb: shape.jsonb,
    offsetAt,
  };
}

/**
 * The row `alias` (a whole table row, such as a write's RETURNING) as the caller reads it: its
 * record's JSON text, or null where the caller may not read the row.
 */
export function readableRecord(scope: Scope, table: CatalogTable, alias: string): string {
  const r = newAlias(scope);
  const shape = recordShape(scope, table, alias, null);
  return `CASE WHEN ${readableRows(scope, table, alias)} THEN (SELECT ${shape.json(r)}::text FROM (SELECT ${shape.list}) ${r}) END`;
}

/** Every field of the row `alias` as JSON, for the server's own records (webhook payloads), not a caller's. */
export function fullRecord(table: CatalogTable, alias: string): string {
  return `(SELECT row_to_json(r) FROM (SELECT ${table.spec.fields.map((f) => `${fieldExpression(alias, f)} AS ${ident(f.name)}`).join(', ')}) r)`;
}
