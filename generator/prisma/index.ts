// svcgen's only doorway to Prisma's own tooling (schema validation/DMMF,
// client generation, migration SQL). Everything comes from Prisma's engines
// (prisma-schema-wasm, schema-engine-wasm, the prisma-client generator) and
// works offline: no engine binary is downloaded. Import from here only.
export { readDmmf, readSchemaConfig, type DMMF, type SchemaConfig } from './dmmf.ts';
export { PrismaEngineError, PrismaSchemaError } from './schema-error.ts';
export { generatePrismaClient, type GeneratePrismaClientOptions } from './generate-client.ts';
export {
  migrationSqlBetween,
  migrationSqlFromMigrations,
  type MigrationSqlFromMigrationsOptions,
} from './migration-sql.ts';
export { MIGRATION_LOCK_FILE, migrationLockContent, writeMigrationLock } from './migrations-dir.ts';
