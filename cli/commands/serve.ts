/** serve: migrate, listen, deliver webhooks, stop cleanly on SIGINT/SIGTERM; worker: delivery alone. */
import os from 'node:os';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { command, projectFlag } from '../hints.ts';
import { parsePort, projectDir, withDatabase, withProject } from '../options.ts';
import type { Config } from '../../runtime/config/index.ts';
import type { ServiceModule } from '../../runtime/model/index.ts';
import type { ServerOptions } from '../../runtime/server/index.ts';
import type { CodeRegistry } from '../../runtime/usercode/index.ts';

interface ServeOptions {
  project: string;
  port: number;
  host: string;
  databaseUrl?: string;
  directDatabaseUrl?: string;
  migrate: boolean;
  worker: boolean;
  logLevel: 'debug' | 'info' | 'warn';
  logFormat: 'auto' | 'json' | 'pretty';
  workers: number;
}

export const LOG_LEVELS = ['debug', 'info', 'warn'];

/**
 * The embedded PostgreSQL's lines on stderr: svcgen's own (starting, reusing) unless warn, and
 * PostgreSQL's log (whose `listening on IPv4 address …` a script waiting for the server's own
 * `listening on <url>` could mistake for it) only with debug.
 */
function databaseLogs(level: ServeOptions['logLevel']): {
  status?: (line: string) => void;
  server?: (line: string) => void;
} {
  const print = (line: string) => console.error(`database: ${line}`);
  return { status: level === 'warn' ? undefined : print, server: level === 'debug' ? print : undefined };
}

/** --workers: a count, or `auto` for one per CPU the process may use. */
export function parseWorkers(value: string): number {
  if (value === 'auto') return os.availableParallelism();
  if (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > 1024)
    throw new InvalidArgumentError('must be a number from 1 to 1024, or auto');
  return Number(value);
}

/** What every serving process of a project passes to startServer (one `serve`, or each of its workers). */
function serverOptions(
  dir: string,
  { service, config, code }: { service: ServiceModule; config: Config; code: CodeRegistry },
  options: ServeOptions,
): Omit<ServerOptions, 'databaseUrl' | 'migrate' | 'worker'> {
  return {
    projectDir: dir,
    service,
    config,
    code,
    port: options.port,
    host: options.host,
    managementToken: process.env.SVCGEN_MANAGEMENT_TOKEN || undefined,
    smtpUrl: process.env.SVCGEN_SMTP_URL || undefined,
    secret: process.env.SVCGEN_SECRET || undefined,
    metricsToken: process.env.SVCGEN_METRICS_TOKEN || undefined,
    log: (m) => console.error(m),
    // JSON lines for collectors when stdout is a pipe or file, a short line per request on a terminal.
    logging: {
      level: options.logLevel,
      format: options.logFormat === 'auto' ? (process.stdout.isTTY ? 'pretty' : 'json') : options.logFormat,
    },
  };
}

