/**
 * dev: serve + watch (docs/dev.md). This process is a supervisor: it opens the database once, keeps
 * one `svcgen serve` child running (children.ts, servers.ts), and on an edit of schema.prisma or
 * svcgen.config.json (or a migration added or changed in migrations/) runs a cycle (cycle.ts,
 * scheduled by watch.ts). Its mutable state is one DevState (state.ts).
 *
 * Where the time goes, and what keeps it short (docs/dev.md "How fast"): `migrate dev` runs in
 * this process, so its schema engine (WebAssembly) stays compiled between edits and no process
 * starts for it; the next server is a child started ahead of time.
 */
import path from 'node:path';
import { Children } from './children.ts';
import { STOP_TIMEOUT_MS, stopServer } from './servers.ts';
import { type DevContext, type DevModules, type DevOptions, initialState } from './state.ts';
import { runCycle, startWatching, stopWatching } from './watch.ts';

async function loadModules(): Promise<{ modules: DevModules; others: Others }> {
  const [
    generate,
    { loadConfig },
    { changeReport },
    { reportLines, isModelChange },
    database,
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
    import('../commands/serve.ts'),
  ]);
  const { readModel, renderProject, writeProject } = generate;
  return {
    modules: {
      readModel,
      renderProject,
      writeProject,
      loadConfig,
      changeReport,
      reportLines,
      isModelChange,
      describeError,
    },
    others: {
      openProjectDatabase: database.openProjectDatabase,
      PACKAGE_ROOT,
      devChildEnvironment: serve.devChildEnvironment,
    },
  };
}

interface Others {
  openProjectDatabase: typeof import('../database.ts').openProjectDatabase;
  PACKAGE_ROOT: string;
  devChildEnvironment: typeof import('../commands/serve.ts').devChildEnvironment;
}

export async function runDev(dir: string, options: DevOptions): Promise<void> {
  const startedAt = performance.now();
  const { modules, others } = await loadModules();
  const say = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  const timed = async <T>(step: string, work: Promise<T>): Promise<T> => {
    if (options.logLevel !== 'debug') return work;
    const from = performance.now();
    try {
      return await work;
    } finally {
      say(`debug: ${step} took ${((performance.now() - from) / 1000).toFixed(2)} s`);
    }
  };

  const args = ['serve', '--host', options.host, '--log-level', options.logLevel, '--project', options.project];
  // The child's stdout is a pipe, so its `auto` would pick JSON; what it writes reaches dev's own stdout.
  if (process.stdout.isTTY) args.push('--log-format', 'pretty');
  const children = new Children({
    // The CLI that runs this very code, so that children match it (checkout or installed package).
    cli: path.join(others.PACKAGE_ROOT, 'bin', 'svcgen.js'),
    args,
    env: { ...process.env, ...others.devChildEnvironment() },
    say,
  });

  // Signals are ours from the start: a Ctrl-C while the database starts stops the standby too.
  const signals = {
    first: undefined as string | undefined,
    handle: (signal: string): void => {
      if (signals.first) process.exit(1);
      signals.first = signal;
      say(`${signal}: stopping`);
      state.shuttingDown = true;
      children.terminateAll();
    },
  };
  const onSigint = () => signals.handle('SIGINT');
  const onSigterm = () => signals.handle('SIGTERM');
  const releaseSignals = () => {
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigterm);
  };
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);

  // The first server's process starts now, beside the database and the first migration.
  const state = initialState(options, children.spawnServe());

  const logs =
    options.logLevel === 'debug'
      ? { status: (line: string) => say(`database: ${line}`), server: (line: string) => say(`database: ${line}`) }
      : {};
  let database: DevContext['database'];
  try {
    database = await others.openProjectDatabase(
      dir,
      options.databaseUrl,
      logs.status,
      options.directDatabaseUrl,
      logs.server,
    );
    if (database.embedded) say('database: embedded PostgreSQL in .svcgen/');
    else {
      const { createMissingDatabase } = await import('../commands/migrate.ts');
      await createMissingDatabase(database.directUrl, say);
    }
  } catch (error) {
    children.terminateAll();
    releaseSignals();
    throw error;
  }
  if (signals.first) {
    await database.release();
    releaseSignals();
    return say('dev stopped');
  }

  const ctx: DevContext = { dir, options, modules, database, children, state, say, timed };
  try {
    startWatching(ctx);
  } catch (error) {
    children.terminateAll();
    await database.release();
    releaseSignals();
    throw error;
  }

  await new Promise<void>((resolve) => {
    signals.handle = (signal: string) => {
      if (state.shuttingDown) {
        // A second Ctrl-C: do not wait for anything.
        say(`${signal} again: exiting without waiting`);
        children.killAll();
        void database.release().finally(() => process.exit(1));
        return;
      }
      state.shuttingDown = true;
      say(`${signal}: stopping the server and the watcher`);
      stopWatching(ctx);
      // The server is stopped below, once; anything else (a standby, a serve still starting) now.
      children.terminateAll(state.server?.child);
      const killer = setTimeout(() => children.killAll(), STOP_TIMEOUT_MS);
      void (async () => {
        await state.running;
        await stopServer(ctx);
        await children.allClosed();
        clearTimeout(killer);
        await database
          .release()
          .catch((error: unknown) => say(`stopping the database failed: ${modules.describeError(error).message}`));
        releaseSignals();
        say('dev stopped');
        resolve();
      })();
    };
    void runCycle(ctx, undefined, startedAt);
  });
}
