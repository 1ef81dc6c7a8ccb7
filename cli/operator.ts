/**
 * What the operator commands share (keys and token: docs/api.md §4; files: docs/storage.md
 * "Operators"): --project, --env and --database-url, the project's config, --env checked against
 * it, and the project's database with the system schema in place.
 */
import type { Command } from 'commander';
import type { Config } from '../runtime/config/index.ts';
import type { Database } from '../runtime/db/index.ts';
import { projectDir, withProject } from './options.ts';
import { UsageError } from './usage-error.ts';

/** The options an operator command reads through openOperator. */
export interface OperatorOptions {
  project: string;
  env?: string;
  databaseUrl?: string;
}

export interface Operator {
  dir: string;
  config: Config;
  /** --env, checked against the config (default: its first environment); a usage error names them. */
  environment(): string;
  /** Runs `work` on the project's database (--database-url, else as cli/database.ts finds it), then closes it. */
  withDatabase<T>(work: (db: Database) => Promise<T>): Promise<T>;
}

/**
 * `command` with --project and the options around the command's own: `env` (how --env is asked
 * for, if at all) before them, --database-url after them. Its --json and the like go after this.
 */
export function withOperatorOptions(
  command: Command,
  own: (command: Command) => Command = (c) => c,
  env?: { required: boolean; description: string },
): Command {
  let c = withProject(command);
  if (env)
    c = env.required ? c.requiredOption('--env <env>', env.description) : c.option('--env <env>', env.description);
  return own(c).option('--database-url <url>', 'PostgreSQL connection string');
}

/**
 * The project folder and its config, and the way to its database. The config and database modules
 * are loaded here, when a command runs, so that --help does not pay for pg and the runtime.
 */
export async function openOperator(options: OperatorOptions): Promise<Operator> {
  const dir = projectDir(options);
  const config = await (await import('../runtime/config/index.ts')).loadConfig(dir);
  return {
    dir,
    config,
    environment() {
      const environment = options.env ?? config.environments[0]!;
      if (!config.environments.includes(environment))
        throw new UsageError(`--env must be one of ${config.environments.join(', ')}`);
      return environment;
    },
    async withDatabase(work) {
      const { openProjectDatabase } = await import('./database.ts');
      const { ensureSystemSchema, openDatabase } = await import('../runtime/db/index.ts');
      const database = await openProjectDatabase(dir, options.databaseUrl);
      const db = openDatabase(database.url, { max: 2 });
      try {
        await ensureSystemSchema(db);
        return await work(db);
      } finally {
        await db.close();
        await database.release();
      }
    },
  };
}
