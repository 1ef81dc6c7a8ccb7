/**
 * The dev supervisor's state, in one object (docs/dev.md): what the running server was built from,
 * what the last cycle saw and migrated, the pending changes, and what is running. Every other
 * module of cli/dev reads and writes it through a DevContext; none keeps state of its own.
 */
import type { FSWatcher } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import type { Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import type { ProjectDatabase } from '../database.ts';
import type { Children, ServeChild } from './children.ts';
import type { Inputs } from './inputs.ts';

export interface DevOptions {
  project: string;
  port: number;
  host: string;
  databaseUrl?: string;
  directDatabaseUrl?: string;
  logLevel: 'debug' | 'info' | 'warn';
}

export interface Server {
  child: ChildProcess;
  url: string;
  closed: Promise<void>;
  stopping: boolean;
}

export interface DevState {
  /** Set by the first signal: no new cycle, server or watcher from then on. */
  shuttingDown: boolean;
  /** The port to bind: --port, then the one the first server got (so `--port 0` keeps its URL). */
  port: number;
  /** The next server's process, started ahead of time. */
  standby: ServeChild | undefined;
  server: Server | undefined;
  /** What the running server was built from. */
  good: { inputs: Inputs; tables: TableSpec[]; config: Config } | undefined;
  /** The last inputs a cycle looked at, to name what an event changed. */
  seen: Inputs | undefined;
  /** schema.prisma and the migrations as of the last migrate dev that succeeded. */
  migrated: { schema: string | undefined; migrations: string } | undefined;
  /** Changes that arrived since the last cycle began; per name, the time of its first event (the `restarted` clock). */
  pending: Map<string, number>;
  /** The debounce of pending changes. */
  timer: NodeJS.Timeout | undefined;
  /** The cycle in progress. */
  running: Promise<void> | undefined;
  /** The project folder's watcher, and migrations/'s (recursive). */
  watcher: FSWatcher | undefined;
  migrationsWatcher: FSWatcher | undefined;
  /** The folders below the project that hold code files (./code-files.ts), each with its watcher. */
  codeWatchers: Map<string, FSWatcher>;
  /** Called when a cycle has read the inputs (`seen`): the watch follows the code's imports before any server starts. */
  onSeen: (() => void) | undefined;
}

export function initialState(options: DevOptions, standby: ServeChild): DevState {
  return {
    shuttingDown: false,
    port: options.port,
    standby,
    server: undefined,
    good: undefined,
    seen: undefined,
    migrated: undefined,
    pending: new Map(),
    timer: undefined,
    running: undefined,
    watcher: undefined,
    migrationsWatcher: undefined,
    codeWatchers: new Map(),
    onSeen: undefined,
  };
}

type Generate = typeof import('../../generator/generate.ts');
type Report = typeof import('../../generator/diff/report.ts');

/** The modules a cycle uses, loaded once when dev starts (the CLI loads none of them for other commands). */
export interface DevModules {
  readonly readModel: Generate['readModel'];
  readonly renderProject: Generate['renderProject'];
  readonly writeProject: Generate['writeProject'];
  readonly loadConfig: typeof import('../../runtime/config/index.ts').loadConfig;
  readonly changeReport: typeof import('../../generator/diff/change-report.ts').changeReport;
  readonly reportLines: Report['reportLines'];
  readonly isModelChange: Report['isModelChange'];
  readonly describeError: typeof import('../errors.ts').describeError;
}

export interface DevContext {
  readonly dir: string;
  readonly options: DevOptions;
  readonly modules: DevModules;
  readonly database: ProjectDatabase;
  readonly children: Children;
  readonly state: DevState;
  /** A status line on stderr. */
  say(line: string): void;
  /** With --log-level debug, how long a step of a cycle took (docs/dev.md "How fast"). */
  timed<T>(step: string, work: Promise<T>): Promise<T>;
}