export function registerServeCommands(program: Command): void {
  withDatabase(withProject(program.command('serve').description('apply pending migrations and serve the API')))
    .option('--port <n>', 'port to listen on', parsePort, 3000)
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .option('--no-migrate', 'do not apply pending migrations')
    .option(
      '--no-worker',
      "do not deliver webhooks nor run the code's jobs in this process (run `npx svcgen worker` for that)",
    )
    .addOption(
      new Option(
        '--log-level <level>',
        "info: an entry per request (reqId, method, path, status, durationMs, caller) on stdout; warn: problems only; debug: info and the embedded PostgreSQL's own log on stderr",
      )
        .choices(LOG_LEVELS)
        .default('info'),
    )
    .addOption(
      new Option('--log-format <format>', 'auto: JSON lines, or a short line per request when stdout is a terminal')
        .choices(['auto', 'json', 'pretty'])
        .default('auto'),
    )
    .option(
      '--workers <n|auto>',
      'serve from n processes sharing the port, each with its own database pool (auto: one per CPU)',
      parseWorkers,
      1,
    )
    .action(async (options: ServeOptions) => {
      const dir = projectDir(options);
      // Before anything serves: how V8 places per-request objects (docs/deployment.md, "Garbage collection").
      (await import('../heap-tuning.ts')).tuneHeapForServing();
      const { isClusterWorker } = await import('../cluster.ts');
      if (isClusterWorker()) return serveAsWorker(dir, options);
      if (isDevChild()) return serveForDev(dir, options);
      // Listening from the start: a SIGTERM during start-up then stops cleanly once started.
      const stopSignal = nextStopSignal();
      const { loadService } = await import('../project.ts');
      const { openProjectDatabase } = await import('../database.ts');
      const loaded = await loadService(dir);
      const { service, config } = loaded;
      const logs = databaseLogs(options.logLevel);
      const database = await openProjectDatabase(
        dir,
        options.databaseUrl,
        logs.status,
        options.directDatabaseUrl,
        logs.server,
      );
      if (options.workers > 1) return serveAsPrimary(dir, service, config, database, stopSignal, options);
      const { startServer } = await import('../../runtime/index.ts');
      let server;
      try {
        const { refuseUnmigratedModel } = await import('../migration-record.ts');
        await refuseUnmigratedModel(dir, database.directUrl, projectFlag(options.project));
        server = await startServer({
          ...serverOptions(dir, loaded, options),
          databaseUrl: database.url,
          directDatabaseUrl: database.directUrl,
          migrate: options.migrate,
          worker: options.worker,
        });
      } catch (error) {
        await database.release();
        throw error;
      }
      announce(server.url, server.applied.length, service, config, options);

      const signal = await stopSignal;
      console.error(`${signal}: finishing in-flight requests and stopping`);
      await server.close().finally(() => database.release());
      console.error('stopped');
    });

  withDatabase(
    withProject(
      program
        .command('worker')
        .description(
          "deliver webhooks and run the code's jobs and schedules without serving HTTP (scale them apart from the API)",
        ),
    ),
  ).action(async (options: { project: string; databaseUrl?: string; directDatabaseUrl?: string }) => {
    const dir = projectDir(options);
    const stopSignal = nextStopSignal();
    const { loadService } = await import('../project.ts');
    const { openProjectDatabase } = await import('../database.ts');
    const { startWorkerProcess } = await import('../../runtime/index.ts');
    const { service, config, code } = await loadService(dir);
    const database = await openProjectDatabase(dir, options.databaseUrl, undefined, options.directDatabaseUrl);
    let worker;
    try {
      worker = await startWorkerProcess({
        config,
        code,
        service,
        projectDir: dir,
        // Each job's entries (docs/own-code.md "Failures and retries"): JSON lines unless stdout is a terminal.
        logging: { level: 'info', format: process.stdout.isTTY ? 'pretty' : 'json' },
        databaseUrl: database.url,
        directDatabaseUrl: database.directUrl,
        secret: process.env.SVCGEN_SECRET || undefined,
        log: (m) => console.error(m),
      });
    } catch (error) {
      await database.release();
      throw error;
    }
    console.log(code.jobs.size ? 'delivering webhooks and running jobs' : 'delivering webhooks');
    const signal = await stopSignal;
    console.error(`${signal}: finishing in-flight deliveries and stopping`);
    await worker.stop().finally(() => database.release());
    console.error('stopped');
  });
}

/** What a started `serve` prints: the URL on stdout (tests and scripts wait for it), the rest on stderr. */
function announce(url: string, applied: number, service: ServiceModule, config: Config, options: ServeOptions): void {
  console.error(applied ? `migrations: ${applied} applied, all up to date` : 'migrations: up to date');
  console.log(`listening on ${url}`);
  const rest = `${url}/gw/api/rest`;
  const roles = Object.keys(config.roles);
  console.error(
    [
      `  data API   ${rest}/<Table>  (${Object.keys(service.tables).join(', ')}; headers X-Project-Id: ${config.project.id}, Authorization)`,
      `  docs       ${rest}/_docs`,
      `  OpenAPI    ${rest}/_openapi`,
      `  auth       ${url}/auth/...`,
      `  an API key: ${command(`keys create --env ${config.environments[0]} --name dev --prefix ApiKey --role ${roles[0] ?? '<role>'}${projectFlag(options.project)}`)}`,
    ].join('\n'),
  );
}

/** --workers n > 1, the primary: migrations once, then n workers on one port (cli/cluster.ts). */
async function serveAsPrimary(
  dir: string,
  service: ServiceModule,
  config: Config,
  database: { url: string; directUrl: string; release(): Promise<void> },
  stopSignal: Promise<NodeJS.Signals>,
  options: ServeOptions,
): Promise<void> {
  const { runPrimary } = await import('../cluster.ts');
  let code: number;
  try {
    const { refuseUnmigratedModel } = await import('../migration-record.ts');
    await refuseUnmigratedModel(dir, database.directUrl, projectFlag(options.project));
    code = await runPrimary({
      projectDir: dir,
      service,
      config,
      databaseUrl: database.url,
      directDatabaseUrl: database.directUrl,
      workers: options.workers,
      migrate: options.migrate,
      delivery: options.worker,
      stopSignal,
      log: (line) => console.error(line),
      onListening: (url, pids, applied) => {
        announce(url, applied, service, config, options);
        console.error(
          `  workers    ${pids.length} processes on one port (pids ${pids.join(', ')})${options.worker ? '; worker 1 also delivers webhooks' : ''}`,
        );
      },
    });
  } finally {
    await database.release();
  }
  if (code === 0) console.error('stopped');
  process.exitCode = code;
}

