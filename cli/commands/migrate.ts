/** migrate dev / deploy / resolve / reset (docs/migrations.md) */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { command, projectFlag } from '../hints.ts';
import { projectDir, withDatabase, withProject } from '../options.ts';
import { UsageError } from '../usage-error.ts';

function timestamp(date = new Date()): string {
  return date.toISOString().replace(/[-:T]/g, '').slice(0, 14);
}

/** What the migrate commands need, loaded when one runs (so that --help stays fast). */
async function load() {
  const [{ readModel }, prisma, { loadConfig }, { openProjectDatabase }, db] = await Promise.all([
    import('../../generator/generate.ts'),
    import('../../generator/prisma/index.ts'),
    import('../../runtime/config/index.ts'),
    import('../database.ts'),
    import('../../runtime/db/index.ts'),
  ]);
  return { readModel, prisma, loadConfig, openProjectDatabase, db };
}

type Loaded = Awaited<ReturnType<typeof load>>;

/** The project's environments and an open database (embedded or not), released by `work`'s end. */
async function withProjectDatabase<T>(
  options: { project: string; databaseUrl?: string; directDatabaseUrl?: string; createDatabase?: boolean },
  work: (context: {
    dir: string;
    loaded: Loaded;
    environments: string[];
    url: string;
    db: import('../../runtime/db/index.ts').Database;
  }) => Promise<T>,
): Promise<T> {
  const dir = projectDir(options);
  const loaded = await load();
  const { tables } = await loaded.readModel(dir);
  const config = await loaded.loadConfig(
    dir,
    tables.map((t) => t.name),
  );
  const database = await loaded.openProjectDatabase(dir, options.databaseUrl, undefined, options.directDatabaseUrl);
  try {
    if (options.createDatabase && !database.embedded)
      await createMissingDatabase(database.directUrl, (line) => console.error(line));
    // Migrations hold an advisory lock and set session state: a session connection, never a transaction pooler.
    const db = loaded.db.openDatabase(database.directUrl, { max: 2 });
    try {
      await loaded.db.ensureSystemSchema(db);
      return await work({ dir, loaded, environments: config.environments, url: database.directUrl, db });
    } finally {
      await db.close();
    }
  } finally {
    await database.release();
  }
}

async function applyAll(
  loaded: Loaded,
  db: import('../../runtime/db/index.ts').Database,
  dir: string,
  environments: string[],
  quiet = false,
  print: (line: string) => void = (line) => console.log(line),
): Promise<void> {
  const applied = await loaded.db.applyMigrations(db, path.join(dir, 'migrations'), environments);
  if (applied.length === 0 && !quiet) print('no pending migrations');
  for (const a of applied) print(`applied ${a.name} to ${a.environment}`);
}

/** Creates the database a URL names when it is missing (as `prisma migrate dev` does), saying so. */
export async function createMissingDatabase(url: string, say: (line: string) => void): Promise<void> {
  const { createDatabaseIfMissing } = await import('../database.ts');
  const created = await createDatabaseIfMissing(url);
  if (created !== undefined) say(`created the database "${created}" (it did not exist)`);
}

export interface MigrateDevRun {
  dir: string;
  environments: string[];
  /** The session connection (never a transaction pooler). */
  url: string;
  name?: string;
  acceptDataLoss: boolean;
  createOnly: boolean;
  /** The --project the user gave, for the commands messages show. */
  project: string;
  interactive?: boolean;
  print?: (line: string) => void;
  warn?: (text: string) => void;
  trustRecord?: boolean;
  /**
   * A schema.prisma that the migrations folder is known to hold as it is now (dev's last migrate):
   * the next migration is then the engine's diff from it, without replaying every migration into
   * a temporary database.
   */
  migratedSchema?: string;
}

