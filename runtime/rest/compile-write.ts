/**
 * Writes → one SQL statement each, the way reads go through compileRead. A write description says
 * what changes; the compiler makes a statement whose first CTE (`w`) is the mutation, holding the
 * after-image of inserted and updated rows (with the names of the fields that really changed) or
 * the before-image of deleted ones, then the event capture CTEs (runtime/webhooks/capture.ts), then
 * the result the handler asked for. Every data mutation runs through here, so none can commit
 * without its events.
 */
import { ident } from '../db/index.ts';
import { compileCondition, fieldExpression, newAlias, recordProjection, type CatalogTable, type Condition, type Grant, type ReadScope } from '../query/index.ts';
import { captureEvents, CHANGED_COLUMN, type EventOperation } from '../webhooks/capture.ts';
import { clientDefaultValue, toParameter } from './values.ts';

export type Write =
  /** `values` are validated field values by field name. */
  | { readonly kind: 'insert'; readonly table: CatalogTable; readonly values: Readonly<Record<string, unknown>> }
  /** A merge patch (RFC 7396) applied to the rows `where` selects; an empty patch changes nothing. */
  | { readonly kind: 'update'; readonly table: CatalogTable; readonly where: Condition; readonly patch: Readonly<Record<string, unknown>> }
  | { readonly kind: 'delete'; readonly table: CatalogTable; readonly where: Condition };

export type WriteResult =
  /** A row per written record: its JSON under `grant` (null when the grant hides the row), then its key JSON. */
  | { readonly kind: 'record'; readonly grant: Grant }
  /** A row per written record: its key JSON. */
  | { readonly kind: 'key' }
  /** One row: the number of records written. */
  | { readonly kind: 'count' };

/** Column list and parameter placeholders of an INSERT for one validated record. */
function insertColumns(table: CatalogTable, record: Readonly<Record<string, unknown>>, add: (v: unknown) => string) {
  const columns: string[] = [];
  const values: string[] = [];
  for (const field of table.spec.fields) {
    if (field.name in record) {
      columns.push(ident(field.column));
      values.push(add(toParameter(field, record[field.name])));
    } else if (field.managed && field.name === 'updatedAt') {
      columns.push(ident(field.column));
      values.push('now()');
    } else if (field.clientDefault) {
      columns.push(ident(field.column));
      values.push(add(toParameter(field, clientDefaultValue(field.clientDefault))));
    } else if (field.list && !field.dbDefault) {
      columns.push(ident(field.column));
      values.push(add([]));
    }
  }
  return { columns, values };
}

/** The key fields of the row `alias` as a JSON object, each value as the API writes it. */
function keyJson(table: CatalogTable, alias: string): string {
  const pairs = table.spec.primaryKey.map((k) => `'${k.replace(/'/g, "''")}', ${fieldExpression(alias, table.fields.get(k)!)}`);
  return `json_build_object(${pairs.join(', ')})`;
}

/** The mutation CTE's body and the event it emits (none for an empty patch, which writes nothing). */
function mutation(scope: ReadScope, write: Write, capture: boolean): { sql: string; operation: EventOperation | null } {
  const table = write.table;
  const q = table.qualified(scope.environment);
  const add = (v: unknown) => scope.params.add(v);
  if (write.kind === 'insert') {
    const t = newAlias(scope);
    const { columns, values } = insertColumns(table, write.values, add);
    const body = columns.length ? `(${columns.join(', ')}) VALUES (${values.join(', ')})` : 'DEFAULT VALUES';
    return { sql: `INSERT INTO ${q} AS ${t} ${body} RETURNING ${t}.*`, operation: 'INSERT' };
  }
  if (write.kind === 'delete') {
    const t = newAlias(scope);
    return { sql: `DELETE FROM ${q} AS ${t} WHERE ${compileCondition(scope, table, t, write.where)} RETURNING ${t}.*`, operation: 'DELETE' };
  }
  const before = newAlias(scope);
  const condition = compileCondition(scope, table, before, write.where);
  const patched = table.spec.fields.filter((f) => f.name in write.patch);
  if (patched.length === 0) return { sql: `SELECT ${before}.* FROM ${q} ${before} WHERE ${condition}`, operation: null };
  const after = newAlias(scope);
  const sets = patched.map((f) => `${ident(f.column)} = ${add(toParameter(f, write.patch[f.name]))}`);
  const updatedAt = table.spec.fields.find((f) => f.managed && f.name === 'updatedAt');
  if (updatedAt && !(updatedAt.name in write.patch)) sets.push(`${ident(updatedAt.column)} = now()`);
  if (!capture) {
    return { sql: `UPDATE ${q} AS ${before} SET ${sets.join(', ')} WHERE ${condition} RETURNING ${before}.*`, operation: 'UPDATE' };
  }
  // The before-image joins the UPDATE by primary key, locked as the UPDATE would lock it, so the
  // changed fields compare the stored values this statement replaced.
  const changed = patched
    .filter((f) => f !== updatedAt)
    .map((f) => `CASE WHEN ${after}.${ident(f.column)} IS DISTINCT FROM ${before}.${ident(f.column)} THEN '${f.name.replace(/'/g, "''")}' END`);
  const join = table.spec.primaryKey.map((k) => `${after}.${ident(table.fields.get(k)!.column)} = ${before}.${ident(table.fields.get(k)!.column)}`);
  return {
    sql: `UPDATE ${q} AS ${after} SET ${sets.join(', ')}
      FROM (SELECT * FROM ${q} ${before} WHERE ${condition} FOR UPDATE OF ${before}) ${before}
      WHERE ${join.join(' AND ')}
      RETURNING ${after}.*, array_remove(ARRAY[${changed.length ? changed.join(', ') : 'NULL'}]::text[], NULL) AS "${CHANGED_COLUMN}"`,
    operation: 'UPDATE',
  };
}

function resultSelect(scope: ReadScope, table: CatalogTable, result: WriteResult): string {
  if (result.kind === 'count') return `SELECT count(*)::int FROM w`;
  if (result.kind === 'key') return `SELECT ${keyJson(table, 'w')}::text FROM w`;
  const alias = newAlias(scope);
  const visible = compileCondition(scope, table, alias, result.grant.rows);
  const projection = recordProjection(scope, table, alias, result.grant);
  return `SELECT (SELECT row_to_json(r)::text FROM (SELECT ${projection} FROM w ${alias} WHERE ${visible}) r),
    ${keyJson(table, 'w')}::text FROM w`;
}

/**
 * One statement for `write`; its rows are as `result` describes.
 * `capture` is whether the table may have subscribers (WatchedTables): when it is false the table
 * has none, and the statement skips the capture CTEs.
 */
export function compileWrite(scope: ReadScope, write: Write, result: WriteResult, capture: boolean): string {
  const { sql, operation } = mutation(scope, write, capture);
  const ctes = [`w AS (${sql})`];
  if (operation && capture) ctes.push(...captureEvents({ scope, table: write.table, operation, rows: 'w', changed: operation === 'UPDATE' }).ctes);
  return `WITH ${ctes.join(',\n')}\n${resultSelect(scope, write.table, result)}`;
}
