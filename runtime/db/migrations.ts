/**
 * Applies the project's Prisma migrations (`migrations/<timestamp>_<name>/migration.sql`) to every
 * environment's schema, with Prisma's own bookkeeping table, so that `prisma migrate deploy`
 * (pointed at `?schema=env_<name>`) sees the same history.
 */
import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { environmentSchema, ident, type Database } from './pool.ts';
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

/** The migrations of the folder not (successfully) applied yet, per environment; reads only. */
export async function pendingMigrations(db: Database, migrationsDir: string, environments: readonly string[]): Promise<AppliedMigration[]> {
  const migrations = await readMigrations(migrationsDir);
  const pending: AppliedMigration[] = [];
  for (const environment of environments) {
    const table = `${ident(environmentSchema(environment))}."_prisma_migrations"`;
    const [exists] = await db.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [table]);
    const done = new Set(
      exists?.t ? (await db.query<{ migration_name: string }>(`SELECT migration_name FROM ${table} WHERE finished_at IS NOT NULL`)).map((r) => r.migration_name) : [],
    );
    for (const m of migrations) if (!done.has(m.name)) pending.push({ environment, name: m.name });
  }
  return pending;
}

/** Applies pending migrations to each environment; returns what it applied. */
export async function applyMigrations(
  db: Database,
  migrationsDir: string,
  environments: readonly string[],
): Promise<AppliedMigration[]> {
  const migrations = await readMigrations(migrationsDir);
  const applied: AppliedMigration[] = [];
  const client = await db.pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    for (const environment of environments) {
      const schema = ident(environmentSchema(environment));
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}; SET search_path TO ${schema}; ${PRISMA_MIGRATIONS_TABLE}`);
      const { rows } = await client.query<{ migration_name: string; finished_at: Date | null; rolled_back_at: Date | null }>(
        `SELECT migration_name, finished_at, rolled_back_at FROM ${schema}."_prisma_migrations"`,
      );
      const failed = rows.find((r) => r.finished_at === null && r.rolled_back_at === null);
      if (failed) {
        throw new MigrationError(
          `migration ${failed.migration_name} failed earlier in environment ${environment}; fix the database, then mark it rolled back (prisma migrate resolve --rolled-back ${failed.migration_name})`,
        );
      }
      const done = new Set(rows.filter((r) => r.finished_at !== null).map((r) => r.migration_name));
      for (const migration of migrations) {
        if (done.has(migration.name)) continue;
        const id = randomUUID();
        await client.query('BEGIN');
        try {
          await client.query(
            `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, applied_steps_count) VALUES ($1, $2, $3, now(), 0)`,
            [id, migration.checksum, migration.name],
          );
          await client.query(migration.sql);
          await client.query(`UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1`, [id]);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw new MigrationError(
            `migration ${migration.name} failed in environment ${environment}: ${(error as Error).message}`,
          );
        }
        applied.push({ environment, name: migration.name });
      }
    }
  } finally {
    await client.query('RESET search_path').catch(() => {});
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
    client.release();
  }
  return applied;
}
