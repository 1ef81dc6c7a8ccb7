/**
 * Writes → one SQL statement each, the way reads go through compileRead. A write description says
 * what changes; the compiler makes a statement whose first CTE (`w`) is the mutation, holding the
 * after-image of inserted and updated rows (with the names of the fields that really changed) or
 * the before-image of deleted ones, then the event capture CTEs (runtime/events/capture.ts), then
 * the result the handler asked for. Every data mutation runs through here, so none can commit
 * without its events, and none can skip the caller's permissions (docs/permissions.md "Writing"):
 * updates and deletes reach only rows the caller may read and the action allows, and every row
 * created or changed must match the action's filter afterwards, or the statement fails (SVRF1).
 */
import { ident } from '../db/index.ts';
import { FILES_TABLE, type FieldSpec } from '../model/index.ts';
import { captureEvents, CHANGED_COLUMN, type EventOperation } from '../events/index.ts';
import type { CatalogTable } from './catalog.ts';
import { compileCondition, compileRoleCondition, newAlias, readableRows, type Scope } from './compile-condition.ts';
import { fieldExpression, fullRecord, readableRecord } from './compile-read.ts';
import type { Condition, Grant, RoleRule } from './description.ts';
import { clientDefaultValue, toParameter } from './values.ts';
import { sameRules, writeRules } from './write-decisions.ts';

export type Write =
  /** `values` are validated field values by field name (presets included); `written` the fields the caller sent. */
  | {
      readonly kind: 'insert';
      readonly table: CatalogTable;
      readonly values: Readonly<Record<string, unknown>>;
      readonly written: readonly string[];
    }
  /**
   * Several such records in one statement, inserted (and returned, and their events captured) in
   * the order given. The caller groups them so that every record is decided by the same rules
   * (sameRules): the statement checks one row filter for all of them.
   */
  | { readonly kind: 'insertMany'; readonly table: CatalogTable; readonly records: readonly InsertRecord[] }
  /**
   * A merge patch (RFC 7396) applied to the rows `where` (the caller's filter) and `key` (an address,
   * such as the id of the path) select; an empty patch changes nothing.
   */
  | {
      readonly kind: 'update';
      readonly table: CatalogTable;
      readonly where: Condition;
      readonly key?: Condition;
      readonly patch: Readonly<Record<string, unknown>>;
      /**
       * The fields the caller sent, whose write permissions apply (default: every patched field);
       * a hook may patch others (docs/own-code.md "Hooks").
       */
      readonly written?: readonly string[];
    }
  | { readonly kind: 'delete'; readonly table: CatalogTable; readonly where: Condition; readonly key?: Condition };

export interface InsertRecord {
  readonly values: Readonly<Record<string, unknown>>;
  readonly written: readonly string[];
}

export type WriteResult =
  /** A row per written record: its JSON as the caller may read it (null when it may not), then its key JSON. */
  | { readonly kind: 'record' }
  /** A row per written record: its key JSON. */
  | { readonly kind: 'key' }
  /** One row: the number of records written. */
  | { readonly kind: 'count' }
  /** A row per written record: every field of it as JSON (for hooks, never for the caller), then as `record`. */
  | { readonly kind: 'full' };

export interface CompiledWrite {
  readonly sql: string;
  /** The fields of the filters a created or changed row must match (named by a row_filter refusal). */
  readonly filterFields: readonly string[];
}

/** SQLSTATE of a row that does not match the action's filter after the write (svcgen.row_filter_check). */
export const ROW_FILTER_SQLSTATE = 'SVRF1';

