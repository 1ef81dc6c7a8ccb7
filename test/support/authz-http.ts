/**
 * test/query/authorization-differential.test.ts on the wire: requests of the generators as HTTP (query
 * strings, `_query` bodies, write bodies), answers normalised for comparison with the reference
 * model, and the database read and written with plain SQL.
 */
import type { Database } from '../../runtime/db/index.ts';
import { SCHEMA, sortDb, TABLES, type Db, type Row } from './authz-schema.ts';
import type { Principal } from './reference-policy.ts';
import { CURSOR, type Cond, type Expected, type ReadReq, type SelectItem, type SortTerm } from './reference-read.ts';
import type { WriteReq } from './reference-write.ts';
import type { TestResponse } from './server.ts';

export const BASE = '/gw/api/rest';
export interface HttpCall {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}
export type Send = (p: Principal, call: HttpCall) => Promise<TestResponse>;

// ------------------------------------------------------------------------------------------------
// rendering

function scalar(v: unknown, inGroup: boolean): string {
  if (v === null) return 'null';
  const s = String(v);
  const needsQuotes =
    s === 'null' ||
    s === '' ||
    /[,();"\\]/.test(s) ||
    (inGroup && typeof v === 'string' && s.includes('.') && !/^\d{4}-\d\d-\d\dT/.test(s));
  return needsQuotes ? `"${s.replace(/[\\"]/g, (c) => `\\${c}`)}"` : s;
}

function operand(op: string, value: unknown, inGroup: boolean): string {
  if (op === 'in' || op === 'not_in') return `(${(value as unknown[]).map((v) => scalar(v, true)).join(',')})`;
  if (op === 'between') {
    const [lo, hi] = value as unknown[];
    return inGroup ? `(${scalar(lo, true)},${scalar(hi, true)})` : `${scalar(lo, true)},${scalar(hi, true)}`;
  }
  return scalar(value, inGroup);
}

function member(c: Cond): string {
  if (c.kind === 'leaf') return `${c.path.join('.')}.${c.op}.${operand(c.op, c.value, true)}`;
  return `${c.kind}(${c.items.map(member).join(',')})`;
}

export function filterParams(filters: Cond[]): [string, string][] {
  return filters.map((c) =>
    c.kind === 'leaf'
      ? [`${c.col ? 'col.' : ''}${c.path.join('.')}`, `${c.op}.${operand(c.op, c.value, false)}`]
      : [c.kind, `(${c.items.map(member).join(',')})`],
  );
}

const sortText = (sort: SortTerm[]) =>
  sort.map((s) => (s.suffix ? `${s.field}.${s.desc ? 'desc' : 'asc'}` : s.desc ? `-${s.field}` : s.field)).join(',');
const sortJson = (sort: SortTerm[]) =>
  sort.map((s) => ({ field: s.field, direction: s.suffix ? (s.desc ? 'DESC' : 'ASC') : s.desc ? 'desc' : 'asc' }));
const filterJson = (filters: Cond[]) =>
  filters.map((c) => ({
    field: (c as { path: string[] }).path.join('.'),
    operator: (c as { op: string }).op,
    value: (c as { value: unknown }).value,
  }));

/** An embed's own terms after its fields: `;name=value` as in a query string (docs/api.md §5.7). */
function embedTerms(it: SelectItem & { kind: 'embed' }): string {
  const terms = filterParams(it.filters ?? []);
  if (it.sort?.length) terms.push(['sort', sortText(it.sort)]);
  if (it.limit !== undefined) terms.push(['limit', String(it.limit)]);
  if (it.offset !== undefined) terms.push(['offset', String(it.offset)]);
  return terms.map(([k, v]) => `;${k}=${v}`).join('');
}

export function selectText(items: SelectItem[]): string {
  return items
    .map((it) =>
      it.kind === 'star'
        ? '*'
        : it.kind === 'field'
          ? it.alias
            ? `${it.name}:${it.alias}`
            : it.name
          : `${it.relation}${it.alias ? `:${it.alias}` : ''}(${selectText(it.items)}${embedTerms(it)})`,
    )
    .join(',');
}

function selectJson(items: SelectItem[]): unknown[] {
  return items.map((it) => {
    if (it.kind === 'star') return { field: '*' };
    if (it.kind === 'field') return { field: it.name, ...(it.alias ? { alias: it.alias } : {}) };
    const pagination = {
      ...(it.limit !== undefined ? { first: it.limit } : {}),
      ...(it.offset !== undefined ? { skip: it.offset } : {}),
    };
    return {
      field: it.relation,
      ...(it.alias ? { alias: it.alias } : {}),
      children: selectJson(it.items),
      ...(it.filters?.length ? { filter: filterJson(it.filters) } : {}),
      ...(it.sort?.length ? { sort: sortJson(it.sort) } : {}),
      ...(Object.keys(pagination).length ? { pagination } : {}),
    };
  });
}

const query = (params: [string, string][]) =>
  params.length ? `?${params.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}` : '';

/** The HTTP call of a read; for walks, of the page after `after` (null: the first page). */
export function renderRead(req: ReadReq, after: string | null = null): HttpCall {
  if (req.kind === 'get')
    return {
      method: 'GET',
      path: `${BASE}/${req.table}/${encodeURIComponent(String(req.id))}${query(req.select ? [['select', selectText(req.select)]] : [])}`,
    };
  if (req.kind === 'aggregate') {
    const params = filterParams(req.filters);
    if (req.fns.length) params.push(['fn', req.fns.map((f) => (f.field ? `${f.fn}:${f.field}` : f.fn)).join(',')]);
    if (req.groupBy.length) params.push(['groupBy', req.groupBy.join(',')]);
    if (req.having.length) params.push(['having', req.having.map((h) => `${h.alias}.${h.op}.${h.value}`).join(',')]);
    if (req.sort.length) params.push(['sort', req.sort.map((s) => (s.desc ? `-${s.key}` : s.key)).join(',')]);
    if (req.limit) params.push(['limit', String(req.limit)]);
    return { method: 'GET', path: `${BASE}/${req.table}/_aggregate${query(params)}` };
  }
  const headers = req.count ? { prefer: 'count=exact' } : undefined;
  const limit = req.walk ?? req.limit;
  if (req.via === 'query') {
    const body: Record<string, unknown> = {};
    if (req.filters.length) body.filter = filterJson(req.filters);
    if (req.sort.length) body.sort = sortJson(req.sort);
    const pagination = {
      ...(limit ? { first: limit } : {}),
      ...(req.offset ? { skip: req.offset } : {}),
      ...(after ? { after } : {}),
    };
    if (Object.keys(pagination).length) body.pagination = pagination;
    if (req.select) body.select = selectJson(req.select);
    return { method: 'POST', path: `${BASE}/${req.table}/_query`, body, headers };
  }
  const params = filterParams(req.filters);
  if (req.sort.length) params.push(['sort', sortText(req.sort)]);
  if (req.select) params.push(['select', selectText(req.select)]);
  if (limit) params.push(['limit', String(limit)]);
  if (req.offset) params.push(['offset', String(req.offset)]);
  if (after) params.push(['after', after]);
  return { method: 'GET', path: `${BASE}/${req.table}${query(params)}`, headers };
}

export function renderWrite(req: WriteReq): HttpCall {
  const path = `${BASE}/${req.table}`;
  switch (req.kind) {
    case 'create':
      return { method: 'POST', path, body: req.body };
    case 'patch':
      return { method: 'PATCH', path: `${path}/${encodeURIComponent(String(req.id))}`, body: req.body };
    case 'patchWhere':
      return { method: 'PATCH', path: `${path}${query(filterParams(req.filters))}`, body: req.body };
    case 'delete':
      return { method: 'DELETE', path: `${path}/${encodeURIComponent(String(req.id))}` };
    case 'bulkCreate':
    case 'bulkDelete': {
      const inQuery = req.modeVia === 'query' && req.mode;
      const payload =
        req.kind === 'bulkCreate' ? { items: req.items } : req.ids ? { ids: req.ids } : { filters: req.filters };
      return {
        method: req.kind === 'bulkCreate' ? 'POST' : 'DELETE',
        path: `${path}/_bulk${inQuery ? `?mode=${req.mode}` : ''}`,
        body: { ...payload, ...(req.mode && !inQuery ? { transactionMode: req.mode } : {}) },
      };
    }
  }
}

/** A read's answer as one object; a walk follows nextCursor to the end and concatenates the pages. */
export async function performRead(
  send: Send,
  p: Principal,
  req: ReadReq,
): Promise<{ status: number; body: unknown; raw: string }> {
  if (req.kind !== 'list' || !req.walk) {
    const res = await send(p, renderRead(req));
    return { status: res.status, body: res.body, raw: res.text };
  }
  const data: unknown[] = [];
  const pages: unknown[] = [];
  let after: string | null = null;
  for (let i = 0; i < 200; i++) {
    const res = await send(p, renderRead(req, after));
    if (res.status !== 200) return { status: res.status, body: res.body, raw: `page ${i + 1}: ${res.text}` };
    data.push(...res.body.data);
    pages.push(res.body.meta.pagination);
    after = res.body.meta.pagination.nextCursor;
    if (!after) return { status: 200, body: { data, pages }, raw: '' };
  }
  return { status: 599, body: { error: 'the cursor walk did not end' }, raw: '' };
}

// ------------------------------------------------------------------------------------------------
// comparison

/** Keys sorted, arrays of objects (embedded to-many records: docs/api.md gives no order) sorted, cursors as present/absent. */
function canon(x: unknown): unknown {
  if (Array.isArray(x)) {
    const items = x.map(canon);
    return items.length && items.every((v) => v && typeof v === 'object' && !Array.isArray(v))
      ? items.sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1))
      : items;
  }
  if (x && typeof x === 'object') {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(x).sort()) {
      const v = (x as Record<string, unknown>)[k];
      out[k] = k === 'nextCursor' && typeof v === 'string' ? CURSOR : canon(v);
    }
    return out;
  }
  return x;
}

