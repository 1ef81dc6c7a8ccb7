// PostgreSQL binaries the "postgres" OS user can reach.
//
// As root, PostgreSQL runs as the "postgres" user, which must be able to enter every folder on the
// way to its binaries. A checkout under a private folder (a 0700 home or mktemp directory) hides
// node_modules from it, so the binaries are copied once to a world-traversable cache under the
// system temp folder, keyed by their source, and used from there.
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { blockedFolder, type RunAs } from './directories.ts';
import type { Binaries } from './server-process.ts';

export async function reachableBinaries(bins: Binaries, runAs: RunAs): Promise<Binaries> {
  if (!(await blockedFolder(path.dirname(bins.postgres), runAs))) return bins;
  const nativeDir = path.dirname(path.dirname(bins.postgres)); // <pkg>/native, holding bin/ lib/ share/
  const key = createHash('sha256').update(nativeDir).digest('hex').slice(0, 12);
  const cache = path.join(os.tmpdir(), `svcgen-postgres-${key}`);
  const relocate = (file: string) => path.join(cache, path.relative(nativeDir, file));
  try {
    await fsp.access(path.join(cache, '.complete'));
  } catch {
    const staging = `${cache}.${process.pid}.tmp`;
    await fsp.rm(staging, { recursive: true, force: true });
    await fsp.cp(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    await fsp.writeFile(path.join(staging, '.complete'), '');
    await fsp.chmod(staging, 0o755);
    // Another process may have finished the same copy first: keep whichever landed.
    await fsp.rename(staging, cache).catch(() => fsp.rm(staging, { recursive: true, force: true }));
  }
  return { initdb: relocate(bins.initdb), postgres: relocate(bins.postgres) };
}
