/**
 * Driving the real `svcgen` CLI from tests: `node bin/svcgen.js ...` as a child process, temp copies
 * of the example project, and cleanup of every child and folder a test file made.
 *
 *   const r = await runCli(['generate', '--project', copy.dir]);      // waits for exit
 *   const s = startCli(['serve', '--port', '0', ...]);                // long-running
 *   const [, port] = await s.waitFor(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
 *   afterAll(cleanupCli);                                              // kills children, removes copies
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { REPO, SHOP } from './server.ts';

export const SVCGEN = path.join(REPO, 'bin', 'svcgen.js');
/** Bound for a command or a condition; a test fails instead of hanging when it is reached. */
const DEFAULT_WAIT_MS = 90_000;

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  cwd?: string;
  /** Added to (or, with undefined, removed from) the child's environment. */
  env?: Record<string, string | undefined>;
  /** Another svcgen executable than this checkout's bin/svcgen.js (e.g. an installed package's). */
  bin?: string;
  /** Its own process group, so that a test can signal the group as a terminal's Ctrl-C does (`process.kill(-pid, 'SIGINT')`). */
  detached?: boolean;
  /** stdout goes to this file (created or truncated) instead of a pipe; `stdout` reads it as it grows. */
  stdoutFile?: string;
}

/** The parent's environment without the variables that would change which database or token the CLI uses. */
export function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of [
    'DATABASE_URL',
    'DIRECT_DATABASE_URL',
    'SVCGEN_MANAGEMENT_TOKEN',
    'SVCGEN_SMTP_URL',
    'SVCGEN_METRICS_TOKEN',
  ])
    delete env[name];
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) delete env[name];
    else env[name] = value;
  }
  return env;
}

const children = new Set<ChildProcess>();

export interface RunningCli {
  child: ChildProcess;
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves with the match once stdout (or stderr) matches; rejects when the process exits first. */
  waitFor(pattern: RegExp, options?: { stream?: 'stdout' | 'stderr'; timeoutMs?: number }): Promise<RegExpMatchArray>;
  /** Resolves when the process has exited (all output read). */
  exited: Promise<CliResult>;
  /** Sends a signal and waits for the exit. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<CliResult>;
}

export function startCli(args: string[], options: CliOptions = {}): RunningCli {
  const stdoutFd = options.stdoutFile === undefined ? undefined : fsSync.openSync(options.stdoutFile, 'w');
  const child = spawn(process.execPath, [options.bin ?? SVCGEN, ...args], {
    cwd: options.cwd ?? REPO,
    env: childEnv(options.env),
    stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  children.add(child);
  const out = { stdout: '', stderr: '' };
  const listeners = new Set<() => void>();
  let readStdoutFile: (() => void) | undefined;
  if (stdoutFd === undefined) {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out.stdout += d;
      for (const l of listeners) l();
    });
  } else {
    fsSync.closeSync(stdoutFd);
    readStdoutFile = () => {
      const text = fsSync.readFileSync(options.stdoutFile!, 'utf8');
      if (text.length === out.stdout.length) return;
      out.stdout = text;
      for (const l of listeners) l();
    };
    const poll = setInterval(readStdoutFile, 20);
    child.once('close', () => clearInterval(poll));
  }
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    out.stderr += d;
    for (const l of listeners) l();
  });
  let done = false;
  const exited = new Promise<CliResult>((resolve, reject) => {
    child.on('error', (error) => {
      done = true;
      children.delete(child);
      reject(error);
    });
    child.on('close', (code, signal) => {
      readStdoutFile?.();
      done = true;
      children.delete(child);
      for (const l of listeners) l();
      resolve({ code, signal, stdout: out.stdout, stderr: out.stderr });
    });
  });
  exited.catch(() => {});

  const describe = () => `svcgen ${args.join(' ')}\n--- stdout\n${out.stdout}\n--- stderr\n${out.stderr}`;

  const waitFor: RunningCli['waitFor'] = (pattern, o = {}) =>
    new Promise((resolve, reject) => {
      const check = () => {
        const text =
          o.stream === 'stderr' ? out.stderr : o.stream === 'stdout' ? out.stdout : `${out.stdout}\n${out.stderr}`;
        const match = text.match(pattern);
        if (match) return finish(() => resolve(match));
        if (done)
          return finish(() =>
            reject(
              new Error(
                `process exited (code ${child.exitCode}, signal ${child.signalCode}) before ${pattern} appeared\n${describe()}`,
              ),
            ),
          );
      };
      const timer = setTimeout(
        () =>
          finish(() =>
            reject(new Error(`${pattern} did not appear within ${o.timeoutMs ?? DEFAULT_WAIT_MS} ms\n${describe()}`)),
          ),
        o.timeoutMs ?? DEFAULT_WAIT_MS,
      );
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        listeners.delete(check);
        settle();
      };
      listeners.add(check);
      check();
    });

  const stop: RunningCli['stop'] = async (signal = 'SIGTERM', timeoutMs = DEFAULT_WAIT_MS) => {
    if (!done) child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        exited,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`no exit within ${timeoutMs} ms after ${signal}\n${describe()}`)),
            timeoutMs,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  };

  return {
    child,
    get stdout() {
      return out.stdout;
    },
    get stderr() {
      return out.stderr;
    },
    waitFor,
    exited,
    stop,
  };
}

/** Runs `svcgen <args>` to completion. */
export async function runCli(args: string[], options: CliOptions & { timeoutMs?: number } = {}): Promise<CliResult> {
  const running = startCli(args, options);
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      running.exited,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          running.child.kill('SIGKILL');
          reject(
            new Error(
              `svcgen ${args.join(' ')} did not finish within ${options.timeoutMs ?? DEFAULT_WAIT_MS} ms\n${running.stdout}\n${running.stderr}`,
            ),
          );
        }, options.timeoutMs ?? DEFAULT_WAIT_MS);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** "svcgen <args> → exit <code>" with the output, for assertion messages. */
