/** generate, check, openapi (heavy modules load when a command runs, so --help stays fast) */
import { access } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import type { Config } from '../../runtime/config/index.ts';
import { projectDir, withProject } from '../options.ts';

const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

export function registerCodegenCommands(program: Command): void {
  withProject(program.command('generate').description('read schema.prisma and svcgen.config.json, write generated/'))
    // `svcgen dev` (cli/dev/code-generate.ts): code that does not load leaves generated/ as it was,
    // as a broken save does in dev, rather than writing the model without the code's endpoints.
    .addOption(new Option('--unchanged-if-code-fails').hideHelp())
    .action(async (options: { project: string; unchangedIfCodeFails?: boolean }) => {
      const dir = projectDir(options);
      const started = Date.now();
      const { CodeNotLoaded, GENERATED_DIR, renderProject, writeProject } = await import('../../generator/generate.ts');
      const { codeEntry, loadCodeOf } = await import('../project.ts');
      // Your code imports generated/code.ts: when there is code but no generated/code.ts yet, the
      // model is written first and the code loaded after it (docs/own-code.md "Endpoints"), never
      // imported before (a failed import would stay failed in this process).
      const modelFirst = new Error('generated/code.ts does not exist yet');
      const code = async (config: Config, tables: readonly string[]) => {
        if ((await codeEntry(dir, config)) !== undefined && !(await exists(path.join(dir, GENERATED_DIR, 'code.ts'))))
          throw modelFirst;
        return loadCodeOf(dir, config, tables);
      };
      // Endpoints GraphQL cannot express are served over REST only: generate says which and why.
      let omitted: string[] = [];
      const graphqlOmitted = (name: string, reason: string) => {
        omitted.push(`svcgen: endpoint ${name} is not a GraphQL field (REST only): ${reason}\n`);
      };
      const render = async (): Promise<{ files: Map<string, string>; failed?: unknown }> => {
        omitted = [];
        try {
          return { files: await renderProject(dir, { code, graphqlOmitted }) };
        } catch (error) {
          if (!(error instanceof CodeNotLoaded)) throw error;
          return { files: await renderProject(dir), failed: error.reason };
        }
      };
      let { files, failed } = await render();
      if (failed !== undefined && failed !== modelFirst && options.unchangedIfCodeFails) {
        process.stderr.write(`svcgen: ${failed instanceof Error ? failed.message : String(failed)}\n`);
        process.exitCode = 1;
        return;
      }
      if (failed === modelFirst) {
        await writeProject(dir, files);
        ({ files, failed } = await render());
      }
      const { written, removed } = await writeProject(dir, files);
      console.log(
        `generated ${files.size} files in ${path.join(dir, GENERATED_DIR)} (${written} changed, ${removed.length} removed) in ${Date.now() - started} ms`,
      );
      for (const line of omitted) process.stderr.write(line);
      if (failed !== undefined) {
        process.stderr.write(
          `svcgen: generated/ has the model but none of your code's endpoints, for your code did not load: ${failed instanceof Error ? failed.message : String(failed)}\nfix it and run generate again\n`,
        );
        process.exitCode = 1;
      }
    });

  withProject(
    program
      .command('check')
      .description('exit 1 when generated/ is stale (with a unified diff) or your code does not type-check'),
  ).action(async (options: { project: string }) => {
    const dir = projectDir(options);
    const { diffProject, renderProject } = await import('../../generator/generate.ts');
    const { loadCodeOf } = await import('../project.ts');
    const code = (config: Config, tables: readonly string[]) => loadCodeOf(dir, config, tables);
    const diff = await diffProject(dir, await renderProject(dir, { code }));
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
