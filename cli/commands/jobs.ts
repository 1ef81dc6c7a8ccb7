/** jobs failed|retry: the project's own jobs whose attempts are spent, for operators (docs/own-code.md "Failed jobs"). */
import type { Command } from 'commander';
import { openOperator, withOperatorOptions } from '../operator.ts';
import { UsageError } from '../usage-error.ts';

// Loaded when a command runs, so that --help does not pay for pg and the runtime.
const usercodeModule = () => import('../../runtime/usercode/index.ts');

/** At most `max` characters of `text` on one line, an ellipsis when cut. */
function oneLine(text: string, max: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

export function registerJobCommands(program: Command): void {
  const jobs = program.command('jobs').description("the project's own jobs (svcgen.code.ts), for operators");

  withOperatorOptions(jobs.command('failed').description('list the jobs whose attempts are spent, oldest first'))
    .option('--json', 'print a JSON array of the jobs (whole payloads and errors)')
    .action(async (options: { project: string; databaseUrl?: string; json?: boolean }) => {
      const operator = await openOperator(options);
      const failed = await operator.withDatabase(async (db) => (await usercodeModule()).listFailedJobs(db));
      if (options.json) return console.log(JSON.stringify(failed));
      if (failed.length === 0) return console.log('no failed jobs');
      for (const job of failed)
        console.log(
          [
            job.id,
            job.name,
            job.environment ?? '-',
            `attempts ${job.attempts}/${job.maxAttempts}`,
            job.failedAt,
            oneLine(JSON.stringify(job.payload) ?? 'null', 80),
            oneLine(job.lastError ?? '', 200),
          ].join('\t'),
        );
    });

  withOperatorOptions(
    jobs
      .command('retry')
      .description('queue failed jobs again: each runs at once, its attempts counted from zero')
      .argument('[id...]', 'ids of failed jobs (as `jobs failed` lists them)'),
  )
    .option('--all', 'every failed job')
    .action(async (ids: string[], options: { project: string; databaseUrl?: string; all?: boolean }) => {
      if (options.all ? ids.length > 0 : ids.length === 0)
        throw new UsageError('name the failed jobs to retry by id, or pass --all (not both)');
      const bad = ids.filter((id) => !/^\d{1,18}$/.test(id));
      if (bad.length) throw new UsageError(`a job id is a number (see \`svcgen jobs failed\`): ${bad.join(', ')}`);
      const operator = await openOperator(options);
      const queued = await operator.withDatabase(async (db) =>
        (await usercodeModule()).retryFailedJobs(db, options.all ? undefined : ids),
      );
      for (const id of queued) console.log(`queued ${id} again`);
      const missing = ids.filter((id) => !queued.includes(id));
      for (const id of missing) console.error(`no failed job with id ${id}`);
      if (options.all && queued.length === 0) console.log('no failed jobs');
      if (missing.length > 0) process.exitCode = 1;
    });
}
