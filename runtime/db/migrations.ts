/**
 * Applies the project's Prisma migrations (`migrations/<timestamp>_<name>/migration.sql`) to every
 * environment's schema, with Prisma's own bookkeeping table, so that `prisma migrate deploy`
 * (pointed at `?schema=env_<name>`) sees the same history.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { withConnection } from './client.ts';
import { environmentSchema, ident, type Database, type Queryable } from './pool.ts';
import { MIGRATION_LOCK_KEY } from './system-schema.ts';

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(migrationsDir: string): Promise<Migration[]> {
  let entries: string[];
  try {
    entries = (await readdir(migrationsDir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    return [];
  }
  const migrations: Migration[] = [];
  for (const name of entries.sort()) {
    let sql: string;
    try {
      sql = await readFile(path.join(migrationsDir, name, 'migration.sql'), 'utf8');
    } catch {
      continue;
    }
    migrations.push({ name, sql, checksum: createHash('sha256').update(sql).digest('hex') });
  }
  return migrations;
}

// Prisma's own definition of its bookkeeping table.
const PRISMA_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

export interface AppliedMigration {
  environment: string;
  name: string;
}

export class MigrationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MigrationError';
  }
}

/** The way out of a failed migration, said wherever one stops svcgen. */
export function failedMigrationMessage(name: string, environment: string): string {
  return (
    `migration ${name} failed in environment ${environment} and is not resolved; nothing else is applied until it is. ` +
    `Its changes were rolled back: fix migrations/${name}/migration.sql, run \`npx svcgen migrate resolve --rolled-back ${name}\`, ` +
    'then `npx svcgen migrate deploy` (docs/migrations.md)'
  );
}

function migrationsTable(environment: string): string {
  return `${ident(environmentSchema(environment))}."_prisma_migrations"`;
}

interface MigrationRow {
  id: string;
  migration_name: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

/** Prisma's _prisma_migrations rows of one environment; [] when the environment has none yet. */
async function migrationRows(db: Queryable, environment: string): Promise<MigrationRow[]> {
  const [exists] = await db.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [migrationsTable(environment)]);
  if (!exists?.t) return [];
  return db.query<MigrationRow>(
    `SELECT id, migration_name, finished_at, rolled_back_at FROM ${migrationsTable(environment)} ORDER BY started_at, migration_name`,
  );
}

/** Prisma's definition of a failed migration: started, neither finished nor rolled back. */
function failedRow(rows: readonly MigrationRow[]): MigrationRow | undefined {
  return rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
}

/** Throws the way out when an environment holds a failed, unresolved migration. */
export async function refuseFailedMigrations(db: Queryable, environments: readonly string[]): Promise<void> {
  for (const environment of environments) {
    const failed = failedRow(await migrationRows(db, environment));
    if (failed) throw new MigrationError(failedMigrationMessage(failed.migration_name, environment));
  }
}

/**
 * The migrations of the folder not (successfully) applied yet, per environment; reads only.
 * A failed, unresolved migration throws (MigrationError with the way out): deploying would not help.
 */
export async function pendingMigrations(
  db: Database,
  migrationsDir: string,
  environments: readonly string[],
): Promise<AppliedMigration[]> {
  const migrations = await readMigrations(migrationsDir);
  await refuseFailedMigrations(db, environments);
  const pending: AppliedMigration[] = [];
  for (const environment of environments) {
    const done = new Set(
      (await migrationRows(db, environment)).filter((r) => r.finished_at !== null).map((r) => r.migration_name),
    );
    for (const m of migrations) if (!done.has(m.name)) pending.push({ environment, name: m.name });
  }
  return pending;
}

/**
 * Whether a server may start on this database: tables of the model with no migration at all would
 * answer 500s, and without migrating (`--no-migrate`) every migration must already be applied.
 * Said the same by one `serve` and by the primary of `serve --workers`.
 */
