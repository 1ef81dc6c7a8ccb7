/** The tables of a service, indexed once at start so requests never search the model. */
import type { FieldSpec, RelationSpec, TableModule, TableSpec } from '../model/index.ts';
import { environmentSchema, ident } from '../db/index.ts';

export interface CatalogTable {
  readonly spec: TableSpec;
  readonly module: TableModule;
  readonly fields: ReadonlyMap<string, FieldSpec>;
  readonly relations: ReadonlyMap<string, RelationSpec>;
  /** `"env_<name>"."Table"` */
  qualified(environment: string): string;
  /** Single-field primary key, or undefined for composite keys (no `/<id>` routes). */
  readonly idField: FieldSpec | undefined;
}

export class Catalog {
  private readonly tables = new Map<string, CatalogTable>();

  /**
   * `qualifiedName` replaces where rows live (default: the table in the environment's schema); a
   * catalog of system tables (runtime/storage's `_files`) points it at svcgen's own.
   */
  constructor(
    modules: Readonly<Record<string, TableModule>>,
    qualifiedName: (spec: TableSpec, environment: string) => string = (spec, environment) =>
      `${ident(environmentSchema(environment))}.${ident(spec.dbName)}`,
  ) {
    for (const module of Object.values(modules)) {
      const spec = module.spec;
      const fields = new Map(spec.fields.map((f) => [f.name, f]));
      const qualifiedCache = new Map<string, string>();
      this.tables.set(spec.name, {
        spec,
        module,
        fields,
        relations: new Map(spec.relations.map((r) => [r.name, r])),
        qualified(environment) {
          let q = qualifiedCache.get(environment);
          if (!q) {
            q = qualifiedName(spec, environment);
            qualifiedCache.set(environment, q);
          }
          return q;
        },
        idField: spec.primaryKey.length === 1 ? fields.get(spec.primaryKey[0]!) : undefined,
      });
    }
  }

  get(name: string): CatalogTable | undefined {
    return this.tables.get(name);
  }

  require(name: string): CatalogTable {
    const table = this.tables.get(name);
    if (!table) throw new Error(`unknown table ${name}`);
    return table;
  }

  names(): string[] {
    return [...this.tables.keys()];
  }
}
