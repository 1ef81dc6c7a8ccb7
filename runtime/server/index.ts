/** Starting and stopping a server for one project: a foundation, the features on it, an HTTP listener. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config/index.ts';
import { ensureSystemSchema, openDatabase, type AppliedMigration } from '../db/index.ts';
import {
  capConnectionsPerAddress,
  clientErrorHandler,
  ConnectionsPerAddress,
  drainableServer,
  startRequestDeadline,
  type ClientErrorLimits,
  type Drain,
} from '../http/index.ts';
import { flushLogger, flushLoggerSync, type Logger, type LoggerOptions } from '../observability/index.ts';
import { SecretBox } from '../secrets/index.ts';
import { installDeliveryQueue, startDeliveryWorker } from '../webhooks/index.ts';
import type { ServiceModule } from '../model/index.ts';
import type { CodeRegistry } from '../usercode/index.ts';
import { createRequestListener } from './app.ts';
import { Lifecycle, RELEASE_DEADLINE_MS } from './feature.ts';
import { startFeatures } from './features/index.ts';
import { openFoundation, type ServerOptions } from './foundation.ts';

export { createApp, createRequestListener, DATA_BASE_PATH } from './app.ts';
export type { Route, ServerFeature, Teardown } from './feature.ts';
export type { ServerOptions } from './foundation.ts';
export type { Services } from './services.ts';

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly applied: readonly AppliedMigration[];
  /** Stops once (a second call gets the first one's promise): drain, then every feature, latest first. */
  close(): Promise<void>;
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const log = options.log ?? ((m: string) => console.error(m));
  const lifecycle = new Lifecycle((name, error) =>
    log(`stopping ${name} failed: ${error instanceof Error ? error.message : String(error)}`),
  );
  try {
    const foundation = await openFoundation(options, lifecycle);
    const { services, routes, upgrades } = await startFeatures(foundation, lifecycle);
    const { server, drain } = createHttpServer(options.config, (address, cap) =>
      log(`connections from ${address} refused: it holds ${cap} already (http.maxConnectionsPerAddress)`),
    );
    const listener = createRequestListener(services, routes, { beforeExpress: drain.follow });
    const onClientError = clientErrorHandler(clientErrorLimits(options.config.http));
    const { requestTimeoutMs } = options.config.http;
    server.on('request', (req, res) => {
      startRequestDeadline(req, res, requestTimeoutMs, onClientError);
      listener(req, res);
    });
    // WebSocket upgrades (docs/realtime.md); one nobody takes is refused.
    server.on('upgrade', (req, socket, head) => {
      if (!upgrades.some((upgrade) => upgrade(req, socket, head)))
        socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => resolve());
    });
    const { logger } = services;
    const port = (server.address() as AddressInfo).port;
    const url = `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
    logger.info(
      {
        url,
        migrationsApplied: foundation.applied.length,
        webhookWorker: options.worker !== false,
        metrics: services.metricsToken !== undefined,
      },
      'server started',
    );
    // Scripts and process managers watch for this line: not held for a batch.
    await flushLogger(logger);
    let closing: Promise<void> | undefined;
    const close = async () => {
      const outcome = await lifecycle.stop(() => drain.close(options.config.http.drainTimeoutMs));
      if (outcome === 'released') logger.info('server stopped');
      else logger.warn(`stopped without waiting longer for the database (no answer within ${RELEASE_DEADLINE_MS} ms)`);
      // Request lines wait in a batch (runtime/observability/logger.ts): out with them before we return.
      await flushLogger(logger);
      flushLoggerSync(logger);
    };
    return { url, port, applied: foundation.applied, close: () => (closing ??= close()) };
  } catch (error) {
    await lifecycle.stop();
    throw error;
  }
}

export interface WorkerProcessOptions {
  config: Config;
  /** The project's own code: `svcgen worker` runs its jobs and schedules (docs/own-code.md "Jobs"). */
  code?: CodeRegistry;
  /**
   * The service and its directory: with code that has jobs, the worker runs the server's features
   * without HTTP, so that a job's data API is the server's (docs/own-code.md "Jobs").
   */
  service?: ServiceModule;
  projectDir?: string;
  /** Receives the text of every SQL statement (tests). */
  onQuery?: (text: string) => void;
  /** The structured log of the code's jobs (docs/own-code.md "Failures and retries"); none when absent. */
  logging?: LoggerOptions;
  databaseUrl: string;
  /** DIRECT_DATABASE_URL (see ServerOptions). */
  directDatabaseUrl?: string;
  /** SVCGEN_SECRET: must be the one the servers use, or webhook secrets cannot be opened to sign. */
  secret?: string;
  log?: (message: string) => void;
}

/**
 * `svcgen worker`: webhook delivery, and the code's jobs and schedules, without the HTTP server, to
 * scale API and workers apart.
 */
export async function startWorkerProcess(options: WorkerProcessOptions): Promise<{ stop(): Promise<void> }> {
  const log = options.log ?? ((m: string) => console.error(m));
  if (options.code && options.code.jobs.size > 0) {
    if (!options.service || !options.projectDir)
      throw new TypeError('startWorkerProcess: code with jobs needs the service and projectDir');
    return startHeadless({ ...options, service: options.service, projectDir: options.projectDir }, log);
  }
  const directUrl = options.directDatabaseUrl ?? options.databaseUrl;
  const db = openDatabase(directUrl, { max: 2 });
  try {
    await ensureSystemSchema(db);
    await installDeliveryQueue(directUrl, log);
    const box = await SecretBox.open(db, options.secret);
    return await startDeliveryWorker({
      databaseUrl: options.databaseUrl,
      directDatabaseUrl: directUrl,
      box,
      config: options.config,
      log,
    });
  } finally {
    await db.close().catch(() => {});
  }
}

/**
 * The server without its HTTP listener: the foundation (no migrations: the servers apply them) and
 * every feature, so that the code's job runner and the webhook worker run on the same services a
 * server has. What the features serve over HTTP is never listened for.
 */
async function startHeadless(
  options: WorkerProcessOptions & { service: ServiceModule; projectDir: string },
  log: (message: string) => void,
): Promise<{ stop(): Promise<void> }> {
  const lifecycle = new Lifecycle((name, error) =>
    log(`stopping ${name} failed: ${error instanceof Error ? error.message : String(error)}`),
  );
  let logger: Logger | undefined;
  try {
    const foundation = await openFoundation(
      {
        projectDir: options.projectDir,
        service: options.service,
        config: options.config,
        code: options.code,
        databaseUrl: options.databaseUrl,
        directDatabaseUrl: options.directDatabaseUrl,
        secret: options.secret,
        port: 0,
        host: '127.0.0.1',
        migrate: false,
        worker: true,
        log,
        onQuery: options.onQuery,
        logging: options.logging,
      },
      lifecycle,
    );
    logger = foundation.logger;
    await startFeatures(foundation, lifecycle);
  } catch (error) {
    await lifecycle.stop();
    throw error;
  }
  return {
    async stop() {
      await lifecycle.stop();
      // The last jobs' entries may wait in a batch (runtime/observability/logger.ts).
      await flushLogger(logger!);
      flushLoggerSync(logger!);
    },
  };
}

/** Long filter lists travel in the URL: allow 64 KiB of request head (Node's default is 16 KiB). */
const MAX_HEADER_SIZE = 65_536;

/**
 * node:http with the config's limits: slow heads and bodies are cut off near their timeouts with a
 * 408, connections capped, per process and per client address. `onRefused` hears of an address
 * over its cap (once until it is under it again).
 */
function createHttpServer(
  config: Config,
  onRefused: (address: string, cap: number) => void,
): { server: Server; drain: Drain } {
  const { http } = config;
  const { server, drain } = drainableServer({
    maxHeaderSize: MAX_HEADER_SIZE,
    headersTimeout: http.headersTimeoutMs,
    // The whole request's bound is svcgen's (runtime/http/request-deadline.ts): uploads replace it.
    requestTimeout: 0,
    keepAliveTimeout: http.keepAliveTimeoutMs,
    // Node checks the two timeouts only this often (default every 30 s), so a cut comes up to one interval late.
    connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(http.headersTimeoutMs / 10))),
  });
  server.maxConnections = http.maxConnections;
  // docs/deployment.md "Connections per client address": before any other 'connection' listener.
  capConnectionsPerAddress(
    server,
    new ConnectionsPerAddress(http.maxConnectionsPerAddress, config.trustProxy),
    onRefused,
  );
  server.on('clientError', clientErrorHandler(clientErrorLimits(http)));
  return { server, drain };
}

function clientErrorLimits(http: Config['http']): ClientErrorLimits {
  return {
    headersTimeoutMs: http.headersTimeoutMs,
    requestTimeoutMs: http.requestTimeoutMs,
    maxHeaderSize: MAX_HEADER_SIZE,
  };
}
