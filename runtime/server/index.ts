/** Starting and stopping a server for one project. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import path from 'node:path';
import { UserAuth } from '../auth/index.ts';
import type { Config } from '../config/index.ts';
import { applyMigrations, ensureSystemSchema, MigrationError, NotificationChannel, openDatabase, pendingMigrations, readMigrations, type AppliedMigration } from '../db/index.ts';
import { clientAddress } from '../http/index.ts';
import { pruneIdempotency } from '../idempotency/index.ts';
import { createMailer, type Mailer } from '../mail/index.ts';
import { CredentialStore } from '../keys/index.ts';
import { SecretBox, serverSecret } from '../secrets/index.ts';
import type { ServiceModule } from '../model/index.ts';
import { Policy } from '../permissions/index.ts';
import { Catalog, cursorCodec } from '../query/index.ts';
import { roleOperand } from '../rest/index.ts';
import { createRequestListener, DATA_BASE_PATH } from './app.ts';
import { SharedRateLimiter } from '../rate-limit/index.ts';
import { installDeliveryQueue, startDeliveryWorker, WatchedTables, type DeliveryWorker } from '../webhooks/index.ts';
import type { Services } from './services.ts';

export { createApp, createRequestListener, DATA_BASE_PATH } from './app.ts';
export { newKeySchema, keyProblems } from './management.ts';
export type { Services } from './services.ts';

export interface ServerOptions {
  projectDir: string;
  service: ServiceModule;
  config: Config;
  databaseUrl: string;
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
  /** Run the webhook delivery worker in this process (default true; `svcgen worker` runs it alone). */
  worker?: boolean;
  log?: (message: string) => void;
  /** Receives one access-log line per request (method, path, status, time, caller); none when absent. */
  requestLog?: (line: string) => void;
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
  const db = openDatabase(options.databaseUrl, { max: 10, onQuery: options.onQuery });
  const channel = new NotificationChannel(options.databaseUrl, log);
  let credentials: CredentialStore | undefined;
  let auth: UserAuth | undefined;
  let worker: DeliveryWorker | undefined;
  const mailer =
    options.mailer ??
    createMailer({
      smtpUrl: options.smtpUrl ?? options.config.mail.smtpUrl,
      from: options.config.mail.from,
      logFile: path.join(options.projectDir, '.svcgen', 'mail.log'),
      log,
    });
  try {
    await ensureSystemSchema(db);
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
    const applied = options.migrate === false ? [] : await applyMigrations(db, migrationsDir, options.config.environments, (m) =>
          options.log?.(`applying migration ${m.name} to ${m.environment}`),
        );
    await installDeliveryQueue(options.databaseUrl, log);
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
    });
    const services: Services = {
      config: options.config,
      service: options.service,
      db,
      catalog,
      policy: new Policy(options.config.roles, (table, path, op, value) => roleOperand(catalog, table, path, op, value)),
      channel,
      credentials,
      resolvers: [auth, credentials],
      cursors: cursorCodec(await serverSecret(db, 'cursor-signing')),
      rateLimiter,
      auth,
      box,
      watchedTables: new WatchedTables(db, channel),
      basePath: DATA_BASE_PATH,
      log,
      requestLog: options.requestLog,
    };
    // Housekeeping off the request path: expired idempotency entries, old rate-limit windows, auth leftovers.
    const maintenance = setInterval(() => {
      void services.rateLimiter.prune();
      void pruneIdempotency(db);
      void services.auth.prune();
    }, 60_000);
    maintenance.unref();
    if (options.worker !== false) worker = await startDeliveryWorker({ databaseUrl: options.databaseUrl, box, config: options.config, log });
    // Long filter lists travel in the URL: allow 64 KiB of request head (Node's default is 16 KiB).
    const server = createServer({ maxHeaderSize: 65_536 }, createRequestListener(services));
    server.on('clientError', answerMalformedRequest);
    server.keepAliveTimeout = 5000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const shownHost = options.host.includes(':') ? `[${options.host}]` : options.host;
    return {
      url: `http://${shownHost}:${port}`,
      port,
      applied,
      close: () => {
        clearInterval(maintenance);
        return closeServer(server, async () => {
          await worker?.stop();
          services.watchedTables.stop();
          await auth!.stop();
          await mailer.close();
          await credentials!.stop();
          await channel.stop();
          await db.close();
        });
      },
    };
  } catch (error) {
    await worker?.stop().catch(() => {});
    await auth?.stop().catch(() => {});
    await mailer.close().catch(() => {});
    await credentials?.stop().catch(() => {});
    await channel.stop();
    await db.close().catch(() => {});
    throw error;
  }
}

export interface WorkerProcessOptions {
  config: Config;
  databaseUrl: string;
  /** SVCGEN_SECRET: must be the one the servers use, or webhook secrets cannot be opened to sign. */
  secret?: string;
  log?: (message: string) => void;
}

/** `svcgen worker`: webhook delivery without the HTTP server, to scale API and delivery apart. */
export async function startWorkerProcess(options: WorkerProcessOptions): Promise<{ stop(): Promise<void> }> {
  const log = options.log ?? ((m: string) => console.error(m));
  const db = openDatabase(options.databaseUrl, { max: 2 });
  try {
    await ensureSystemSchema(db);
    await installDeliveryQueue(options.databaseUrl, log);
    const box = await SecretBox.open(db, options.secret);
    return await startDeliveryWorker({ databaseUrl: options.databaseUrl, box, config: options.config, log });
  } finally {
    await db.close().catch(() => {});
  }
}

/**
 * Requests Node's HTTP parser rejects before any handler runs (a head over the size limit, broken
 * syntax) still get a Problem body that says what to fix.
 */
function answerMalformedRequest(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const status = tooLarge ? 431 : 400;
  const body = JSON.stringify({
    type: tooLarge ? '/errors/request-header-too-large' : '/errors/bad-request',
    title: tooLarge ? 'Request Header Fields Too Large' : 'Bad Request',
    status,
    detail: tooLarge
      ? 'the request line and headers exceed 64 KiB; send long filters in a POST /<table>/_query body'
      : 'the request is not valid HTTP/1.1',
    instance: '',
    errors: [],
  });
  socket.end(
    `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
      `Content-Type: application/problem+json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Stops accepting, lets in-flight requests finish (up to 10 s), then releases the database. */
async function closeServer(server: Server, release: () => Promise<void>): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const force = setTimeout(() => server.closeAllConnections(), 10_000);
  await closed;
  clearTimeout(force);
  await release();
}