/** An answer body for comparison: the order of list rows, aggregate rows, pages and bulk items kept; bulk error messages dropped. */
export function normalize(body: unknown): unknown {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return canon(body);
  const b = body as Record<string, any>;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(b).sort()) out[k] = canon(b[k]);
  if (Array.isArray(b.data)) out.data = b.data.map(canon);
  if (Array.isArray(b.pages)) out.pages = b.pages.map(canon);
  if (b.data && typeof b.data === 'object' && Array.isArray(b.data.aggregates))
    out.data = { aggregates: b.data.aggregates.map(canon) };
  if (b.data && typeof b.data === 'object' && 'transactionMode' in b.data) {
    const d = canon(b.data) as Record<string, unknown>;
    d.items = (b.data.items ?? []).map(canon);
    d.errors = (b.data.errors ?? []).map((e: { index: number }) => ({ index: e.index }));
    out.data = d;
  }
  return out;
}

/** Deep equality, numbers within a relative 1e-6 (sums and averages of floats depend on the order of the rows). */
export function close(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number')
    return Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(a), Math.abs(b));
  if (Array.isArray(a) || Array.isArray(b))
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => close(x, b[i]));
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return (
      ka.length === kb.length &&
      ka.every(
        (k) => Object.hasOwn(b, k) && close((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]),
      )
    );
  }
  return a === b;
}

