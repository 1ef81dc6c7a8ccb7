/**
 * The baseline of the benchmark: what a careful developer would write by hand for the benchmarked
 * requests of the shop's Order table, with node:http and pg, no framework. It answers the same
 * requests as svcgen with the same JSON and does the same essential work a real service does:
 *
 * - parses the URL and routes it; checks X-Project-Id; authenticates the API key (SHA-256 digest
 *   looked up in svcgen.api_keys, cached in a Map for 60 s, like svcgen's credential store);
 *   checks the key's project, environment and role;
 * - validates query parameters (limit/offset, unknown parameters rejected) and POST bodies
 *   (media type, size limit, JSON.parse, field types);
 * - one parameterised (prepared) SQL statement per request over a pg.Pool of 10 connections,
 *   the same pool settings as svcgen (UTC session time zone, timestamps read as UTC);
 * - signs the next-page cursor of a list (HMAC-SHA256), as svcgen does;
 * - builds the records in JavaScript with ISO 8601 timestamps and answers
 *   `{"data": record}`, `{"data": [...], "meta": {"pagination": {...}}}`, 201 + Location.
 *
 * When a case is added to ./cases.ts, add its hand-written counterpart here.
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { runChild } from './child-harness.ts';

const databaseUrl = process.env.BENCH_DATABASE_URL;
if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set');

const PROJECT_ID = 'shop';
const ENVIRONMENT = 'master';
const ORDERS_PATH = '/gw/api/rest/Order';
const BODY_LIMIT = 1024 * 1024;
const KEY_TTL_MS = 60_000;
const MAX_LIMIT = 1000;
const DEFAULT_LIMIT = 100;

// timestamp(3) columns hold UTC: read them as UTC, as svcgen does.
const TIMESTAMP_OID = 1114;
const types = {
  getTypeParser(oid: number, format?: string) {
    if (oid === TIMESTAMP_OID) return (value: string) => new Date(`${value.replace(' ', 'T')}Z`);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10, types: types as pg.CustomTypesConfig, options: '-c TimeZone=UTC' });
pool.on('error', () => {});

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

// ---- authentication -------------------------------------------------------------------------

interface Key {
  roles: string[];
  expiresAt: number;
}
const keys = new Map<string, Key>();

async function authenticate(req: IncomingMessage): Promise<Key> {
  const value = req.headers.authorization;
  const match = value ? /^Bearer +(\S+)$/i.exec(value) : null;
  if (!match) throw new HttpError(401, 'send "Authorization: Bearer <API key>"');
  const hash = createHash('sha256').update(match[1]!).digest('hex');
  const now = Date.now();
  let key = keys.get(hash);
  if (!key || key.expiresAt < now) {
    const { rows } = await pool.query<{ roles: string[] }>({
      name: 'api_key_by_hash',
      text: 'SELECT roles FROM svcgen.api_keys WHERE key_hash = $1 AND project_id = $2 AND environment = $3 AND revoked_at IS NULL',
      values: [hash, PROJECT_ID, ENVIRONMENT],
    });
    if (rows.length === 0) throw new HttpError(401, 'unknown or revoked API key');
    key = { roles: rows[0]!.roles, expiresAt: now + KEY_TTL_MS };
    keys.set(hash, key);
  }
  return key;
}

// ---- records ----------------------------------------------------------------------------------

const ORDER_COLUMNS = `id, status, total, note, "placedAt", "customerId", "createdAt", "updatedAt"`;

interface OrderRow {
  id: number;
  status: string;
  total: number;
  note: string | null;
  placedAt: Date | null;
  customerId: string;
  createdAt: Date;
  updatedAt: Date;
}

function orderRecord(row: OrderRow) {
  return {
    id: row.id,
    status: row.status,
    total: row.total,
    note: row.note,
    placedAt: row.placedAt ? row.placedAt.toISOString() : null,
    customerId: row.customerId,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

// ---- handlers ---------------------------------------------------------------------------------

interface Reply {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

async function readOrder(id: string): Promise<Reply> {
  const n = /^\d{1,10}$/.test(id) ? Number(id) : NaN;
  if (!(n <= 2147483647)) throw new HttpError(404, `no Order record with id ${JSON.stringify(id)}`);
  const { rows } = await pool.query<OrderRow>({ name: 'order_by_id', text: `SELECT ${ORDER_COLUMNS} FROM env_master."Order" WHERE id = $1`, values: [n] });
  if (rows.length === 0) throw new HttpError(404, `no Order record with id ${JSON.stringify(id)}`);
  return { status: 200, body: { data: orderRecord(rows[0]!) } };
}

function integerParam(query: URLSearchParams, name: string, fallback: number, max: number): number {
  const raw = query.get(name);
  if (raw === null) return fallback;
  if (!/^\d{1,9}$/.test(raw) || Number(raw) > max) throw new HttpError(400, `${name}: must be a whole number from 0 to ${max}`);
  return Number(raw);
}

// Keyset cursors for the next page, signed so clients cannot forge them (svcgen's are too).
const CURSOR_SECRET = randomBytes(32);
function nextCursor(lastId: number): string {
  const payload = Buffer.from(JSON.stringify({ q: 'orders-by-id', v: [String(lastId)] })).toString('base64url');
  return `${payload}.${createHmac('sha256', CURSOR_SECRET).update(payload).digest().subarray(0, 16).toString('base64url')}`;
}

async function listOrders(query: URLSearchParams): Promise<Reply> {
  for (const name of query.keys()) if (name !== 'limit' && name !== 'offset') throw new HttpError(400, `${name}: unknown query parameter`);
  const limit = integerParam(query, 'limit', DEFAULT_LIMIT, MAX_LIMIT);
  const offset = integerParam(query, 'offset', 0, 1_000_000_000);
  const { rows } = await pool.query<OrderRow>({
    name: 'orders_page',
    text: `SELECT ${ORDER_COLUMNS} FROM env_master."Order" ORDER BY id LIMIT $1 OFFSET $2`,
    values: [limit + 1, offset],
  });
  const hasNextPage = rows.length > limit;
  const page = hasNextPage ? rows.slice(0, limit) : rows;
  return {
    status: 200,
    body: {
      data: page.map(orderRecord),
      meta: {
        pagination: {
          limit,
          offset,
          hasNextPage,
          hasPreviousPage: offset > 0,
          nextCursor: hasNextPage ? nextCursor(page[page.length - 1]!.id) : null,
        },
      },
    },
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > BODY_LIMIT) {
        req.removeAllListeners('data');
        req.resume();
        reject(new HttpError(413, 'the request body is too large'));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks, size).toString('utf8')));
    req.on('error', reject);
  });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function createOrder(req: IncomingMessage): Promise<Reply> {
  const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (contentType !== 'application/json') throw new HttpError(415, 'send the body with Content-Type application/json');
  let body: unknown;
  try {
    body = JSON.parse(await readBody(req));
  } catch (error) {
    if (error instanceof HttpError) throw error;
    throw new HttpError(400, 'the body is not valid JSON');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new HttpError(422, 'the body must be a JSON object');
  const { total, customerId, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length) throw new HttpError(422, `unknown fields: ${unknown.join(', ')}`);
  if (typeof total !== 'number' || !Number.isFinite(total)) throw new HttpError(422, 'total: a number is required');
  if (typeof customerId !== 'string' || !UUID.test(customerId)) throw new HttpError(422, 'customerId: a UUID is required');
  let rows: OrderRow[];
  try {
    ({ rows } = await pool.query<OrderRow>({
      name: 'order_insert',
      text: `INSERT INTO env_master."Order" (total, "customerId", "updatedAt") VALUES ($1, $2, now()) RETURNING ${ORDER_COLUMNS}`,
      values: [total, customerId],
    }));
  } catch (error) {
    if ((error as { code?: string }).code === '23503') throw new HttpError(422, 'customerId: no such Customer');
    throw error;
  }
  const record = orderRecord(rows[0]!);
  return { status: 201, body: { data: record }, headers: { location: `${ORDERS_PATH}/${record.id}` } };
}

async function route(req: IncomingMessage): Promise<Reply> {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = new URLSearchParams(q === -1 ? '' : url.slice(q + 1));
  if (path !== ORDERS_PATH && !path.startsWith(`${ORDERS_PATH}/`)) throw new HttpError(404, `nothing is served at ${req.method} ${path}`);

  const project = req.headers['x-project-id'];
  if (!project) throw new HttpError(400, 'send the project id in the X-Project-Id header');
  if (project !== PROJECT_ID) throw new HttpError(404, `no project with id "${String(project)}" is served here`);
  const key = await authenticate(req);
  if (!key.roles.includes('admin')) throw new HttpError(403, 'your role may not access Order records');

  if (path === ORDERS_PATH) {
    if (req.method === 'GET') return listOrders(query);
    if (req.method === 'POST') return createOrder(req);
  } else {
    const id = decodeURIComponent(path.slice(ORDERS_PATH.length + 1));
    if (req.method === 'GET' && !id.includes('/')) return readOrder(id);
  }
  throw new HttpError(405, `${req.method} is not available on this path`);
}

function send(res: ServerResponse, reply: Reply, contentType = 'application/json; charset=utf-8'): void {
  res.writeHead(reply.status, { 'content-type': contentType, ...reply.headers });
  res.end(JSON.stringify(reply.body));
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  route(req).then(
    (reply) => send(res, reply),
    (error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      if (!(error instanceof HttpError)) console.error('[baseline]', error);
      const detail = error instanceof HttpError ? error.message : 'internal error';
      send(res, { status, body: { status, detail, instance: req.url } }, 'application/problem+json');
    },
  );
}

await runChild(async () => {
  const server = createServer(handle);
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
      await pool.end();
    },
  };
});
