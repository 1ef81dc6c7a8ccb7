/**
 * dev: serve + watch (docs/dev.md). This process is a supervisor: it opens the database once, keeps
 * one `svcgen serve` child running, and on an edit of schema.prisma or svcgen.config.json (or a
 * migration added or changed in migrations/) renders the model, migrates, writes generated/ and
 * restarts the child, in that order. generated/ and the database therefore only move to a model
 * that rendered and migrated, and a broken edit leaves the running server (and generated/) alone.
 *
 * Where the time goes, and what keeps it short (docs/dev.md "How fast"): `migrate dev` runs in
 * this process, so its schema engine (WebAssembly) stays compiled between edits and no process
 * starts for it; the next server is a child started ahead of time (a standby that has loaded the
 * runtime), which loads the new generated/ while the old server still answers and binds the port
 * once the old one has stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Option, type Command } from 'commander';
import type { ApiChange } from '../../generator/diff/diff-models.ts';
import type { Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { parsePort, projectDir, withDatabase, withProject } from '../options.ts';
import type { DevChildMessage, DevParentMessage } from './serve.ts';

/** Editors save in bursts (write + rename + chmod); one cycle per burst. */
const DEBOUNCE_MS = 150;
/** A server that ignores SIGTERM this long is killed. */
const STOP_TIMEOUT_MS = 30_000;
const WATCHED = ['schema.prisma', 'svcgen.config.json'] as const;
const MIGRATIONS = 'migrations/';

interface DevOptions {
  project: string;
  port: number;
  host: string;
  databaseUrl?: string;
  directDatabaseUrl?: string;
  logLevel: 'debug' | 'info' | 'warn';
}

export function registerDevCommand(program: Command): void {
  withDatabase(
    withProject(
      program
        .command('dev')
        .description(
          'serve and watch: an edit of schema.prisma, svcgen.config.json or migrations/ regenerates, migrates the dev database and restarts',
        ),
    ),
  )
    .option('--port <n>', 'port to listen on (0: a free one, kept across restarts)', parsePort, 3000)
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .addOption(
      new Option(
        '--log-level <level>',
        "passed to serve: info logs a line per request on stdout; debug also shows the embedded PostgreSQL's own log",
      )
        .choices(['debug', 'info', 'warn'])
        .default('info'),
    )
    .action(async (options: DevOptions) => {
      await runDev(projectDir(options), options);
    });
}

/** What a cycle looks at: the two files, and a fingerprint of the migrations (names and SQL). */
interface Inputs {
  'schema.prisma': string | undefined;
  'svcgen.config.json': string | undefined;
  migrations: string;
}

interface Server {
  child: ChildProcess;
  url: string;
  closed: Promise<void>;
  stopping: boolean;
}

/** A `svcgen serve` child on an IPC channel (cli/commands/serve.ts, serveForDev). */
interface ServeChild {
  child: ChildProcess;
  closed: Promise<number | null>;
  /** The next message of this type, or undefined once the child has exited. */
  next<T extends DevChildMessage['type']>(type: T): Promise<Extract<DevChildMessage, { type: T }> | undefined>;
  send(message: DevParentMessage): void;
}

async function migrationsFingerprint(dir: string): Promise<string> {
  const folder = path.join(dir, 'migrations');
  const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
  const hash = createHash('sha256');
  for (const name of entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort()) {
    const sql = await readFile(path.join(folder, name, 'migration.sql'), 'utf8').catch(() => '\0missing');
    hash.update(`${name}\0${sql}\0`);
  }
  return hash.digest('hex');
}

