/**
 * dev: serve + watch (docs/dev.md). This process is a supervisor: it opens the database once, keeps
 * one `svcgen serve` child running, and on an edit of schema.prisma or svcgen.config.json renders
 * the model, migrates, writes generated/ and restarts the child, in that order. generated/ and the
 * database therefore only move to a model that rendered and migrated, and a broken edit leaves the
 * running server (and generated/) alone.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import type { ApiChange } from '../../generator/diff/diff-models.ts';
import type { Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { parsePort, projectDir, withDatabase, withProject } from '../options.ts';

/** Editors save in bursts (write + rename + chmod); one cycle per burst. */
const DEBOUNCE_MS = 150;
/** A server that ignores SIGTERM this long is killed. */
const STOP_TIMEOUT_MS = 30_000;
const WATCHED = ['schema.prisma', 'svcgen.config.json'] as const;
const LISTENING = /^listening on (\S+)$/m;

interface DevOptions {
  project: string;
  port: number;
  host: string;
  databaseUrl?: string;
  directDatabaseUrl?: string;
  logLevel: string;
}

export function registerDevCommand(program: Command): void {
  withDatabase(withProject(program.command('dev').description('serve and watch: an edit of schema.prisma or svcgen.config.json regenerates, migrates the dev database and restarts')))
    .option('--port <n>', 'port to listen on (0: a free one, kept across restarts)', parsePort, 3000)
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .addOption(new Option('--log-level <level>', 'passed to serve: info logs a line per request on stdout').choices(['info', 'warn']).default('info'))
    .action(async (options: DevOptions) => {
      await runDev(projectDir(options), options);
    });
}

type Texts = Record<(typeof WATCHED)[number], string | undefined>;

interface Server {
  child: ChildProcess;
  url: string;
  closed: Promise<void>;
  stopping: boolean;
}

