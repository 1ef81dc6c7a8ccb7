export {
  openDatabase,
  gatedTransaction,
  transactionDatabase,
  requireUtcSessions,
  ident,
  environmentSchema,
  SYSTEM_SCHEMA,
  type Database,
  type DatabaseOptions,
  type Queryable,
  type Row,
} from './pool.ts';
export { ensureSystemSchema } from './system-schema.ts';
export { QUEUE_SCHEMA } from './job-queue.ts';
export { connectionConfig, ConnectionStringError } from './connection.ts';
export { newClient, newPool, raisedAtConnectionStart, withConnection } from './client.ts';
export {
  applyMigrations,
  dropEnvironmentSchemas,
  failedMigrationMessage,
  markMigrationApplied,
  markMigrationRolledBack,
  pendingMigrations,
  readMigrations,
  refuseFailedMigrations,
  refuseUnservable,
  MigrationError,
  type AppliedMigration,
  type Migration,
  type ResolvedMigration,
} from './migrations.ts';
export { NotificationChannel, notify, type Subscriber } from './notifications.ts';
export { ANNOUNCEMENT_SETTLE_MS, FRESHNESS_MS, insideTransaction, onCommit } from './announcements.ts';
export { againOnConflict, databaseFault, type DatabaseFault, type DatabaseFaultKind } from './faults.ts';
export { Readiness, type ReadinessReport, type ReadinessOptions, type CheckState } from './readiness.ts';
export { Admission, AdmissionRefused, type AdmissionOptions, type AdmissionRefusal } from './admission.ts';
export {
  FixedLimit,
  GradientLimit,
  type ConcurrencyLimit,
  type GradientLimitOptions,
  type LimitChange,
} from './concurrency-limit.ts';
