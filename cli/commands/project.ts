/** init: scaffold a project folder from an example. */
import { access, copyFile, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { PACKAGE_ROOT, SVCGEN_VERSION } from '../../generator/package-root.ts';
import { command, projectFlag } from '../hints.ts';
import { UsageError } from '../usage-error.ts';

const EXAMPLES = path.join(PACKAGE_ROOT, 'examples');

/** A project id from a folder name: lower case letters, digits, - and _. */
function idFromFolder(folder: string): string {
  const id = folder
    .toLowerCase()
    .replace(/[^a-z0-9_-]+/g, '-')
    .replace(/^-+|-+$/g, '');
  return id || 'app';
}

const IGNORED = ['.svcgen/', 'node_modules/'];

/** `init --empty`: the datasource and no model (svcgen adds Prisma's generator block itself). */
const EMPTY_SCHEMA = `// Every model is a table of the generated REST API (node_modules/svcgen/docs/api.md §5.1 "Routes").
datasource db {
  provider = "postgresql"
}

// For example (every model needs createdAt and updatedAt):
//
// model Note {
//   id        Int      @id @default(autoincrement())
//   text      String
//   createdAt DateTime @default(now())
//   updatedAt DateTime @updatedAt
// }
`;

/** `init --empty`: an `admin` role that may do everything on every table (docs/permissions.md). */
const EMPTY_ROLES = { roles: { admin: { tables: { '*': { read: true, create: true, update: true, delete: true } } } } };

export function registerProjectCommands(program: Command): void {
  program
    .command('init')
    .description(
      'scaffold a project folder (schema.prisma, svcgen.config.json, .gitignore, package.json) from an example, or empty',
    )
    .argument('<dir>', 'folder to create (or an existing folder without schema.prisma and svcgen.config.json)')
    .option('--example <name>', 'example to start from (default: shop)')
    .option('--empty', 'start from a schema.prisma without models and a config with only an admin role')
    .option('--id <id>', 'the project id (X-Project-Id); default: from the folder name')
    .action(async (dir: string, options: { example?: string; empty?: boolean; id?: string }) => {
      if (options.empty && options.example !== undefined)
        throw new UsageError('--empty and --example exclude each other: pick one');
      const example = options.empty ? undefined : (options.example ?? 'shop');
      const examples = (await readdir(EXAMPLES, { withFileTypes: true }))
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
      if (example !== undefined && !examples.includes(example)) {
        throw new UsageError(
          `no example "${example}" (examples: ${examples.join(', ')}; or --empty for a project without models)`,
        );
      }
      const target = path.resolve(dir);
      for (const file of ['schema.prisma', 'svcgen.config.json']) {
        const exists = await access(path.join(target, file)).then(
          () => true,
          () => false,
        );
        if (exists)
          throw new UsageError(
            `${path.join(target, file)} already exists; init writes only into a new or empty project folder`,
          );
      }
      if (options.id !== undefined && !/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(options.id)) {
        throw new UsageError(`--id "${options.id}": use letters, digits, - and _`);
      }
      const id = options.id ?? idFromFolder(path.basename(target));
      await mkdir(target, { recursive: true });
      let config: { project: { id: string } };
      if (example === undefined) {
        await writeFile(path.join(target, 'schema.prisma'), EMPTY_SCHEMA);
        // One role, so the first API key can be made (`keys create --role admin`); narrow or add roles later.
        config = { project: { id }, ...EMPTY_ROLES };
      } else {
        await copyFile(path.join(EXAMPLES, example, 'schema.prisma'), path.join(target, 'schema.prisma'));
        config = JSON.parse(await readFile(path.join(EXAMPLES, example, 'svcgen.config.json'), 'utf8')) as {
          project: { id: string };
        };
        config.project.id = id;
        // The example's database functions live in its migrations, which init does not copy (the
        // project's first `migrate dev` writes its own): named without them, serve would refuse to start.
        delete (config as { functions?: unknown }).functions;
      }
      await writeFile(path.join(target, 'svcgen.config.json'), `${JSON.stringify(config, null, 2)}\n`);
      // An existing .gitignore keeps its lines; the ones svcgen needs are added.
      const gitignore = path.join(target, '.gitignore');
      const present = await readFile(gitignore, 'utf8').catch(() => '');
      const missing = IGNORED.filter((line) => !present.split(/\r?\n/).includes(line));
      if (missing.length)
        await writeFile(
          gitignore,
          `${present}${present && !present.endsWith('\n') ? '\n' : ''}${missing.join('\n')}\n`,
        );
      const added = await addScripts(path.join(target, 'package.json'), id);
      console.log(
        `created ${target} ${example === undefined ? 'without models' : `from example ${example}`} (project id "${id}")`,
      );
      if (added.length) console.log(`package.json scripts added: ${added.join(', ')}`);
      // The npm script runs in the project folder; npx from here finds the svcgen that ran this.
      const here = path.resolve(dir) === process.cwd();
      console.log(
        `next: ${command(`dev${projectFlag(dir)}`)}${here && added.includes('dev') ? ' (or: npm run dev)' : ''}`,
      );
    });
}

const SCRIPTS: Readonly<Record<string, string>> = {
  dev: 'svcgen dev',
  generate: 'svcgen generate',
  check: 'svcgen check',
  serve: 'svcgen serve',
  'migrate:dev': 'svcgen migrate dev',
};

/**
 * Writes a package.json depending on svcgen with its scripts, or adds to an existing one the
 * scripts it lacks (a script of the same name is the user's and stays). Returns the names added.
 */
async function addScripts(manifest: string, id: string): Promise<string[]> {
  const text = await readFile(manifest, 'utf8').catch(() => undefined);
  if (text === undefined) {
    await writeFile(
      manifest,
      `${JSON.stringify({ name: id, private: true, scripts: SCRIPTS, devDependencies: { svcgen: `^${SVCGEN_VERSION}` } }, null, 2)}\n`,
    );
    return Object.keys(SCRIPTS);
  }
  let pkg: { scripts?: Record<string, string> };
  try {
    pkg = JSON.parse(text) as typeof pkg;
  } catch {
    console.error(`${manifest} is not valid JSON: no scripts added`);
    return [];
  }
  const added = Object.keys(SCRIPTS).filter((name) => pkg.scripts?.[name] === undefined);
  if (added.length === 0) return [];
  pkg.scripts = { ...pkg.scripts, ...Object.fromEntries(added.map((name) => [name, SCRIPTS[name]!])) };
  const indent = /^[ \t]+(?=")/m.exec(text)?.[0] ?? '  ';
  await writeFile(manifest, `${JSON.stringify(pkg, null, indent)}\n`);
  return added;
}
