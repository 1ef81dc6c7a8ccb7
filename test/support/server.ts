/**
 * An svcgen server for one test file: the example project's generated code, its own database,
 * real HTTP on a free port. Helpers keep the tests about behaviour, not plumbing.
 */
import path from 'node:path';
import { expect } from 'vitest';
import { loadService } from '../../cli/project.ts';
import { parseConfig, type Config } from '../../runtime/config/index.ts';
import { openDatabase, type Database } from '../../runtime/db/index.ts';
import { createApiKey } from '../../runtime/keys/index.ts';
import { startServer, type RunningServer } from '../../runtime/index.ts';
import type { LoggerOptions } from '../../runtime/observability/index.ts';
import { CodeRegistry, type CodeDefinition } from '../../runtime/usercode/index.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

export const REPO = path.resolve(import.meta.dirname, '../..');
export const SHOP = path.join(REPO, 'examples/shop');
export const MANAGEMENT_TOKEN = 'test-management-token-0123456789';

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

export interface RequestOptions {
  body?: unknown;
  /** Raw body text, sent as is. */
  raw?: string;
  headers?: Record<string, string | undefined>;
  /** API key value (sent as Bearer) or false for no Authorization header. */
  key?: string | false;
  project?: string | false;
  environment?: string;
}

export interface TestServer {
  url: string;
  server: RunningServer;
  database: TestDatabase;
  /** Direct SQL on the test database, for arranging rows and checking what changed. */
  db: Database;
  config: Config;
  adminKey: string;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  createKey(
    roles: string[],
    options?: { environment?: string; context?: Record<string, string>; prefix?: string },
  ): Promise<{ id: string; key: string }>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  configPatch?: (raw: any) => void;
  /**
   * The project's own code for this server (docs/own-code.md): hooks, endpoints and jobs defined
   * inline by the test (typed with examples/shop/generated/code.ts), `'entry'` for the project's
   * code entry as `svcgen serve` loads it, or none (the default), so that the tests of the
   * generated API run without the example's own hooks and jobs.
   */
  code?: CodeDefinition<any> | 'entry';
  project?: string;
  /**
   * Reuse this database (e.g. another test server's `database.url`) instead of creating one: a second
   * server process on the same database. close() then leaves the database alone.
   */
  databaseUrl?: string;
  /** Receives the server's log lines (errors behind 500s among them); default: discarded. */
  log?: (message: string) => void;
  /** The server's structured log (pino), e.g. `{ format: 'json', level: 'info', destination }`; default: none. */
  logging?: LoggerOptions;
  /** Receives the text of every SQL statement the server sends (tests count statements). */
  onQuery?: (text: string) => void;
  /** bcrypt cost of new passwords (default 10, the product's). */
  passwordCost?: number;
  /** Sees each bcrypt job of the server's password hasher (tests count comparisons). */
  onPasswordJob?: (op: 'hash' | 'verify') => void;
  /** SVCGEN_SECRET for this server. */
  secret?: string;
  /** false: no webhook delivery nor code jobs in this server (`serve --no-worker`). */
  worker?: boolean;
}

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const projectDir = options.project ?? SHOP;
  const { service, config: loaded, code: loadedCode } = await loadService(projectDir);
  let config = loaded;
  if (options.configPatch) {
    const raw = JSON.parse(JSON.stringify(loaded));
    options.configPatch(raw);
    config = parseConfig(
      raw,
      'test config',
      Object.fromEntries(Object.values(service.tables).map((t) => [t.spec.name, t.spec.fields.map((f) => f.name)])),
    );
  }
  const database: TestDatabase = options.databaseUrl
    ? { url: options.databaseUrl, name: new URL(options.databaseUrl).pathname.slice(1), drop: async () => {} }
    : await createTestDatabase();
  const code =
    options.code === 'entry'
      ? loadedCode
      : options.code
        ? new CodeRegistry(options.code, Object.keys(service.tables), config.code.schedules)
        : CodeRegistry.EMPTY;
  const server = await startServer({
    projectDir,
    service,
    config,
    code,
    databaseUrl: database.url,
    port: 0,
    host: '127.0.0.1',
    managementToken: MANAGEMENT_TOKEN,
    log: options.log ?? (() => {}),
    logging: options.logging,
    onQuery: options.onQuery,
    passwordCost: options.passwordCost,
    onPasswordJob: options.onPasswordJob,
    secret: options.secret,
    worker: options.worker,
  });
  const db = openDatabase(database.url, { max: 2 });
  const createKey: TestServer['createKey'] = async (roles, o = {}) => {
    const created = await createApiKey(db, {
      projectId: config.project.id,
      environment: o.environment ?? 'master',
      name: 'test',
      prefix: o.prefix ?? 'ApiKey',
      roles,
      context: o.context ?? {},
    });
    return { id: created.id, key: created.key };
  };
  const admin = await createKey(['admin']);
  const request: TestServer['request'] = async (method, p, o = {}) => {
    const headers: Record<string, string> = {};
    if (o.project !== false) headers['x-project-id'] = o.project ?? config.project.id;
    if (o.environment) headers.environment = o.environment;
    if (o.key !== false) headers.authorization = `Bearer ${o.key ?? admin.key}`;
    let body: string | undefined;
    if (o.raw !== undefined) body = o.raw;
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] = 'application/json';
    }
    for (const [k, v] of Object.entries(o.headers ?? {})) {
      if (v === undefined) delete headers[k.toLowerCase()];
      else headers[k.toLowerCase()] = v;
    }
    return readResponse(await fetch(`${server.url}${p}`, { method, headers, body }));
  };
  return {
    url: server.url,
    server,
    database,
    db,
    config,
    adminKey: admin.key,
    request,
    createKey,
    async close() {
      await server.close();
      await db.close();
      await database.drop();
    },
  };
}

/** Status, headers, text and (when it is JSON) the parsed body of a fetch response. */
export async function readResponse(res: Response): Promise<TestResponse> {
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** Asserts a Problem Details response: status, kind, and (optionally) a field named in `errors`. */
export function expectProblem(res: TestResponse, status: number, kind?: string, field?: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toMatchObject({
    status,
    title: expect.any(String),
    detail: expect.any(String),
    instance: expect.any(String),
    errors: expect.any(Array),
  });
  if (kind) expect(res.body.type).toBe(`/errors/${kind}`);
  if (field)
    expect(
      res.body.errors.map((e: { field: string }) => e.field),
      res.text,
    ).toContain(field);
}
