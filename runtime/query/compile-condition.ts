/**
 * Condition tree → SQL boolean expression. Relation paths become EXISTS semi-joins.
 *
 * A caller's condition is compiled under its access (docs/permissions.md): every field it compares
 * must be readable, every relation step followable, only the related rows the caller may read take
 * part, and a comparison on a field hidden on a row (several roles with different field lists) is
 * neither true nor false there. A role's own filter (from the policy) is compiled as written.
 */
import { ident } from '../db/index.ts';
import type { FieldSpec, Operator } from '../model/index.ts';
import { canReadField, followable, QueryError } from './access.ts';
import type { Catalog, CatalogTable } from './catalog.ts';
import type { Access, Condition } from './description.ts';
import { OPERATOR_IMPLEMENTATIONS } from './operator-implementations.ts';
import type { Params } from './sql.ts';

export interface Scope {
  readonly catalog: Catalog;
  readonly environment: string;
  readonly params: Params;
  /** Next free table alias number (t0, t1, ...), shared by the whole statement. */
  nextAlias: { n: number };
  /** The caller's permissions: every table the statement touches is asked for its grant. */
  readonly access: Access;
  /** The caller's permissions on files, for fields that reference them (compile-write.ts); none: no file is readable. */
  readonly files?: FileAccess;
}

/** The `_files` catalog and the caller's access to the files of a bucket in an environment (docs/storage.md). */
export interface FileAccess {
  readonly catalog: Catalog;
  access(bucket: string, environment: string): Access | undefined;
  /** An SQL expression queuing the removal of the bytes of the deleted file row `alias`, in the statement's transaction. */
  removal(alias: string, add: (value: unknown) => string): string;
}

export function newAlias(scope: Scope): string {
  return `t${scope.nextAlias.n++}`;
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

/**
 * Where the caller may see `field` on the row `alias`: undefined when on every row it may read
 * (the common case), else an SQL condition (several roles listing different fields).
 */
export function fieldVisibility(scope: Scope, table: CatalogTable, alias: string, field: string): string | undefined {
  const rows = scope.access.grant(table.spec.name, 'read')?.fieldRows.get(field);
  return rows ? compileRoleCondition(scope, table, alias, rows) : undefined;
}

/** A field's value as the caller sees it on the row `alias`: NULL where it is hidden. */
export function visibleValue(scope: Scope, table: CatalogTable, alias: string, field: FieldSpec): string {
  const visible = fieldVisibility(scope, table, alias, field.name);
  return visible ? `(CASE WHEN ${visible} THEN ${columnRef(alias, field)} END)` : columnRef(alias, field);
}

/** The rows of `table` the caller may read, on the row `alias` (FALSE when it may read none). */
export function readableRows(scope: Scope, table: CatalogTable, alias: string): string {
  const grant = scope.access.grant(table.spec.name, 'read');
  return grant ? compileRoleCondition(scope, table, alias, grant.rows) : 'FALSE';
}

function compareSql(scope: Scope, column: string, field: FieldSpec, op: Operator, value: unknown): string {
  return OPERATOR_IMPLEMENTATIONS[op].sql({ column, field, value, param: (v) => scope.params.add(v) });
}

/** `sql` where every one of `conditions` holds, NULL (neither true nor false) elsewhere. */
function onlyWhere(conditions: readonly (string | undefined)[], sql: string): string {
  const kept = conditions.filter((c): c is string => c !== undefined);
  return kept.length ? `(CASE WHEN ${kept.join(' AND ')} THEN ${sql} END)` : sql;
}

function compile(scope: Scope, table: CatalogTable, alias: string, condition: Condition, guarded: boolean): string {
  switch (condition.kind) {
    case 'true':
      return 'TRUE';
    case 'false':
      return 'FALSE';
    case 'and':
    case 'or':
      if (condition.items.length === 0) return condition.kind === 'and' ? 'TRUE' : 'FALSE';
      return `(${condition.items.map((c) => compile(scope, table, alias, c, guarded)).join(condition.kind === 'and' ? ' AND ' : ' OR ')})`;
    case 'not':
      return `NOT ${compile(scope, table, alias, condition.item, guarded)}`;
    case 'compare': {
      const [head, ...rest] = condition.path;
      if (rest.length === 0) {
        const field = table.fields.get(head!);
        if (!field || (guarded && !canReadField(scope.access, table, field.name))) {
          throw new QueryError(condition.path.join('.'), `${table.spec.name} has no field "${head}"`);
        }
        const sql = compareSql(scope, columnRef(alias, field), field, condition.op, condition.value);
        return guarded ? onlyWhere([fieldVisibility(scope, table, alias, field.name)], sql) : sql;
      }
      // A relation step: "some related record matches" (to-many) or "the related record matches".
      const relation = guarded ? followable(scope.access, scope.catalog, table, head!) : table.relations.get(head!);
      if (!relation) throw new QueryError(condition.path.join('.'), `${table.spec.name} has no relation "${head}"`);
      const targetAlias = newAlias(scope);
      const join = joinCondition(scope, table, alias, head!, targetAlias);
      const inner = compile(scope, join.target, targetAlias, { ...condition, path: rest }, guarded);
      if (!guarded)
        return `EXISTS (SELECT 1 FROM ${join.target.qualified(scope.environment)} ${targetAlias} WHERE ${join.sql} AND ${inner})`;
      // Only related rows the caller may read take part, joined on fields it can see: a link hidden
      // on either row links nothing, as a null foreign key would (embeds do the same).
      const linkedOn = [
        ...relation.fields.map((f) => fieldVisibility(scope, table, alias, f)),
        ...relation.targetFields.map((f) => fieldVisibility(scope, join.target, targetAlias, f)),
      ];
      return `EXISTS (SELECT 1 FROM ${join.target.qualified(scope.environment)} ${targetAlias}
        WHERE ${[join.sql, readableRows(scope, join.target, targetAlias), ...linkedOn, inner].filter((c) => c !== undefined && c !== 'TRUE').join(' AND ')})`;
    }
  }
}

/** A caller's condition on rows `alias` of `table`, under its access (see the file comment). */
export function compileCondition(scope: Scope, table: CatalogTable, alias: string, condition: Condition): string {
  return compile(scope, table, alias, condition, true);
}

/** A role's own condition (from a grant): fields and relations as written, whatever the caller may read. */
export function compileRoleCondition(scope: Scope, table: CatalogTable, alias: string, condition: Condition): string {
  return compile(scope, table, alias, condition, false);
}
