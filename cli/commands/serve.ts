/** serve: migrate, listen, stop cleanly on SIGINT/SIGTERM. */
import type { Command } from 'commander';
import { startServer } from '../../runtime/index.ts';
import { openProjectDatabase } from '../database.ts';
import { parsePort, projectDir, withProject } from '../options.ts';
import { loadService } from '../project.ts';

export function registerServeCommands(program: Command): void {
  withProject(program.command('serve').description('apply pending migrations and serve the API'))
    .option('--port <n>', 'port to listen on', parsePort, 3000)
    .option('--host <h>', 'address to listen on', '127.0.0.1')
    .option('--database-url <url>', 'PostgreSQL connection string (default: DATABASE_URL, else embedded)')
    .option('--no-migrate', 'do not apply pending migrations')
    .action(async (options: { project: string; port: number; host: string; databaseUrl?: string; migrate: boolean }) => {
      const dir = projectDir(options);
      const { service, config } = await loadService(dir);
      const database = await openProjectDatabase(dir, options.databaseUrl);
      let server;
      try {
        server = await startServer({
          projectDir: dir,
          service,
          config,
          databaseUrl: database.url,
          port: options.port,
          host: options.host,
          migrate: options.migrate,
          managementToken: process.env.SVCGEN_MANAGEMENT_TOKEN || undefined,
          smtpUrl: process.env.SVCGEN_SMTP_URL || undefined,
          secret: process.env.SVCGEN_SECRET || undefined,
          log: (m) => console.error(m),
        });
      } catch (error) {
        await database.release();
        throw error;
      }
      for (const a of server.applied) console.error(`applied migration ${a.name} to ${a.environment}`);
      if (database.embedded) console.error('database: embedded PostgreSQL in .svcgen/');
      console.log(`listening on ${server.url}`);

      await new Promise<void>((resolve) => {
        let stopping = false;
        const stop = (signal: string) => {
          if (stopping) return;
          stopping = true;
          console.error(`${signal}: finishing in-flight requests and stopping`);
          server
            .close()
            .catch((e: unknown) => console.error(e))
            .then(() => database.release())
            .catch((e: unknown) => console.error(e))
            .finally(resolve);
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
      console.error('stopped');
    });
}
