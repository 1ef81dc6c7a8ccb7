/**
 * The `svcgen serve` children of dev (cli/commands/serve.ts, serveForDev), on an IPC channel. Each
 * runs in its own process group: a Ctrl-C in the terminal reaches dev alone, which stops the
 * server once (a child that got the terminal's SIGINT as well as dev's SIGTERM would take the
 * second signal for an impatient user and stop without draining; docs/dev.md "Stopping").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { DevChildMessage, DevParentMessage } from '../commands/serve.ts';

/** A `svcgen serve` child on an IPC channel. */
export interface ServeChild {
  child: ChildProcess;
  closed: Promise<number | null>;
  /** The next message of this type, or undefined once the child has exited. */
  next<T extends DevChildMessage['type']>(type: T): Promise<Extract<DevChildMessage, { type: T }> | undefined>;
  send(message: DevParentMessage): void;
}

export interface SpawnOptions {
  /** bin/svcgen.js of the CLI that runs dev, so that children match it (checkout or installed package). */
  readonly cli: string;
  readonly args: readonly string[];
  readonly env: NodeJS.ProcessEnv;
  readonly say: (line: string) => void;
}

/** Every child dev started and that has not closed yet. */
export class Children {
  private readonly live = new Set<ChildProcess>();
  /** serve drains on its first SIGTERM and exits at once on a second: each child gets one. */
  private readonly terminated = new WeakSet<ChildProcess>();

  constructor(private readonly spawnOptions: SpawnOptions) {}

  spawnServe(): ServeChild {
    const { cli, args, env, say } = this.spawnOptions;
    const child = spawn(process.execPath, [cli, ...args], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env,
      detached: true,
    });
    this.live.add(child);
    child.stdout!.pipe(process.stdout, { end: false });
    child.stderr!.pipe(process.stderr, { end: false });
    const closed = new Promise<number | null>((resolve) => {
      child.once('error', (error) => {
        say(`could not run svcgen serve: ${error.message}`);
        resolve(null);
      });
      child.once('close', (code) => resolve(code));
    }).finally(() => this.live.delete(child));
    const next: ServeChild['next'] = (type) =>
      new Promise((resolve) => {
        const listener = (message: DevChildMessage) => {
          if (message?.type !== type) return;
          child.off('message', listener);
          resolve(message as never);
        };
        child.on('message', listener);
        void closed.then(() => {
          child.off('message', listener);
          resolve(undefined);
        });
      });
    return {
      child,
      closed,
      next,
      send: (message) => {
        if (child.connected) child.send(message);
      },
    };
  }

  terminate(child: ChildProcess): void {
    if (this.terminated.has(child) || child.exitCode !== null || child.signalCode !== null) return;
    this.terminated.add(child);
    child.kill('SIGTERM');
  }

  /** SIGTERM to each child but `except`. */
  terminateAll(except?: ChildProcess): void {
    for (const child of this.live) if (child !== except) this.terminate(child);
  }

  killAll(): void {
    for (const child of this.live) child.kill('SIGKILL');
  }

  /** Resolves once every child has closed. */
  async allClosed(): Promise<void> {
    await Promise.all(
      [...this.live].map(
        (child) =>
          new Promise((done) =>
            child.exitCode !== null || child.signalCode !== null ? done(undefined) : child.once('close', done),
          ),
      ),
    );
  }
}
