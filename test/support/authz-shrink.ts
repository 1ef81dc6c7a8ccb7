/**
 * Shrinking for test/query/authorization-differential.test.ts: smaller variants of a request (filter terms
 * dropped, groups flattened, select items, embeds and sort terms dropped, pagination and bulk items
 * removed), tried greedily until none still shows the difference; and, for reads, smaller datasets.
 */
import { FOREIGN_KEYS, keyOf, type Db, type Row, type Table } from './authz-schema.ts';
import type { Cond, ReadReq, SelectItem } from './reference-read.ts';
import type { WriteReq } from './reference-write.ts';

type Req = ReadReq | WriteReq;

function without<T>(xs: T[], i: number): T[] {
  return [...xs.slice(0, i), ...xs.slice(i + 1)];
}
function replaced<T>(xs: T[], i: number, x: T): T[] {
  return [...xs.slice(0, i), x, ...xs.slice(i + 1)];
}

function condVariants(c: Cond): Cond[] {
  if (c.kind === 'leaf') {
    if ((c.op === 'in' || c.op === 'not_in') && (c.value as unknown[]).length > 1)
      return (c.value as unknown[]).map((_v, i) => ({ ...c, value: without(c.value as unknown[], i) }));
    return [];
  }
  const out: Cond[] = [...c.items];
  if (c.items.length > 1) c.items.forEach((_x, i) => out.push({ ...c, items: without(c.items, i) }));
  c.items.forEach((x, i) => condVariants(x).forEach((v) => out.push({ ...c, items: replaced(c.items, i, v) })));
  return out;
}

function filterVariants(filters: Cond[], keepOne: boolean): Cond[][] {
  const out: Cond[][] = [];
  if (!keepOne || filters.length > 1) filters.forEach((_c, i) => out.push(without(filters, i)));
  filters.forEach((c, i) => {
    for (const v of condVariants(c)) {
      // a leaf out of a group becomes a top-level parameter: only one per name
      const clash =
        v.kind === 'leaf'
          ? filters.some((f, j) => j !== i && f.kind === 'leaf' && f.path.join('.') === v.path.join('.'))
          : filters.some((f, j) => j !== i && f.kind === v.kind);
      if (!clash) out.push(replaced(filters, i, v.kind === 'leaf' ? { ...v, col: undefined } : v));
    }
  });
  return out;
}

function selectVariants(items: SelectItem[]): SelectItem[][] {
  const out: SelectItem[][] = [];
  if (items.length > 1) items.forEach((_x, i) => out.push(without(items, i)));
  items.forEach((it, i) => {
    if (it.kind === 'embed') {
      for (const v of selectVariants(it.items)) out.push(replaced(items, i, { ...it, items: v }));
      if (it.alias) out.push(replaced(items, i, { ...it, alias: undefined }));
      for (const key of ['filters', 'sort', 'limit', 'offset'] as const)
        if (it[key] !== undefined) out.push(replaced(items, i, { ...it, [key]: undefined }));
      if (it.filters && it.filters.length > 1)
        it.filters.forEach((_c, j) => out.push(replaced(items, i, { ...it, filters: without(it.filters!, j) })));
    }
    if (
      it.kind === 'field' &&
      it.alias &&
      !items.some((x, j) => j !== i && x.kind === 'field' && (x.alias ?? x.name) === it.name)
    )
      out.push(replaced(items, i, { kind: 'field', name: it.name }));
  });
  return out;
}

