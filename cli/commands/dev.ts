/**
 * dev: serve + watch (docs/dev.md). The command's options; the supervisor itself is cli/dev/
 * (supervisor.ts), loaded only when dev runs.
 */
import { Option, type Command } from 'commander';
import type { DevOptions } from '../dev/state.ts';
import { parsePort, projectDir, withDatabase, withProject } from '../options.ts';

export function registerDevCommand(program: Command): void {
  withDatabase(
    withProject(
      program
        .command('dev')
        .description(
          'serve and watch: an edit of schema.prisma, svcgen.config.json or migrations/ regenerates, migrates the dev database and restarts; an edit of your code (svcgen.code.ts and what it imports) restarts',
        ),
    ),
  )
    .option('--port <n>', 'port to listen on (0: a free one, kept across restarts)', parsePort, 3000)
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .addOption(
      new Option(
        '--log-level <level>',
        "passed to serve: info logs a line per request on stdout; debug also shows the embedded PostgreSQL's own log",
      )
        .choices(['debug', 'info', 'warn'])
        .default('info'),
    )
    .action(async (options: DevOptions) => {
      const { runDev } = await import('../dev/supervisor.ts');
      await runDev(projectDir(options), options);
    });
}
