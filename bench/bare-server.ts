/**
 * The bare baseline: the physical limit of svcgen's design for the five core requests, not a
 * service anyone should run. node:http + pg, the record JSON built by PostgreSQL (as svcgen builds
 * it), one prepared statement per request over a pool of 10, and nothing else: no API key lookup,
 * no X-Project-Id, no validation beyond what routing needs, no rate limit, no request log, no
 * extra headers. Whatever svcgen spends beyond this is the price of being a service.
 *
 * It answers exactly what svcgen answers (bench/run.ts compares the bodies) for
 *   GET /Order/<id>, GET /Order?limit&offset, GET /Order?status=equals.&total=gte.&sort=-total&limit,
 *   GET /Order?select=id,total,customer(name,city(name))&limit&offset, POST /Order.
 * The next-page cursor is the last key in plain base64url (svcgen's is signed; the bench compares
 * cursors by type only).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { runChild } from './child-harness.ts';

const databaseUrl = process.env.BENCH_DATABASE_URL;
if (!databaseUrl) throw new Error('BENCH_DATABASE_URL is not set');

const ORDERS_PATH = '/gw/api/rest/Order';
const pool = new pg.Pool({ connectionString: databaseUrl, max: 10, options: '-c TimeZone=UTC' });
pool.on('error', () => {});

const iso = (column: string) => `to_char(${column}, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const ORDER_JSON =
  `json_build_object('id', o.id, 'status', o.status, 'total', o.total, 'note', o.note, 'placedAt', ${iso('o."placedAt"')}, ` +
  `'customerId', o."customerId", 'invoiceId', o."invoiceId", 'receiptId', o."receiptId", 'createdAt', ${iso('o."createdAt"')}, 'updatedAt', ${iso('o."updatedAt"')})::text`;
const EMBED_JSON =
  `json_build_object('id', o.id, 'total', o.total, 'customer', json_build_object('name', c.name, ` +
  `'city', CASE WHEN ci.id IS NULL THEN NULL ELSE json_build_object('name', ci.name) END))::text`;

const statements = new Map<string, string>();
async function rows(text: string, values: unknown[]): Promise<unknown[][]> {
  let name = statements.get(text);
  if (name === undefined) statements.set(text, (name = `b${statements.size}`));
  return (await pool.query({ name, text, values, rowMode: 'array' })).rows as unknown[][];
}

function send(res: ServerResponse, status: number, body: string, location?: string): void {
  res.writeHead(
    status,
    location
      ? { 'content-type': 'application/json; charset=utf-8', location }
      : { 'content-type': 'application/json; charset=utf-8' },
  );
  res.end(body);
}

async function list(res: ServerResponse, query: URLSearchParams): Promise<void> {
  const limit = Number(query.get('limit') ?? 100);
  const offset = Number(query.get('offset') ?? 0);
  const values: unknown[] = [];
  const where: string[] = [];
  const status = query.get('status');
  if (status !== null) where.push(`o.status = $${values.push(status.slice('equals.'.length))}`);
  const total = query.get('total');
  if (total !== null) where.push(`o.total >= $${values.push(Number(total.slice('gte.'.length)))}`);
  const byTotal = query.get('sort') === '-total';
  const orderBy = byTotal ? 'o.total DESC, o.id' : 'o.id';
  const whereSql = where.length ? ` WHERE ${where.join(' AND ')}` : '';
  const paging = `LIMIT $${values.push(limit + 1)} OFFSET $${values.push(offset)}`;
  const sql = query.has('select')
    ? `SELECT ${EMBED_JSON}, o.id FROM (SELECT o.id, o.total, o."customerId" FROM env_master."Order" o${whereSql} ORDER BY ${orderBy} ${paging}) o ` +
      `JOIN env_master."Customer" c ON c.id = o."customerId" LEFT JOIN env_master."City" ci ON ci.id = c."cityId" ORDER BY ${orderBy}`
    : `SELECT ${ORDER_JSON}, o.total, o.id FROM (SELECT * FROM env_master."Order" o${whereSql} ORDER BY ${orderBy} ${paging}) o ORDER BY ${orderBy}`;
  const found = await rows(sql, values);
  const hasNextPage = found.length > limit;
  const page = hasNextPage ? found.slice(0, limit) : found;
  const last = page[page.length - 1];
  const key = last ? (byTotal ? [last[1], last[2]] : [last[last.length - 1]]) : [];
  const nextCursor = hasNextPage ? Buffer.from(JSON.stringify(key)).toString('base64url') : null;
  send(
    res,
    200,
    `{"data":[${page.map((r) => r[0] as string).join(',')}],"meta":{"pagination":${JSON.stringify({ limit, offset, hasNextPage, hasPreviousPage: offset > 0, nextCursor })}}}`,
  );
}

async function readOne(res: ServerResponse, id: string): Promise<void> {
  const found = await rows(`SELECT ${ORDER_JSON} FROM env_master."Order" o WHERE o.id = $1`, [Number(id)]);
  if (found.length === 0) send(res, 404, '{"status":404}');
  else send(res, 200, `{"data":${found[0]![0] as string}}`);
}

async function create(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { total: number; customerId: string };
  const [row] = await rows(
    `INSERT INTO env_master."Order" AS o (total, "customerId", "updatedAt") VALUES ($1, $2, now()) RETURNING ${ORDER_JSON}, o.id`,
    [body.total, body.customerId],
  );
  send(res, 201, `{"data":${row![0] as string}}`, `${ORDERS_PATH}/${row![1] as number}`);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  let work: Promise<void>;
  if (path === ORDERS_PATH)
    work = req.method === 'POST' ? create(req, res) : list(res, new URLSearchParams(q === -1 ? '' : url.slice(q + 1)));
  else if (path.startsWith(`${ORDERS_PATH}/`)) work = readOne(res, path.slice(ORDERS_PATH.length + 1));
  else work = Promise.resolve(send(res, 404, '{"status":404}'));
  work.catch((error: unknown) => {
    console.error('[bare]', error);
    send(res, 500, '{"status":500}');
  });
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
