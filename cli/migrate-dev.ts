/** `svcgen migrate dev`: pending migrations first, then the new one, checked for data loss before it is written. */
import path from 'node:path';
import type { Database } from '../runtime/db/index.ts';
import { environmentSchema } from '../runtime/db/index.ts';
import { askYesNo, decideMigration, isInteractive } from './migration-decision.ts';
import {
  countForCheck,
  evaluateMigrationChecks,
  formatFindings,
  planMigrationChecks,
  warningsHeader,
} from './migration-checks.ts';
import { command } from './hints.ts';
import { modelMigrationState, recordMigratedSchema } from './migration-record.ts';
import { UsageError } from './usage-error.ts';

export interface MigrateDevOptions {
  dir: string;
  environments: string[];
  url: string;
  db: Database;
  name?: string;
  acceptDataLoss: boolean;
  createOnly: boolean;
  /** ` --project <dir>` when the command was given one, for the commands the messages suggest */
  projectFlag: string;
  applyAll(quiet: boolean): Promise<void>;
  migrationSql(schemaText: string): Promise<string>;
  readSchema(): Promise<string>;
  /** Writes <migrations>/<folderName>/migration.sql (and the lock); returns the path to show. */
  writeMigration(folderName: string, sql: string): Promise<string>;
  folderName(name: string): string;
  /** The answer to the data-loss question; a terminal prompt by default. */
  ask?: (question: string) => Promise<boolean>;
  interactive?: boolean;
  /** Where the progress lines go (stdout by default; dev sends them to its stderr). */
  print?: (line: string) => void;
  /** Where the data-loss findings go (stderr by default). */
  warn?: (text: string) => void;
  /**
   * Trust migrations/svcgen_schema.toml: when it records this very schema.prisma and the last
   * migration, skip the schema engine's replay (dev restarts often; `migrate dev` checks always).
   */
  trustRecord?: boolean;
}

export async function migrateDev(o: MigrateDevOptions): Promise<void> {
  const migrationsDir = path.join(o.dir, 'migrations');
  // The checks count rows in the environments as the migrations folder leaves them.
  const print = o.print ?? ((line: string) => console.log(line));
  const warn = o.warn ?? ((text: string) => process.stderr.write(`${text}\n`));
  await o.applyAll(true);
  const schemaText = await o.readSchema();
  if (o.trustRecord && (await modelMigrationState(o.dir, o.url, { recordOnly: true })) === 'recorded') {
    print('the model has no changes since the last migration');
    return;
  }
  const sql = await o.migrationSql(schemaText);
  if (sql.trim() === '') {
    print('the model has no changes since the last migration');
    await recordMigratedSchema(migrationsDir, schemaText);
    return;
  }
  if (o.name === undefined)
    throw new UsageError(
      `the model has changes since the last migration: name the new one with --name <name>, e.g. \`${command(`migrate dev --name add_order_note${o.projectFlag}`)}\``,
    );

  const checks = planMigrationChecks(sql);
  const environments = o.environments.map((name) => ({ name, schema: environmentSchema(name) }));
  const findings = await evaluateMigrationChecks(o.db, environments, checks);
  const hasWarnings = findings.some((f) => f.warnings.length > 0);
  const hasUnexecutable = findings.some((f) => f.unexecutable.length > 0);
  const folderName = o.folderName(o.name);
  const decision = decideMigration({
    hasWarnings,
    hasUnexecutable,
    interactive: o.interactive ?? isInteractive(),
    acceptDataLoss: o.acceptDataLoss,
    createOnly: o.createOnly,
  });
  if (hasWarnings || hasUnexecutable) warn(formatFindings(findings));

  if (decision.action === 'refuse') {
    const rerun = command(`migrate dev --name ${o.name}${o.projectFlag}`);
    if (decision.reason === 'unexecutable') {
      throw new Error(
        `migration ${o.name} not written: it has steps that cannot be executed on the rows above, and --accept-data-loss cannot change that. ` +
          `Give the field a default (@default(...)) or make it optional in schema.prisma, or run \`${rerun} --create-only\` and edit the SQL ` +
          `(e.g. add the column as nullable, fill it with an UPDATE, then SET NOT NULL) before \`${command(`migrate deploy${o.projectFlag}`)}\``,
      );
    }
    throw new Error(
      `migration ${o.name} not written: it would lose data (see the warnings above). ` +
        `Run \`${rerun} --accept-data-loss\` to write and apply it anyway, or \`${rerun} --create-only\` to write it without applying it, ` +
        `edit the SQL, then run \`${command(`migrate deploy${o.projectFlag}`)}\``,
    );
  }
  if (decision.action === 'ask') {
    const ask = o.ask ?? ((question: string) => askYesNo(question));
    if (!(await ask('Are you sure you want to create and apply this migration?'))) {
      throw new Error(`migration ${o.name} not written: cancelled`);
    }
  }

  // Prisma's migration.sql carries the warnings (without row counts) as a comment at the top.
  const first = environments[0];
  const header = warningsHeader(checks, () => ({}));
  const typed = first === undefined ? header : await headerWithTypes(o.db, first.schema, checks);
  const shown = await o.writeMigration(folderName, `${typed}${sql}`);
  print(`wrote ${shown}`);
  await recordMigratedSchema(migrationsDir, schemaText);
  if (decision.action === 'write-only') {
    print(`not applied (--create-only): edit it if needed, then run \`${command(`migrate deploy${o.projectFlag}`)}\``);
    return;
  }
  await o.applyAll(false);
}

/** The header's cast and enum messages name types and values, which only the database knows. */
async function headerWithTypes(
  db: Database,
  schema: string,
  checks: ReturnType<typeof planMigrationChecks>,
): Promise<string> {
  const known = new Map<number, { previousType?: string; removedValues?: string[] }>();
  for (const [index, check] of checks.entries()) {
    if (check.kind !== 'cast' && check.kind !== 'enumValueRemoval') continue;
    const { previousType, removedValues } = await countForCheck(db, schema, check);
    known.set(index, { previousType, removedValues });
  }
  return warningsHeader(checks, (check) => known.get(checks.indexOf(check)) ?? {});
}
