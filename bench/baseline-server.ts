/**
 * The baseline of the benchmark: what a careful developer would write by hand for the benchmarked
 * requests of the shop's Order table, with node:http and pg, no framework. It answers the same
 * requests as svcgen with the same JSON and does the same essential work a real service does:
 *
 * - parses the URL and routes it; checks X-Project-Id; authenticates the API key (SHA-256 digest
 *   looked up in svcgen.api_keys, cached in a Map for 60 s, like svcgen's credential store);
 *   checks the key's project, environment and role;
 * - validates query parameters (paging, sort, the two filters, the one embed, the aggregate's
 *   functions; unknown parameters rejected) and POST bodies (media type, size limit, JSON.parse,
 *   field types);
 * - one parameterised (prepared) SQL statement per request over a pg.Pool of 10 connections,
 *   the same pool settings as svcgen (UTC session time zone, timestamps read as UTC); embeds are
 *   plain joins, aggregates a plain GROUP BY, cursor pages a keyset WHERE;
 * - signs the next-page cursor of a list (HMAC-SHA256) and checks it on the way back, as svcgen does;
 * - builds the records in JavaScript with ISO 8601 timestamps and answers
 *   `{"data": record}`, `{"data": [...], "meta": {"pagination": {...}}}`, 201 + Location,
 *   `{"data": {"aggregates": [...]}}`.
 *
 * When a case is added to ./cases.ts, add its hand-written counterpart here.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
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
const pool = new pg.Pool({
  connectionString: databaseUrl,
  max: 10,
  types: types as pg.CustomTypesConfig,
  options: '-c TimeZone=UTC',
});
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

const ORDER_COLUMNS = `id, status, total, note, "placedAt", "customerId", "invoiceId", "receiptId", "createdAt", "updatedAt"`;

interface OrderRow {
  id: number;
  status: string;
  total: number;
  note: string | null;
  placedAt: Date | null;
  customerId: string;
  invoiceId: string | null;
  receiptId: string | null;
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
    invoiceId: row.invoiceId,
    receiptId: row.receiptId,
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
  const { rows } = await pool.query<OrderRow>({
    name: 'order_by_id',
    text: `SELECT ${ORDER_COLUMNS} FROM env_master."Order" WHERE id = $1`,
    values: [n],
  });
  if (rows.length === 0) throw new HttpError(404, `no Order record with id ${JSON.stringify(id)}`);
  return { status: 200, body: { data: orderRecord(rows[0]!) } };
}

function integerParam(query: URLSearchParams, name: string, fallback: number, max: number): number {
  const raw = query.get(name);
  if (raw === null) return fallback;
  if (!/^\d{1,9}$/.test(raw) || Number(raw) > max)
    throw new HttpError(400, `${name}: must be a whole number from 0 to ${max}`);
  return Number(raw);
}

// Keyset cursors for the next page, signed so clients cannot forge them (svcgen's are too), and
// bound to the order and filter they came from.
const CURSOR_SECRET = randomBytes(32);
const signCursor = (payload: string) => createHmac('sha256', CURSOR_SECRET).update(payload).digest().subarray(0, 16);

function encodeCursor(query: string, values: (string | number)[]): string {
  const payload = Buffer.from(JSON.stringify({ q: query, v: values })).toString('base64url');
  return `${payload}.${signCursor(payload).toString('base64url')}`;
}

function decodeCursor(query: string, cursor: string): unknown[] {
  const bad = () => new HttpError(400, 'after: not a cursor of this query');
  const [payload, signature, extra] = cursor.split('.');
  if (!payload || !signature || extra !== undefined || cursor.length > 4096) throw bad();
  const given = Buffer.from(signature, 'base64url');
  const expected = signCursor(payload);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw bad();
  let parsed: { q?: unknown; v?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (parsed.q !== query || !Array.isArray(parsed.v)) throw bad();
  return parsed.v;
}

/** One prepared statement per distinct SQL text (the list SQL is assembled from fixed fragments). */
const statementNames = new Map<string, string>();
function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) statementNames.set(text, (name = `s${statementNames.size}`));
  return { name, text, values };
}

const ORDER_STATUSES = new Set(['open', 'paid', 'shipped', 'cancelled']);
const NUMBER = /^-?\d{1,15}(\.\d{1,15})?$/;
/** The one embed this service offers: each order with its customer's name and city name. */
const CUSTOMER_CITY_SELECT = 'id,total,customer(name,city(name))';
const LIST_PARAMETERS = new Set(['limit', 'offset', 'after', 'sort', 'status', 'total', 'select']);

