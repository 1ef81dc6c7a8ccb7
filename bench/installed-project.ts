/**
 * svcgen installed as users install it, for the benchmarks that serve it through its CLI
 * (./installed.ts, ./realtime.ts): `npm pack` of this checkout (prepack compiles dist/) installed
 * with `npm install -D` into a new project outside the repository, holding a copy of examples/shop
 * (schema.prisma, svcgen.config.json, migrations) on which `svcgen generate` has run.
 * BENCH_INSTALLED_PROJECT reuses a project made by an earlier run. On a working tree others are
 * editing, pack a commit instead (`commit`): what is served is then exactly that commit.
 */
import { execFileSync } from 'node:child_process';
import { cp, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { REPO } from './children.ts';

export async function installedProject(
  addCleanup: (step: () => Promise<void>) => void,
  log: (message: string) => void,
  /** Pack this commit (a `git archive` of it, this checkout's node_modules linked in) instead of the working tree. */
  commit?: string,
  /** false: a new project even with BENCH_INSTALLED_PROJECT set (./installed.ts's BENCH_BEFORE project) */
  reuse = true,
): Promise<string> {
  if (reuse && process.env.BENCH_INSTALLED_PROJECT) return path.resolve(process.env.BENCH_INSTALLED_PROJECT);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svcgen-bench-installed-'));
  addCleanup(() => rm(dir, { recursive: true, force: true }));
  let source = REPO;
  if (commit) {
    source = await mkdtemp(path.join(os.tmpdir(), 'svcgen-bench-source-'));
    addCleanup(() => rm(source, { recursive: true, force: true }));
    execFileSync('sh', ['-c', `git archive ${commit} | tar -x -C "${source}"`], { cwd: REPO, stdio: 'inherit' });
    await symlink(path.join(REPO, 'node_modules'), path.join(source, 'node_modules'));
  }
  log(
    `npm pack of ${commit ? `commit ${commit}` : 'the working tree'} (compiles dist/) and npm install -D into ${dir}`,
  );
  const packed = execFileSync('npm', ['pack', '--pack-destination', dir, '--silent'], {
    cwd: source,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .at(-1)!;
  await writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'bench-shop', private: true }, null, 2));
  execFileSync('npm', ['install', '-D', '--no-audit', '--no-fund', path.join(dir, packed)], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  for (const item of ['schema.prisma', 'svcgen.config.json', 'migrations'])
    await cp(path.join(source, 'examples/shop', item), path.join(dir, item), { recursive: true });
  execFileSync(process.execPath, [svcgenBin(dir), 'generate'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  return dir;
}

export const svcgenBin = (project: string) => path.join(project, 'node_modules/svcgen/bin/svcgen.js');

/**
 * The project's config as the benchmarks run it: the data rate limit out of reach and the pool's
 * wait bound at 60 s (50 connections of scans on 2 CPUs), then `patch` for a benchmark's own needs.
 */
export async function patchConfig(project: string, patch: (config: Record<string, any>) => void = () => {}) {
  const file = path.join(project, 'svcgen.config.json');
  const config = JSON.parse(await readFile(file, 'utf8'));
  config.rateLimits = { ...config.rateLimits, dataPerMinutePerProject: 1_000_000_000 };
  config.database = { ...config.database, poolWaitTimeoutMs: 60_000 };
  patch(config);
  await writeFile(file, JSON.stringify(config, null, 2));
}
