/**
 * Reference answers of the data API's reads (docs/api.md 5.3–5.10) under docs/permissions.md, for
 * test/query/authorization-differential.test.ts: lists, single reads, `_query`, cursor walks and
 * aggregates, computed from a View (reference-policy.ts) without the server's code.
 */
import {
  compareValues,
  fieldNames,
  fieldType,
  isNumeric,
  relation,
  SCHEMA,
  type Table,
  type Value,
} from './authz-schema.ts';
import {
  and3,
  applyOp,
  cannotFollow,
  cannotName,
  linkedVisible,
  not3,
  or3,
  visibleValue,
  type TV,
  type View,
  type VRow,
} from './reference-policy.ts';

export type Leaf = { kind: 'leaf'; path: string[]; op: string; value: unknown; col?: boolean };
export type Group = { kind: 'and' | 'or' | 'not'; items: Cond[] };
export type Cond = Leaf | Group;
export type SelectItem =
  | { kind: 'field'; name: string; alias?: string }
  | { kind: 'star' }
  | {
      kind: 'embed';
      relation: string;
      alias?: string;
      items: SelectItem[];
      filters?: Cond[];
      sort?: SortTerm[];
      limit?: number;
      offset?: number;
    };
export interface SortTerm {
  field: string;
  desc: boolean;
  suffix?: boolean;
}
export interface ListReq {
  kind: 'list';
  table: Table;
  via: 'get' | 'query';
  filters: Cond[];
  sort: SortTerm[];
  select?: SelectItem[];
  limit?: number;
  offset?: number;
  /** Walk the cursors with this page size and answer the concatenation. */
  walk?: number;
  count?: boolean;
}
export interface GetReq {
  kind: 'get';
  table: Table;
  id: Value;
  select?: SelectItem[];
}
export interface AggFn {
  fn: 'count' | 'sum' | 'avg' | 'min' | 'max' | 'count_distinct';
  field?: string;
}
export interface AggReq {
  kind: 'aggregate';
  table: Table;
  filters: Cond[];
  fns: AggFn[];
  groupBy: string[];
  having: { alias: string; op: string; value: number }[];
  sort: { key: string; desc: boolean }[];
  limit?: number;
}
export type ReadReq = ListReq | GetReq | AggReq;

/** An expected answer: a status and an exact body (2xx), or a Problem's type and the rules / parameters it must name. */
export interface Expected {
  status: number;
  body?: unknown;
  type?: string;
  rules?: string[];
  /** A Problem must name one of these in errors[].field (prefix match). */
  params?: string[];
  /** Other answers docs/*.md leave open (see `why`). */
  alternatives?: Expected[];
  why?: string;
}
export const CURSOR = '<cursor>';
export const problem = (status: number, kind: string, extra: Partial<Expected> = {}): Expected => ({
  status,
  type: `/errors/${kind}`,
  ...extra,
});

// ------------------------------------------------------------------------------------------------
// filters

export function evalCond(view: View, table: Table, r: VRow, c: Cond): TV {
  if (c.kind !== 'leaf') {
    const xs = c.items.map((x) => evalCond(view, table, r, x));
    return c.kind === 'and' ? and3(xs) : c.kind === 'or' ? or3(xs) : not3(and3(xs));
  }
  if (c.path.length > 1) {
    const rel = relation(table, c.path[0]!)!;
    const rest: Leaf = { ...c, path: c.path.slice(1) };
    return linkedVisible(view, table, r, rel.name).some((x) => evalCond(view, rel.target, x, rest) === true);
  }
  const f = c.path[0]!;
  if (!r.fields.has(f)) return null;
  return applyOp(fieldType(table, f), c.op, r.row[f] ?? null, c.value, view.now);
}

export const leafParam = (l: Leaf) => (l.col ? `col.${l.path.join('.')}` : l.path.join('.'));
const leaves = (c: Cond): Leaf[] => (c.kind === 'leaf' ? [c] : c.items.flatMap(leaves));

/** Parameters naming something the caller may not name (400). */
function badFilters(view: View, table: Table, filters: Cond[], via: 'get' | 'query'): string[] {
  const out: string[] = [];
  for (const c of filters) {
    if (!leaves(c).some((l) => cannotName(view, table, l.path))) continue;
    if (via === 'query') out.push('filter');
    else if (c.kind === 'leaf') out.push(leafParam(c), c.path.join('.'));
    else out.push(c.kind);
  }
  return out;
}

/** Whether an embed carries a filter, sort or page of its own (docs/api.md §5.7: to-many embeds only). */
export const hasArguments = (it: SelectItem & { kind: 'embed' }) =>
  !!it.filters?.length || !!it.sort?.length || it.limit !== undefined || it.offset !== undefined;

