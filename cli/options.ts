import { statSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { UsageError } from './usage-error.ts';

export function withProject(command: Command): Command {
  return command.option('--project <dir>', 'the project folder', '.');
}

/** The database options of every command that opens one (README "Command line"; cli/database.ts reads them). */
export function withDatabase(command: Command): Command {
  return command
    .option('--database-url <url>', 'PostgreSQL connection string (default: DATABASE_URL, else embedded)')
    .option(
      '--direct-database-url <url>',
      'session connection string for migrations, LISTEN and webhooks when --database-url is a transaction pooler (default: DIRECT_DATABASE_URL, else the database URL)',
    );
}

/** The project folder; one that does not exist is a usage error naming it (exit 2). */
export function projectDir(options: { project?: string }): string {
  const dir = path.resolve(options.project ?? '.');
  let isFolder = false;
  try {
    isFolder = statSync(dir).isDirectory();
  } catch {
    isFolder = false;
  }
  if (!isFolder) {
    throw new UsageError(
      `no project folder ${dir}: --project names the folder that holds schema.prisma and svcgen.config.json (npx svcgen init <dir> makes one)`,
    );
  }
  return dir;
}

export function parsePort(value: string): number {
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65535)
    throw new InvalidArgumentError('must be a number from 0 to 65535');
  return Number(value);
}

export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}
