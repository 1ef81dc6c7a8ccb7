export { openDatabase, ident, environmentSchema, SYSTEM_SCHEMA, type Database, type Queryable, type Row } from './pool.ts';
export { ensureSystemSchema } from './system-schema.ts';
export { applyMigrations, pendingMigrations, readMigrations, MigrationError, type AppliedMigration, type Migration } from './migrations.ts';
export { NotificationChannel, notify, type Subscriber } from './notifications.ts';
