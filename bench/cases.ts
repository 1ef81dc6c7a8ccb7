/**
 * The benchmarked requests, one entry each in CASES. To add one (filtered + sorted list, embeds,
 * aggregates, cursor walks, ...):
 *
 *   1. append an entry below: `next()` builds the request each connection sends next (it runs in
 *      the load generator, so keep it cheap), `sample()` one deterministic request used to check
 *      that both servers answer the same thing before anything is measured;
 *   2. implement the same request by hand in ./baseline-server.ts.
 *
 * A case that walks (cursor pagination) sets `sequence` to the number of requests of one walk and
 * keeps its state in `context`: autocannon gives each connection its own context and resets it
 * after the last request of the sequence; `onResponse` (optional) sees every response body. Such
 * a case is checked along one whole sequence: `sample()` first, then `next()`, each server with its
 * own context (so each follows its own cursors).
 *
 * A case that writes sets `writes`: after each of its measurements (and profiles) ./run.ts deletes
 * the orders beyond the seed and vacuums, so every case reads the same 100,000 orders.
 */

/** What the seeded database holds; built by ./database.ts. */
export interface Fixture {
  projectId: string;
  /** an admin API key of environment master */
  apiKey: string;
  /** Order ids of the seed rows (contiguous) */
  orderIds: { min: number; max: number };
  orderCount: number;
  customerIds: string[];
}

export interface BenchRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** path and query, e.g. /gw/api/rest/Order?limit=20 */
  path: string;
  /** sent as JSON */
  body?: unknown;
}

export interface BenchCase {
  /** short id, used in file names: read-one */
  id: string;
  /** the request as a reader sees it: GET /Order/<id> */
  title: string;
  description: string;
  /** every response must have this status (anything else fails the run) */
  status: number;
  /** requests per sequence (default 1); `step` counts from 0 within it */
  sequence?: number;
  next(fixture: Fixture, context: Record<string, unknown>, step: number): BenchRequest;
  onResponse?(status: number, body: string, context: Record<string, unknown>): void;
  /** A deterministic request whose response the two servers must agree on. */
  sample(fixture: Fixture): BenchRequest;
  /** 'exact': equal JSON bodies; 'shape': same status, same keys and value types (writes: ids and times differ). */
  compare: 'exact' | 'shape';
  /** Paths (`meta.pagination.nextCursor`) whose values legitimately differ (signed tokens): compared by type only. */
  opaque?: string[];
  /** The case creates orders: the seed is restored after each of its runs. */
  writes?: boolean;
  /** ./bare-server.ts answers it too: one of the five requests measured against the physical limit of the design. */
  bare?: boolean;
}

import type autocannon from 'autocannon';

/** The headers every benchmarked request sends: the project and the fixture's admin key. */
export function headersFor(fixture: Fixture): Record<string, string> {
  return { 'x-project-id': fixture.projectId, authorization: `Bearer ${fixture.apiKey}` };
}

/** Writes `r` into the request autocannon is about to send (its method, path and JSON body). */
export function fillRequest(req: autocannon.RawRequest, r: BenchRequest): autocannon.RawRequest {
  req.method = r.method;
  req.path = r.path;
  if (r.body !== undefined) {
    req.headers = { ...req.headers, 'content-type': 'application/json' };
    req.body = JSON.stringify(r.body);
  } else {
    req.body = undefined;
  }
  return req;
}

const API = '/gw/api/rest';