/** `migrate dev` on a database that is already open: the command, and dev in its own process. */
export async function runMigrateDev(
  run: MigrateDevRun,
  loaded?: Loaded,
  open?: import('../../runtime/db/index.ts').Database,
): Promise<void> {
  loaded ??= await load();
  const db = open ?? loaded.db.openDatabase(run.url, { max: 2 });
  try {
    if (!open) await loaded.db.ensureSystemSchema(db);
    const { migrateDev } = await import('../migrate-dev.ts');
    const { dir, environments, url } = run;
    await migrateDev({
      dir,
      environments,
      url,
      db,
      name: run.name,
      acceptDataLoss: run.acceptDataLoss,
      createOnly: run.createOnly,
      projectFlag: projectFlag(run.project),
      interactive: run.interactive,
      print: run.print,
      warn: run.warn,
      trustRecord: run.trustRecord,
      applyAll: (quiet) => applyAll(loaded, db, dir, environments, quiet, run.print),
      migrationSql: (schemaText) =>
        run.migratedSchema !== undefined
          ? loaded.prisma.migrationSqlBetween(run.migratedSchema, schemaText)
          : loaded.prisma.migrationSqlFromMigrations({
              migrationsDir: path.join(dir, 'migrations'),
              schemaText,
              shadowDatabaseUrl: url,
            }),
      readSchema: async () => (await loaded.readModel(dir)).schemaText,
      writeMigration: async (folderName, sql) => {
        const migrationsDir = path.join(dir, 'migrations');
        const folder = path.join(migrationsDir, folderName);
        await mkdir(folder, { recursive: true });
        await writeFile(path.join(folder, 'migration.sql'), sql);
        await loaded.prisma.writeMigrationLock(migrationsDir);
        return path.relative(process.cwd(), path.join(folder, 'migration.sql'));
      },
      folderName: (name) => `${timestamp()}_${name}`,
    });
  } finally {
    if (!open) await db.close();
  }
}

const DEV_HELP = `
Before writing the migration, svcgen checks it against the rows of every environment, as
\`prisma migrate dev\` does: dropping a table or a column that holds data, or casting a column
that may fail, is a data-loss warning; adding a required column without a default to a table
with rows (or making a column with NULLs required) cannot be executed at all.
  - warnings, on a terminal: asks y/N; otherwise refuses (exit 1) unless --accept-data-loss
  - steps that cannot be executed: always refused; add a @default, or use --create-only and
    edit the SQL (e.g. add the column nullable, fill it, then SET NOT NULL)
  - --create-only writes migrations/<timestamp>_<name>/migration.sql without applying it;
    \`npx svcgen migrate deploy\` (or \`npx svcgen migrate dev\`) applies it
Nothing is written when it refuses. See docs/migrations.md.`;

const RESOLVE_HELP = `
A migration whose SQL fails is rolled back in that environment and recorded as failed; deploy
and serve then refuse until it is resolved:
  --rolled-back <name>  after fixing its migration.sql: deploy will apply it again
  --applied <name>      its changes were made by hand: record it as applied without running it`;

const RESET_HELP = `
Development only (refuses when NODE_ENV=production): drops every environment's data schema
(env_<name>: tables, rows, migration history) and applies all migrations again. svcgen's own
tables (API keys, management tokens, user accounts, webhooks) are kept. Asks y/N on a terminal;
--force otherwise.`;