/** SQLSTATE of a file reference to no file the caller may read (svcgen.file_reference_check); its detail names the field. */
export const FILE_REFERENCE_SQLSTATE = 'SVFR1';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The SQL value of `field` in a write. A file reference (docs/storage.md "Records that reference
 * files") is checked in the statement itself: the value must be the id of a file of the field's
 * bucket and environment that the caller may read (its bucket read rule), else the statement fails
 * with FILE_REFERENCE_SQLSTATE, whether the file is missing or only unreadable. The file's row is
 * locked FOR KEY SHARE, so a concurrent delete of the file waits for this statement's transaction
 * (and a delete that committed first makes the check fail).
 */
function writeValue(scope: Scope, field: FieldSpec, value: unknown, add: (v: unknown) => string): string {
  const p = add(toParameter(field, value));
  if (!field.file || value === null || value === undefined) return p;
  const name = `'${field.name.replace(/'/g, "''")}'`;
  const access = scope.files?.access(field.file.bucket, scope.environment);
  let readable = 'FALSE';
  if (scope.files && access && typeof value === 'string' && UUID.test(value)) {
    const files = scope.files.catalog.require(FILES_TABLE);
    const sub: Scope = { ...scope, catalog: scope.files.catalog, access };
    const f = newAlias(scope);
    // A file deleted with the record must be one the writer may delete too, or referencing it
    // would let a caller delete a file its bucket rules keep from it.
    const deletable = access.grant(FILES_TABLE, 'delete');
    const mayDelete =
      field.file.onDelete !== 'delete'
        ? ''
        : ` AND ${deletable ? compileRoleCondition(sub, files, f, deletable.rows) : 'FALSE'}`;
    readable = `EXISTS (SELECT 1 FROM ${files.qualified(scope.environment)} ${f} WHERE ${f}."id" = ${add(value)}::uuid AND ${readableRows(sub, files, f)}${mayDelete} FOR KEY SHARE OF ${f})`;
  }
  // Typed: inside CASE an untyped parameter would be text, which a uuid column does not take.
  const type = field.nativeType?.[0] === 'Uuid' ? 'uuid' : 'text';
  return `(CASE WHEN svcgen.file_reference_check(${readable}, ${name}) THEN ${p}::${type} END)`;
}

/**
 * What an INSERT of `record` writes to `field`: its own value, `now()` (updatedAt), a client-side
 * default, an empty list, or nothing (undefined: the column's DEFAULT).
 */
function insertSource(
  field: FieldSpec,
  record: Readonly<Record<string, unknown>>,
): 'value' | 'now' | 'default' | 'empty' | undefined {
  if (Object.hasOwn(record, field.name)) return 'value';
  if (field.managed && field.name === 'updatedAt') return 'now';
  if (field.clientDefault) return 'default';
  if (field.list && !field.dbDefault) return 'empty';
  return undefined;
}

/** Column list and parameter placeholders of an INSERT for one validated record. */
function insertColumns(
  scope: Scope,
  table: CatalogTable,
  record: Readonly<Record<string, unknown>>,
  add: (v: unknown) => string,
) {
  const columns: string[] = [];
  const values: string[] = [];
  for (const field of table.spec.fields) {
    const source = insertSource(field, record);
    if (source === undefined) continue;
    columns.push(ident(field.column));
    if (source === 'value') values.push(writeValue(scope, field, record[field.name], add));
    else if (source === 'now') values.push('now()');
    else if (source === 'default') values.push(add(toParameter(field, clientDefaultValue(field.clientDefault!))));
    else values.push(add([]));
  }
  return { columns, values };
}

/**
 * The parameters insertColumns adds for `record`, in its order, without the SQL text (for a
 * compiled create used again, compiledInsert). Only for records without file references, whose
 * text depends on the value.
 */
function insertParameters(table: CatalogTable, record: Readonly<Record<string, unknown>>, into: unknown[]): void {
  for (const field of table.spec.fields) {
    const source = insertSource(field, record);
    if (source === 'value') into.push(toParameter(field, record[field.name]));
    else if (source === 'default') into.push(toParameter(field, clientDefaultValue(field.clientDefault!)));
    else if (source === 'empty') into.push([]);
  }
}

/**
 * A create's statement for one caller, with the record's own parameters left out: its text and the
 * parameters after them (row filter, readable record), which depend only on the caller and the
 * record's shape, never on its values.
 */
interface CompiledInsert {
  readonly write: CompiledWrite;
  readonly rest: readonly unknown[];
  readonly aliases: number;
}

// Grants are cached per principal (runtime/query/policy.ts) for as long as its credential is, so
// they key this cache: a principal re-resolved (its key changed or was revoked) gets new grants
// and compiles again. Per grant, a statement per record shape (the fields sent and set), bounded.
const compiledInserts = new WeakMap<Grant, Map<string, CompiledInsert>>();
const MAX_SHAPES_PER_GRANT = 64;

/** The cache key of an insert's shape, or undefined when its statement may not be kept. */
function insertShape(scope: Scope, write: Write & { kind: 'insert' }, result: WriteResult): string | undefined {
  if (scope.params.values.length !== 0 || scope.nextAlias.n !== 0) return undefined;
  let present = '';
  for (const field of write.table.spec.fields) {
    if (!Object.hasOwn(write.values, field.name)) continue;
    if (field.file) return undefined; // a file reference's check is written for its value
    present += `${field.name},`;
  }
  return `${write.table.spec.name}\n${scope.environment}\n${result.kind}\n${write.written.join(',')}\n${present}`;
}

/**
 * A multi-row VALUES list: the columns any record (or a client-side default) sets; a record without
 * a value of its own gets exactly what insertColumns would give it alone, the column's DEFAULT
 * where insertColumns leaves the column out. Undefined when no record sets any column.
 */
function insertManyColumns(
  scope: Scope,
  table: CatalogTable,
  records: readonly InsertRecord[],
  add: (v: unknown) => string,
) {
  const fields = table.spec.fields.filter(
    (f) =>
      (f.managed && f.name === 'updatedAt') ||
      f.clientDefault ||
      (f.list && !f.dbDefault) ||
      records.some((r) => Object.hasOwn(r.values, f.name)),
  );
  if (fields.length === 0) return undefined;
  const rows = records.map(({ values: record }) => {
    const values = fields.map((field) => {
      if (Object.hasOwn(record, field.name)) return writeValue(scope, field, record[field.name], add);
      if (field.managed && field.name === 'updatedAt') return 'now()';
      if (field.clientDefault) return add(toParameter(field, clientDefaultValue(field.clientDefault)));
      if (field.list && !field.dbDefault) return add([]);
      return 'DEFAULT';
    });
    return `(${values.join(', ')})`;
  });
  return { columns: fields.map((f) => ident(f.column)), rows };
}

/** The key fields of the row `alias` as a JSON object, each value as the API writes it. */
function keyJson(table: CatalogTable, alias: string): string {
  const pairs = table.spec.primaryKey.map(
    (k) => `'${k.replace(/'/g, "''")}', ${fieldExpression(alias, table.fields.get(k)!)}`,
  );
  return `json_build_object(${pairs.join(', ')})`;
}

/** The rows an update or delete may reach: addressed and filtered by the caller, readable to it, allowed by the action's rules. */
function targetCondition(
  scope: Scope,
  table: CatalogTable,
  alias: string,
  write: Write & { kind: 'update' | 'delete' },
  allowed: Condition,
): string {
  const parts = [
    compileCondition(scope, table, alias, write.where),
    readableRows(scope, table, alias),
    compileRoleCondition(scope, table, alias, allowed),
  ];
  if (write.key) parts.unshift(compileRoleCondition(scope, table, alias, write.key));
  return parts.filter((p) => p !== 'TRUE').join(' AND ') || 'TRUE';
}

/**
 * Why an update of `fields` by `key` changed no row (docs/permissions.md "Several roles"): a
 * statement answering one row, when the caller may read the addressed record and some role allows
 * updating it, that holds the fields it may not write there (text[]); no row when the record is
 * "not found". Undefined when no field's writability depends on the row: then no row changed
 * means not found, with no statement to ask.
 */
export function compileUnwritableFields(
  scope: Scope,
  table: CatalogTable,
  key: Condition,
  fields: readonly string[],
): string | undefined {
  const decision = writeRules(scope, table, 'update', fields);
  if (!fields.some((f) => decision.fieldRows.has(f))) return undefined;
  const t = newAlias(scope);
  const checks = fields.flatMap((f) => {
    const rows = decision.fieldRows.get(f);
    return rows
      ? [`CASE WHEN ${compileRoleCondition(scope, table, t, rows)} THEN NULL ELSE '${f.replace(/'/g, "''")}' END`]
      : [];
  });
  const where = [
    compileRoleCondition(scope, table, t, key),
    readableRows(scope, table, t),
    compileRoleCondition(scope, table, t, decision.anyRows),
  ].filter((p) => p !== 'TRUE');
  return `SELECT array_remove(ARRAY[${checks.join(', ')}]::text[], NULL) FROM ${table.qualified(scope.environment)} ${t} WHERE ${where.join(' AND ') || 'TRUE'}`;
}

/** A RETURNING column that fails the statement when the row `alias` does not match `rows` afterwards. */
function checkColumn(scope: Scope, table: CatalogTable, alias: string, rows: Condition): string {
  return rows.kind === 'true'
    ? ''
    : `, svcgen.row_filter_check(${compileRoleCondition(scope, table, alias, rows)}) AS "svcgen:checked"`;
}

/** The mutation CTE's body, the event it emits (none for an empty patch, which writes nothing) and the filters it checks. */
function mutation(
  scope: Scope,
  write: Write,
  capture: boolean,
): { sql: string; operation: EventOperation | null; rules: readonly RoleRule[] } {
  const table = write.table;
  const q = table.qualified(scope.environment);
  const add = (v: unknown) => scope.params.add(v);
  if (write.kind === 'insert') {
    const decision = writeRules(scope, table, 'create', write.written);
    const t = newAlias(scope);
    const { columns, values } = insertColumns(scope, table, write.values, add);
    const body = columns.length ? `(${columns.join(', ')}) VALUES (${values.join(', ')})` : 'DEFAULT VALUES';
    return {
      sql: `INSERT INTO ${q} AS ${t} ${body} RETURNING ${t}.*${checkColumn(scope, table, t, decision.rows)}`,
      operation: 'INSERT',
      rules: decision.rules,
    };
  }
  if (write.kind === 'insertMany') {
    const [first, ...rest] = write.records;
    if (!first) throw new Error('insertMany needs at least one record');
    const decision = writeRules(scope, table, 'create', first.written);
    for (const r of rest) {
      if (!sameRules(decision, writeRules(scope, table, 'create', r.written)))
        throw new Error('insertMany records must be decided by the same rules');
    }
    const t = newAlias(scope);
    const list = insertManyColumns(scope, table, write.records, add);
    // Records that set no column at all: every column takes its default, as DEFAULT VALUES would.
    const body = list
      ? `(${list.columns.join(', ')}) VALUES ${list.rows.join(', ')}`
      : `SELECT FROM generate_series(1, ${write.records.length})`;
    return {
      sql: `INSERT INTO ${q} AS ${t} ${body} RETURNING ${t}.*${checkColumn(scope, table, t, decision.rows)}`,
      operation: 'INSERT',
      rules: decision.rules,
    };
  }
  if (write.kind === 'delete') {
    const decision = writeRules(scope, table, 'delete', []);
    const t = newAlias(scope);
    const where = targetCondition(scope, table, t, write, decision.anyRows);
    return { sql: `DELETE FROM ${q} AS ${t} WHERE ${where} RETURNING ${t}.*`, operation: 'DELETE', rules: [] };
  }
  const patched = table.spec.fields.filter((f) => Object.hasOwn(write.patch, f.name));
  const decision = writeRules(scope, table, 'update', write.written ?? patched.map((f) => f.name));
  const rules = decision.rules;
  // The rows on which every patched field is writable, before the change and after it (a row
  // some role may update, but not with these fields, is not reached: an update by key that
  // changes nothing asks unwritableFields why).
  const allowed = decision.rows;
  const before = newAlias(scope);
  const condition = targetCondition(scope, table, before, write, allowed);
  if (patched.length === 0)
    return { sql: `SELECT ${before}.* FROM ${q} ${before} WHERE ${condition}`, operation: null, rules: [] };
  const after = newAlias(scope);
  const sets = patched.map((f) => `${ident(f.column)} = ${writeValue(scope, f, write.patch[f.name], add)}`);
  const updatedAt = table.spec.fields.find((f) => f.managed && f.name === 'updatedAt');
  if (updatedAt && !Object.hasOwn(write.patch, updatedAt.name)) sets.push(`${ident(updatedAt.column)} = now()`);
  if (!capture) {
    return {
      sql: `UPDATE ${q} AS ${before} SET ${sets.join(', ')} WHERE ${condition} RETURNING ${before}.*${checkColumn(scope, table, before, allowed)}`,
      operation: 'UPDATE',
      rules,
    };
  }
  // The before-image joins the UPDATE by primary key, locked as the UPDATE would lock it, so the
  // changed fields compare the stored values this statement replaced.
  const changed = patched
    .filter((f) => f !== updatedAt)
    .map(
      (f) =>
        `CASE WHEN ${after}.${ident(f.column)} IS DISTINCT FROM ${before}.${ident(f.column)} THEN '${f.name.replace(/'/g, "''")}' END`,
    );
  const join = table.spec.primaryKey.map(
    (k) => `${after}.${ident(table.fields.get(k)!.column)} = ${before}.${ident(table.fields.get(k)!.column)}`,
  );
  return {
    sql: `UPDATE ${q} AS ${after} SET ${sets.join(', ')}
      FROM (SELECT * FROM ${q} ${before} WHERE ${condition} FOR UPDATE OF ${before}) ${before}
      WHERE ${join.join(' AND ')}
      RETURNING ${after}.*, array_remove(ARRAY[${changed.length ? changed.join(', ') : 'NULL'}]::text[], NULL) AS "${CHANGED_COLUMN}"${checkColumn(scope, table, after, allowed)}`,
    operation: 'UPDATE',
    rules,
  };
}

/**
 * The CTEs that delete, with the records `w` deleted, the files their `onDelete: delete` fields
 * reference (docs/storage.md "Records that reference files"): the file rows in this statement,
 * their DELETE events of table `_files`, and a job per file that removes its bytes.
 */
function fileDeletes(scope: Scope, table: CatalogTable): string[] {
  const files = scope.files;
  const fields = table.spec.fields.filter((f) => f.file?.onDelete === 'delete');
  if (!files || fields.length === 0) return [];
  const filesTable = files.catalog.require(FILES_TABLE);
  const sub: Scope = { ...scope, catalog: files.catalog };
  const add = (v: unknown) => scope.params.add(v);
  const ctes: string[] = [];
  for (const field of fields) {
    const f = newAlias(scope);
    const column = `w.${ident(field.column)}`;
    const id =
      field.nativeType?.[0] === 'Uuid'
        ? column
        : `(CASE WHEN ${column} ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN ${column}::uuid END)`;
    const rows = `deleted_files_${f}`;
    ctes.push(
      `${rows} AS (DELETE FROM ${filesTable.qualified(scope.environment)} ${f} USING w WHERE ${f}."id" = ${id} AND ${f}."bucket" = ${add(field.file!.bucket)} AND ${f}."environment" = ${add(scope.environment)} RETURNING ${f}.*, ${files.removal(f, add)} AS "svcgen:removal")`,
      ...captureCtes(sub, filesTable, { operation: 'DELETE', rows, changed: false, name: `capture_${f}` }),
    );
  }
  return ctes;
}

/** The capture CTEs (runtime/events/capture.ts) for the changed rows of `table`, whose records this layer builds. */
function captureCtes(
  scope: Scope,
  table: CatalogTable,
  site: { operation: EventOperation; rows: string; changed: boolean; name?: string },
): string[] {
  const alias = newAlias(scope);
  return captureEvents({
    ...site,
    params: scope.params,
    environment: scope.environment,
    table: table.spec.name,
    alias,
    record: fullRecord(table, alias),
  }).ctes;
}

function resultSelect(scope: Scope, table: CatalogTable, result: WriteResult): string {
  if (result.kind === 'count') return `SELECT count(*)::int FROM w`;
  if (result.kind === 'key') return `SELECT ${keyJson(table, 'w')}::text FROM w`;
  const alias = newAlias(scope);
  const full = result.kind === 'full' ? `${fullRecord(table, alias)}::text, ` : '';
  return `SELECT ${full}${readableRecord(scope, table, alias)}, ${keyJson(table, alias)}::text FROM w ${alias}`;
}

/**
 * The rows an update (of the caller's `written` fields) or a delete may reach, as compileWrite
 * would reach them, locked FOR UPDATE in key order: a row per target, every field of it as JSON
 * (read as the system: for hooks' `previous`, never for the caller), then its key JSON. A write
 * with hooks applies itself row by row to these (runtime/data/hooks.ts).
 */
export function compileLockTargets(scope: Scope, write: Write & { kind: 'update' | 'delete' }): string {
  const table = write.table;
  const decision =
    write.kind === 'delete'
      ? writeRules(scope, table, 'delete', [])
      : writeRules(
          scope,
          table,
          'update',
          write.written ?? table.spec.fields.filter((f) => Object.hasOwn(write.patch, f.name)).map((f) => f.name),
        );
  const t = newAlias(scope);
  const where = targetCondition(scope, table, t, write, write.kind === 'delete' ? decision.anyRows : decision.rows);
  const order = table.spec.primaryKey.map((k) => `${t}.${ident(table.fields.get(k)!.column)}`).join(', ');
  return `SELECT ${fullRecord(table, t)}::text, ${keyJson(table, t)}::text FROM ${table.qualified(scope.environment)} ${t} WHERE ${where} ORDER BY ${order} FOR UPDATE OF ${t}`;
}

/**
 * One statement for `write`; its rows are as `result` describes. Throws WriteRefused when the
 * caller may not write these fields, and QueryError when its filter names what it cannot read.
 * `capture` is whether the table may have subscribers (WatchedTables): when it is false the table
 * has none, and the statement skips the capture CTEs.
 */
export function compileWrite(scope: Scope, write: Write, result: WriteResult, capture: boolean): CompiledWrite {
  // A create without capture CTEs (no subscriber), the cheap path: its statement is compiled once per caller and shape.
  if (write.kind === 'insert' && !capture) {
    const shape = insertShape(scope, write, result);
    const grant = shape === undefined ? undefined : scope.access.grant(write.table.spec.name, 'create');
    if (shape !== undefined && grant) {
      let byShape = compiledInserts.get(grant);
      const kept = byShape?.get(shape);
      if (kept) {
        // Refusals (403) were decided when it was compiled, by this grant for these fields.
        insertParameters(write.table, write.values, scope.params.values);
        scope.params.values.push(...kept.rest);
        scope.nextAlias.n = kept.aliases;
        return kept.write;
      }
      const compiled = compileStatement(scope, write, result, capture);
      const count: unknown[] = [];
      insertParameters(write.table, write.values, count);
      if (!byShape) compiledInserts.set(grant, (byShape = new Map()));
      if (byShape.size < MAX_SHAPES_PER_GRANT) {
        byShape.set(shape, {
          write: compiled,
          rest: scope.params.values.slice(count.length),
          aliases: scope.nextAlias.n,
        });
      }
      return compiled;
    }
  }
  return compileStatement(scope, write, result, capture);
}

function compileStatement(scope: Scope, write: Write, result: WriteResult, capture: boolean): CompiledWrite {
  const { sql, operation, rules } = mutation(scope, write, capture);
  const ctes = [`w AS (${sql})`];
  if (operation && capture)
    ctes.push(...captureCtes(scope, write.table, { operation, rows: 'w', changed: operation === 'UPDATE' }));
  if (write.kind === 'delete') ctes.push(...fileDeletes(scope, write.table));
  return {
    sql: `WITH ${ctes.join(',\n')}\n${resultSelect(scope, write.table, result)}`,
    filterFields: [...new Set(rules.flatMap((r) => r.filterFields))],
  };
}
