/** files ls|rm: the stored files of an environment, for operators (docs/storage.md "Operators"). */
import type { Command } from 'commander';
import { openOperator, withOperatorOptions } from '../operator.ts';
import { UsageError } from '../usage-error.ts';

// Loaded when a command runs, so that --help does not pay for pg and the runtime.
const storageModule = () => import('../../runtime/storage/index.ts');
const ENV = { required: false, description: "environment (default: the config's first)" };

export function registerFileCommands(program: Command): void {
  const files = program.command('files').description('stored files (storage buckets), for operators');

  withOperatorOptions(
    files.command('ls').description('list the files of an environment, oldest first'),
    (c) => c.option('--bucket <bucket>', 'only this bucket'),
    ENV,
  )
    .option('--json', 'print a JSON array of the files')
    .action(
      async (options: { project: string; env?: string; bucket?: string; databaseUrl?: string; json?: boolean }) => {
        const operator = await openOperator(options);
        const { config } = operator;
        const environment = operator.environment();
        if (options.bucket !== undefined && !Object.hasOwn(config.storage.buckets, options.bucket)) {
          const names = Object.keys(config.storage.buckets);
          throw new UsageError(
            `no bucket "${options.bucket}" in svcgen.config.json (${names.length ? `buckets: ${names.join(', ')}` : 'storage.buckets is empty'})`,
          );
        }
        const list = await operator.withDatabase(async (db) =>
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

  withOperatorOptions(
    files
      .command('rm')
      .description("remove files: their rows and `_files` DELETE events now, their bytes by the server's job")
      .argument('<id...>', 'file ids'),
    undefined,
    ENV,
  ).action(async (ids: string[], options: { project: string; env?: string; databaseUrl?: string }) => {
    const operator = await openOperator(options);
    const { config } = operator;
    const environment = operator.environment();
    const missing = await operator.withDatabase(async (db) => {
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