interface CustomerCityRow {
  id: number;
  total: number;
  customer_name: string;
  city_id: number | null;
  city_name: string | null;
}

/**
 * GET /Order: `limit`, `offset`, `after` (the cursor of a previous page), `sort` (by id, or
 * `-total`), filters `status=equals.<status>` and `total=gte.<number>`, and `select` for the
 * customer-and-city embed. One statement: the page plus one row to learn whether another follows.
 */
async function listOrders(query: URLSearchParams): Promise<Reply> {
  for (const name of query.keys()) {
    if (!LIST_PARAMETERS.has(name)) throw new HttpError(400, `${name}: unknown query parameter`);
    if (query.getAll(name).length > 1) throw new HttpError(400, `${name}: send it once`);
  }
  const limit = integerParam(query, 'limit', DEFAULT_LIMIT, MAX_LIMIT);
  if (limit < 1) throw new HttpError(400, 'limit: must be at least 1');
  const offset = integerParam(query, 'offset', 0, 1_000_000_000);
  const after = query.get('after');
  if (after !== null && offset > 0) throw new HttpError(400, 'after: a cursor and an offset cannot be combined');

  const sort = query.get('sort');
  if (sort !== null && sort !== '-total' && sort !== 'id')
    throw new HttpError(400, 'sort: orders sort by id or -total');
  const byTotal = sort === '-total';

  const values: unknown[] = [];
  const param = (v: unknown) => `$${values.push(v)}`;
  const where: string[] = [];
  const status = query.get('status');
  if (status !== null) {
    const value = status.startsWith('equals.') ? status.slice(7) : '';
    if (!ORDER_STATUSES.has(value)) throw new HttpError(400, 'status: must be equals.<open|paid|shipped|cancelled>');
    where.push(`o.status = ${param(value)}`);
  }
  const total = query.get('total');
  if (total !== null) {
    const value = total.startsWith('gte.') ? total.slice(4) : '';
    if (!NUMBER.test(value)) throw new HttpError(400, 'total: must be gte.<number>');
    where.push(`o.total >= ${param(Number(value))}`);
  }
  // the cursor is bound to the order and the filter
  const cursorQuery = `orders/${byTotal ? '-total' : 'id'}/${status ?? ''}/${total ?? ''}`;
  if (after !== null) {
    const v = decodeCursor(cursorQuery, after);
    if (byTotal) {
      if (v.length !== 2 || typeof v[0] !== 'number' || typeof v[1] !== 'number')
        throw new HttpError(400, 'after: not a cursor of this query');
      const t = param(v[0]);
      where.push(`(o.total < ${t} OR (o.total = ${t} AND o.id > ${param(v[1])}))`);
    } else {
      if (v.length !== 1 || typeof v[0] !== 'number') throw new HttpError(400, 'after: not a cursor of this query');
      where.push(`o.id > ${param(v[0])}`);
    }
  }
  const whereSql = where.length ? ` WHERE ${where.join(' AND ')}` : '';
  // ties of total are broken by id, ascending (svcgen's order: the primary key last, ascending)
  const orderBy = byTotal ? 'o.total DESC, o.id' : 'o.id';
  const paging = ` LIMIT ${param(limit + 1)} OFFSET ${param(offset)}`;

  const select = query.get('select');
  let records: { id: number; total: number }[];
  if (select === null) {
    const columns = ORDER_COLUMNS.split(', ')
      .map((c) => `o.${c}`)
      .join(', ');
    const { rows } = await pool.query<OrderRow>(
      prepared(`SELECT ${columns} FROM env_master."Order" o${whereSql} ORDER BY ${orderBy}${paging}`, values),
    );
    records = rows.map(orderRecord);
  } else {
    if (select !== CUSTOMER_CITY_SELECT)
      throw new HttpError(400, `select: orders can be read whole or as ${CUSTOMER_CITY_SELECT}`);
    const { rows } = await pool.query<CustomerCityRow>(
      prepared(
        `SELECT o.id, o.total, c.name AS customer_name, ci.id AS city_id, ci.name AS city_name
         FROM (SELECT o.id, o.total, o."customerId" FROM env_master."Order" o${whereSql} ORDER BY ${orderBy}${paging}) o
         JOIN env_master."Customer" c ON c.id = o."customerId"
         LEFT JOIN env_master."City" ci ON ci.id = c."cityId"
         ORDER BY ${orderBy}`,
        values,
      ),
    );
    records = rows.map((r) => ({
      id: r.id,
      total: r.total,
      customer: { name: r.customer_name, city: r.city_id === null ? null : { name: r.city_name } },
    }));
  }
  const hasNextPage = records.length > limit;
  const page = hasNextPage ? records.slice(0, limit) : records;
  const last = page[page.length - 1];
  return {
    status: 200,
    body: {
      data: page,
      meta: {
        pagination: {
          limit,
          offset,
          hasNextPage,
          hasPreviousPage: offset > 0 || after !== null,
          nextCursor:
            hasNextPage && last ? encodeCursor(cursorQuery, byTotal ? [last.total, last.id] : [last.id]) : null,
        },
      },
    },
  };
}

