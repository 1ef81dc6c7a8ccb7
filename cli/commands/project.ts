/** init: scaffold a project folder from an example. */
import { access, copyFile, mkdir, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { UsageError } from '../project.ts';

const EXAMPLES = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../examples');

export function registerProjectCommands(program: Command): void {
  program
    .command('init')
    .description('scaffold a project folder (schema.prisma, svcgen.config.json, .gitignore, package.json) from an example')
    .argument('<dir>', 'folder to create')
    .option('--example <name>', 'example to start from', 'shop')
    .action(async (dir: string, options: { example: string }) => {
      const examples = (await readdir(EXAMPLES, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
      if (!examples.includes(options.example)) throw new UsageError(`no example "${options.example}" (examples: ${examples.join(', ')})`);
      const target = path.resolve(dir);
      for (const file of ['schema.prisma', 'svcgen.config.json']) {
        const exists = await access(path.join(target, file)).then(() => true, () => false);
        if (exists) throw new UsageError(`${path.join(target, file)} already exists; init writes only into a new or empty project folder`);
      }
      await mkdir(target, { recursive: true });
      for (const file of ['schema.prisma', 'svcgen.config.json']) await copyFile(path.join(EXAMPLES, options.example, file), path.join(target, file));
      await writeFile(path.join(target, '.gitignore'), '.svcgen/\nnode_modules/\n');
      // The generated modules are ES modules; a project's own package.json says so.
      const manifest = path.join(target, 'package.json');
      if (!(await access(manifest).then(() => true, () => false))) {
        await writeFile(manifest, `${JSON.stringify({ name: path.basename(target), private: true, type: 'module' }, null, 2)}\n`);
      }
      console.log(`created ${target} from example ${options.example}`);
      console.log(`next: svcgen generate --project ${dir} && svcgen migrate dev --name init --project ${dir} && svcgen serve --project ${dir}`);
    });
}
