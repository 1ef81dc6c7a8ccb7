/** `svcgen`: the command line of README "Command line". Bad arguments print one usage line and exit 2. */
import { Command, CommanderError } from 'commander';
import { registerCodegenCommands } from './commands/codegen.ts';
import { registerCredentialCommands } from './commands/credentials.ts';
import { registerDevCommand } from './commands/dev.ts';
import { registerDiffCommand } from './commands/diff.ts';
import { registerFileCommands } from './commands/files.ts';
import { registerJobCommands } from './commands/jobs.ts';
import { registerMigrateCommands } from './commands/migrate.ts';
import { registerProjectCommands } from './commands/project.ts';
import { registerServeCommands } from './commands/serve.ts';
import { describeError } from './errors.ts';
import { SVCGEN_VERSION } from '../generator/package-root.ts';

export function buildProgram(): Command {
  const program = new Command('svcgen')
    .description('Generate and serve a typed REST backend from a Prisma schema')
    .version(SVCGEN_VERSION)
    .showHelpAfterError(false)
    .exitOverride()
    .configureOutput({ outputError: () => {} });
  registerProjectCommands(program);
  registerCodegenCommands(program);
  registerDiffCommand(program);
  registerMigrateCommands(program);
  registerServeCommands(program);
  registerDevCommand(program);
  registerCredentialCommands(program);
  registerFileCommands(program);
  registerJobCommands(program);
  // Subcommands inherit the same error handling.
  for (const command of program.commands) {
    command.exitOverride().configureOutput({ outputError: () => {} });
    for (const sub of command.commands) sub.exitOverride().configureOutput({ outputError: () => {} });
  }
  return program;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (
        error.code === 'commander.helpDisplayed' ||
        error.code === 'commander.version' ||
        error.code === 'commander.help'
      )
        return 0;
      if (error.code === 'commander.executeSubCommandAsync') return error.exitCode;
      process.stderr.write(`svcgen: ${error.message.replace(/^error: /, '')} (see svcgen --help)\n`);
      return 2;
    }
    const { message, code } = describeError(error);
    process.stderr.write(`svcgen: ${message}\n`);
    return code;
  }
}
