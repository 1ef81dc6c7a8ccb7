/** migrate dev / migrate deploy */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { projectDir, withProject } from '../options.ts';
import { UsageError } from '../usage-error.ts';

function timestamp(date = new Date()): string {
  return date.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

/** What the migrate commands need, loaded when one runs (so that --help stays fast). */
async function load() {
  const [{ readModel }, { migrationSqlFromMigrations, writeMigrationLock }, { loadConfig }, { openProjectDatabase }] = await Promise.all([
    import('../../generator/generate.ts'),
    import('../../generator/prisma/index.ts'),
    import('../../runtime/config/index.ts'),
    import('../database.ts'),
  ]);
  return { readModel, migrationSqlFromMigrations, writeMigrationLock, loadConfig, openProjectDatabase };
}

async function applyAll(dir: string, url: string, environments: string[]): Promise<void> {
  const { applyMigrations, ensureSystemSchema, openDatabase } = await import('../../runtime/db/index.ts');
  const db = openDatabase(url, { max: 2 });
  try {
    await ensureSystemSchema(db);
    const applied = await applyMigrations(db, path.join(dir, 'migrations'), environments);
    if (applied.length === 0) console.log('no pending migrations');
    for (const a of applied) console.log(`applied ${a.name} to ${a.environment}`);
  } finally {
    await db.close();
  }
}

export function registerMigrateCommands(program: Command): void {
  const migrate = program.command('migrate').description('create and apply SQL migrations (Prisma layout)');

  withProject(migrate.command('dev').description('write a migration for the model changes since the last one, then apply it'))
    .requiredOption('--name <name>', 'a short name for the migration, e.g. add_order_note')
    .option('--database-url <url>', 'PostgreSQL connection string (default: DATABASE_URL, else embedded)')
    .action(async (options: { project: string; name: string; databaseUrl?: string }) => {
      if (!/^[A-Za-z0-9_-]{1,100}$/.test(options.name)) throw new UsageError('--name may use letters, digits, _ and - only');
      const dir = projectDir(options);
      const { readModel, loadConfig, openProjectDatabase, migrationSqlFromMigrations, writeMigrationLock } = await load();
      const { schemaText, tables } = await readModel(dir);
      const config = await loadConfig(dir, tables.map((t) => t.name));
      const database = await openProjectDatabase(dir, options.databaseUrl);
      try {
        const migrationsDir = path.join(dir, 'migrations');
        const sql = await migrationSqlFromMigrations({ migrationsDir, schemaText, shadowDatabaseUrl: database.url });
        if (sql.trim() === '') {
          console.log('the model has no changes since the last migration');
        } else {
          const folder = path.join(migrationsDir, `${timestamp()}_${options.name}`);
          await mkdir(folder, { recursive: true });
          await writeFile(path.join(folder, 'migration.sql'), sql);
          await writeMigrationLock(migrationsDir);
          console.log(`wrote ${path.relative(process.cwd(), path.join(folder, 'migration.sql'))}`);
        }
        await applyAll(dir, database.url, config.environments);
      } finally {
        await database.release();
      }
    });

  withProject(migrate.command('deploy').description('apply pending migrations to every environment; never prompts'))
    .option('--database-url <url>', 'PostgreSQL connection string (default: DATABASE_URL, else embedded)')
    .action(async (options: { project: string; databaseUrl?: string }) => {
      const dir = projectDir(options);
      const { readModel, loadConfig, openProjectDatabase } = await load();
      const { tables } = await readModel(dir);
      const config = await loadConfig(dir, tables.map((t) => t.name));
      const database = await openProjectDatabase(dir, options.databaseUrl);
      try {
        await applyAll(dir, database.url, config.environments);
      } finally {
        await database.release();
      }
    });
}
