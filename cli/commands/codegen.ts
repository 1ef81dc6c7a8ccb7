/** generate, check, openapi (heavy modules load when a command runs, so --help stays fast) */
import path from 'node:path';
import type { Command } from 'commander';
import { projectDir, withProject } from '../options.ts';

export function registerCodegenCommands(program: Command): void {
  withProject(
    program.command('generate').description('read schema.prisma and svcgen.config.json, write generated/'),
  ).action(async (options: { project: string }) => {
    const dir = projectDir(options);
    const started = Date.now();
    const { GENERATED_DIR, renderProject, writeProject } = await import('../../generator/generate.ts');
    const files = await renderProject(dir);
    const { written, removed } = await writeProject(dir, files);
    console.log(
      `generated ${files.size} files in ${path.join(dir, GENERATED_DIR)} (${written} changed, ${removed.length} removed) in ${Date.now() - started} ms`,
    );
  });

  withProject(
    program
      .command('check')
      .description('exit 1 when generated/ is stale (with a unified diff) or your code does not type-check'),
  ).action(async (options: { project: string }) => {
    const dir = projectDir(options);
    const { diffProject, renderProject } = await import('../../generator/generate.ts');
    const diff = await diffProject(dir, await renderProject(dir));
    if (diff) {
      process.stdout.write(diff);
      process.stderr.write(
        `generated/ is stale: run \`npx svcgen generate${options.project === '.' ? '' : ` --project ${options.project}`}\` and commit the result (your code is checked against generated/ once it is up to date)\n`,
      );
      process.exitCode = 1;
      return;
    }
    console.log('generated/ is up to date');
    // docs/own-code.md "Where the code lives": the code type-checked with the generated types.
    const { checkCode } = await import('../code-check.ts');
    const started = Date.now();
    const { entry, errors } = await checkCode(dir);
    if (entry === undefined) return;
    const name = path.relative(dir, entry);
    if (errors.length > 0) {
      for (const error of errors) process.stderr.write(`${error}\n`);
      process.stderr.write(
        `your code (${name}) has ${errors.length} type error${errors.length === 1 ? '' : 's'}: fix ${errors.length === 1 ? 'it' : 'them'} and run check again\n`,
      );
      process.exitCode = 1;
    } else {
      console.log(`your code (${name}) type-checks against generated/ (${Date.now() - started} ms)`);
    }
  });

  withProject(program.command('openapi').description('print the OpenAPI 3.1 document')).action(
    async (options: { project: string }) => {
      const dir = projectDir(options);
      const { readModel } = await import('../../generator/generate.ts');
      const { loadService } = await import('../project.ts');
      await readModel(dir); // a broken model fails here with Prisma's message rather than at import
      const { service } = await loadService(dir);
      process.stdout.write(`${JSON.stringify(service.openapi, null, 2)}\n`);
    },
  );
}
