/**
 * `svcgen/testing` (docs/own-code.md "Testing your code"): a project's own server, started in the
 * test's process on a throwaway database, for the project's own tests of its hooks and endpoints
 * through its typed client:
 *
 *   import { startTestServer } from 'svcgen/testing';
 *   import { createClient } from '../generated/client.ts';
 *
 *   const server = await startTestServer();
 *   const db = createClient({ baseUrl: server.url, projectId: server.projectId, apiKey: await server.createKey(['admin']) });
 *   ...
 *   await server.close();
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { newClient } from '../runtime/db/client.ts';
import { connectionConfig } from '../runtime/db/connection.ts';
import { openDatabase } from '../runtime/db/index.ts';
import { createApiKey } from '../runtime/keys/index.ts';
import { startServer } from '../runtime/server/index.ts';
import { openProjectDatabase } from './database.ts';
import { loadService } from './project.ts';

export interface TestServerOptions {
  /** The project folder (svcgen.config.json, generated/, migrations/); default: the current directory. */
  project?: string;
  /**
   * The PostgreSQL server to make the throwaway database on (any database of it: a fresh one is
   * created beside it and dropped by close()). Default: DATABASE_URL, else the project's embedded
   * PostgreSQL (`<project>/.svcgen`, the one `svcgen dev` uses).
   */
  databaseUrl?: string;
  /** The server's log lines (errors behind 500s among them); default: discarded. */
  log?: (line: string) => void;
}

export interface TestServer {
  /** The server's address, e.g. `http://127.0.0.1:51234`: the client's baseUrl. */
  readonly url: string;
  /** The project id of svcgen.config.json: the client's projectId. */
  readonly projectId: string;
  /** The database the server runs on (its migrations applied), for arranging rows with SQL. */
  readonly databaseUrl: string;
  /** A new API key with these roles (of svcgen.config.json), in `environment` (default master): its secret. */
  createKey(roles: string[], options?: { environment?: string; context?: Record<string, string> }): Promise<string>;
  /** Stops the server and drops its database. */
  close(): Promise<void>;
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const projectDir = path.resolve(options.project ?? process.cwd());
  const log = options.log ?? (() => {});
  const { service, config, code } = await loadService(projectDir);
  const host = await openProjectDatabase(projectDir, options.databaseUrl, log);
  let dropDatabase: (() => Promise<void>) | undefined;
  try {
    const name = `svcgen_test_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
    await onServer(host.url, (c) => c.query(`CREATE DATABASE ${c.escapeIdentifier(name)}`));
    dropDatabase = () =>
      onServer(host.url, (c) => c.query(`DROP DATABASE IF EXISTS ${c.escapeIdentifier(name)} WITH (FORCE)`));
    const url = new URL(host.url);
    url.pathname = `/${name}`;
    const databaseUrl = url.href;
    const server = await startServer({
      projectDir,
      service,
      config,
      code,
      databaseUrl,
      port: 0,
      host: '127.0.0.1',
      log,
    });
    const keys = openDatabase(databaseUrl, { max: 1 });
    let closing: Promise<void> | undefined;
    return {
      url: server.url,
      projectId: config.project.id,
      databaseUrl,
      async createKey(roles, o = {}) {
        const created = await createApiKey(keys, {
          projectId: config.project.id,
          environment: o.environment ?? 'master',
          name: 'test',
          prefix: 'test',
          roles,
          context: o.context ?? {},
        });
        return created.key;
      },
      close: () =>
        (closing ??= (async () => {
          await server.close();
          await keys.close();
          await dropDatabase?.();
          await host.release();
        })()),
    };
  } catch (error) {
    await dropDatabase?.().catch(() => {});
    await host.release().catch(() => {});
    throw error;
  }
}

/** Runs `work` on a connection to the server `url` names (its database must exist). */
async function onServer(url: string, work: (client: ReturnType<typeof newClient>) => Promise<unknown>): Promise<void> {
  const client = newClient(connectionConfig(url));
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}
