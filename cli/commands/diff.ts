/** diff: API changes between two data models; exit 1 when any is breaking. */
import { execFile } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import { projectDir, withProject } from '../options.ts';
import { UsageError } from '../usage-error.ts';

const run = promisify(execFile);

/** A schema from a file, or from git: `<ref>` (the project's schema.prisma at that ref) or `<ref>:<path>`. */
async function readSchema(dir: string, source: string): Promise<{ text: string; label: string }> {
  const file = path.resolve(dir, source);
  if (await access(file).then(() => true, () => false)) return { text: await readFile(file, 'utf8'), label: source };
  const [ref, explicit] = source.includes(':') ? [source.slice(0, source.indexOf(':')), source.slice(source.indexOf(':') + 1)] : [source, undefined];
  try {
    let spec: string;
    if (explicit !== undefined) spec = `${ref}:${explicit}`;
    else {
      const { stdout: prefix } = await run('git', ['rev-parse', '--show-prefix'], { cwd: dir });
      spec = `${ref}:${prefix.trim()}schema.prisma`;
    }
    const { stdout } = await run('git', ['show', spec], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
    return { text: stdout, label: spec };
  } catch {
    throw new UsageError(`--from "${source}" is neither a file nor a git ref with a schema.prisma in this project`);
  }
}

export function registerDiffCommand(program: Command): void {
  withProject(program.command('diff').description('list API changes between two data models; exit 1 when any is breaking'))
    .requiredOption('--from <schema>', 'the earlier model: a schema file or a git ref (e.g. main, HEAD~1, main:path/schema.prisma)')
    .option('--to <file>', 'the later model (default: the project\'s schema.prisma)')
    .option('--allow-breaking', 'exit 0 even when a change is breaking')
    .option('--json', 'print the changes as JSON')
    .action(async (options: { project: string; from: string; to?: string; allowBreaking?: boolean; json?: boolean }) => {
      const dir = projectDir(options);
      const from = await readSchema(dir, options.from);
      const toFile = path.resolve(dir, options.to ?? 'schema.prisma');
      const toText = await readFile(toFile, 'utf8').catch(() => {
        throw new UsageError(`--to ${toFile} not found`);
      });
      const [{ diffModels }, { describeModel }, { readDmmf }] = await Promise.all([
        import('../../generator/diff/diff-models.ts'),
        import('../../generator/model/describe-model.ts'),
        import('../../generator/prisma/index.ts'),
      ]);
      const changes = diffModels(describeModel(await readDmmf(from.text, from.label)), describeModel(await readDmmf(toText, toFile)));
      const breaking = changes.filter((c) => c.breaking).length;
      if (options.json) console.log(JSON.stringify({ changes, breaking }, null, 2));
      else if (changes.length === 0) console.log('no API changes');
      else {
        const width = Math.max(...changes.map((c) => c.kind.length));
        for (const c of changes) console.log(`${c.breaking ? 'BREAKING' : '        '}  ${c.kind.padEnd(width)}  ${c.subject}  ${c.detail}`);
        console.log(`${changes.length} change${changes.length === 1 ? '' : 's'}, ${breaking} breaking`);
      }
      if (breaking > 0 && !options.allowBreaking) process.exitCode = 1;
    });
}