async function runDev(dir: string, options: DevOptions): Promise<void> {
  const [{ readModel, renderProject, writeProject }, { loadConfig }, { diffModels }, { diffConfigs }, { reportLines }, { openProjectDatabase }, { describeError }, { PACKAGE_ROOT }] = await Promise.all([
    import('../../generator/generate.ts'),
    import('../../runtime/config/index.ts'),
    import('../../generator/diff/diff-models.ts'),
    import('../../generator/diff/diff-config.ts'),
    import('../../generator/diff/report.ts'),
    import('../database.ts'),
    import('../errors.ts'),
    import('../../generator/package-root.ts'),
  ]);
  // The CLI that runs this very code, so that children match it (checkout or installed package).
  const cli = path.join(PACKAGE_ROOT, 'bin', 'svcgen.js');
  const say = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };

  const database = await openProjectDatabase(dir, options.databaseUrl, undefined, options.directDatabaseUrl);
  if (database.embedded) say('database: embedded PostgreSQL in .svcgen/');

  const children = new Set<ChildProcess>();
  let shuttingDown = false;
  let port = options.port;
  let server: Server | undefined;
  /** What the running server was built from. */
  let good: { texts: Texts; tables: TableSpec[]; config: Config } | undefined;
  /** The last texts a cycle looked at, to name what an event changed. */
  let seen: Texts | undefined;
  /** schema.prisma as of the last migrate dev that succeeded. */
  let migratedSchema: string | undefined;

  const readTexts = async (): Promise<Texts> => {
    const [schema, config] = await Promise.all(WATCHED.map((f) => readFile(path.join(dir, f), 'utf8').catch(() => undefined)));
    return { 'schema.prisma': schema, 'svcgen.config.json': config };
  };

  /** `svcgen <args>` with this project's database; undefined once shutting down. */
  const spawnCli = (args: string[]): { child: ChildProcess; closed: Promise<number | null> } | undefined => {
    if (shuttingDown) return undefined;
    // The URL goes by environment rather than argument: `ps` shows arguments, and it may hold a password.
    const env = { ...process.env, DATABASE_URL: database.url, DIRECT_DATABASE_URL: database.directUrl };
    const child = spawn(process.execPath, [cli, ...args, '--project', dir], { stdio: ['ignore', 'pipe', 'pipe'], env });
    children.add(child);
    const closed = new Promise<number | null>((resolve) => {
      child.once('error', (error) => {
        say(`could not run svcgen ${args.join(' ')}: ${error.message}`);
        resolve(null);
      });
      child.once('close', (code) => resolve(code));
    }).finally(() => children.delete(child));
    return { child, closed };
  };

  const migrate = async (name: string): Promise<boolean> => {
    const run = spawnCli(['migrate', 'dev', '--name', name]);
    if (!run) return false;
    run.child.stdout!.pipe(process.stderr, { end: false });
    run.child.stderr!.pipe(process.stderr, { end: false });
    return (await run.closed) === 0;
  };

  const stopServer = async (): Promise<void> => {
    const current = server;
    if (!current) return;
    current.stopping = true;
    // serve stops gracefully on its first SIGTERM only; a second one would kill it mid-shutdown.
    if (!current.child.killed) current.child.kill('SIGTERM');
    const timer = setTimeout(() => current.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await current.closed;
    clearTimeout(timer);
    if (server === current) server = undefined;
  };

  /** Starts `svcgen serve`; resolves once it prints `listening on`, or with undefined when it exits first. */
  const startServer = (): Promise<Server | undefined> => {
    const args = ['serve', '--port', String(port), '--host', options.host, '--log-level', options.logLevel];
    // The child's stdout is a pipe, so its `auto` would pick JSON; what it writes reaches dev's own stdout.
    if (process.stdout.isTTY) args.push('--log-format', 'pretty');
    const run = spawnCli(args);
    if (!run) return Promise.resolve(undefined);
    const { child } = run;
    return new Promise((resolve) => {
      let buffered = '';
      let started: Server | undefined;
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        process.stdout.write(chunk);
        if (started) return;
        buffered += chunk;
        const match = buffered.match(LISTENING);
        if (!match) return;
        started = { child, url: match[1], closed: run.closed.then(() => {}), stopping: false };
        resolve(started);
      });
      child.stderr!.pipe(process.stderr, { end: false });
      void run.closed.then((code) => {
        if (!started) return resolve(undefined);
        if (started.stopping || shuttingDown) return;
        if (server === started) server = undefined;
        const how = child.signalCode ? `killed by ${child.signalCode}` : `exit code ${code}`;
        say(`the server exited on its own (${how}); save schema.prisma or svcgen.config.json to start it again`);
      });
    });
  };

  const fail = (message: string | undefined) => {
    if (message) say(message);
    say(server ? `keeping the last good server running (${server.url})` : 'no server running: waiting for the next edit of schema.prisma or svcgen.config.json');
  };

  /** One pass: render, migrate when the schema moved, write generated/, restart. `trigger` is undefined at start. */
  const cycle = async (trigger?: Set<string>, since = performance.now()): Promise<void> => {
    const texts = await readTexts();
    const runsThis = server && good && migratedSchema === texts['schema.prisma'] && WATCHED.every((f) => texts[f] === good!.texts[f]);
    if (trigger) {
      const changed = WATCHED.filter((f) => texts[f] !== seen?.[f]);
      // A save that changes nothing while the server runs is a no-op; otherwise any save retries.
      if (changed.length === 0 && runsThis) return;
      say(`change detected: ${(changed.length > 0 ? changed : [...trigger].sort()).join(', ')}`);
    }
    seen = texts;
    if (runsThis) return say(`back to what the server runs (${server!.url}): nothing to restart`);

    let tables: TableSpec[];
    let config: Config;
    try {
      // Schema and config are checked here first so that a broken edit prints its error once
      // (migrate dev would print the same) and starts no migration.
      tables = (await readModel(dir)).tables;
      config = await loadConfig(dir, Object.fromEntries(tables.map((t) => [t.name, t.fields.map((f) => f.name)])));
    } catch (error) {
      return fail(describeError(error).message);
    }
    const changes = good && texts['schema.prisma'] !== good.texts['schema.prisma'] ? diffModels(good.tables, tables) : undefined;
    // Permission and setting changes too, as `svcgen diff` lists them (WIDENS ACCESS, BREAKING).
    const configChanges = good && texts['svcgen.config.json'] !== good.texts['svcgen.config.json'] ? diffConfigs(good.config, config, tables) : undefined;
    if (changes || configChanges) for (const line of reportLines([...(changes ?? []), ...(configChanges ?? [])])) say(line);

    // Rendering (in this process) and migrating (a child) take seconds each: side by side.
    const rendering = renderProject(dir).then(
      (files) => ({ files }),
      (error: unknown) => ({ error }),
    );
    const migrating = texts['schema.prisma'] === migratedSchema ? Promise.resolve(true) : migrate(changes ? migrationName(changes) : 'dev');
    const [rendered, migrated] = await Promise.all([rendering, migrating]);
    if (migrated) migratedSchema = texts['schema.prisma'];
    if (shuttingDown) return;
    if ('error' in rendered) return fail(describeError(rendered.error).message);
    if (!migrated) return fail('migrate dev failed (see above): fix schema.prisma, or run the command it names, then save schema.prisma again');
    const { files } = rendered;

    try {
      const { written, removed } = await writeProject(dir, files);
      if (written + removed.length > 0) say(`generated/: ${written} file${written === 1 ? '' : 's'} written, ${removed.length} removed`);
    } catch (error) {
      return fail(`could not write generated/: ${describeError(error).message}`);
    }

    // An edit made while this cycle ran would make serve refuse the generated/ just written (or
    // serve a stale one): leave the running server to the cycle that follows.
    const now = await readTexts();
    if (WATCHED.some((f) => now[f] !== texts[f])) return say('more changes arrived: not restarting for this one');

    await stopServer();
    const next = await startServer();
    if (!next) return shuttingDown ? undefined : fail('the server did not start (see above)');
    server = next;
    good = { texts, tables, config };
    // --port 0 picks a free port once; restarts keep it so that the URL stays put.
    port = Number(new URL(next.url).port) || port;
    const seconds = ((performance.now() - since) / 1000).toFixed(1);
    if (trigger) say(`restarted: listening on ${next.url} (${seconds} s after the change)`);
  };

  // Changes arriving while a cycle runs are coalesced into one more cycle afterwards.
  let pending = new Set<string>();
  let firstEventAt = 0;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const runCycle = async (trigger?: Set<string>, since?: number): Promise<void> => {
    running = cycle(trigger, since).catch((error: unknown) => fail(`unexpected: ${describeError(error).message}`));
    await running;
    running = undefined;
    if (pending.size > 0) schedule();
  };
  const schedule = () => {
    if (running || shuttingDown) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      const trigger = pending;
      pending = new Set();
      void runCycle(trigger, firstEventAt);
    }, DEBOUNCE_MS);
  };

  // The folder, not the files: editors that save by rename replace the file a file watch holds.
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, (_event, filename) => {
      const name = filename?.toString();
      if (name && (WATCHED as readonly string[]).includes(name)) {
        if (pending.size === 0) firstEventAt = performance.now();
        pending.add(name);
        schedule();
      }
    });
    watcher.on('error', (error) => say(`watching ${dir} failed: ${error.message}`));
    say(`watching schema.prisma and svcgen.config.json in ${dir}`);
  } catch (error) {
    await database.release();
    throw error;
  }

  await new Promise<void>((resolve) => {
    const shutdown = (signal: string) => {
      if (shuttingDown) {
        // A second Ctrl-C: do not wait for graceful stops.
        for (const child of children) child.kill('SIGKILL');
        return;
      }
      shuttingDown = true;
      say(`${signal}: stopping the server and the watcher`);
      clearTimeout(timer);
      watcher!.close();
      // The server is stopped below, once; anything else (a migrate, a serve still starting) now.
      for (const child of children) if (child !== server?.child) child.kill('SIGTERM');
      const killer = setTimeout(() => {
        for (const child of children) child.kill('SIGKILL');
      }, STOP_TIMEOUT_MS);
      void (async () => {
        await running;
        await stopServer();
        clearTimeout(killer);
        await database.release().catch((error: unknown) => say(`stopping the database failed: ${describeError(error).message}`));
        process.off('SIGINT', onSigint);
        process.off('SIGTERM', onSigterm);
        say('dev stopped');
        resolve();
      })();
    };
    const onSigint = () => shutdown('SIGINT');
    const onSigterm = () => shutdown('SIGTERM');
    process.on('SIGINT', onSigint);
    process.on('SIGTERM', onSigterm);
    void runCycle();
  });
}

/** A migration folder name that says what changed when one thing did (`add_customer_nickname`), else `dev`. */
export function migrationName(changes: readonly ApiChange[]): string {
  if (changes.length !== 1) return 'dev';
  const [change] = changes;
  const verb = change.kind.endsWith('added') ? 'add' : change.kind.endsWith('removed') ? 'remove' : 'change';
  const subject = change.subject.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
  return `${verb}_${subject}`.slice(0, 80);
}