export function registerMigrateCommands(program: Command): void {
  const migrate = program
    .command('migrate')
    .description('create and apply SQL migrations (Prisma layout); see docs/migrations.md');

  withDatabase(
    withProject(
      migrate
        .command('dev')
        .description(
          'apply pending migrations, write a migration for the model changes since the last one, then apply it',
        ),
    ),
  )
    .option('--name <name>', 'a short name for the migration, e.g. add_order_note (needed when the model changed)')
    .option(
      '--accept-data-loss',
      'write and apply the migration despite data-loss warnings (never for steps that cannot be executed)',
    )
    .option('--create-only', 'write the migration file but do not apply it (edit it, then `npx svcgen migrate deploy`)')
    .addHelpText('after', DEV_HELP)
    .action(
      async (options: {
        project: string;
        name?: string;
        acceptDataLoss?: boolean;
        createOnly?: boolean;
        databaseUrl?: string;
        directDatabaseUrl?: string;
      }) => {
        if (options.name !== undefined && !/^[A-Za-z0-9_-]{1,100}$/.test(options.name))
          throw new UsageError('--name may use letters, digits, _ and - only');
        await withProjectDatabase({ ...options, createDatabase: true }, ({ dir, loaded, environments, url, db }) =>
          runMigrateDev(
            {
              dir,
              environments,
              url,
              name: options.name,
              acceptDataLoss: options.acceptDataLoss === true,
              createOnly: options.createOnly === true,
              project: options.project,
            },
            loaded,
            db,
          ),
        );
      },
    );

  withDatabase(
    withProject(migrate.command('deploy').description('apply pending migrations to every environment; never prompts')),
  ).action(async (options: { project: string; databaseUrl?: string; directDatabaseUrl?: string }) => {
    await withProjectDatabase(options, ({ dir, loaded, environments, db }) => applyAll(loaded, db, dir, environments));
  });

  withDatabase(
    withProject(
      migrate
        .command('resolve')
        .description('resolve a failed migration: mark it rolled back (to apply it again) or applied'),
    ),
  )
    .option('--rolled-back <name>', 'the failed migration, e.g. 20260101120000_add_note')
    .option('--applied <name>', 'a migration whose changes were made by hand')
    .addHelpText('after', RESOLVE_HELP)
    .action(
      async (options: {
        project: string;
        rolledBack?: string;
        applied?: string;
        databaseUrl?: string;
        directDatabaseUrl?: string;
      }) => {
        if ((options.rolledBack === undefined) === (options.applied === undefined))
          throw new UsageError('migrate resolve needs one of --rolled-back <name> or --applied <name>');
        await withProjectDatabase(options, async ({ dir, loaded, environments, db }) => {
          const migrationsDir = path.join(dir, 'migrations');
          if (options.rolledBack !== undefined) {
            for (const r of await loaded.db.markMigrationRolledBack(
              db,
              migrationsDir,
              environments,
              options.rolledBack,
            )) {
              console.log(
                `marked ${r.name} rolled back in ${r.environment}: \`${command(`migrate deploy${projectFlag(options.project)}`)}\` applies it again`,
              );
            }
          } else {
            for (const r of await loaded.db.markMigrationApplied(db, migrationsDir, environments, options.applied!)) {
              console.log(`marked ${r.name} applied in ${r.environment}`);
            }
          }
        });
      },
    );

  withDatabase(
    withProject(
      migrate
        .command('reset')
        .description("development only: drop every environment's data and apply all migrations again"),
    ),
  )
    .option('--force', 'do not ask (needed when not on a terminal)')
    .addHelpText('after', RESET_HELP)
    .action(async (options: { project: string; force?: boolean; databaseUrl?: string; directDatabaseUrl?: string }) => {
      if (process.env.NODE_ENV === 'production') {
        throw new Error(
          "migrate reset drops every environment's data, and NODE_ENV=production: refusing (resolve a failed migration with `npx svcgen migrate resolve` instead)",
        );
      }
      const { askYesNo, isInteractive } = await import('../migration-decision.ts');
      await withProjectDatabase(options, async ({ dir, loaded, environments, db }) => {
        if (!options.force) {
          if (!isInteractive())
            throw new Error(
              "migrate reset drops every environment's data: pass --force to do it without a terminal to ask on",
            );
          const yes = await askYesNo(
            `Drop all data of environments ${environments.join(', ')} and apply all migrations again?`,
          );
          if (!yes) throw new Error('migrate reset cancelled: nothing was dropped');
        }
        await loaded.db.dropEnvironmentSchemas(db, environments);
        console.log(`dropped the data of ${environments.join(', ')}`);
        await applyAll(loaded, db, dir, environments);
      });
    });
}
