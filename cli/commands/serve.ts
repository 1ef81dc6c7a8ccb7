/** serve: migrate, listen, deliver webhooks, stop cleanly on SIGINT/SIGTERM; worker: delivery alone. */
import { Option, type Command } from 'commander';
import { parsePort, projectDir, withProject } from '../options.ts';

export function registerServeCommands(program: Command): void {
  withProject(program.command('serve').description('apply pending migrations and serve the API'))
    .option('--port <n>', 'port to listen on', parsePort, 3000)
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .option('--database-url <url>', 'PostgreSQL connection string (default: DATABASE_URL, else embedded)')
    .option('--no-migrate', 'do not apply pending migrations')
    .option('--no-worker', 'do not deliver webhooks in this process (run `svcgen worker` for that)')
    .addOption(new Option('--log-level <level>', 'info: a line per request (method, path, status, time, caller) on stdout; warn: problems only').choices(['info', 'warn']).default('info'))
    .action(async (options: { project: string; port: number; host: string; databaseUrl?: string; migrate: boolean; worker: boolean; logLevel: string }) => {
      const dir = projectDir(options);
      // Listening from the start: a SIGTERM during start-up then stops cleanly once started.
      const stopSignal = nextStopSignal();
      const { loadService } = await import('../project.ts');
      const { openProjectDatabase } = await import('../database.ts');
      const { startServer } = await import('../../runtime/index.ts');
      const { service, config } = await loadService(dir);
      const database = await openProjectDatabase(dir, options.databaseUrl, (line) => console.error(`database: ${line}`));
      let server;
      try {
        const { refuseUnmigratedModel } = await import('../migration-record.ts');
        await refuseUnmigratedModel(dir, database.url, options.project === '.' ? '' : ` --project ${options.project}`);
        server = await startServer({
          projectDir: dir,
          service,
          config,
          databaseUrl: database.url,
          port: options.port,
          host: options.host,
          migrate: options.migrate,
          worker: options.worker,
          managementToken: process.env.SVCGEN_MANAGEMENT_TOKEN || undefined,
          smtpUrl: process.env.SVCGEN_SMTP_URL || undefined,
          secret: process.env.SVCGEN_SECRET || undefined,
          log: (m) => console.error(m),
          requestLog: options.logLevel === 'info' ? (line) => console.log(line) : undefined,
        });
      } catch (error) {
        await database.release();
        throw error;
      }
      console.error(server.applied.length ? `migrations: ${server.applied.length} applied, all up to date` : 'migrations: up to date');
      console.log(`listening on ${server.url}`);
      const rest = `${server.url}/gw/api/rest`;
      const roles = Object.keys(config.roles);
      console.error(
        [
          `  data API   ${rest}/<Table>  (${Object.keys(service.tables).join(', ')}; headers X-Project-Id: ${config.project.id}, Authorization)`,
          `  docs       ${rest}/_docs`,
          `  OpenAPI    ${rest}/_openapi`,
          `  auth       ${server.url}/auth/...`,
          `  an API key: svcgen keys create --env ${config.environments[0]} --name dev --prefix ApiKey --role ${roles[0] ?? '<role>'}${options.project === '.' ? '' : ` --project ${options.project}`}`,
        ].join('\n'),
      );

      const signal = await stopSignal;
      console.error(`${signal}: finishing in-flight requests and stopping`);
      await server.close().finally(() => database.release());
      console.error('stopped');
    });

  withProject(program.command('worker').description('deliver webhooks without serving HTTP (scale delivery apart from the API)'))
    .option('--database-url <url>', 'PostgreSQL connection string (default: DATABASE_URL, else embedded)')
    .action(async (options: { project: string; databaseUrl?: string }) => {
      const dir = projectDir(options);
      const stopSignal = nextStopSignal();
      const { loadService } = await import('../project.ts');
      const { openProjectDatabase } = await import('../database.ts');
      const { startWorkerProcess } = await import('../../runtime/index.ts');
      const { config } = await loadService(dir);
      const database = await openProjectDatabase(dir, options.databaseUrl);
      let worker;
      try {
        worker = await startWorkerProcess({
          config,
          databaseUrl: database.url,
          secret: process.env.SVCGEN_SECRET || undefined,
          log: (m) => console.error(m),
        });
      } catch (error) {
        await database.release();
        throw error;
      }
      console.log('delivering webhooks');
      const signal = await stopSignal;
      console.error(`${signal}: finishing in-flight deliveries and stopping`);
      await worker.stop().finally(() => database.release());
      console.error('stopped');
    });
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
