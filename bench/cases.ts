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
 * after the last request of the sequence; `onResponse` (optional) sees every response body.
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
}

const API = '/gw/api/rest';

function randomInt(min: number, max: number): number {
  return min + Math.floor(Math.random() * (max - min + 1));
}

/** List offsets are drawn from [0, LIST_MAX_OFFSET]: shallow pages, as API clients read them. A
 *  deep OFFSET makes PostgreSQL step over up to 100k index entries, which measures the database,
 *  not the service (see RESULTS.md). */
export const LIST_MAX_OFFSET = Number(process.env.BENCH_LIST_MAX_OFFSET ?? 1000);

export const CASES: BenchCase[] = [
  {
    id: 'read-one',
    title: 'GET /Order/<id>',
    description: 'one record by primary key, id uniformly random over the 100k seeded orders',
    status: 200,
    next: (f) => ({ method: 'GET', path: `${API}/Order/${randomInt(f.orderIds.min, f.orderIds.max)}` }),
    sample: (f) => ({ method: 'GET', path: `${API}/Order/${f.orderIds.min + 2}` }),
    compare: 'exact',
  },
  {
    id: 'list-20',
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
  },
];
