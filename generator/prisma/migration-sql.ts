// Migration SQL written by Prisma's schema engine (`diff` with script: true),
// i.e. the same CREATE/ALTER statements `prisma migrate dev` puts in
// migration.sql.
import type { DiffTarget, SchemaFilter } from '@prisma/schema-engine-wasm';
import { readSchemaConfig } from './dmmf.ts';
import { readMigrationList } from './migrations-dir.ts';
import { openShadowDatabaseSession } from './pg-shadow-database.ts';
import { probeOnlyAdapterFactory } from './probe-adapter.ts';
import { withSchemaEngine, withSharedSchemaEngine, type SchemaEngine } from './schema-engine.ts';

const NO_FILTERS: SchemaFilter = { externalTables: [], externalEnums: [] };

function datamodel(path: string, content: string): DiffTarget {
  return { tag: 'schemaDatamodel', files: [{ path, content }] };
}

/**
 * The state of a freshly created database. Not `{ tag: 'empty' }`: that
 * state lacks even the "public" schema, so the engine would start the script
 * with `CREATE SCHEMA IF NOT EXISTS "public"`, which `migrate dev` never
 * writes (its shadow database has "public"). A datamodel holding only the
 * datasource's provider is exactly "fresh database": the default schema
 * exists, any other `schemas = [...]` entries do not. (Checked against the
 * engine replaying an empty migrations folder into a real shadow database.)
 */
async function freshDatabase(to: string): Promise<DiffTarget> {
  const datasource = (await readSchemaConfig(to)).datasources[0];
  // Without a datasource the engine reports the problem itself ("There is no datasource in the schema").
  if (datasource === undefined) return { tag: 'empty' };
  return datamodel(
    'fresh-database.prisma',
    `datasource ${datasource.name} {\n  provider = "${datasource.provider}"\n}\n`,
  );
}

// exitCode: true makes the engine say whether there is a difference (2) or not (0), as `migrate diff --exit-code`.
async function scriptOrEmpty(engine: SchemaEngine, from: DiffTarget, to: DiffTarget): Promise<string> {
  const result = await engine.diff({ from, to, script: true, exitCode: true, filters: NO_FILTERS });
  return result.exitCode === 2 ? (result.stdout ?? '') : '';
}

/**
 * SQL to go from datamodel `from` (null = new, empty database) to datamodel
 * `to`; '' when they are equivalent. No database involved. Invalid schemas
 * throw PrismaSchemaError.
 */
export async function migrationSqlBetween(from: string | null, to: string): Promise<string> {
  const fromTarget = from === null ? await freshDatabase(to) : datamodel('from.prisma', from);
  return withSharedSchemaEngine(
    () => probeOnlyAdapterFactory(),
    (engine) => scriptOrEmpty(engine, fromTarget, datamodel('schema.prisma', to)),
  );
}

export interface MigrationSqlFromMigrationsOptions {
  /** Prisma layout: <dir>/<timestamp>_<name>/migration.sql and <dir>/migration_lock.toml. */
  migrationsDir: string;
  schemaText: string;
  /** A server where a temporary database may be created and dropped (any existing database on it). */
  shadowDatabaseUrl: string;
}

/**
 * SQL of the next migration: from the state the migrations folder produces
 * (replayed by the engine into a temporary shadow database, dropped
 * afterwards) to `schemaText`; '' when nothing changed.
 */
export async function migrationSqlFromMigrations(opts: MigrationSqlFromMigrationsOptions): Promise<string> {
  let list = await readMigrationList(opts.migrationsDir);
  if (list.lockfile.content === null) {
    const provider = (await readSchemaConfig(opts.schemaText)).datasources[0]?.provider;
    list = await readMigrationList(opts.migrationsDir, provider);
  }
  const session = await openShadowDatabaseSession(opts.shadowDatabaseUrl);
  let sql: string;
  try {
    sql = await withSchemaEngine(session.factory, (engine) =>
      scriptOrEmpty(engine, { tag: 'migrations', ...list }, datamodel('schema.prisma', opts.schemaText)),
    );
  } catch (error) {
    // The engine's error matters more than a cleanup failure on top of it.
    await session.close().catch(() => undefined);
    throw error;
  }
  await session.close();
  return sql;
}
