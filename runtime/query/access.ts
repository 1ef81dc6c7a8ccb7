/**
 * What a caller may name in a query (docs/permissions.md "What the caller cannot read cannot shape
 * an answer"), asked in one place by the parsers (for their 400s) and by the compilers (which refuse
 * to compile anything else, so a front end that forgets to ask still cannot leak).
 */
import type { RelationSpec } from '../model/index.ts';
import type { Catalog, CatalogTable } from './catalog.ts';
import type { Access } from './description.ts';

/** A query names something the caller may not use or that does not exist: a 400 for the front end. */
export class QueryError extends Error {
  constructor(
    /** Where in the request: the query parameter, or a JSON path of a body. */
    readonly parameter: string,
    message: string,
  ) {
    super(message);
    this.name = 'QueryError';
  }
}

/** Whether the caller may read `field` of `table` (some role with `read` lists it). */
export function canReadField(access: Access, table: CatalogTable, field: string): boolean {
  const grant = access.grant(table.spec.name, 'read');
  return grant !== null && table.fields.has(field) && (grant.fields === null || grant.fields.has(field));
}

/**
 * Whether the caller may go from `table` through `relation`: the related table is readable and the
 * fields linking the two are readable on both sides (else the link itself would leak a hidden key).
 */
export function canFollow(access: Access, catalog: Catalog, table: CatalogTable, relation: RelationSpec): boolean {
  const target = catalog.get(relation.target);
  if (!target || access.grant(target.spec.name, 'read') === null) return false;
  return (
    relation.fields.every((f) => canReadField(access, table, f)) &&
    relation.targetFields.every((f) => canReadField(access, target, f))
  );
}

/** The relation of `table` named `name` when the caller may follow it; undefined as if it did not exist. */
export function followable(
  access: Access,
  catalog: Catalog,
  table: CatalogTable,
  name: string,
): RelationSpec | undefined {
  const relation = table.relations.get(name);
  return relation && canFollow(access, catalog, table, relation) ? relation : undefined;
}