export function show(result: CliResult): string {
  return `exit ${result.code} (signal ${result.signal})\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`;
}

const temps = new Set<string>();

export interface ProjectCopy {
  /** the project folder (a copy of examples/shop) */
  dir: string;
  /** the temp folder holding it */
  root: string;
}

/** Makes a temp folder under os.tmpdir(), traversable by the `postgres` OS user (embedded PostgreSQL as root). */
export async function tempDir(label: string): Promise<string> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), `svcgen-${label}-`));
  await fs.chmod(root, 0o711);
  temps.add(root);
  return root;
}

/** A copy of examples/shop (without local state) in a fresh temp folder. */
export async function copyExample(label: string): Promise<ProjectCopy> {
  const root = await tempDir(label);
  const dir = path.join(root, 'shop');
  await fs.cp(SHOP, dir, {
    recursive: true,
    filter: (src) => !['.svcgen', 'node_modules'].includes(path.basename(src)),
  });
  // The example's own code imports zod, as a user's project that installed it does (`svcgen`
  // itself resolves to the running CLI's).
  await fs.mkdir(path.join(root, 'node_modules'), { recursive: true });
  await fs.symlink(path.join(REPO, 'node_modules', 'zod'), path.join(root, 'node_modules', 'zod'), 'dir');
  return { dir, root };
}

/** Every file below `dir`, by path relative to it ('/'-separated), with its bytes. */
export async function readTree(dir: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const walk = async (current: string): Promise<void> => {
    for (const entry of await fs.readdir(current, { withFileTypes: true })) {
      const full = path.join(current, entry.name);
      if (entry.isDirectory()) await walk(full);
      else files.set(path.relative(dir, full).split(path.sep).join('/'), await fs.readFile(full));
    }
  };
  await walk(dir);
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Resolves true when something accepts TCP connections on 127.0.0.1:<port>. */
export function portIsOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Stops every child still running (SIGTERM, then SIGKILL) and removes every temp folder. For afterAll. */
export async function cleanupCli(): Promise<void> {
  await Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
          child.once('close', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
  children.clear();
  await Promise.all([...temps].map((dir) => fs.rm(dir, { recursive: true, force: true })));
  temps.clear();
  await Promise.all([...databases].map((d) => d.drop()));
  databases.clear();
}

const databases = new Set<TestDatabase>();

/** A fresh database that cleanupCli() drops (after the processes using it are stopped). */
export async function freshDatabase(): Promise<TestDatabase> {
  const database = await createTestDatabase();
  databases.add(database);
  return database;
}

/** Lines of `ps -eo pid,args` whose command line contains `needle`. */
export async function processesMentioning(needle: string): Promise<{ pid: number; args: string }[]> {
  const { stdout } = await promisify(execFile)('ps', ['-eo', 'pid=,args=']);
  return stdout
    .split('\n')
    .map((line) => line.trim().match(/^(\d+)\s+(.*)$/))
    .filter((m): m is RegExpMatchArray => m?.[2].includes(needle) === true)
    .map((m) => ({ pid: Number(m[1]), args: m[2] }));
}