function badSelect(view: View, table: Table, items: SelectItem[] | undefined): boolean {
  for (const it of items ?? []) {
    if (it.kind === 'field' && !fieldType(table, it.name)) return true;
    if (it.kind === 'embed') {
      if (cannotFollow(view, table, it.relation)) return true;
      const rel = relation(table, it.relation)!;
      if (hasArguments(it) && !rel.many) return true;
      // An embed's filter and sort are held to the read list like top-level ones.
      if ((it.filters ?? []).some((c) => leaves(c).some((l) => cannotName(view, rel.target, l.path)))) return true;
      if ((it.sort ?? []).some((s) => cannotName(view, rel.target, [s.field]))) return true;
      if (badSelect(view, rel.target, it.items)) return true;
    }
  }
  return false;
}

// ------------------------------------------------------------------------------------------------
// records

export function project(view: View, table: Table, r: VRow, items?: SelectItem[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const all = () => {
    for (const f of fieldNames(table)) if (r.fields.has(f)) out[f] = r.row[f] ?? null;
  };
  if (!items) {
    all();
    return out;
  }
  for (const it of items) {
    if (it.kind === 'star') all();
    else if (it.kind === 'field') {
      if (r.fields.has(it.name)) out[it.alias ?? it.name] = r.row[it.name] ?? null;
    } else {
      const rel = relation(table, it.relation)!;
      // Only visible related rows; the embed's own filter narrows them, its sort and page cut them.
      let related = linkedVisible(view, table, r, it.relation);
      if (it.filters?.length)
        related = related.filter((x) => and3(it.filters!.map((c) => evalCond(view, rel.target, x, c))) === true);
      if (hasArguments(it))
        related = sortRows(rel.target, related, it.sort ?? []).slice(
          it.offset ?? 0,
          it.limit === undefined ? undefined : (it.offset ?? 0) + it.limit,
        );
      const rows = related.map((x) => project(view, rel.target, x, it.items));
      out[it.alias ?? it.relation] = rel.many ? rows : (rows[0] ?? null);
    }
  }
  return out;
}

export function sortRows(table: Table, rows: VRow[], terms: SortTerm[]): VRow[] {
  const key = SCHEMA[table].key;
  return [...rows].sort((a, b) => {
    for (const t of terms) {
      const x = visibleValue(a, t.field);
      const y = visibleValue(b, t.field);
      if (x === null && y === null) continue;
      if (x === null) return t.desc ? -1 : 1;
      if (y === null) return t.desc ? 1 : -1;
      const c = compareValues(fieldType(table, t.field), x, y);
      if (c !== 0) return t.desc ? -c : c;
    }
    for (const k of key) {
      const c = compareValues(fieldType(table, k), a.row[k]!, b.row[k]!);
      if (c !== 0) return c;
    }
    return 0;
  });
}

function pagination(limit: number, offset: number, more: boolean, previous: boolean, total?: number) {
  return {
    limit,
    offset,
    hasNextPage: more,
    hasPreviousPage: previous,
    nextCursor: more ? CURSOR : null,
    ...(total === undefined ? {} : { totalCount: total }),
  };
}

export function answerList(view: View, req: ListReq): Expected {
  const tv = view.tables[req.table];
  if (!tv.readable) return problem(403, 'forbidden');
  const params = badFilters(view, req.table, req.filters, req.via);
  if (req.sort.some((s) => cannotName(view, req.table, [s.field]))) params.push('sort');
  if (badSelect(view, req.table, req.select)) params.push('select');
  if (params.length) return problem(400, 'invalid-parameter', { params });
  const matching = tv.rows.filter((r) => and3(req.filters.map((c) => evalCond(view, req.table, r, c))) === true);
  const rows = sortRows(req.table, matching, req.sort).map((r) => project(view, req.table, r, req.select));
  const total = req.count ? rows.length : undefined;
  if (req.walk) {
    const pages = [];
    for (let i = 0; i === 0 || i * req.walk < rows.length; i++) {
      pages.push(pagination(req.walk, 0, (i + 1) * req.walk < rows.length, i > 0, total));
    }
    return { status: 200, body: { data: rows, pages } };
  }
  const limit = req.limit ?? 100;
  const offset = req.offset ?? 0;
  return {
    status: 200,
    body: {
      data: rows.slice(offset, offset + limit),
      meta: { pagination: pagination(limit, offset, rows.length > offset + limit, offset > 0, total) },
    },
  };
}

export function answerGet(view: View, req: GetReq): Expected {
  const tv = view.tables[req.table];
  if (!tv.readable) return problem(403, 'forbidden');
  if (badSelect(view, req.table, req.select)) return problem(400, 'invalid-parameter', { params: ['select'] });
  const r = tv.byKey.get(String(req.id));
  if (!r) return problem(404, 'not-found');
  return { status: 200, body: { data: project(view, req.table, r, req.select) } };
}

// ------------------------------------------------------------------------------------------------
// aggregates

export const aggAlias = (f: AggFn) => (f.field ? `${f.fn}_${f.field}` : f.fn);

function aggregate(table: Table, rows: VRow[], f: AggFn): Value {
  if (f.fn === 'count') return rows.length;
  const type = fieldType(table, f.field!);
  const values = rows.map((r) => visibleValue(r, f.field!)).filter((v) => v !== null);
  if (f.fn === 'count_distinct')
    return new Set(values.map((v) => (type === 'datetime' ? Date.parse(String(v)) : JSON.stringify(v)))).size;
  if (values.length === 0) return null;
  if (f.fn === 'sum') return (values as number[]).reduce((a, b) => a + b, 0);
  if (f.fn === 'avg') return (values as number[]).reduce((a, b) => a + b, 0) / values.length;
  const sorted = [...values].sort((a, b) => compareValues(type, a, b));
  return f.fn === 'min' ? sorted[0]! : sorted[sorted.length - 1]!;
}

function fnFits(table: Table, f: AggFn): boolean {
  if (f.fn === 'count') return f.field === undefined;
  const type = fieldType(table, f.field ?? '');
  if (!type || type === 'list') return false;
  if (f.fn === 'sum' || f.fn === 'avg') return isNumeric(type);
  if (f.fn === 'min' || f.fn === 'max') return isNumeric(type) || type === 'datetime' || type === 'string';
  return true;
}

export function answerAggregate(view: View, req: AggReq): Expected {
  const tv = view.tables[req.table];
  if (!tv.readable) return problem(403, 'forbidden');
  const fns = req.fns.length ? req.fns : [{ fn: 'count' } as AggFn];
  const aliases = fns.map(aggAlias);
  const params = badFilters(view, req.table, req.filters, 'get');
  if (fns.some((f) => !fnFits(req.table, f) || (f.field && cannotName(view, req.table, [f.field])))) params.push('fn');
  if (req.groupBy.some((g) => cannotName(view, req.table, [g]))) params.push('groupBy');
  // `having` compares with a number: an alias whose value is no number (min/max of text or DateTime) cannot take it
  const numeric = (alias: string) => {
    const f = fns[aliases.indexOf(alias)];
    return (
      !!f &&
      (f.fn === 'count' ||
        f.fn === 'count_distinct' ||
        f.fn === 'sum' ||
        f.fn === 'avg' ||
        isNumeric(fieldType(req.table, f.field!)))
    );
  };
  if (req.having.some((h) => !aliases.includes(h.alias) || !numeric(h.alias))) params.push('having');
  if (req.sort.some((s) => !aliases.includes(s.key) && !req.groupBy.includes(s.key))) params.push('sort');
  if (params.length) return problem(400, 'invalid-parameter', { params });
  const matching = tv.rows.filter((r) => and3(req.filters.map((c) => evalCond(view, req.table, r, c))) === true);
  const groups = new Map<string, VRow[]>();
  if (req.groupBy.length === 0) groups.set('', matching);
  for (const r of req.groupBy.length ? matching : []) {
    const k = JSON.stringify(req.groupBy.map((g) => visibleValue(r, g)));
    groups.set(k, [...(groups.get(k) ?? []), r]);
  }
  let out = [...groups.values()].map((rows) => {
    const o: Record<string, Value> = {};
    for (const g of req.groupBy) o[g] = visibleValue(rows[0]!, g);
    fns.forEach((f, i) => (o[aliases[i]!] = aggregate(req.table, rows, f)));
    return o;
  });
  out = out.filter((o) =>
    req.having.every((h) => o[h.alias] !== null && applyOp('float', h.op, o[h.alias]!, h.value, 0) === true),
  );
  const typeOf = (k: string) => {
    if (req.groupBy.includes(k)) return fieldType(req.table, k);
    const f = fns[aliases.indexOf(k)]!;
    return f.fn === 'min' || f.fn === 'max' ? fieldType(req.table, f.field!) : 'float';
  };
  const terms = [...req.sort, ...req.groupBy.map((g) => ({ key: g, desc: false }))];
  out.sort((a, b) => {
    for (const t of terms) {
      const x = a[t.key] ?? null;
      const y = b[t.key] ?? null;
      if (x === null && y === null) continue;
      // Aggregate rows put nulls last in both directions (docs/api.md §5.9), unlike list sorts.
      if (x === null) return 1;
      if (y === null) return -1;
      const c = compareValues(typeOf(t.key), x, y);
      if (c !== 0) return t.desc ? -c : c;
    }
    return 0;
  });
  return { status: 200, body: { data: { aggregates: out.slice(0, req.limit ?? 10_000) } } };
}

export function answerRead(view: View, req: ReadReq): Expected {
  if (req.kind === 'list') return answerList(view, req);
  if (req.kind === 'get') return answerGet(view, req);
  return answerAggregate(view, req);
}
