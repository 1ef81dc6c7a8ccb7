// processes: liveness, /proc, signals, and the postmaster.pid of a data directory
import fs from 'node:fs';
import path from 'node:path';

export function isAlive(pid: number): boolean {
  if (!pid || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // kill(pid, 0) also succeeds for a zombie (killed, not yet reaped by its parent / init)
  return procState(pid) !== 'Z';
}

function procState(pid: number): string | null {
  if (process.platform !== 'linux') return null;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0] ?? null;
  } catch {
    return null;
  }
}

/** Linux: the process start time (clock ticks since boot); distinguishes a live owner from a reused pid. */
export function processStart(pid: number): string | null {
  if (process.platform !== 'linux') return null;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // field 22; skip past "(comm)" which may contain spaces
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

export function sameProcessStart(pid: number, recorded: string | null | undefined): boolean {
  if (!recorded) return true;
  const now = processStart(pid);
  return now == null || now === recorded;
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

export async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

// the postmaster of a data directory

interface PostmasterInfo {
  pid: number;
  port: number;
  status: string;
}

export function readPostmasterPid(dataDir: string): PostmasterInfo | null {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8');
  } catch {
    return null;
  }
  // line 1 pid, 2 data dir, 3 start time, 4 port, 5 socket dir, 6 listen addr, 7 shmem key, 8 status
  const lines = text.split('\n');
  const pid = Number.parseInt(lines[0] ?? '', 10);
  const port = Number.parseInt(lines[3] ?? '', 10);
  return {
    pid: Number.isFinite(pid) ? pid : 0,
    port: Number.isFinite(port) ? port : 0,
    status: (lines[7] ?? '').trim(),
  };
}

/** Is `pid` really the postmaster of `dataDir` (and not an unrelated process that reused the pid)? */
export function isPostmasterOf(pid: number, dataDir: string): boolean {
  if (process.platform !== 'linux') return true; // cannot tell cheaply; trust kill(pid, 0)
  try {
    // the postmaster chdir()s into its data directory
    return fs.readlinkSync(`/proc/${pid}/cwd`) === fs.realpathSync(dataDir);
  } catch {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
    } catch {
      return false;
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