function randomInt(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

/** The nextCursor of a list response, without parsing the whole body (the load generator's time counts). */
export function nextCursorOf(body: string): string | undefined {
  const at = body.lastIndexOf('"nextCursor":');
  if (at === -1) return undefined;
  const start = at + '"nextCursor":'.length;
  if (body[start] !== '"') return undefined; // null: the last page
  const end = body.indexOf('"', start + 1);
  return end === -1 ? undefined : body.slice(start + 1, end);
}

/** Pages per cursor walk before a connection starts again from the first page. */
export const WALK_PAGES = Number(process.env.BENCH_WALK_PAGES ?? 20);
export const WALK_PAGE_SIZE = 50;

/** List offsets are drawn from [0, LIST_MAX_OFFSET]: shallow pages, as API clients read them. A
 *  deep OFFSET makes PostgreSQL step over up to 100k index entries, which measures the database,
 *  not the service (see RESULTS.md). */
export const LIST_MAX_OFFSET = Number(process.env.BENCH_LIST_MAX_OFFSET ?? 1000);

export const CASES: BenchCase[] = [
  {
    id: 'read-one',
    bare: true,
    title: 'GET /Order/<id>',
    description: 'one record by primary key, id uniformly random over the 100k seeded orders',
    status: 200,
    next: (f) => ({ method: 'GET', path: `${API}/Order/${randomInt(f.orderIds.min, f.orderIds.max)}` }),
    sample: (f) => ({ method: 'GET', path: `${API}/Order/${f.orderIds.min + 2}` }),
    compare: 'exact',
  },
  {
    id: 'list-20',
    bare: true,
    title: 'GET /Order?limit=20&offset=<n>',
    description: `a page of 20 records in primary-key order, offset uniformly random in [0, ${LIST_MAX_OFFSET}]`,
    status: 200,
    next: () => ({ method: 'GET', path: `${API}/Order?limit=20&offset=${randomInt(0, LIST_MAX_OFFSET)}` }),
    sample: () => ({ method: 'GET', path: `${API}/Order?limit=20&offset=40` }),
    compare: 'exact',
    // signed with each server's own secret
    opaque: ['meta.pagination.nextCursor'],
  },
  {
    id: 'create',
    bare: true,
    title: 'POST /Order',
    description: '{ total, customerId } with a random existing customer; 201 with the record and Location',
    status: 201,
    next: (f) => ({
      method: 'POST',
      path: `${API}/Order`,
      body: { total: randomInt(100, 99_999) / 100, customerId: f.customerIds[randomInt(0, f.customerIds.length - 1)] },
    }),
    sample: (f) => ({ method: 'POST', path: `${API}/Order`, body: { total: 12.5, customerId: f.customerIds[0] } }),
    compare: 'shape',
    writes: true,
  },
  {
    id: 'list-filtered',
    bare: true,
    title: 'GET /Order?status=equals.paid&total=gte.<x>&sort=-total&limit=20',
    description:
      'the 20 largest paid orders of at least x, x uniformly random in [0, 490] in steps of 0.01, whole records; ' +
      "no index on status or total in the example, so both servers' statements scan all 100k orders and sort the matches",
    status: 200,
    next: () => ({
      method: 'GET',
      path: `${API}/Order?status=equals.paid&total=gte.${randomInt(0, 49_000) / 100}&sort=-total&limit=20`,
    }),
    sample: () => ({ method: 'GET', path: `${API}/Order?status=equals.paid&total=gte.123.45&sort=-total&limit=20` }),
    compare: 'exact',
    opaque: ['meta.pagination.nextCursor'],
  },
  {
    id: 'list-embed',
    bare: true,
    title: 'GET /Order?select=id,total,customer(name,city(name))&limit=20&offset=<n>',
    description:
      `a page of 20 orders in primary-key order with their customer's name and the customer's city name (two levels ` +
      `of embedded to-one relations; 1 customer in 20 has no city), offset uniformly random in [0, ${LIST_MAX_OFFSET}]`,
    status: 200,
    next: () => ({
      method: 'GET',
      path: `${API}/Order?select=id,total,customer(name,city(name))&limit=20&offset=${randomInt(0, LIST_MAX_OFFSET)}`,
    }),
    // offset 0: the first customer (every 20th one has no city) is among them
    sample: () => ({ method: 'GET', path: `${API}/Order?select=id,total,customer(name,city(name))&limit=20&offset=0` }),
    compare: 'exact',
    opaque: ['meta.pagination.nextCursor'],
  },
  {
    id: 'aggregate',
    title: 'GET /Order/_aggregate?fn=count,sum:total,avg:total&groupBy=status&sort=-count',
    description: 'count, sum and average of total per status over all 100k orders (4 groups), by count descending',
    status: 200,
    next: () => ({
      method: 'GET',
      path: `${API}/Order/_aggregate?fn=count,sum:total,avg:total&groupBy=status&sort=-count`,
    }),
    sample: () => ({
      method: 'GET',
      path: `${API}/Order/_aggregate?fn=count,sum:total,avg:total&groupBy=status&sort=-count`,
    }),
    compare: 'exact',
  },
  {
    id: 'cursor-walk',
    title: `GET /Order?sort=-total&limit=${WALK_PAGE_SIZE}&after=<cursor>`,
    description:
      `cursor pagination: each connection reads pages of ${WALK_PAGE_SIZE} orders by descending total (ties by ascending id, as svcgen orders them), following ` +
      `nextCursor with after, and starts again from the first page after ${WALK_PAGES} pages (or at the end); requests/s are page ` +
      'fetches. No index on total in the example: every page scans all 100k orders (the cursor is a filter) and keeps the top 51',
    status: 200,
    sequence: WALK_PAGES,
    next: (_f, context, step) => {
      const cursor = step > 0 ? context.cursor : undefined;
      const after = typeof cursor === 'string' ? `&after=${encodeURIComponent(cursor)}` : '';
      return { method: 'GET', path: `${API}/Order?sort=-total&limit=${WALK_PAGE_SIZE}${after}` };
    },
    onResponse: (status, body, context) => {
      context.cursor = status === 200 ? nextCursorOf(body) : undefined;
    },
    sample: () => ({ method: 'GET', path: `${API}/Order?sort=-total&limit=${WALK_PAGE_SIZE}` }),
    compare: 'exact',
    opaque: ['meta.pagination.nextCursor'],
  },
];