async function runDev(dir: string, options: DevOptions): Promise<void> {
  const startedAt = performance.now();
  const [
    { readModel, renderProject, writeProject },
    { loadConfig },
    { changeReport },
    { reportLines, isModelChange },
    { openProjectDatabase },
    { describeError },
    { PACKAGE_ROOT },
    serve,
  ] = await Promise.all([
    import('../../generator/generate.ts'),
    import('../../runtime/config/index.ts'),
    import('../../generator/diff/change-report.ts'),
    import('../../generator/diff/report.ts'),
    import('../database.ts'),
    import('../errors.ts'),
    import('../../generator/package-root.ts'),
    import('./serve.ts'),
  ]);
  // The CLI that runs this very code, so that children match it (checkout or installed package).
  const cli = path.join(PACKAGE_ROOT, 'bin', 'svcgen.js');
  const say = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  /** With --log-level debug, how long each step of a cycle took (docs/dev.md "How fast"). */
  const timed = async <T>(step: string, work: Promise<T>): Promise<T> => {
    if (options.logLevel !== 'debug') return work;
    const from = performance.now();
    try {
      return await work;
    } finally {
      say(`debug: ${step} took ${((performance.now() - from) / 1000).toFixed(2)} s`);
    }
  };

  const children = new Set<ChildProcess>();
  let shuttingDown = false;
  /** serve drains on its first SIGTERM and exits at once on a second: each child gets one. */
  const terminated = new WeakSet<ChildProcess>();
  const terminate = (child: ChildProcess) => {
    if (terminated.has(child) || child.exitCode !== null || child.signalCode !== null) return;
    terminated.add(child);
    child.kill('SIGTERM');
  };

  /**
   * `svcgen serve` for dev. Its own process group: a Ctrl-C in the terminal reaches dev alone,
   * which stops the server once (a child that got the terminal's SIGINT as well as dev's SIGTERM
   * would take the second signal for an impatient user and stop without draining).
   */
  const spawnServe = (): ServeChild => {
    const args = ['serve', '--host', options.host, '--log-level', options.logLevel, '--project', options.project];
    // The child's stdout is a pipe, so its `auto` would pick JSON; what it writes reaches dev's own stdout.
    if (process.stdout.isTTY) args.push('--log-format', 'pretty');
    const child = spawn(process.execPath, [cli, ...args], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: { ...process.env, ...serve.devChildEnvironment() },
      detached: true,
    });
    children.add(child);
    child.stdout!.pipe(process.stdout, { end: false });
    child.stderr!.pipe(process.stderr, { end: false });
    const closed = new Promise<number | null>((resolve) => {
      child.once('error', (error) => {
        say(`could not run svcgen serve: ${error.message}`);
        resolve(null);
      });
      child.once('close', (code) => resolve(code));
    }).finally(() => children.delete(child));
    const next: ServeChild['next'] = (type) =>
      new Promise((resolve) => {
        const listener = (message: DevChildMessage) => {
          if (message?.type !== type) return;
          child.off('message', listener);
          resolve(message as never);
        };
        child.on('message', listener);
        void closed.then(() => {
          child.off('message', listener);
          resolve(undefined);
        });
      });
    return {
      child,
      closed,
      next,
      send: (message) => {
        if (child.connected) child.send(message);
      },
    };
  };

  // Signals are ours from the start: a Ctrl-C while the database starts stops the standby too.
  let earlySignal: string | undefined;
  let shutdown = (signal: string) => {
    if (earlySignal) process.exit(1);
    earlySignal = signal;
    say(`${signal}: stopping`);
    shuttingDown = true;
    for (const child of children) terminate(child);
  };
  const onSigint = () => shutdown('SIGINT');
  const onSigterm = () => shutdown('SIGTERM');
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);

  // The first server's process starts now, beside the database and the first migration.
  let standby: ServeChild | undefined = spawnServe();
  const takeStandby = (): ServeChild => {
    const taken = standby ?? spawnServe();
    standby = undefined;
    return taken;
  };

  const logs =
    options.logLevel === 'debug'
      ? { status: (line: string) => say(`database: ${line}`), server: (line: string) => say(`database: ${line}`) }
      : {};
  let database: Awaited<ReturnType<typeof openProjectDatabase>>;
  try {
    database = await openProjectDatabase(dir, options.databaseUrl, logs.status, options.directDatabaseUrl, logs.server);
    if (database.embedded) say('database: embedded PostgreSQL in .svcgen/');
    else {
      const { createMissingDatabase } = await import('./migrate.ts');
      await createMissingDatabase(database.directUrl, say);
    }
  } catch (error) {
    for (const child of children) terminate(child);
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigterm);
    throw error;
  }
  if (earlySignal) {
    await database.release();
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigterm);
    return say('dev stopped');
  }

  let port = options.port;
  let server: Server | undefined;
  /** What the running server was built from. */
  let good: { inputs: Inputs; tables: TableSpec[]; config: Config } | undefined;
  /** The last inputs a cycle looked at, to name what an event changed. */
  let seen: Inputs | undefined;
  /** schema.prisma and the migrations as of the last migrate dev that succeeded. */
  let migrated: { schema: string | undefined; migrations: string } | undefined;

  const readInputs = async (): Promise<Inputs> => {
    const [schema, config, migrations] = await Promise.all([
      ...WATCHED.map((f) => readFile(path.join(dir, f), 'utf8').catch(() => undefined)),
      migrationsFingerprint(dir),
    ]);
    return { 'schema.prisma': schema, 'svcgen.config.json': config, migrations: migrations! };
  };
  const changedIn = (a: Inputs, b: Inputs | undefined): string[] => [
    ...WATCHED.filter((f) => a[f] !== b?.[f]),
    ...(a.migrations !== b?.migrations ? [MIGRATIONS] : []),
  ];

  /** migrate dev, in this process: the schema engine stays warm between edits. */
  const migrate = async (
    name: string,
    environments: string[],
    migratedSchema: string | undefined,
  ): Promise<boolean> => {
    try {
      const { runMigrateDev } = await import('./migrate.ts');
      await runMigrateDev({
        dir,
        environments,
        url: database.directUrl,
        name,
        acceptDataLoss: false,
        createOnly: false,
        project: options.project,
        // dev never accepts data loss for you, and never asks: the command it names does.
        interactive: false,
        print: say,
        warn: say,
        trustRecord: true,
        migratedSchema,
      });
      return true;
    } catch (error) {
      say(`svcgen: ${describeError(error).message}`);
      return false;
    }
  };

  const stopServer = async (): Promise<void> => {
    const current = server;
    if (!current) return;
    current.stopping = true;
    terminate(current.child);
    const timer = setTimeout(() => current.child.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await current.closed;
    clearTimeout(timer);
    if (server === current) server = undefined;
  };

  /**
   * The next server: the standby loads generated/ while the running server still answers; then the
   * running one stops and the new one binds the port. Undefined when it could not start (its
   * output says why); the running server is then left alone unless the failure came after it stopped.
   */
  const startServer = async (): Promise<Server | undefined> => {
    const next = takeStandby();
    const fail = () => {
      terminate(next.child);
      return undefined;
    };
    if (!(await next.next('standby')) || shuttingDown) return fail();
    next.send({ type: 'start', port, databaseUrl: database.url, directDatabaseUrl: database.directUrl });
    if (!(await next.next('ready')) || shuttingDown) return fail();
    await stopServer();
    next.send({ type: 'listen' });
    const listening = await next.next('listening');
    if (!listening) return undefined;
    const started: Server = {
      child: next.child,
      url: listening.url,
      closed: next.closed.then(() => {}),
      stopping: false,
    };
    void next.closed.then((code) => {
      if (started.stopping || shuttingDown) return;
      if (server === started) server = undefined;
      const how = next.child.signalCode ? `killed by ${next.child.signalCode}` : `exit code ${code}`;
      say(`the server exited on its own (${how}); save schema.prisma or svcgen.config.json to start it again`);
    });
    return started;
  };

  const fail = (message: string | undefined) => {
    if (message) say(message);
    say(
      server
        ? `keeping the last good server running (${server.url})`
        : 'no server running: waiting for the next edit of schema.prisma or svcgen.config.json',
    );
  };

  /** One pass: render, migrate when the schema or migrations moved, write generated/, restart. `trigger` is undefined at start. */
  const cycle = async (trigger?: Set<string>, since = performance.now()): Promise<void> => {
    const inputs = await readInputs();
    const migrationsCurrent =
      migrated?.schema === inputs['schema.prisma'] && migrated?.migrations === inputs.migrations;
    const runsThis = server && good && migrationsCurrent && changedIn(inputs, good.inputs).length === 0;
    if (trigger) {
      const changed = changedIn(inputs, seen);
      // A save that changes nothing while the server runs is a no-op (so are dev's own migrations); otherwise any save retries.
      if (changed.length === 0 && runsThis) return;
      say(`change detected: ${(changed.length > 0 ? changed : [...trigger].sort()).join(', ')}`);
    }
    seen = inputs;
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
    // What `svcgen diff` prints for the same two versions (the running server's and this one).
    const report =
      good &&
      (inputs['schema.prisma'] !== good.inputs['schema.prisma'] ||
        inputs['svcgen.config.json'] !== good.inputs['svcgen.config.json'])
        ? changeReport(good, { tables, config })
        : undefined;
    if (report) for (const line of reportLines(report.changes, report.graphql)) say(line);
    const changes = report?.changes.filter(isModelChange) ?? [];

    const rendering = timed('render generated/', renderProject(dir)).then(
      (files) => ({ files }),
      (error: unknown) => ({ error }),
    );
    // While migrations/ is as dev's last migrate left it, the new migration is a diff from the schema
    // that migrate saw; otherwise the engine replays the folder.
    const known =
      migrated?.schema !== undefined && migrated.migrations === inputs.migrations ? migrated.schema : undefined;
    const migrating = migrationsCurrent
      ? Promise.resolve(true)
      : timed('migrate dev', migrate(migrationName(changes), config.environments, known));
    const [rendered, ok] = await Promise.all([rendering, migrating]);
    // The fingerprint after this migration (dev's own new folder included), so that its watch event is a no-op.
    if (ok && !migrationsCurrent) {
      migrated = { schema: inputs['schema.prisma'], migrations: await migrationsFingerprint(dir) };
      seen = { ...inputs, migrations: migrated.migrations };
    }
    if (shuttingDown) return;
    if ('error' in rendered) return fail(describeError(rendered.error).message);
    if (!ok)
      return fail(
        'migrate dev failed (see above): fix schema.prisma, or run the command it names, then save schema.prisma again',
      );
    const { files } = rendered;

    try {
      const { written, removed } = await writeProject(dir, files);
      if (written + removed.length > 0)
        say(`generated/: ${written} file${written === 1 ? '' : 's'} written, ${removed.length} removed`);
    } catch (error) {
      return fail(`could not write generated/: ${describeError(error).message}`);
    }

    // An edit made while this cycle ran would make serve refuse the generated/ just written (or
    // serve a stale one): leave the running server to the cycle that follows.
    const now = await readInputs();
    if (WATCHED.some((f) => now[f] !== inputs[f])) return say('more changes arrived: not restarting for this one');

    const next = await timed('start the server', startServer());
    if (!next) return shuttingDown ? undefined : fail('the server did not start (see above)');
    server = next;
    good = { inputs: { ...inputs, migrations: migrated!.migrations }, tables, config };
    seen = good.inputs;
    // --port 0 picks a free port once; restarts keep it so that the URL stays put.
    port = Number(new URL(next.url).port) || port;
    const seconds = ((performance.now() - since) / 1000).toFixed(1);
    say(
      trigger
        ? `restarted: serving ${next.url} ${seconds} s after the change`
        : `started: serving ${next.url} ${seconds} s after svcgen dev started`,
    );
    // The next restart's process, started now that this one is up (not competing with it).
    if (!shuttingDown) standby ??= spawnServe();
  };

  // Changes arriving while a cycle runs are coalesced into one more cycle afterwards. Per name:
  // the time of its first event, the clock of the `restarted` line.
  let pending = new Map<string, number>();
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const runCycle = async (trigger?: Set<string>, since?: number): Promise<void> => {
    running = cycle(trigger, since).catch((error: unknown) => fail(`unexpected: ${describeError(error).message}`));
    await running;
    running = undefined;
    watchMigrations();
    // The events of dev's own migration are not a change (nor the start of the next one's clock).
    if (pending.has(MIGRATIONS) && seen && (await migrationsFingerprint(dir)) === seen.migrations)
      pending.delete(MIGRATIONS);
    if (pending.size > 0) schedule();
  };
  const schedule = () => {
    if (running || shuttingDown) return;
    clearTimeout(timer);
    timer = setTimeout(() => {
      const trigger = new Set(pending.keys());
      const since = Math.min(...pending.values());
      pending = new Map();
      void runCycle(trigger, since);
    }, DEBOUNCE_MS);
  };
  const changed = (name: string) => {
    if (shuttingDown) return;
    if (!pending.has(name)) pending.set(name, performance.now());
    schedule();
  };

  // migrations/ and what is below it: a migration that someone else added or applied (e.g. the
  // `migrate dev --accept-data-loss` dev named) changes the tables the running server expects.
  let migrationsWatcher: FSWatcher | undefined;
  const watchMigrations = () => {
    if (migrationsWatcher || shuttingDown) return;
    try {
      migrationsWatcher = watch(path.join(dir, 'migrations'), { recursive: true }, () => changed(MIGRATIONS));
      migrationsWatcher.on('error', () => {
        // The folder was removed (or replaced): watched again after the next cycle.
        migrationsWatcher?.close();
        migrationsWatcher = undefined;
        changed(MIGRATIONS);
      });
    } catch {
      // No migrations/ yet: the project folder's watcher sees it appear.
    }
  };

  // The folder, not the files: editors that save by rename replace the file a file watch holds.
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, (_event, filename) => {
      const name = filename?.toString();
      if (name && (WATCHED as readonly string[]).includes(name)) changed(name);
      else if (name === 'migrations') {
        if (!migrationsWatcher) watchMigrations();
        changed(MIGRATIONS);
      }
    });
    watcher.on('error', (error) => say(`watching ${dir} failed: ${error.message}`));
    watchMigrations();
    say(`watching schema.prisma, svcgen.config.json and migrations/ in ${dir}`);
  } catch (error) {
    for (const child of children) terminate(child);
    await database.release();
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigterm);
    throw error;
  }

  await new Promise<void>((resolve) => {
    shutdown = (signal: string) => {
      if (shuttingDown) {
        // A second Ctrl-C: do not wait for anything.
        say(`${signal} again: exiting without waiting`);
        for (const child of children) child.kill('SIGKILL');
        void database.release().finally(() => process.exit(1));
        return;
      }
      shuttingDown = true;
      say(`${signal}: stopping the server and the watcher`);
      clearTimeout(timer);
      watcher!.close();
      migrationsWatcher?.close();
      // The server is stopped below, once; anything else (a standby, a serve still starting) now.
      for (const child of children) if (child !== server?.child) terminate(child);
      const killer = setTimeout(() => {
        for (const child of children) child.kill('SIGKILL');
      }, STOP_TIMEOUT_MS);
      void (async () => {
        await running;
        await stopServer();
        await Promise.all(
          [...children].map(
            (child) =>
              new Promise((done) =>
                child.exitCode !== null || child.signalCode !== null ? done(undefined) : child.once('close', done),
              ),
          ),
        );
        clearTimeout(killer);
        await database
          .release()
          .catch((error: unknown) => say(`stopping the database failed: ${describeError(error).message}`));
        process.off('SIGINT', onSigint);
        process.off('SIGTERM', onSigterm);
        say('dev stopped');
        resolve();
      })();
    };
    void runCycle(undefined, startedAt);
  });
}

/** A migration folder name that says what changed when one thing did (`add_customer_nickname`), else `dev`. */
export function migrationName(changes: readonly ApiChange[]): string {
  if (changes.length !== 1) return 'dev';
  const [change] = changes;
  const verb = change.kind.endsWith('added') ? 'add' : change.kind.endsWith('removed') ? 'remove' : 'change';
  const subject = change.subject
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
  return `${verb}_${subject}`.slice(0, 80);
}
