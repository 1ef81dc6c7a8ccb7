/** The parent's side of the server children (./child-harness.ts is the other side). */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
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
  execFileSync(process.execPath, [path.join(REPO, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: REPO, stdio: 'inherit' });
  built = true;
}

/** Starts `node bin/run-ts.js <script>` with an IPC channel and waits for its `ready` message. */
export async function startServerChild(name: string, script: string, env: Record<string, string>): Promise<ServerChild> {
  if (script === 'bench/svcgen-server.ts') buildSvcgen();
  const child: ChildProcess = fork(path.join(REPO, 'bin/run-ts.js'), [script], {
    cwd: REPO,
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
    const timer = setTimeout(() => reject(new Error(`${name} server did not start within ${STARTUP_TIMEOUT_MS / 1000} s`)), STARTUP_TIMEOUT_MS);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} server exited during startup (${signal ?? `exit code ${code}`}); see its output above`));
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
