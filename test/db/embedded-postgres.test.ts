import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  isEmbeddedRunning,
  startEmbeddedPostgres,
  type EmbeddedPostgres,
} from '../../runtime/db/embedded-postgres/index.ts';

const MODULE_URL = pathToFileURL(path.resolve(import.meta.dirname, '../../runtime/db/embedded-postgres/index.ts')).href;

const tempDirs: string[] = [];
const started: EmbeddedPostgres[] = [];
const children: ChildProcess[] = [];

function tempStateDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcgen-epg-test-'));
  fs.chmodSync(dir, 0o711); // mkdtemp makes 0700; the postgres OS user must traverse it when we are root
  tempDirs.push(dir);
  return path.join(dir, '.svcgen');
}

async function start(stateDir: string): Promise<EmbeddedPostgres> {
  const db = await startEmbeddedPostgres(stateDir);
  started.push(db);
  return db;
}

async function selectOne(url: string): Promise<number> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query<{ one: number }>('select 1 as one')).rows[0].one;
  } finally {
    await client.end();
  }
}

/** pids of all processes (postmaster and its children) whose working directory is `dataDir` */
function postgresProcessesIn(dataDir: string): number[] {
  const want = fs.realpathSync(dataDir);
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readlinkSync(`/proc/${entry}/cwd`) === want) pids.push(Number(entry));
    } catch {
      /* gone, zombie, or not ours */
    }
  }
  return pids;
}

function readState(stateDir: string): { port: number; ownerPid: number | null } {
  return JSON.parse(fs.readFileSync(path.join(stateDir, 'pg', 'state.json'), 'utf8'));
}

interface Holder {
  child: ChildProcess;
  info: Promise<{ owned: boolean; port: number; pid: number }>;
  /** asks the child to stop() its handle and exit */
  release(): Promise<void>;
  exited: Promise<void>;
}

/** Another "svcgen CLI": a separate node process that starts the server and holds it until released. */
function holder(stateDir: string): Holder {
  const code = `
    const { startEmbeddedPostgres } = await import(${JSON.stringify(MODULE_URL)});
    const db = await startEmbeddedPostgres(${JSON.stringify(stateDir)});
    process.stdout.write(JSON.stringify({ owned: db.owned, port: db.port, pid: db.pid }) + '\\n');
    process.stdin.once('data', async () => { await db.stop(); process.exit(0); });
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.push(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const info = new Promise<{ owned: boolean; port: number; pid: number }>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]));
    });
    child.once('exit', (c) => reject(new Error(`holder exited with ${c} before starting`)));
  });
  return {
    child,
    info,
    exited,
    release: async () => {
      child.stdin!.write('stop\n');
      await exited;
    },
  };
}

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  for (const db of started.splice(0).reverse()) await db.stop().catch(() => {});
});

afterAll(() => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

describe('startEmbeddedPostgres', () => {
  const stateDir = tempStateDir();
  let first: EmbeddedPostgres;
  afterAll(async () => {
    await first?.stop();
  });

  it('initialises, starts and answers select 1', async () => {
    first = await startEmbeddedPostgres(stateDir);
    expect(first.owned).toBe(true);
    expect(first.port).not.toBe(5432);
    expect(first.url).toMatch(new RegExp(`^postgres://postgres:[^@/]+@127\\.0\\.0\\.1:${first.port}/postgres$`));
    expect(await selectOne(first.url)).toBe(1);
    expect(await isEmbeddedRunning(stateDir)).toBe(true);
    expect(readState(stateDir)).toMatchObject({ port: first.port, ownerPid: process.pid });
    expect(fs.existsSync(path.join(stateDir, 'pg', 'data', 'PG_VERSION'))).toBe(true);
    expect(fs.existsSync(path.join(stateDir, 'pg', 'postgres.log'))).toBe(true);
  });

  it('a second start while it runs reuses it with owned=false, and its stop() is a no-op', async () => {
    const second = await startEmbeddedPostgres(stateDir);
    expect(second).toMatchObject({ owned: false, port: first.port, pid: first.pid, url: first.url });
    await second.stop();
    expect(await selectOne(first.url)).toBe(1);
  });

  it('stop() shuts it down, leaves no process behind and is idempotent', async () => {
    const client = new pg.Client(first.url);
    await client.connect();
    client.on('error', () => {}); // the fast shutdown terminates this session
    await client.query('create table kept (id int); insert into kept values (42)');
    await client.end();

    await first.stop();
    await first.stop();
    expect(postgresProcessesIn(first.dataDir)).toEqual([]);
    expect(() => process.kill(first.pid, 0)).toThrow();
    expect(await isEmbeddedRunning(stateDir)).toBe(false);
    expect(readState(stateDir).ownerPid).toBeNull();
  });

  it('starts again on the same port with the data kept', async () => {
    const again = await start(stateDir);
    expect(again.owned).toBe(true);
    expect(again.port).toBe(first.port);
    const client = new pg.Client(again.url);
    await client.connect();
    expect((await client.query('select id from kept')).rows).toEqual([{ id: 42 }]);
    await client.end();
    await again.stop();
    expect(postgresProcessesIn(again.dataDir)).toEqual([]);
  });

  it('recovers from a stale postmaster.pid', async () => {
    // the pid of a process that has certainly exited
    const dead = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => dead.once('exit', resolve));
    const dataDir = path.join(stateDir, 'pg', 'data');
    const pidFile = path.join(dataDir, 'postmaster.pid');
    fs.writeFileSync(
      pidFile,
      `${dead.pid}\n${dataDir}\n1700000000\n${first.port}\n\n127.0.0.1\n  1234 5678\nready   \n`,
    );
    const st = fs.statSync(dataDir);
    fs.chownSync(pidFile, st.uid, st.gid);

    const db = await start(stateDir);
    expect(db.owned).toBe(true);
    expect(db.pid).not.toBe(dead.pid);
    expect(await selectOne(db.url)).toBe(1);
    await db.stop();
    expect(postgresProcessesIn(db.dataDir)).toEqual([]);
  });
});

