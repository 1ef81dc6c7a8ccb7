/**
 * The reference model of docs/permissions.md, written for test/query/authorization-differential.test.ts
 * without any of svcgen's code: which rows and fields a caller sees, which fields and relations it
 * may name, and SQL's three-valued logic for filters (a comparison on a field the caller cannot see
 * on that row is UNKNOWN).
 */
import {
  compareValues,
  fieldNames,
  fieldType,
  relation,
  SCHEMA,
  TABLES,
  type Db,
  type FieldType,
  type RelationSpec,
  type Row,
  type Table,
  type Value,
} from './authz-schema.ts';

export type Action = 'read' | 'create' | 'update' | 'delete';
export type FilterSpec = Record<string, unknown>;
export type ActionRule = boolean | { filter?: FilterSpec; fields?: string[] };
export type RolesConfig = Record<
  string,
  { signup?: boolean; tables: Record<string, Partial<Record<Action, ActionRule>>> }
>;

export interface Principal {
  name: string;
  roles: string[];
  user?: { id: string; email: string };
  context?: Record<string, string>;
  /** A management token: no data at all (403 on every data route). */
  management?: boolean;
}

/** One role's grant of an action on a table: its filter (none = every row) and fields (null = all). */
export interface Grant {
  role: string;
  filter: FilterSpec | null;
  fields: string[] | null;
}

export function grants(roles: RolesConfig, p: Principal, table: Table, action: Action): Grant[] {
  const out: Grant[] = [];
  for (const name of p.roles) {
    const tables = roles[name]?.tables ?? {};
    const rules = Object.hasOwn(tables, table) ? tables[table] : tables['*'];
    const rule = rules?.[action];
    if (rule === true) out.push({ role: name, filter: null, fields: null });
    else if (rule && typeof rule === 'object')
      out.push({ role: name, filter: rule.filter ?? null, fields: rule.fields ?? null });
  }
  return out;
}

/** The value of `$user.id`, `$user.email`, `$context.<key>`; undefined when the caller has none. */
export function variable(p: Principal, text: string): string | undefined {
  if (text === '$user.id') return p.user?.id;
  if (text === '$user.email') return p.user?.email;
  if (text.startsWith('$context.')) {
    const k = text.slice('$context.'.length);
    return p.context && Object.hasOwn(p.context, k) ? p.context[k] : undefined;
  }
  return undefined;
}
const isVariable = (v: unknown): v is string => typeof v === 'string' && v.startsWith('$');

// ------------------------------------------------------------------------------------------------
// operators (docs/api.md 5.5) with SQL NULL semantics; TV = true | false | null (UNKNOWN)

export type TV = boolean | null;
export const DAY = 86_400_000;

function eq(type: FieldType | undefined, v: Value, w: unknown): boolean {
  if (type === 'datetime') return Date.parse(String(v)) === Date.parse(String(w));
  if (typeof v === 'number') return v === Number(w);
  if (type === 'uuid') return String(v).toLowerCase() === String(w).toLowerCase();
  return v === w;
}
function cmp(type: FieldType | undefined, v: Value, w: unknown): number {
  if (type === 'datetime') return Date.parse(String(v)) - Date.parse(String(w));
  return compareValues(type, v, w as Value);
}

export function windowOf(op: string, n: number, now: number): [number, number] {
  const today = now - (((now % DAY) + DAY) % DAY);
  const d = new Date(now);
  switch (op) {
    case 'today':
      return [today, today + DAY - 1];
    case 'yesterday':
      return [today - DAY, today - 1];
    case 'this_week': {
      const start = today - ((new Date(today).getUTCDay() + 6) % 7) * DAY;
      return [start, start + 7 * DAY - 1];
    }
    case 'this_month':
      return [
        Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1),
        Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) - 1,
      ];
    case 'last_days':
      return [now - n * DAY, now];
    case 'last_weeks':
      return [now - 7 * n * DAY, now];
    default:
      throw new Error(`no window for ${op}`);
  }
}

export function applyOp(type: FieldType | undefined, op: string, v: Value, w: unknown, now: number): TV {
  const empty = v === null || v === '' || (Array.isArray(v) && v.length === 0);
  switch (op) {
    case 'equals':
      return w === null ? v === null : v === null ? null : eq(type, v, w);
    case 'not_equals':
      return w === null ? v !== null : v === null ? true : !eq(type, v, w);
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      if (v === null) return null;
      const c = cmp(type, v, w);
      return op === 'gt' ? c > 0 : op === 'gte' ? c >= 0 : op === 'lt' ? c < 0 : c <= 0;
    }
    case 'between': {
      if (v === null) return null;
      const [lo, hi] = w as unknown[];
      return cmp(type, v, lo) >= 0 && cmp(type, v, hi) <= 0;
    }
    case 'in':
      return v === null ? null : (w as unknown[]).some((x) => eq(type, v, x));
    case 'not_in':
      return v === null ? true : !(w as unknown[]).some((x) => eq(type, v, x));
    case 'contains':
      if (v === null) return null;
      return Array.isArray(v) ? v.includes(String(w)) : String(v).includes(String(w));
    case 'starts_with':
      return v === null ? null : String(v).startsWith(String(w));
    case 'ends_with':
      return v === null ? null : String(v).endsWith(String(w));
    case 'is_empty':
      return w === false ? !empty : empty;
    case 'is_not_empty':
      return w === false ? empty : !empty;
    default: {
      if (v === null) return null;
      const [lo, hi] = windowOf(op, Number(w), now);
      const ms = Date.parse(String(v));
      return ms >= lo && ms <= hi;
    }
  }
}

export const and3 = (xs: TV[]): TV => (xs.includes(false) ? false : xs.includes(null) ? null : true);
export const or3 = (xs: TV[]): TV => (xs.includes(true) ? true : xs.includes(null) ? null : false);
export const not3 = (x: TV): TV => (x === null ? null : !x);