function differs(e: Expected, status: number, body: any): string | null {
  if (status !== e.status) return `status ${status}, expected ${e.status}`;
  if (e.type) {
    if (body?.type !== e.type) return `type ${body?.type}, expected ${e.type}`;
    const errors: { field?: string; rule?: string }[] = Array.isArray(body?.errors) ? body.errors : [];
    for (const rule of e.rules ?? []) if (!errors.some((x) => x.rule === rule)) return `no errors[].rule ${rule}`;
    if (e.rules?.includes('forbidden_field')) {
      for (const f of e.params ?? [])
        if (!errors.some((x) => x.field === f)) return `forbidden_field does not name ${f}`;
    } else if (
      e.params?.length &&
      !errors.some((x) =>
        e.params!.some((p) => x.field === p || x.field?.startsWith(`${p}[`) || x.field?.startsWith(`${p}.`)),
      )
    ) {
      return `errors[].field names none of ${e.params.join(', ')}`;
    }
  }
  if (e.body !== undefined && !close(normalize(e.body), normalize(e.type ? { data: body?.data } : body)))
    return 'body differs';
  return null;
}

/** Why the answer is not the expected one (or any of its alternatives), or null. */
export function mismatch(e: Expected, status: number, body: unknown): string | null {
  const first = differs(e, status, body);
  if (first === null) return null;
  for (const alt of e.alternatives ?? []) if (differs(alt, status, body) === null) return null;
  return first;
}

// ------------------------------------------------------------------------------------------------
// the database

const ISO = (col: string) => `to_char("${col}", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as "${col}"`;

export async function loadDb(db: Database): Promise<Db> {
  const out = {} as Db;
  for (const t of TABLES) {
    const cols = Object.entries(SCHEMA[t].fields).map(([f, s]) =>
      s.type === 'datetime'
        ? ISO(f)
        : s.type === 'enum'
          ? `"${f}"::text as "${f}"`
          : s.type === 'uuid'
            ? `"${f}"::text as "${f}"`
            : `"${f}"`,
    );
    const rows = await db.query<Row>(`select ${cols.join(', ')} from env_master."${t}"`);
    for (const r of rows) if (r.price !== undefined && r.price !== null) r.price = Number(r.price);
    out[t] = rows;
  }
  return sortDb(out);
}

/** Replaces every row of the example tables with `state` (explicit timestamps) and moves the sequences past the ids. */
export async function writeDb(db: Database, state: Db): Promise<void> {
  await db.transaction(async (tx) => {
    await tx.query(
      `truncate env_master."OrderItem", env_master."Order", env_master."Product", env_master."Customer", env_master."City"`,
    );
    for (const t of TABLES) {
      const fields = Object.keys(SCHEMA[t].fields);
      for (let i = 0; i < state[t].length; i += 200) {
        const values: unknown[] = [];
        const tuples = state[t]
          .slice(i, i + 200)
          .map((row) => `(${fields.map((f) => (values.push(row[f] ?? null), `$${values.length}`)).join(', ')})`);
        await tx.query(
          `insert into env_master."${t}" (${fields.map((f) => `"${f}"`).join(', ')}) values ${tuples.join(', ')}`,
          values,
        );
      }
      if (SCHEMA[t].serial)
        await tx.query(
          `select setval(pg_get_serial_sequence('env_master."${t}"', 'id'), greatest(1000, (select coalesce(max(id), 0) from env_master."${t}")))`,
        );
    }
  });
}
