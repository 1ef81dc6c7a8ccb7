// lock: exclusive-create a file containing our pid; stale when that pid is dead (or very old)
import { randomBytes } from 'node:crypto';
import fsp from 'node:fs/promises';
import { LOCK_STALE_MS, LOCK_TIMEOUT_MS } from './limits.ts';
import { isAlive, sleep } from './processes.ts';

export async function acquireLock(lockPath: string): Promise<() => Promise<void>> {
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