// ------------------------------------------------------------------------------------------------
// role filters: the configuration's own, evaluated on the raw data (no read permission applies)

export function linkedRaw(db: Db, rel: RelationSpec, row: Row): Row[] {
  const v = row[rel.from];
  if (v === null || v === undefined) return [];
  return db[rel.target].filter((r) => r[rel.to] === v);
}

function entryHolds(db: Db, p: Principal, table: Table, row: Row, path: string[], spec: unknown, now: number): boolean {
  if (path.length > 1) {
    const rel = relation(table, path[0]!)!;
    return linkedRaw(db, rel, row).some((r) => entryHolds(db, p, rel.target, r, path.slice(1), spec, now));
  }
  const f = path[0]!;
  const type = fieldType(table, f);
  const v = row[f] ?? null;
  if (spec !== null && typeof spec === 'object' && !Array.isArray(spec)) {
    return Object.entries(spec).every(([op, operand]) => {
      let w: unknown = operand;
      if (isVariable(operand)) {
        w = variable(p, operand);
        if (w === undefined) return false;
      }
      return applyOp(type, op, v, w, now) === true;
    });
  }
  if (isVariable(spec)) {
    const w = variable(p, spec);
    return w !== undefined && applyOp(type, 'equals', v, w, now) === true;
  }
  return applyOp(type, 'equals', v, spec, now) === true;
}

export function filterHolds(
  db: Db,
  p: Principal,
  table: Table,
  row: Row,
  filter: FilterSpec | null,
  now: number,
): boolean {
  if (!filter) return true;
  return Object.entries(filter).every(([key, spec]) => entryHolds(db, p, table, row, key.split('.'), spec, now));
}

/** The grants whose filter holds on the row. */
export const grantsOn = (db: Db, p: Principal, table: Table, row: Row, gs: Grant[], now: number) =>
  gs.filter((g) => filterHolds(db, p, table, row, g.filter, now));

// ------------------------------------------------------------------------------------------------
// the caller's view of a database state

export interface VRow {
  row: Row;
  /** The fields visible on this row. */
  fields: Set<string>;
}
export interface TableView {
  readGrants: Grant[];
  /** Readable fields of the table; null when no role may read it. */
  readable: Set<string> | null;
  rows: VRow[];
  byKey: Map<string, VRow>;
  /** visible rows by `<field>=<value>`, for the linking fields of relations (only rows where the field is visible) */
  index: Map<string, VRow[]>;
}
export interface View {
  p: Principal;
  db: Db;
  now: number;
  tables: Record<Table, TableView>;
}

const unionFields = (table: Table, gs: Grant[]) => {
  const out = new Set<string>();
  for (const g of gs) for (const f of g.fields ?? fieldNames(table)) if (fieldType(table, f)) out.add(f);
  return out;
};

export function viewOf(roles: RolesConfig, p: Principal, db: Db, now = Date.now()): View {
  const tables = {} as Record<Table, TableView>;
  for (const table of TABLES) {
    const readGrants = grants(roles, p, table, 'read');
    const readable = readGrants.length ? unionFields(table, readGrants) : null;
    const rows: VRow[] = [];
    for (const row of db[table]) {
      const holding = grantsOn(db, p, table, row, readGrants, now);
      if (holding.length) rows.push({ row, fields: unionFields(table, holding) });
    }
    const byKey = new Map(rows.map((r) => [SCHEMA[table].key.map((k) => String(r.row[k])).join('/'), r]));
    const index = new Map<string, VRow[]>();
    for (const r of rows) {
      for (const f of r.fields) {
        const k = `${f}=${String(r.row[f])}`;
        const list = index.get(k);
        if (list) list.push(r);
        else index.set(k, [r]);
      }
    }
    tables[table] = { readGrants, readable, rows, byKey, index };
  }
  return { p, db, now, tables };
}

/** Why the caller may not go from `table` through `rel` (docs/permissions.md "Reading"), or null. */
export function cannotFollow(view: View, table: Table, name: string): string | null {
  const rel = relation(table, name);
  if (!rel) return `${table} has no relation ${name}`;
  const here = view.tables[table].readable;
  const there = view.tables[rel.target].readable;
  if (!there) return `${rel.target} is not readable`;
  if (!here?.has(rel.from) || !there.has(rel.to))
    return `the link ${table}.${rel.from} = ${rel.target}.${rel.to} is not readable`;
  return null;
}

/**
 * The visible rows related to a visible row: the link is a comparison, so the linking field must be
 * visible on both rows.
 */
export function linkedVisible(view: View, table: Table, r: VRow, name: string): VRow[] {
  const rel = relation(table, name)!;
  if (!r.fields.has(rel.from)) return [];
  const v = r.row[rel.from];
  if (v === null || v === undefined) return [];
  return view.tables[rel.target].index.get(`${rel.to}=${String(v)}`) ?? [];
}

/** Why a filter/sort/aggregate may not name `path` (relations..., field) on `table`, or null. */
export function cannotName(view: View, table: Table, path: string[]): string | null {
  let t = table;
  for (const step of path.slice(0, -1)) {
    const why = cannotFollow(view, t, step);
    if (why) return why;
    t = relation(t, step)!.target;
  }
  const f = path[path.length - 1]!;
  if (!fieldType(t, f)) return `${t} has no field ${f}`;
  if (!view.tables[t].readable?.has(f)) return `${t}.${f} is not readable`;
  return null;
}

/** The visible value of a field on a row, or null when it is hidden (sorts and aggregates). */
export const visibleValue = (r: VRow, f: string): Value => (r.fields.has(f) ? (r.row[f] ?? null) : null);
