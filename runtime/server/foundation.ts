/**
 * What every server feature stands on: the checked options, the logger, the database (schema and
 * migrations applied), the LISTEN channel, the secret box and the shared rate limiter.
 */
import path from 'node:path';
import type { Config } from '../config/index.ts';
import {
  applyMigrations,
  ensureSystemSchema,
  NotificationChannel,
  openDatabase,
  refuseUnservable,
  requireUtcSessions,
  type AppliedMigration,
  type Database,
} from '../db/index.ts';
import type { Mailer } from '../mail/index.ts';
import { DATA_BASE_PATH, type ServiceModule } from '../model/index.ts';
import {
  createLogger,
  silentLogger,
  type Logger,
  type LoggerOptions,
  type MetricsText,
} from '../observability/index.ts';
import { SharedRateLimiter } from '../rate-limit/index.ts';
import { SecretBox } from '../secrets/index.ts';
import { CodeRegistry } from '../usercode/index.ts';
import type { Teardown } from './feature.ts';

export interface ServerOptions {
  projectDir: string;
  service: ServiceModule;
  config: Config;
  /** The project's own code (docs/own-code.md); none: the empty registry. */
  code?: CodeRegistry;
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

export interface Foundation {
  readonly options: ServerOptions;
  readonly config: Config;
  readonly service: ServiceModule;
  /** The project's own code; the empty registry when it has none. */
  readonly code: CodeRegistry;
  readonly log: (message: string) => void;
  /** Structured entries: one per request (at info) and request errors. */
  readonly logger: Logger;
  /** Set when GET /metrics is on: the bearer token scrapers send. */
  readonly metricsToken?: string;
  readonly basePath: string;
  readonly db: Database;
  /** DIRECT_DATABASE_URL, or the database URL when there is no pooler in between. */
  readonly directUrl: string;
  readonly migrationsDir: string;
  readonly applied: readonly AppliedMigration[];
  readonly channel: NotificationChannel;
  /** Seals what must be read back: signing keys, webhook secrets. */
  readonly box: SecretBox;
  readonly rateLimiter: SharedRateLimiter;
}

export async function openFoundation(options: ServerOptions, teardown: Teardown): Promise<Foundation> {
  const { config } = options;
  const log = options.log ?? ((m: string) => console.error(m));
  const metricsToken = config.metrics.enabled ? (options.metricsToken ?? config.metrics.token) : undefined;
  if (config.metrics.enabled && !metricsToken) {
    throw new Error(
      'metrics.enabled is true but there is no metrics token: set SVCGEN_METRICS_TOKEN (or metrics.token in svcgen.config.json), which scrapers send as "Authorization: Bearer <token>"',
    );
  }
  const logger = options.logging ? createLogger(options.logging) : silentLogger;
  const { poolSize, statementTimeoutMs, poolWaitTimeoutMs } = config.database;
  const directUrl = options.directDatabaseUrl ?? options.databaseUrl;
  const pooled = directUrl !== options.databaseUrl;
  const db = openDatabase(options.databaseUrl, {
    max: poolSize,
    statementTimeoutMs,
    poolWaitTimeoutMs,
    transactionPooler: pooled,
    onQuery: options.onQuery,
  });
  teardown.add('database', () => db.close());
  const channel = new NotificationChannel(directUrl, log);
  teardown.add('listen', () => channel.stop());
  const migrationsDir = path.join(options.projectDir, 'migrations');
  // Only start-up needs a session besides LISTEN and the worker's runner: closed once started.
  const direct = pooled ? openDatabase(directUrl, { max: 1 }) : db;
  let applied: AppliedMigration[];
  try {
    await ensureSystemSchema(direct);
    if (pooled) await requireUtcSessions(db);
    applied = await migrate(options, db, direct, migrationsDir);
  } finally {
    if (pooled) await direct.close().catch(() => {});
  }
  await channel.start();
  const rateLimiter = new SharedRateLimiter(db);
  // Added after the database: stops run in reverse, so the last batch is written before the pool closes.
  teardown.add('rate limits', () => rateLimiter.flushPending());
  return {
    options,
    config,
    service: options.service,
    code: options.code ?? CodeRegistry.EMPTY,
    log,
    logger,
    metricsToken,
    basePath: DATA_BASE_PATH,
    db,
    directUrl,
    migrationsDir,
    applied,
    channel,
    box: await SecretBox.open(db, options.secret),
    rateLimiter,
  };
}

async function migrate(
  options: ServerOptions,
  db: Database,
  direct: Database,
  migrationsDir: string,
): Promise<AppliedMigration[]> {
  const { environments } = options.config;
  const migrate = options.migrate !== false;
  await refuseUnservable(db, migrationsDir, environments, {
    hasTables: Object.keys(options.service.tables).length > 0,
    migrate,
  });
  if (!migrate) return [];
  return applyMigrations(direct, migrationsDir, environments, (m) =>
    options.log?.(`applying migration ${m.name} to ${m.environment}`),
  );
}
