/** files ls|rm: the stored files of an environment, for operators (docs/storage.md "Operators"). */
import type { Command } from 'commander';
import type { Config } from '../../runtime/config/index.ts';
import type { Database } from '../../runtime/db/index.ts';
import { projectDir, withProject } from '../options.ts';
import { UsageError } from '../usage-error.ts';

// Loaded when a command runs, so that --help does not pay for pg and the runtime.
const storageModule = () => import('../../runtime/storage/index.ts');
const loadConfig = async (dir: string) => (await import('../../runtime/config/index.ts')).loadConfig(dir);

async function withDatabase<T>(dir: string, url: string | undefined, work: (db: Database) => Promise<T>): Promise<T> {
  const { openProjectDatabase } = await import('../database.ts');
  const { ensureSystemSchema, openDatabase } = await import('../../runtime/db/index.ts');
  const database = await openProjectDatabase(dir, url);
  const db = openDatabase(database.url, { max: 2 });
  try {
    await ensureSystemSchema(db);
    return await work(db);
  } finally {
    await db.close();
    await database.release();
  }
}

/** --env, checked against the config (default: its first environment). */
function environmentOf(config: Config, env: string | undefined): string {
  const environment = env ?? config.environments[0]!;
  if (!config.environments.includes(environment))
    throw new UsageError(`--env must be one of ${config.environments.join(', ')}`);
  return environment;
}

export function registerFileCommands(program: Command): void {
  const files = program.command('files').description('stored files (storage buckets), for operators');

  withProject(files.command('ls').description('list the files of an environment, oldest first'))
    .option('--env <env>', "environment (default: the config's first)")
    .option('--bucket <bucket>', 'only this bucket')
    .option('--database-url <url>', 'PostgreSQL connection string')
    .option('--json', 'print a JSON array of the files')
    .action(
      async (options: { project: string; env?: string; bucket?: string; databaseUrl?: string; json?: boolean }) => {
        const dir = projectDir(options);
        const config = await loadConfig(dir);
        const environment = environmentOf(config, options.env);
        if (options.bucket !== undefined && !Object.hasOwn(config.storage.buckets, options.bucket)) {
          const names = Object.keys(config.storage.buckets);
          throw new UsageError(
            `no bucket "${options.bucket}" in svcgen.config.json (${names.length ? `buckets: ${names.join(', ')}` : 'storage.buckets is empty'})`,
          );
        }
        const list = await withDatabase(dir, options.databaseUrl, async (db) =>
          (await storageModule()).listFiles(db, environment, options.bucket),
        );
        if (options.json) console.log(JSON.stringify(list));
        else if (list.length === 0)
          console.log(`no files in ${environment}${options.bucket ? `/${options.bucket}` : ''}`);
        else
          for (const f of list)
            console.log(
              `${f.id}\t${f.bucket}\t${f.size}\t${f.contentType}\t${f.createdAt}\towner ${f.ownerId ?? '-'}\t${JSON.stringify(f.name)}`,
            );
      },
    );

  withProject(
    files
      .command('rm')
      .description("remove files: their rows and `_files` DELETE events now, their bytes by the server's job")
      .argument('<id...>', 'file ids'),
  )
    .option('--env <env>', "environment (default: the config's first)")
    .option('--database-url <url>', 'PostgreSQL connection string')
    .action(async (ids: string[], options: { project: string; env?: string; databaseUrl?: string }) => {
      const dir = projectDir(options);
      const config = await loadConfig(dir);
      const environment = environmentOf(config, options.env);
      const missing = await withDatabase(dir, options.databaseUrl, async (db) => {
        const { removeFile } = await storageModule();
        const notFound: string[] = [];
        for (const id of ids) {
          const bucket = await removeFile(db, config, environment, id);
          if (bucket === undefined) notFound.push(id);
          else console.log(`removed ${id} (${bucket})`);
        }
        return notFound;
      });
      for (const id of missing) console.error(`no file with id ${id} in ${environment}`);
      if (missing.length > 0) process.exitCode = 1;
    });
}