/** Smaller variants of a request, the most drastic first. */
export function shrinkCandidates(req: Req): Req[] {
  const out: Req[] = [];
  switch (req.kind) {
    case 'list':
      if (req.walk) out.push({ ...req, walk: undefined });
      if (req.count) out.push({ ...req, count: undefined });
      if (req.limit) out.push({ ...req, limit: undefined });
      if (req.offset) out.push({ ...req, offset: undefined });
      if (req.select) out.push({ ...req, select: undefined });
      if (req.via === 'query' && !req.select?.some((s) => s.kind === 'star')) out.push({ ...req, via: 'get' });
      for (const f of filterVariants(req.filters, false)) out.push({ ...req, filters: f });
      req.sort.forEach((_s, i) => out.push({ ...req, sort: without(req.sort, i) }));
      for (const s of selectVariants(req.select ?? [])) out.push({ ...req, select: s });
      break;
    case 'get':
      if (req.select) out.push({ ...req, select: undefined });
      for (const s of selectVariants(req.select ?? [])) out.push({ ...req, select: s });
      break;
    case 'aggregate':
      if (req.limit) out.push({ ...req, limit: undefined });
      if (req.having.length) out.push({ ...req, having: [] });
      if (req.sort.length) out.push({ ...req, sort: [] });
      for (const f of filterVariants(req.filters, false)) out.push({ ...req, filters: f });
      req.fns.forEach((f, i) => {
        const alias = f.field ? `${f.fn}_${f.field}` : f.fn;
        if (!req.having.some((h) => h.alias === alias) && !req.sort.some((s) => s.key === alias))
          out.push({ ...req, fns: without(req.fns, i) });
      });
      req.groupBy.forEach((g, i) => {
        if (!req.sort.some((s) => s.key === g)) out.push({ ...req, groupBy: without(req.groupBy, i) });
      });
      break;
    case 'create':
    case 'patch':
      Object.keys(req.body).forEach((k) => {
        const { [k]: _gone, ...rest } = req.body;
        out.push({ ...req, body: rest });
      });
      break;
    case 'patchWhere':
      for (const f of filterVariants(req.filters, true)) out.push({ ...req, filters: f });
      Object.keys(req.body).forEach((k) => {
        const { [k]: _gone, ...rest } = req.body;
        out.push({ ...req, body: rest });
      });
      break;
    case 'bulkCreate':
      if (req.items.length > 1) req.items.forEach((_x, i) => out.push({ ...req, items: without(req.items, i) }));
      req.items.forEach((item, i) =>
        Object.keys(item).forEach((k) => {
          const { [k]: _gone, ...rest } = item;
          out.push({ ...req, items: replaced(req.items, i, rest) });
        }),
      );
      break;
    case 'bulkDelete':
      if (req.ids && req.ids.length > 1) req.ids.forEach((_x, i) => out.push({ ...req, ids: without(req.ids!, i) }));
      if (req.filters && req.filters.length > 1)
        req.filters.forEach((_x, i) => out.push({ ...req, filters: without(req.filters!, i) }));
      break;
  }
  return out;
}

/** Greedy shrinking: take the first smaller variant that still fails, until none does (or the budget ends). */
export async function shrink<T extends Req>(
  req: T,
  stillFails: (r: T) => Promise<boolean>,
  budget = 80,
): Promise<{ req: T; tries: number }> {
  let current = req;
  let tries = 0;
  for (let progress = true; progress && tries < budget; ) {
    progress = false;
    for (const candidate of shrinkCandidates(current) as T[]) {
      if (tries++ >= budget) break;
      if (await stillFails(candidate)) {
        current = candidate;
        progress = true;
        break;
      }
    }
  }
  return { req: current, tries };
}

// ------------------------------------------------------------------------------------------------
// the dataset

/** `db` without the given rows of `table` and everything that depends on them (children removed, nullable links cleared). */
export function withoutRows(db: Db, table: Table, rows: Row[]): Db {
  const out = structuredClone(db);
  const drop = (t: Table, keys: Set<string>) => {
    const gone = out[t].filter((r) => keys.has(keyOf(t, r)));
    if (gone.length === 0) return;
    out[t] = out[t].filter((r) => !keys.has(keyOf(t, r)));
    const ids = new Set(gone.map((r) => r.id));
    for (const fk of FOREIGN_KEYS.filter((f) => f.target === t)) {
      const children = out[fk.table].filter((r) => ids.has(r[fk.field]!));
      if (fk.onDelete === 'setNull') for (const c of children) c[fk.field] = null;
      else drop(fk.table, new Set(children.map((c) => keyOf(fk.table, c))));
    }
  };
  drop(table, new Set(rows.map((r) => keyOf(table, r))));
  return out;
}

/**
 * Greedy dataset reduction: drops whole tables, then halves, then single rows, while the case
 * still fails on the smaller data (`stillFails` writes the data and asks again).
 */
export async function shrinkDataset(db: Db, stillFails: (d: Db) => Promise<boolean>, budget = 60): Promise<Db> {
  let current = db;
  let tries = 0;
  const attempt = async (candidate: Db) => {
    if (tries++ >= budget) return false;
    if (!(await stillFails(candidate))) return false;
    current = candidate;
    return true;
  };
  for (const t of ['OrderItem', 'Order', 'Customer', 'Product', 'City'] as Table[]) {
    if (current[t].length === 0 || (await attempt(withoutRows(current, t, current[t])))) continue;
    for (
      let size = Math.ceil(current[t].length / 2);
      size >= 1 && tries < budget;
      size = size === 1 ? 0 : Math.ceil(size / 2)
    ) {
      for (let i = 0; i < current[t].length && tries < budget; ) {
        if (!(await attempt(withoutRows(current, t, current[t].slice(i, i + size))))) i += size;
      }
    }
  }
  return current;
}