describe('startEmbeddedPostgres across processes', () => {
  it('reuses a server owned by another live process; adopts it after that process is SIGKILLed', async () => {
    const stateDir = tempStateDir();
    const owner = holder(stateDir);
    const ownerInfo = await owner.info;
    expect(ownerInfo.owned).toBe(true);

    const borrowed = await start(stateDir);
    expect(borrowed).toMatchObject({ owned: false, port: ownerInfo.port, pid: ownerInfo.pid });
    expect(await selectOne(borrowed.url)).toBe(1);

    owner.child.kill('SIGKILL');
    await owner.exited;
    // PostgreSQL survives its owner
    expect(await isEmbeddedRunning(stateDir)).toBe(true);

    const adopted = await start(stateDir);
    expect(adopted).toMatchObject({ owned: true, port: ownerInfo.port, pid: ownerInfo.pid });
    expect(readState(stateDir).ownerPid).toBe(process.pid);
    expect(await selectOne(adopted.url)).toBe(1);
    await adopted.stop();
    expect(postgresProcessesIn(adopted.dataDir)).toEqual([]);
  });

  it('two processes starting at the same moment: one initialises and owns, the other reuses', async () => {
    const stateDir = tempStateDir();
    const a = holder(stateDir);
    const b = holder(stateDir);
    const [ia, ib] = await Promise.all([a.info, b.info]);
    expect([ia.owned, ib.owned].sort()).toEqual([false, true]);
    expect(ia.port).toBe(ib.port);
    expect(ia.pid).toBe(ib.pid);
    const log = fs.readFileSync(path.join(stateDir, 'pg', 'postgres.log'), 'utf8');
    expect(log.match(/Initialising PostgreSQL data directory/g)).toHaveLength(1);

    const [borrower, owner] = ia.owned ? [b, a] : [a, b];
    await borrower.release();
    expect(await isEmbeddedRunning(stateDir)).toBe(true);
    await owner.release();
    expect(postgresProcessesIn(path.join(stateDir, 'pg', 'data'))).toEqual([]);
  });
});
