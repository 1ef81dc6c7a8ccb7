// inspecting an existing server
import fs from 'node:fs';
import path from 'node:path';
import { newClient } from '../client.ts';
import { readPassword, type Paths } from './directories.ts';
import { START_TIMEOUT_MS } from './limits.ts';
import { logTail } from './log.ts';
import { isAlive, isPostmasterOf, readPostmasterPid, sleep } from './processes.ts';

/**
 * Returns the running, connectable server for this data dir, or null after clearing a stale
 * postmaster.pid. Waits for a server that is still starting up (e.g. crash recovery).
 */
export async function findRunningServer(
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
export async function probe(port: number, password: string): Promise<'ok' | 'auth' | 'down'> {
  const client = newClient({
    host: '127.0.0.1',
    port,
    user: 'postgres',
    password,
    database: 'postgres',
    connectionTimeoutMillis: 3000,
  });
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
