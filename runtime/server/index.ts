/** Starting and stopping a server for one project. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { UserAuth } from '../auth/index.ts';
import type { Config } from '../config/index.ts';
import { Admission, applyMigrations, ensureSystemSchema, MigrationError, NotificationChannel, openDatabase, pendingMigrations, Readiness, readMigrations, requireUtcSessions, type AppliedMigration } from '../db/index.ts';
import { clientAddress, clientErrorHandler, drainable, type Drain } from '../http/index.ts';
import { pruneIdempotency } from '../idempotency/index.ts';
import { createMailer, type Mailer } from '../mail/index.ts';
import { CredentialStore } from '../keys/index.ts';
import { SecretBox, serverSecret } from '../secrets/index.ts';
import type { ServiceModule } from '../model/index.ts';
import { Catalog, cursorCodec, Policy, roleOperand } from '../query/index.ts';
import { createRequestListener, DATA_BASE_PATH } from './app.ts';
import { SharedRateLimiter } from '../rate-limit/index.ts';
import { installDeliveryQueue, startDeliveryWorker, webhookQueueDepth, WatchedTables, type DeliveryWorker } from '../webhooks/index.ts';
import { createLogger, metrics, silentLogger, useClusterMetrics, type LoggerOptions, type MetricsText } from '../observability/index.ts';
import type { Services } from './services.ts';

export { createApp, createRequestListener, DATA_BASE_PATH } from './app.ts';
export { newKeySchema, keyProblems } from './management.ts';
export type { Services } from './services.ts';

export interface ServerOptions {
  projectDir: string;
  service: ServiceModule;
  config: Config;
  databaseUrl: string;
  /**
   * DIRECT_DATABASE_URL: a session connection for what needs one (schema install, migrations and
   * their advisory lock, LISTEN, graphile-worker's runner). When it differs from databaseUrl, that
   * one is taken for a transaction-pooling PgBouncer's (README "PgBouncer and managed PostgreSQL").
   */
  directDatabaseUrl?: string;
  port: number;
  host: string;
  /** Apply pending migrations to every environment before listening (default true). */
  migrate?: boolean;
  managementToken?: string;
  /** SVCGEN_SMTP_URL: overrides the config's mail.smtpUrl. */
  smtpUrl?: string;
  /** SVCGEN_SECRET: seals stored secrets (signing keys); without it a database-kept secret does. */
  secret?: string;
  /** Replaces the mailer the config describes (tests). */
  mailer?: Mailer;
  /** bcrypt cost of new passwords (default 10). */
  passwordCost?: number;
  /** Sees each bcrypt job (hash or verify) of the password hasher: tests count comparisons. */
  onPasswordJob?: (op: 'hash' | 'verify') => void;
  /** Run the webhook delivery worker in this process (default true; `svcgen worker` runs it alone). */
  worker?: boolean;
  log?: (message: string) => void;
  /** Structured log (pino): an entry per request at info, request errors, start and stop; none when absent. */
  logging?: LoggerOptions;
  /** SVCGEN_METRICS_TOKEN: overrides the config's metrics.token. */
  metricsToken?: string;
  /** A worker of `serve --workers`: where /metrics gets the whole server's metrics (its primary) instead of this process's. */
  clusterMetrics?: () => Promise<MetricsText>;
  /** Called with the text of every SQL statement the server sends (tests count statements). */
  onQuery?: (text: string) => void;
}

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly applied: AppliedMigration[];
  close(): Promise<void>;
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const log = options.log ?? ((m: string) => console.error(m));
  const metricsToken = options.config.metrics.enabled ? (options.metricsToken ?? options.config.metrics.token) : undefined;
  if (options.config.metrics.enabled && !metricsToken) {
    throw new Error('metrics.enabled is true but there is no metrics token: set SVCGEN_METRICS_TOKEN (or metrics.token in svcgen.config.json), which scrapers send as "Authorization: Bearer <token>"');
  }
  const { poolSize, statementTimeoutMs, poolWaitTimeoutMs, expensiveReadConcurrency, expensiveReadQueue } = options.config.database;
  const directUrl = options.directDatabaseUrl ?? options.databaseUrl;
  const pooled = directUrl !== options.databaseUrl;
  const db = openDatabase(options.databaseUrl, { max: poolSize, statementTimeoutMs, poolWaitTimeoutMs, transactionPooler: pooled, onQuery: options.onQuery });
  // Closed once started: only start-up needs a session besides LISTEN and the worker's runner.
  const direct = pooled ? openDatabase(directUrl, { max: 1 }) : db;
  const channel = new NotificationChannel(directUrl, log);
  let credentials: CredentialStore | undefined;
  let auth: UserAuth | undefined;
  let worker: DeliveryWorker | undefined;
  let unwatch: Array<() => void> = [];
  const logger = options.logging ? createLogger(options.logging) : silentLogger;
  const mailer =
    options.mailer ??
    createMailer({
      smtpUrl: options.smtpUrl ?? options.config.mail.smtpUrl,
      from: options.config.mail.from,
      logFile: path.join(options.projectDir, '.svcgen', 'mail.log'),
      log,
    });
  try {
    await ensureSystemSchema(direct);
    if (pooled) await requireUtcSessions(db);
    const migrationsDir = path.join(options.projectDir, 'migrations');
    // Serving tables that do not exist would answer 500s: refuse, and say what fixes it.
    if (Object.keys(options.service.tables).length > 0 && (await readMigrations(migrationsDir)).length === 0) {
      throw new MigrationError('the project has no migrations yet, so its tables do not exist: run `svcgen migrate dev --name init`, then serve');
    }
    if (options.migrate === false) {
      const pending = await pendingMigrations(db, migrationsDir, options.config.environments);
      if (pending.length > 0) {
        throw new MigrationError(
          `${pending.length} migration(s) not applied (${pending.map((p) => `${p.name} in ${p.environment}`).join(', ')}): run \`svcgen migrate deploy\`, or serve without --no-migrate`,
        );
      }
    }
    const applied = options.migrate === false ? [] : await applyMigrations(direct, migrationsDir, options.config.environments, (m) =>
          options.log?.(`applying migration ${m.name} to ${m.environment}`),
        );
    await installDeliveryQueue(directUrl, log);
    if (pooled) await direct.close();
    await channel.start();
    credentials = new CredentialStore(db, channel, options.managementToken);
    credentials.start();
    const rateLimiter = new SharedRateLimiter(db);
    const catalog = new Catalog(options.service.tables);
    const box = await SecretBox.open(db, options.secret);
    auth = await UserAuth.start({
      config: options.config,
      db,
      channel,
      box,
      mailer,
      rateLimiter,
      clientIp: clientAddress(options.config.trustProxy),
      log,
      passwordCost: options.passwordCost,
      onPasswordJob: options.onPasswordJob,
    });
    const services: Services = {
      config: options.config,
      service: options.service,
      db,
      // Half the pool by default: expensive reads keep going under load, cheap ones keep the other half.
      expensiveReads: new Admission({
        slots: expensiveReadConcurrency ?? Math.max(1, Math.floor(poolSize / 2)),
        queue: expensiveReadQueue,
        waitTimeoutMs: poolWaitTimeoutMs,
        onRefused: metrics.expensiveReadRefused,
      }),
      catalog,
      policy: new Policy(
        options.config.roles,
        (table, path, op, value) => roleOperand(catalog, table, path, op, value),
        (table) => catalog.get(table)?.spec.fields.map((f) => f.name) ?? [],
      ),
      channel,
      credentials,
      resolvers: [auth, credentials],
      cursors: cursorCodec(await serverSecret(db, 'cursor-signing')),
      rateLimiter,
      auth,
      box,
      watchedTables: new WatchedTables(db, channel),
      readiness: new Readiness({
        // Straight on the pool: not a request's statement, so not reported to onQuery.
        probe: async () => void (await db.pool.query('SELECT 1')),
        pendingMigrations: async () => (await pendingMigrations(db, migrationsDir, options.config.environments)).map((p) => `${p.name} in ${p.environment}`),
        listenerLive: () => channel.live,
        poolBusy: () => db.pool.waitingCount > 0,
      }),
      basePath: DATA_BASE_PATH,
      log,
      logger,
      metricsToken,
    };
    unwatch = metricsToken
      ? [metrics.watchPool(db.pool, 'api'), metrics.watchReadBudget(services.expensiveReads), metrics.watchWebhookQueue(() => webhookQueueDepth(db))]
      : [];
    if (metricsToken && options.clusterMetrics) unwatch.push(useClusterMetrics(options.clusterMetrics));
    // Housekeeping off the request path: expired idempotency entries, old rate-limit windows, auth leftovers.
    const maintenance = setInterval(() => {
      void services.rateLimiter.prune();
      void pruneIdempotency(db);
      void services.auth.prune();
    }, 60_000);
    maintenance.unref();
    services.readiness.start();
    if (options.worker !== false) worker = await startDeliveryWorker({ databaseUrl: options.databaseUrl, directDatabaseUrl: directUrl, box, config: options.config, log });
    const server = createHttpServer(options.config.http);
    const drain = drainable(server);
    server.on('request', createRequestListener(services));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const shownHost = options.host.includes(':') ? `[${options.host}]` : options.host;
    logger.info({ url: `http://${shownHost}:${port}`, migrationsApplied: applied.length, webhookWorker: worker !== undefined, metrics: metricsToken !== undefined }, 'server started');
    return {
      url: `http://${shownHost}:${port}`,
      port,
      applied,
      close: () => {
        services.readiness.drain();
        clearInterval(maintenance);
        for (const stop of unwatch) stop();
        return closeServer(drain, options.config.http.drainTimeoutMs, async () => {
          // Side by side: each may wait out a connect timeout when the database is black-holed.
          await Promise.all([
            worker?.stop(),
            (async () => {
              services.watchedTables.stop();
              await services.readiness.stop();
              await auth!.stop();
              await mailer.close();
              await credentials!.stop();
              await channel.stop();
              await db.close();
            })(),
          ]);
          logger.info('server stopped');
        }, () => logger.warn(`stopped without waiting longer for the database (no answer within ${RELEASE_DEADLINE_MS} ms)`));
      },
    };
  } catch (error) {
    for (const stop of unwatch) stop();
    await worker?.stop().catch(() => {});
    await auth?.stop().catch(() => {});
    await mailer.close().catch(() => {});
    await credentials?.stop().catch(() => {});
    await channel.stop();
    await db.close().catch(() => {});
    if (pooled) await direct.close().catch(() => {});
    throw error;
  }
}

