export { openDatabase, ident, environmentSchema, SYSTEM_SCHEMA, type Database, type Queryable, type Row } from './pool.ts';
export { ensureSystemSchema } from './system-schema.ts';
export {
  applyMigrations,
  dropEnvironmentSchemas,
  failedMigrationMessage,
  markMigrationApplied,
  markMigrationRolledBack,
  pendingMigrations,
  readMigrations,
  refuseFailedMigrations,
  MigrationError,
  type AppliedMigration,
  type Migration,
  type ResolvedMigration,
} from './migrations.ts';
export { NotificationChannel, notify, type Subscriber } from './notifications.ts';