export async function refuseUnservable(
  db: Database,
  migrationsDir: string,
  environments: readonly string[],
  options: { hasTables: boolean; migrate: boolean },
): Promise<void> {
  if (options.hasTables && (await readMigrations(migrationsDir)).length === 0) {
    throw new MigrationError(
      'the project has no migrations yet, so its tables do not exist: run `npx svcgen migrate dev --name init`, then serve',
    );
  }
  if (options.migrate) return;
  const pending = await pendingMigrations(db, migrationsDir, environments);
  if (pending.length > 0) {
    throw new MigrationError(
      `${pending.length} migration(s) not applied (${pending.map((p) => `${p.name} in ${p.environment}`).join(', ')}): run \`npx svcgen migrate deploy\`, or serve without --no-migrate`,
    );
  }
}

/** Applies pending migrations to each environment; returns what it applied. */
export async function applyMigrations(
  db: Database,
  migrationsDir: string,
  environments: readonly string[],
  /** Called before each migration is applied to an environment (progress for the CLI). */
  onApply?: (migration: AppliedMigration) => void,
): Promise<AppliedMigration[]> {
  const migrations = await readMigrations(migrationsDir);
  const applied: AppliedMigration[] = [];
  return withConnection(db.pool, async (client) => {
    try {
      // Schema changes and waiting for another process's migration lock may outlast a request's statement_timeout.
      await client.query('SET statement_timeout = 0');
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      for (const environment of environments) {
        const schema = ident(environmentSchema(environment));
        await client.query(
          `CREATE SCHEMA IF NOT EXISTS ${schema}; SET search_path TO ${schema}; ${PRISMA_MIGRATIONS_TABLE}`,
        );
        const { rows } = await client.query<{
          migration_name: string;
          finished_at: Date | null;
          rolled_back_at: Date | null;
        }>(`SELECT migration_name, finished_at, rolled_back_at FROM ${schema}."_prisma_migrations"`);
        const failed = rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
        if (failed) throw new MigrationError(failedMigrationMessage(failed.migration_name, environment));
        const done = new Set(rows.filter((r) => r.finished_at !== null).map((r) => r.migration_name));
        for (const migration of migrations) {
          if (done.has(migration.name)) continue;
          onApply?.({ environment, name: migration.name });
          const id = randomUUID();
          await client.query('BEGIN');
          try {
            await client.query(
              `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, applied_steps_count) VALUES ($1, $2, $3, now(), 0)`,
              [id, migration.checksum, migration.name],
            );
            await client.query(migration.sql);
            await client.query(
              `UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1`,
              [id],
            );
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK');
            const reason = postgresError(error);
            // Recorded after the rollback, as Prisma records a failed migration (finished_at and
            // rolled_back_at NULL, the error in logs), so that later runs stop until it is resolved.
            await client.query(
              `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, logs, applied_steps_count) VALUES ($1, $2, $3, now(), $4, 0)`,
              [id, migration.checksum, migration.name, reason],
            );
            throw new MigrationError(
              `migration ${migration.name} failed in environment ${environment}: ${reason}\n` +
                `It was rolled back there (a migration that commits its own transaction, e.g. an enum change, may have left part of it applied) and is recorded as failed. ` +
                `Fix migrations/${migration.name}/migration.sql, run \`npx svcgen migrate resolve --rolled-back ${migration.name}\`, then \`npx svcgen migrate deploy\` (docs/migrations.md)`,
            );
          }
          applied.push({ environment, name: migration.name });
        }
      }
    } finally {
      await client.query('RESET search_path').catch(() => {});
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
      await client.query('RESET statement_timeout').catch(() => {});
    }
    return applied;
  });
}

/** PostgreSQL's own words for a failed statement: message, then detail and hint when it gave them. */
function postgresError(error: unknown): string {
  const e = error as { message?: string; detail?: string; hint?: string; code?: string };
  const parts = [`${e.message ?? String(error)}${e.code ? ` (SQLSTATE ${e.code})` : ''}`];
  if (e.detail) parts.push(`DETAIL: ${e.detail}`);
  if (e.hint) parts.push(`HINT: ${e.hint}`);
  return parts.join('; ');
}