export interface WorkerProcessOptions {
  config: Config;
  databaseUrl: string;
  /** DIRECT_DATABASE_URL (see ServerOptions). */
  directDatabaseUrl?: string;
  /** SVCGEN_SECRET: must be the one the servers use, or webhook secrets cannot be opened to sign. */
  secret?: string;
  log?: (message: string) => void;
}

/** `svcgen worker`: webhook delivery without the HTTP server, to scale API and delivery apart. */
export async function startWorkerProcess(options: WorkerProcessOptions): Promise<{ stop(): Promise<void> }> {
  const log = options.log ?? ((m: string) => console.error(m));
  const directUrl = options.directDatabaseUrl ?? options.databaseUrl;
  const db = openDatabase(directUrl, { max: 2 });
  try {
    await ensureSystemSchema(db);
    await installDeliveryQueue(directUrl, log);
    const box = await SecretBox.open(db, options.secret);
    return await startDeliveryWorker({ databaseUrl: options.databaseUrl, directDatabaseUrl: directUrl, box, config: options.config, log });
  } finally {
    await db.close().catch(() => {});
  }
}

/** Long filter lists travel in the URL: allow 64 KiB of request head (Node's default is 16 KiB). */
const MAX_HEADER_SIZE = 65_536;

/** node:http with the config's limits: slow heads and bodies are cut off near their timeouts with a 408, connections capped. */
function createHttpServer(http: Config['http']): Server {
  const server = createServer({
    maxHeaderSize: MAX_HEADER_SIZE,
    headersTimeout: http.headersTimeoutMs,
    requestTimeout: http.requestTimeoutMs,
    keepAliveTimeout: http.keepAliveTimeoutMs,
    // Node checks the two timeouts only this often (default every 30 s), so a cut comes up to one interval late.
    connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(http.headersTimeoutMs / 10))),
  });
  server.maxConnections = http.maxConnections;
  server.on('clientError', clientErrorHandler({ headersTimeoutMs: http.headersTimeoutMs, requestTimeoutMs: http.requestTimeoutMs, maxHeaderSize: MAX_HEADER_SIZE }));
  return server;
}

/** Drains the HTTP server (in-flight requests get up to `drainTimeoutMs`), then releases the database. */
/**
 * How long closing waits for database work (pools, the LISTEN session, the webhook runner) to let
 * go after the drain. A black-holed database makes each pending connection attempt wait out its
 * connect timeout; past this the process stops anyway, abandoning them (nothing committed is at
 * stake: every request has been answered or cut off by then).
 */
const RELEASE_DEADLINE_MS = 4000;

async function closeServer(drain: Drain, drainTimeoutMs: number, release: () => Promise<void>, onAbandoned: () => void): Promise<void> {
  await drain.close(drainTimeoutMs);
  let deadline: NodeJS.Timeout | undefined;
  const abandoned = new Promise<'abandoned'>((resolve) => {
    deadline = setTimeout(() => resolve('abandoned'), RELEASE_DEADLINE_MS);
    deadline.unref();
  });
  const outcome = await Promise.race([release().then(() => 'released' as const), abandoned]).finally(() => clearTimeout(deadline));
  if (outcome === 'abandoned') onAbandoned();
}
