/** The parent's side of the server children (./child-harness.ts is the other side). */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildStats, LoopDelay } from './child-harness.ts';

export const REPO = path.resolve(import.meta.dirname, '..');

export interface ServerChild {
  readonly name: string;
  readonly url: string;
  readonly pid: number;
  stats(): Promise<ChildStats>;
  startProfile(): Promise<void>;
  /** Stops the profiler, writes `file`, returns the SQL statements sent while it ran (by text). */
  stopProfile(file: string): Promise<{ statements: [string, number, unknown[]][] }>;
  /** Measures how late the child's event loop runs (until stopLoopDelay). */
  /**
   * Starts V8's sampling heap profiler (objects collected meanwhile included: what was allocated);
   * `survivors`: only objects that outlived a young-generation collection (what was promoted).
   */
  startHeapSampling(survivors?: boolean): Promise<void>;
  /** Stops it and writes the .heapprofile to `file`. */
  stopHeapSampling(file: string): Promise<void>;
  startLoopDelay(): Promise<void>;
  stopLoopDelay(): Promise<LoopDelay>;
  stop(): Promise<void>;
}

const STARTUP_TIMEOUT_MS = 60_000;

let built = false;
/**
 * Compiles svcgen into dist/ (`npm run build`'s tsc), once per run: ./svcgen-server.ts serves from
 * it, as an installed svcgen runs. The checkout's source under tsx is slower per request (esbuild's
 * keepNames wraps every function it creates, on every call), which is not what users run.
 */
export function buildSvcgen(): void {
  if (built) return;
  compile(REPO);
  built = true;
}

/** Compiles the svcgen in `dir` into its dist/ with this checkout's TypeScript. */
function compile(dir: string): void {
  execFileSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: dir,
    stdio: 'inherit',
  });
}

const git = (...args: string[]) =>
  execFileSync('git', args, { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();

/** svcgen as of another commit, compiled, for ./svcgen-server.ts to serve next to this checkout's. */
export interface SvcgenCheckout {
  /** the commit, short */
  sha: string;
  /** the child's environment for ./svcgen-server.ts: that commit's dist/ and examples/shop, and its tsconfig for tsx (the
   *  example's generated code imports `svcgen/model` through its `paths`) */
  env: Record<string, string>;
}

/**
 * Checks `ref` out into a temporary git worktree outside the repo, links this checkout's
 * node_modules into it and compiles it (tsc -p tsconfig.build.json). The step that removes the
 * worktree again goes to `addCleanup` before anything past the checkout can fail.
 */
export function checkoutSvcgen(ref: string, addCleanup: (step: () => Promise<void>) => void): SvcgenCheckout {
  const sha = git('rev-parse', '--verify', '--short', `${ref}^{commit}`);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-bench-before-'));
  const dir = path.join(tmp, 'svcgen');
  addCleanup(async () => {
    fs.rmSync(path.join(dir, 'node_modules'), { force: true }); // the link, not what it points to
    try {
      if (fs.existsSync(dir)) git('worktree', 'remove', '--force', dir);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
  git('worktree', 'add', '--detach', dir, sha);
  fs.symlinkSync(path.join(REPO, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  compile(dir);
  const env = {
    BENCH_SVCGEN_DIST: path.join(dir, 'dist'),
    BENCH_SVCGEN_PROJECT: path.join(dir, 'examples/shop'),
    TSX_TSCONFIG_PATH: path.join(dir, 'tsconfig.json'),
  };
  return { sha, env };
}

/**
 * Starts `node bin/run-ts.js <script>` with an IPC channel and waits for its `ready` message.
 * `execPath`: another Node.js binary to run it (./graphql.ts: PostGraphile 5 needs Node 22).
 */
export async function startServerChild(
  name: string,
  script: string,
  env: Record<string, string>,
  execPath: string = process.execPath,
): Promise<ServerChild> {
  // (a checkout's build, BENCH_SVCGEN_DIST, is compiled by checkoutSvcgen)
  if (script === 'bench/svcgen-server.ts' && !env.BENCH_SVCGEN_DIST) buildSvcgen();
  const child: ChildProcess = fork(path.join(REPO, 'bin/run-ts.js'), [script], {
    cwd: REPO,
    execPath,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let nextId = 1;
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      for (const p of pending.values()) p.reject(new Error(`${name} server exited (${signal ?? code})`));
      pending.clear();
      resolve();
    });
  });

  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} server did not start within ${STARTUP_TIMEOUT_MS / 1000} s`)),
      STARTUP_TIMEOUT_MS,
    );
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(
        new Error(`${name} server exited during startup (${signal ?? `exit code ${code}`}); see its output above`),
      );
    });
    child.on('message', (message: any) => {
      if (message?.type === 'ready') {
        clearTimeout(timer);
        resolve(message.port as number);
      } else if (typeof message?.id === 'number') {
        const p = pending.get(message.id);
        pending.delete(message.id);
        if (message.error) p?.reject(new Error(`${name} server: ${message.error}`));
        else p?.resolve(message);
      }
    });
  }).catch((error: unknown) => {
    if (!exited) child.kill('SIGKILL');
    throw error;
  });

  const call = <T>(message: Record<string, unknown>): Promise<T> => {
    if (exited) return Promise.reject(new Error(`${name} server is not running`));
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve, reject });
      child.send({ id, ...message });
    });
  };

  return {
    name,
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    stats: () => call<ChildStats>({ type: 'stats' }),
    startProfile: () => call<void>({ type: 'profile-start' }),
    stopProfile: (file) => call<{ statements: [string, number, unknown[]][] }>({ type: 'profile-stop', file }),
    startHeapSampling: (survivors = false) => call<void>({ type: 'heap-start', survivors }),
    stopHeapSampling: (file) => call<void>({ type: 'heap-stop', file }),
    startLoopDelay: () => call<void>({ type: 'loop-delay-start' }),
    stopLoopDelay: () => call<LoopDelay>({ type: 'loop-delay-stop' }),
    async stop() {
      if (exited) return;
      await call({ type: 'stop' }).catch(() => {});
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exit;
      clearTimeout(timer);
    },
  };
}