export interface ResolvedMigration {
  environment: string;
  name: string;
}

/**
 * `migrate resolve --rolled-back`: marks the failed attempt of `name` rolled back in every
 * environment where it failed, so that deploy applies (the fixed) migration.sql again.
 */
export async function markMigrationRolledBack(
  db: Database,
  migrationsDir: string,
  environments: readonly string[],
  name: string,
): Promise<ResolvedMigration[]> {
  await requireMigration(migrationsDir, name);
  const resolved: ResolvedMigration[] = [];
  for (const environment of environments) {
    const failed = failedRow(await migrationRows(db, environment));
    if (failed?.migration_name !== name) continue;
    await db.query(`UPDATE ${migrationsTable(environment)} SET rolled_back_at = now() WHERE id = $1`, [failed.id]);
    resolved.push({ environment, name });
  }
  if (resolved.length === 0) {
    throw new MigrationError(
      `migration ${name} is not failed in any environment (${environments.join(', ')}): there is nothing to roll back`,
    );
  }
  return resolved;
}

/**
 * `migrate resolve --applied`: records `name` as applied without running it (its changes were made
 * by hand), in every environment that has not applied it; a failed attempt is marked rolled back.
 */
export async function markMigrationApplied(
  db: Database,
  migrationsDir: string,
  environments: readonly string[],
  name: string,
): Promise<ResolvedMigration[]> {
  const migration = await requireMigration(migrationsDir, name);
  const resolved: ResolvedMigration[] = [];
  for (const environment of environments) {
    const table = migrationsTable(environment);
    await db.exec(
      `CREATE SCHEMA IF NOT EXISTS ${ident(environmentSchema(environment))}; SET search_path TO ${ident(environmentSchema(environment))}; ${PRISMA_MIGRATIONS_TABLE}; RESET search_path`,
    );
    const rows = await migrationRows(db, environment);
    if (rows.some((r) => r.migration_name === name && r.finished_at !== null)) continue;
    await db.transaction(async (tx) => {
      await tx.query(
        `UPDATE ${table} SET rolled_back_at = now() WHERE migration_name = $1 AND finished_at IS NULL AND rolled_back_at IS NULL`,
        [name],
      );
      await tx.query(
        `INSERT INTO ${table} (id, checksum, migration_name, started_at, finished_at, applied_steps_count) VALUES ($1, $2, $3, now(), now(), 0)`,
        [randomUUID(), migration.checksum, name],
      );
    });
    resolved.push({ environment, name });
  }
  if (resolved.length === 0)
    throw new MigrationError(
      `migration ${name} is already recorded as applied in every environment (${environments.join(', ')})`,
    );
  return resolved;
}

async function requireMigration(migrationsDir: string, name: string): Promise<Migration> {
  const migration = (await readMigrations(migrationsDir)).find((m) => m.name === name);
  if (!migration)
    throw new MigrationError(
      `no migration ${name} in ${migrationsDir} (the name of its folder, e.g. 20260101120000_add_note)`,
    );
  return migration;
}

/**
 * `migrate reset`: drops each environment's data schema (its tables, data and migration history).
 * svcgen's own schema (API keys, tokens, accounts, webhooks) is kept: see docs/migrations.md.
 */
export async function dropEnvironmentSchemas(db: Database, environments: readonly string[]): Promise<void> {
  return withConnection(db.pool, async (client) => {
    try {
      // Schema changes and waiting for another process's migration lock may outlast a request's statement_timeout.
      await client.query('SET statement_timeout = 0');
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      for (const environment of environments)
        await client.query(`DROP SCHEMA IF EXISTS ${ident(environmentSchema(environment))} CASCADE`);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
      await client.query('RESET statement_timeout').catch(() => {});
    }
  });
}
