/**
 * Whether the model has changes that no migration holds. The exact answer needs the schema engine
 * to replay the migrations into a temporary database (a second or so), too slow for every `serve`;
 * so `migrate dev` records the schema.prisma it left migrated, and only a schema or migrations
 * folder that differs from the record pays for the exact check.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { command } from './hints.ts';

export const SCHEMA_RECORD_FILE = 'svcgen_schema.toml';

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

async function migrationNames(migrationsDir: string): Promise<string[]> {
  const entries = await readdir(migrationsDir, { withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

function recordContent(schemaText: string, lastMigration: string): string {
  return (
    '# Written by `svcgen migrate dev`: the schema.prisma that the migrations of this folder hold,\n' +
    '# so that `svcgen serve` knows without a database that the model has no unmigrated changes.\n' +
    `schema_sha256 = "${sha256(schemaText)}"\n` +
    `last_migration = "${lastMigration}"\n`
  );
}

/** Notes that the migrations folder holds `schemaText` (after `migrate dev` wrote or found nothing to write). */
export async function recordMigratedSchema(migrationsDir: string, schemaText: string): Promise<void> {
  const names = await migrationNames(migrationsDir);
  if (names.length === 0) return;
  const content = recordContent(schemaText, names[names.length - 1]);
  const existing = await readFile(path.join(migrationsDir, SCHEMA_RECORD_FILE), 'utf8').catch(() => undefined);
  if (existing !== content) await writeFile(path.join(migrationsDir, SCHEMA_RECORD_FILE), content);
}

export type ModelState = 'no-migrations' | 'recorded' | 'checked' | 'unmigrated' | 'unknown';

/**
 * 'recorded': the record matches (no database needed); 'checked': it did not, but the schema
 * engine found no difference; 'unmigrated': the model has changes no migration holds; 'unknown':
 * the record did not match and `recordOnly` asked for no engine check.
 */
export async function modelMigrationState(
  projectDir: string,
  databaseUrl: string,
  options: { recordOnly?: boolean } = {},
): Promise<ModelState> {
  const migrationsDir = path.join(projectDir, 'migrations');
  const names = await migrationNames(migrationsDir);
  if (names.length === 0) return 'no-migrations';
  const schemaText = await readFile(path.join(projectDir, 'schema.prisma'), 'utf8');
  const record = await readFile(path.join(migrationsDir, SCHEMA_RECORD_FILE), 'utf8').catch(() => undefined);
  if (record === recordContent(schemaText, names[names.length - 1])) return 'recorded';
  if (options.recordOnly) return 'unknown';
  const { migrationSqlFromMigrations } = await import('../generator/prisma/index.ts');
  const sql = await migrationSqlFromMigrations({ migrationsDir, schemaText, shadowDatabaseUrl: databaseUrl });
  return sql.trim() === '' ? 'checked' : 'unmigrated';
}

export function unmigratedModelMessage(projectFlag: string): string {
  return (
    `schema.prisma has changes no migration holds yet: run \`${command(`migrate dev --name <change>${projectFlag}`)}\`, then serve again ` +
    '(serving now would answer errors for tables and columns the database lacks)'
  );
}

/** serve's start-up check: throws with the fixing command when the model has unmigrated changes. */
export async function refuseUnmigratedModel(
  projectDir: string,
  databaseUrl: string,
  projectFlag: string,
): Promise<void> {
  let state: ModelState;
  try {
    state = await modelMigrationState(projectDir, databaseUrl);
  } catch (error) {
    // E.g. no CREATEDB right for the temporary database, or a migration whose SQL fails (which
    // applying it reports better): the check is a safety net, not a reason to stay down.
    console.error(`could not check schema.prisma against the migrations: ${(error as Error).message.split('\n')[0]}`);
    return;
  }
  if (state === 'unmigrated') throw new Error(unmigratedModelMessage(projectFlag));
  if (state === 'checked') {
    console.error(
      `schema.prisma differs from migrations/${SCHEMA_RECORD_FILE} but has no unmigrated changes; \`${command(`migrate dev${projectFlag}`)}\` records it (faster start-up)`,
    );
  }
}
