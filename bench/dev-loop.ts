/**
 * `npm run bench:dev`: how long `svcgen dev` takes to start and to follow an edit, the two figures
 * docs/dev.md quotes. Each round, as a new user would:
 *
 *   1. `svcgen init <tmp>/app` (example shop): no generated/, no migrations/, no .svcgen/;
 *   2. `svcgen dev --port 0` on the embedded PostgreSQL (or DEV_BENCH_DATABASE_URL, a fresh
 *      database per round is then the caller's business);
 *      start = spawn → the first `listening on <url>` on stdout;
 *   3. a field added to schema.prisma (`population Int?` in City);
 *      edit = the write → the next `listening on` (the new server, serving the field);
 *   4. a second `svcgen dev` in the same folder (generated/, migrations/ and .svcgen/ exist):
 *      warm start = spawn → `listening on`;
 *   5. Ctrl-C (SIGINT to the process group), waiting for the exit.
 *
 * Every line dev prints is shown with its time since the spawn (or the edit), so a slow step is
 * visible. SVCGEN_BIN runs another svcgen (e.g. node_modules/svcgen/bin/svcgen.js of a project
 * that installed the tarball); DEV_BENCH_ROUNDS (default 3); DEV_BENCH_ARGS, more arguments for dev
 * (`--log-level debug` prints how long each step took).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BIN = process.env.SVCGEN_BIN ? path.resolve(process.env.SVCGEN_BIN) : path.join(REPO, 'bin', 'svcgen.js');
const ROUNDS = Number(process.env.DEV_BENCH_ROUNDS ?? 3);
const DATABASE_URL = process.env.DEV_BENCH_DATABASE_URL;
/** e.g. `--log-level debug`, which times each step of dev's cycle */
const EXTRA_ARGS = (process.env.DEV_BENCH_ARGS ?? '').split(' ').filter(Boolean);

interface Dev {
  child: ChildProcess;
  /** Resolves with the time (ms since `since`) of the n-th `listening on` line on stdout. */
  listening(n: number): Promise<number>;
  exited: Promise<number | null>;
}

function startDev(dir: string, clock: { since: number }): Dev {
  const env = { ...process.env };
  delete env.DATABASE_URL;
  delete env.DIRECT_DATABASE_URL;
  const args = [BIN, 'dev', '--port', '0', ...(DATABASE_URL ? ['--database-url', DATABASE_URL] : []), ...EXTRA_ARGS];
  // detached: its own process group, so that SIGINT reaches the group as a terminal's Ctrl-C does.
  const child = spawn(process.execPath, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let count = 0;
  const waiters: { n: number; resolve: (ms: number) => void }[] = [];
  const lines = (stream: NodeJS.ReadableStream, name: string) => {
    let rest = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      rest += chunk;
      let at: number;
      while ((at = rest.indexOf('\n')) >= 0) {
        const line = rest.slice(0, at);
        rest = rest.slice(at + 1);
        const ms = performance.now() - clock.since;
        console.error(`  ${(ms / 1000).toFixed(2).padStart(6)} s ${name} ${line.slice(0, 150)}`);
        if (name === 'stdout' && /^listening on /.test(line)) {
          count++;
          for (const w of waiters.filter((w) => w.n === count)) w.resolve(ms);
        }
      }
    });
  };
  lines(child.stdout!, 'stdout');
  lines(child.stderr!, 'stderr');
  running.add(child);
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code))).finally(() =>
    running.delete(child),
  );
  return {
    child,
    exited,
    listening: (n) =>
      new Promise((resolve, reject) => {
        waiters.push({ n, resolve });
        void exited.then((code) => reject(new Error(`dev exited (code ${code}) before listening #${n}`)));
      }),
  };
}

async function stop(dev: Dev): Promise<void> {
  process.kill(-dev.child.pid!, 'SIGINT');
  const code = await dev.exited;
  if (code !== 0) throw new Error(`dev exited with code ${code} after SIGINT`);
}

function run(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, stdio: ['ignore', 'ignore', 'inherit'] });
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`svcgen ${args.join(' ')}: exit ${code}`)),
    );
  });
}

// dev runs in its own process group: if this script is stopped, take them down with it.
const running = new Set<ChildProcess>();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of running) process.kill(-child.pid!, 'SIGTERM');
    process.exit(1);
  });
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const results = { start: [] as number[], edit: [] as number[], warm: [] as number[] };
for (let round = 1; round <= ROUNDS; round++) {
  // The embedded PostgreSQL runs as the postgres user when we are root: a traversable folder.
  const root = await mkdtemp(path.join(os.tmpdir(), 'svcgen-dev-bench-'));
  await chmod(root, 0o711);
  try {
    const dir = path.join(root, 'app');
    await run(['init', dir], root);
    console.error(`round ${round}: svcgen dev in a new project (${dir})`);
    const clock = { since: performance.now() };
    const dev = startDev(dir, clock);
    let stopped = false;
    try {
      results.start.push(await dev.listening(1));
      const schemaFile = path.join(dir, 'schema.prisma');
      const schema = await readFile(schemaFile, 'utf8');
      console.error(`round ${round}: a field added to schema.prisma`);
      clock.since = performance.now();
      await writeFile(schemaFile, schema.replace('model City {\n', 'model City {\n  population Int?\n'));
      results.edit.push(await dev.listening(2));
      await stop(dev);
      stopped = true;
    } finally {
      if (!stopped) dev.child.kill('SIGKILL');
    }
    console.error(`round ${round}: svcgen dev again in the same project`);
    clock.since = performance.now();
    const again = startDev(dir, clock);
    try {
      results.warm.push(await again.listening(1));
    } finally {
      await stop(again);
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
const list = (values: number[]) => values.map(seconds).join(', ');
console.log(
  `svcgen dev (${BIN}), ${ROUNDS} rounds on ${os.cpus().length} CPUs, ${DATABASE_URL ? 'DEV_BENCH_DATABASE_URL' : 'embedded PostgreSQL'}`,
);
console.log(`  start in a new project      median ${seconds(median(results.start))}  (${list(results.start)})`);
console.log(`  field added → new server    median ${seconds(median(results.edit))}  (${list(results.edit)})`);
console.log(`  start again (same project)  median ${seconds(median(results.warm))}  (${list(results.warm)})`);