const AGGREGATE_FUNCTIONS: Record<string, string> = {
  count: 'count(*)::int',
  'sum:total': 'sum(o.total)',
  'avg:total': 'avg(o.total)',
  'min:total': 'min(o.total)',
  'max:total': 'max(o.total)',
};
const AGGREGATE_PARAMETERS = new Set(['fn', 'groupBy', 'sort']);

/**
 * GET /Order/_aggregate: `fn` (count, sum/avg/min/max of total), `groupBy=status`, `sort` by an
 * aggregate or the group; groups in the requested order, then by status.
 */
async function aggregateOrders(query: URLSearchParams): Promise<Reply> {
  for (const name of query.keys()) {
    if (!AGGREGATE_PARAMETERS.has(name)) throw new HttpError(400, `${name}: unknown query parameter`);
    if (query.getAll(name).length > 1) throw new HttpError(400, `${name}: send it once`);
  }
  const fns = (query.get('fn') ?? 'count').split(',');
  const aliases: string[] = [];
  const select: string[] = [];
  for (const fn of fns) {
    const expr = AGGREGATE_FUNCTIONS[fn];
    if (expr === undefined || aliases.includes(fn.replace(':', '_')))
      throw new HttpError(400, `fn: "${fn}" must be count or sum|avg|min|max:total, once each`);
    aliases.push(fn.replace(':', '_'));
    select.push(`${expr} AS ${aliases[aliases.length - 1]}`);
  }
  const groupBy = query.get('groupBy');
  if (groupBy !== null && groupBy !== 'status') throw new HttpError(400, 'groupBy: orders group by status');
  const sort = query.get('sort');
  const orderBy: string[] = [];
  if (sort !== null) {
    const name = sort.replace(/^-/, '');
    if (!aliases.includes(name) && name !== groupBy)
      throw new HttpError(400, `sort: sort by an aggregate or the group, not "${name}"`);
    orderBy.push(`${name} ${sort.startsWith('-') ? 'DESC' : 'ASC'}`);
  }
  if (groupBy && sort?.replace(/^-/, '') !== groupBy) orderBy.push('status');
  const text =
    `SELECT ${groupBy ? 'o.status, ' : ''}${select.join(', ')} FROM env_master."Order" o` +
    `${groupBy ? ' GROUP BY o.status' : ''}${orderBy.length ? ` ORDER BY ${orderBy.join(', ')}` : ''}`;
  const { rows } = await pool.query<Record<string, unknown>>(prepared(text, []));
  return { status: 200, body: { data: { aggregates: rows } } };
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
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new HttpError(422, 'the body must be a JSON object');
  const { total, customerId, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest);
  if (unknown.length) throw new HttpError(422, `unknown fields: ${unknown.join(', ')}`);
  if (typeof total !== 'number' || !Number.isFinite(total)) throw new HttpError(422, 'total: a number is required');
  if (typeof customerId !== 'string' || !UUID.test(customerId))
    throw new HttpError(422, 'customerId: a UUID is required');
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
  if (path !== ORDERS_PATH && !path.startsWith(`${ORDERS_PATH}/`))
    throw new HttpError(404, `nothing is served at ${req.method} ${path}`);

  const project = req.headers['x-project-id'];
  if (!project) throw new HttpError(400, 'send the project id in the X-Project-Id header');
  if (project !== PROJECT_ID) throw new HttpError(404, `no project with id "${String(project)}" is served here`);
  const key = await authenticate(req);
  if (!key.roles.includes('admin')) throw new HttpError(403, 'your role may not access Order records');

  if (path === ORDERS_PATH) {
    if (req.method === 'GET') return listOrders(query);
    if (req.method === 'POST') return createOrder(req);
  } else if (path === `${ORDERS_PATH}/_aggregate`) {
    if (req.method === 'GET') return aggregateOrders(query);
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