/** One of the primary's workers: a whole server on the primary's database, which the primary migrated. */
async function serveAsWorker(dir: string, options: ServeOptions): Promise<void> {
  const { clusterMetricsSource, leaveCluster, nextStopRequest, reportListening, workerSettings } = await import(
    '../cluster.ts'
  );
  const stopRequest = nextStopRequest();
  try {
    const { databaseUrl, delivery } = workerSettings();
    const { loadService } = await import('../project.ts');
    const { startServer } = await import('../../runtime/index.ts');
    const loaded = await loadService(dir);
    const { config } = loaded;
    // Workers run this command's argv and environment again, so they find the same direct URL.
    const directDatabaseUrl = options.directDatabaseUrl || process.env.DIRECT_DATABASE_URL || databaseUrl;
    const server = await startServer({
      ...serverOptions(dir, loaded, options),
      databaseUrl,
      directDatabaseUrl,
      migrate: false,
      worker: delivery,
      clusterMetrics: config.metrics.enabled ? clusterMetricsSource() : undefined,
    });
    reportListening(server.url);
    await stopRequest;
    await server.close();
  } finally {
    leaveCluster();
  }
}

/**
 * The first SIGINT or SIGTERM. Listening starts when the command does, so a signal during start-up
 * is not the default kill; a second signal while stopping exits at once.
 */
function nextStopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received: NodeJS.Signals | undefined;
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        if (received) {
          console.error(`${signal} again: exiting without waiting`);
          process.exit(1);
        }
        received = signal;
        resolve(signal);
      });
    }
  });
}

/**
 * `serve` as `svcgen dev` runs it (docs/dev.md): a child on an IPC channel that loads the runtime
 * at once, then waits. On `start` it loads the project's generated/ (while the previous server
 * still answers), reports `ready`, and only binds the port on `listen`, once dev has stopped the
 * previous server: the API is down for the time startServer takes, not for a whole process start.
 */
const DEV_CHILD_VARIABLE = 'SVCGEN_DEV_CHILD';

export function devChildEnvironment(): Record<string, string> {
  return { [DEV_CHILD_VARIABLE]: '1' };
}

function isDevChild(): boolean {
  return process.env[DEV_CHILD_VARIABLE] === '1' && typeof process.send === 'function';
}

export type DevChildMessage = { type: 'standby' } | { type: 'ready' } | { type: 'listening'; url: string };
export type DevParentMessage =
  | { type: 'start'; port: number; databaseUrl: string; directDatabaseUrl: string }
  | { type: 'listen' };

async function serveForDev(dir: string, options: ServeOptions): Promise<void> {
  const stopSignal = nextStopSignal();
  // dev is gone (killed, say): nobody will stop this server otherwise.
  const orphaned = new Promise<'disconnect'>((resolve) => process.once('disconnect', () => resolve('disconnect')));
  const stopped = Promise.race([stopSignal, orphaned]);
  const send = (message: DevChildMessage) => {
    if (process.connected) process.send!(message);
  };
  const next = <T extends DevParentMessage['type']>(type: T) =>
    Promise.race([
      new Promise<Extract<DevParentMessage, { type: T }>>((resolve) => {
        const listener = (message: DevParentMessage) => {
          if (message?.type !== type) return;
          process.off('message', listener);
          resolve(message as Extract<DevParentMessage, { type: T }>);
        };
        process.on('message', listener);
      }),
      stopped.then(() => undefined),
    ]);
  try {
    const [{ loadService }, { startServer }, { ensureTypeScriptLoader }] = await Promise.all([
      import('../project.ts'),
      import('../../runtime/index.ts'),
      import('../typescript-loader.ts'),
    ]);
    await ensureTypeScriptLoader();
    const starting = next('start');
    send({ type: 'standby' });
    const start = await starting;
    if (!start) return;
    const loaded = await loadService(dir);
    const { service, config } = loaded;
    const listening = next('listen');
    send({ type: 'ready' });
    if (!(await listening)) return;
    const serveOptions = { ...options, port: start.port };
    const server = await startServer({
      ...serverOptions(dir, loaded, serveOptions),
      databaseUrl: start.databaseUrl,
      directDatabaseUrl: start.directDatabaseUrl,
      migrate: true,
      worker: options.worker,
    });
    announce(server.url, server.applied.length, service, config, serveOptions);
    send({ type: 'listening', url: server.url });
    const signal = await stopped;
    console.error(
      `${signal === 'disconnect' ? 'svcgen dev is gone' : signal}: finishing in-flight requests and stopping`,
    );
    await server.close();
    console.error('stopped');
  } finally {
    // The channel would keep this process alive.
    if (process.connected) process.disconnect();
  }
}
