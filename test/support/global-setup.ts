// vitest globalSetup: one PostgreSQL server for the whole test run.
//
// - SVCGEN_TEST_DATABASE_URL set (e.g. postgres://postgres@127.0.0.1:5432/postgres): use that server.
// - otherwise: start one embedded PostgreSQL with its state in a fresh temp dir, stop and delete it
//   at teardown.
// Tests get the server URL with `inject('databaseServerUrl')`; normally through
// `createTestDatabase()` from ./database.ts, which gives each test file its own database.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from '../../runtime/db/embedded-postgres/index.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a maintenance database (usually `postgres`) on the test PostgreSQL server */
    databaseServerUrl: string;
  }
}

const TEMP_PREFIX = 'svcgen-test-pg-';
/** test databases older than this are left-overs of crashed runs (see database.ts for the name format) */
const STALE_DATABASE_MS = 24 * 60 * 60 * 1000;

export default async function setup(project: TestProject): Promise<(() => Promise<void>) | void> {
  const external = process.env.SVCGEN_TEST_DATABASE_URL;
  if (external) {
    await dropStaleTestDatabases(external);
    project.provide('databaseServerUrl', external);
    return;
  }

  await removeStaleTempServers();
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), TEMP_PREFIX));
  // mkdtemp creates 0700; as root PostgreSQL runs as the `postgres` user, which must traverse it
  fs.chmodSync(stateDir, 0o711);
  let server;
  try {
    server = await startEmbeddedPostgres(stateDir);
  } catch (err) {
    fs.rmSync(stateDir, { recursive: true, force: true });
    throw err;
  }
  project.provide('databaseServerUrl', server.url);
  return async () => {
    try {
      await server.stop();
    } finally {
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  };
}

async function dropStaleTestDatabases(serverUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 5000 });
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (err) {
    throw new Error(`SVCGEN_TEST_DATABASE_URL: cannot connect to ${redact(serverUrl)}: ${(err as Error).message}`);
  }
  try {
    const { rows } = await client.query<{ datname: string }>(
      String.raw`select datname from pg_database where datname like 'svcgen\_t\_%'`,
    );
    for (const { datname } of rows) {
      const created = Number.parseInt(datname.split('_')[2] ?? '', 36);
      if (Number.isFinite(created) && Date.now() - created > STALE_DATABASE_MS) {
        await client.query(`drop database if exists ${client.escapeIdentifier(datname)} with (force)`).catch(() => {});
      }
    }
  } finally {
    await client.end().catch(() => {});
  }
}

/** Temp servers of earlier runs that died without teardown (SIGKILL, crash): stop them, delete their files. */
async function removeStaleTempServers(): Promise<void> {
  const tmp = os.tmpdir();
  for (const name of fs.readdirSync(tmp)) {
    if (!name.startsWith(TEMP_PREFIX)) continue;
    const dir = path.join(tmp, name);
    try {
      if (fs.existsSync(path.join(dir, 'pg', 'data', 'postmaster.pid'))) {
        // Reused (owned=false) when another live test run owns it: leave it alone. Otherwise this adopts
        // the orphaned server (or clears a stale pid file and starts one) so we can shut it down.
        const server = await startEmbeddedPostgres(dir);
        if (!server.owned) continue;
        await server.stop();
      } else {
        const statePath = path.join(dir, 'pg', 'state.json');
        if (fs.existsSync(statePath)) {
          const { ownerPid } = JSON.parse(fs.readFileSync(statePath, 'utf8')) as { ownerPid?: number | null };
          if (ownerPid && isAlive(ownerPid)) continue;
        } else if (Date.now() - fs.statSync(dir).mtimeMs < 10 * 60_000) {
          continue; // maybe a run that is initialising right now
        }
      }
      fs.rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort; never fail the test run over a left-over
    }
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    // a killed process whose parent has not reaped it yet is a zombie: dead for our purposes
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return true;
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}
