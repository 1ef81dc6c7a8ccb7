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

  withProject(program.command('check').description('exit 1 with a unified diff when generated/ is stale')).action(
    async (options: { project: string }) => {
      const dir = projectDir(options);
      const { diffProject, renderProject } = await import('../../generator/generate.ts');
      const diff = await diffProject(dir, await renderProject(dir));
      if (diff) {
        process.stdout.write(diff);
        process.stderr.write(
          `generated/ is stale: run \`npx svcgen generate${options.project === '.' ? '' : ` --project ${options.project}`}\` and commit the result\n`,
        );
        process.exitCode = 1;
      } else {
        console.log('generated/ is up to date');
      }
    },
  );

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
