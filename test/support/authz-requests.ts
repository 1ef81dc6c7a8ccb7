/**
 * Request generators of test/query/authorization-differential.test.ts: reads (lists with filters, groups,
 * relation paths, sorts, selects with aliases and embeds, pagination and cursor walks; single
 * reads; `_query`; aggregates) and writes (create, update by id and by filter, delete, bulk), biased
 * towards what the principal may name but often stepping outside it.
 */
import {
  compareValues,
  fieldNames,
  fieldType,
  type Rng,
  SCHEMA,
  TABLES,
  type Db,
  type Row,
  type Table,
  type Value,
} from './authz-schema.ts';
import { newRow, randomValue, uuidFrom } from './authz-generator.ts';
import { grants, type Principal, type RolesConfig, type View } from './reference-policy.ts';
import type { AggFn, AggReq, Cond, GetReq, Leaf, ListReq, ReadReq, SelectItem, SortTerm } from './reference-read.ts';
import type { Mode, WriteReq } from './reference-write.ts';

const OPS: Record<string, string[]> = {
  int: ['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte', 'between', 'in', 'not_in', 'is_empty', 'is_not_empty'],
  float: ['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte', 'between', 'in', 'not_in', 'is_empty'],
  decimal: ['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte', 'between', 'in', 'not_in'],
  string: [
    'equals',
    'not_equals',
    'gt',
    'lte',
    'between',
    'in',
    'not_in',
    'contains',
    'starts_with',
    'ends_with',
    'is_empty',
    'is_not_empty',
  ],
  uuid: ['equals', 'not_equals', 'in', 'not_in', 'is_empty'],
  bool: ['equals', 'not_equals', 'is_empty'],
  enum: ['equals', 'not_equals', 'in', 'not_in', 'is_empty'],
  datetime: [
    'gt',
    'gte',
    'lt',
    'lte',
    'between',
    'equals',
    'is_empty',
    'is_not_empty',
    'today',
    'this_month',
    'last_days',
    'last_weeks',
  ],
  list: ['contains', 'is_empty', 'is_not_empty'],
};
export const DATE_HELPERS = ['today', 'yesterday', 'this_week', 'this_month', 'last_days', 'last_weeks'];
/** Text with characters whose order depends on the collation: never compared by order (sort, gt, min, groupBy). */
const UNORDERED = new Set(['Customer.email']);
const ORDERING = new Set(['gt', 'gte', 'lt', 'lte', 'between']);

export class RequestGen {
  /** How often a filter names a relation path (the non-interference check raises it). */
  relationBias = 0.35;
  constructor(
    private rng: Rng,
    private roles: RolesConfig,
  ) {}

  private fieldOf(view: View, table: Table, sortable = false): string {
    const all = fieldNames(table).filter(
      (f) => !sortable || (fieldType(table, f) !== 'list' && !UNORDERED.has(`${table}.${f}`)),
    );
    const readable = all.filter((f) => view.tables[table].readable?.has(f));
    if (this.rng.chance(0.02)) return 'nope';
    return readable.length && this.rng.chance(0.85) ? this.rng.pick(readable) : this.rng.pick(all);
  }

  /** A path of 0–3 relations (mostly ones the caller can follow) and a field. */
  private path(view: View, table: Table, maxSteps: number): { path: string[]; table: Table } {
    const path: string[] = [];
    let t = table;
    const steps = this.rng.chance(this.relationBias) ? this.rng.int(1, maxSteps) : 0;
    for (let i = 0; i < steps; i++) {
      const rels = SCHEMA[t].relations;
      const followable = rels.filter(
        (r) =>
          view.tables[r.target].readable &&
          view.tables[t].readable?.has(r.from) &&
          view.tables[r.target].readable?.has(r.to),
      );
      const rel = followable.length && this.rng.chance(0.85) ? this.rng.pick(followable) : this.rng.pick(rels);
      path.push(rel.name);
      t = rel.target;
    }
    path.push(this.fieldOf(view, t));
    return { path, table: t };
  }

  private sampleValue(db: Db, table: Table, field: string): Value {
    const values = db[table].map((r) => r[field]).filter((v) => v !== null && v !== undefined);
    if (values.length && this.rng.chance(0.8)) return this.rng.pick(values) as Value;
    const type = fieldType(table, field);
    if (type === 'uuid') return uuidFrom(this.rng);
    if (type === 'int') return this.rng.int(0, 40);
    if (type === 'datetime') return new Date(Date.UTC(2024, this.rng.int(0, 11), this.rng.int(1, 28))).toISOString();
    try {
      return randomValue(this.rng, db, table, field, Date.now());
    } catch {
      return this.rng.word(1, 3);
    }
  }

  leaf(view: View, table: Table, inGroup: boolean): Leaf {
    const { path, table: t } = this.path(view, table, 3);
    const f = path[path.length - 1]!;
    const type = fieldType(t, f) ?? 'int';
    let op = this.rng.pick(OPS[type]!);
    if (UNORDERED.has(`${t}.${f}`) && ORDERING.has(op)) op = 'equals';
    const rng = this.rng;
    // operands are never NULL except for equals/not_equals (`null` is SQL NULL only there)
    const v = (): Value => {
      const x = this.sampleValue(view.db, t, f);
      return x === null ? (type === 'string' ? rng.word(1, 3) : 1) : x;
    };
    let value: unknown;
    if (op === 'in' || op === 'not_in')
      value = Array.from({ length: rng.int(1, 3) }, v).map((x) => (Array.isArray(x) ? (x[0] ?? 'gift') : x));
    else if (op === 'between')
      value = [v(), v()].sort((a, b) => compareValues(type === 'datetime' ? 'string' : type, a, b));
    else if (op === 'is_empty' || op === 'is_not_empty') value = rng.chance(0.8);
    else if (DATE_HELPERS.includes(op)) value = op.startsWith('last_') ? rng.int(1, 10) : true;
    else if (op === 'contains' && type === 'list') value = rng.pick(['gift', 'red', 'sale']);
    else if (op === 'contains' || op === 'starts_with' || op === 'ends_with') {
      const s = String(v());
      const i = rng.int(0, Math.max(0, s.length - 1));
      value = s.slice(i, i + rng.int(1, 2)) || 'a';
    } else if ((op === 'equals' || op === 'not_equals') && SCHEMA[t].fields[f]?.nullable && rng.chance(0.25))
      value = null;
    else value = v();
    if (type === 'list' && Array.isArray(value)) value = value[0] ?? 'gift';
    return {
      kind: 'leaf',
      path,
      op,
      value,
      ...(!inGroup && path.length === 1 && rng.chance(0.1) ? { col: true } : {}),
    };
  }

  cond(view: View, table: Table, depth: number, inGroup: boolean): Cond {
    if (depth >= 3 || this.rng.chance(0.7)) return this.leaf(view, table, inGroup);
    const kind = this.rng.pick(['and', 'or', 'or', 'not'] as const);
    const n = kind === 'not' ? 1 : this.rng.int(2, 3);
    return { kind, items: Array.from({ length: n }, () => this.cond(view, table, depth + 1, true)) };
  }

  filters(view: View, table: Table, leavesOnly: boolean, max = 3): Cond[] {
    const out: Cond[] = [];
    const names = new Set<string>();
    for (let i = this.rng.int(0, max); i > 0; i--) {
      const c = leavesOnly ? this.leaf(view, table, false) : this.cond(view, table, 0, false);
      const name = c.kind === 'leaf' ? c.path.join('.') : c.kind;
      if (names.has(name) || (c.kind === 'leaf' && leavesOnly && c.col)) continue;
      names.add(name);
      out.push(c);
    }
    return out;
  }

  sort(view: View, table: Table): SortTerm[] {
    const out: SortTerm[] = [];
    for (let i = this.rng.chance(0.6) ? this.rng.int(1, 3) : 0; i > 0; i--) {
      const field = this.fieldOf(view, table, true);
      if (!out.some((s) => s.field === field))
        out.push({ field, desc: this.rng.chance(0.5), suffix: this.rng.chance(0.3) });
    }
    return out;
  }

  /** A to-many embed's own filter, sort and page, sometimes (and now and then on a to-one embed, a 400). */
  private embedArguments(
    view: View,
    target: Table,
    many: boolean,
    leavesOnly: boolean,
  ): Partial<SelectItem & { kind: 'embed' }> {
    const rng = this.rng;
    if (!rng.chance(many ? 0.4 : 0.05)) return {};
    const filters = this.filters(view, target, leavesOnly, 2);
    const sort = this.sort(view, target);
    return {
      ...(filters.length ? { filters } : {}),
      ...(sort.length ? { sort } : {}),
      ...(rng.chance(sort.length ? 0.8 : 0.4) ? { limit: rng.int(1, 2) } : {}),
      ...(rng.chance(0.3) ? { offset: rng.int(0, 2) } : {}),
    };
  }

  /** `budget.leavesOnly`: the select goes in a `_query` body, whose filters are leaves. */
  select(
    view: View,
    table: Table,
    depth: number,
    budget: { embeds: number; aliases: number; leavesOnly?: boolean },
    allowStar: boolean,
  ): SelectItem[] {
    const items: SelectItem[] = [];
    const used = new Set<string>();
    const star = allowStar && depth === 0 && this.rng.chance(0.2);
    if (star) items.push({ kind: 'star' });
    const n = this.rng.int(1, 4);
    for (let i = 0; i < n; i++) {
      const rels = SCHEMA[table].relations;
      if (depth < 3 && budget.embeds < 10 && this.rng.chance(depth === 0 ? 0.35 : 0.2)) {
        const followable = rels.filter(
          (r) =>
            view.tables[r.target].readable &&
            view.tables[table].readable?.has(r.from) &&
            view.tables[r.target].readable?.has(r.to),
        );
        const rel = followable.length && this.rng.chance(0.85) ? this.rng.pick(followable) : this.rng.pick(rels);
        const alias = used.has(rel.name) || this.rng.chance(0.2) ? `e${budget.aliases++}` : undefined;
        if (used.has(alias ?? rel.name)) continue;
        used.add(alias ?? rel.name);
        budget.embeds++;
        const args = this.embedArguments(view, rel.target, rel.many, !!budget.leavesOnly);
        items.push({
          kind: 'embed',
          relation: rel.name,
          ...(alias ? { alias } : {}),
          items: this.select(view, rel.target, depth + 1, budget, false),
          ...args,
        });
      } else if (!star) {
        const name = this.fieldOf(view, table);
        const alias = this.rng.chance(0.2) ? `a${budget.aliases++}` : undefined;
        if (used.has(alias ?? name)) continue;
        used.add(alias ?? name);
        items.push({ kind: 'field', name, ...(alias ? { alias } : {}) });
      }
    }
    if (items.length === 0) items.push({ kind: 'field', name: SCHEMA[table].key[0]! });
    return items;
  }

  list(view: View, table: Table, via: 'get' | 'query'): ListReq {
    const rng = this.rng;
    const req: ListReq = {
      kind: 'list',
      table,
      via,
      filters: this.filters(view, table, via === 'query'),
      sort: this.sort(view, table),
    };
    if (rng.chance(0.55))
      req.select = this.select(view, table, 0, { embeds: 0, aliases: 0, leavesOnly: via === 'query' }, true);
    const page = rng.next();
    if (page < 0.25) req.walk = rng.int(2, 7);
    else if (page < 0.6) req.limit = rng.int(1, 12);
    if (!req.walk && rng.chance(0.25)) req.offset = rng.int(0, 20);
    if (rng.chance(0.2)) req.count = true;
    return req;
  }

  get(view: View, table: Table): GetReq {
    const rows =
      this.rng.chance(0.6) && view.tables[table].rows.length
        ? view.tables[table].rows.map((r) => r.row)
        : view.db[table];
    const id =
      rows.length && this.rng.chance(0.9)
        ? this.rng.pick(rows).id!
        : fieldType(table, 'id') === 'uuid'
          ? uuidFrom(this.rng)
          : 99_999;
    return {
      kind: 'get',
      table,
      id,
      ...(this.rng.chance(0.5) ? { select: this.select(view, table, 0, { embeds: 0, aliases: 0 }, true) } : {}),
    };
  }

  aggregate(view: View, table: Table): AggReq {
    const rng = this.rng;
    const fns: AggFn[] = [];
    for (let i = rng.int(0, 3); i > 0; i--) {
      const fn = rng.pick(['count', 'sum', 'avg', 'min', 'max', 'count_distinct'] as const);
      const numeric = fieldNames(table).filter((f) => ['int', 'float', 'decimal'].includes(fieldType(table, f)!));
      const ordered = fieldNames(table).filter(
        (f) =>
          ['int', 'float', 'decimal', 'datetime', 'string'].includes(fieldType(table, f)!) &&
          !UNORDERED.has(`${table}.${f}`),
      );
      const candidates =
        fn === 'sum' || fn === 'avg'
          ? numeric
          : fn === 'count_distinct'
            ? fieldNames(table).filter((f) => fieldType(table, f) !== 'list')
            : ordered;
      const readable = candidates.filter((f) => view.tables[table].readable?.has(f));
      const f: AggFn =
        fn === 'count'
          ? { fn }
          : { fn, field: readable.length && rng.chance(0.85) ? rng.pick(readable) : rng.pick(candidates) };
      if (!fns.some((x) => x.fn === f.fn && x.field === f.field)) fns.push(f);
    }
    const groupBy: string[] = [];
    for (let i = rng.chance(0.6) ? rng.int(1, 2) : 0; i > 0; i--) {
      const g = this.fieldOf(view, table, true);
      if (!groupBy.includes(g)) groupBy.push(g);
    }
    const aliases = (fns.length ? fns : [{ fn: 'count' } as AggFn]).map((f) => (f.field ? `${f.fn}_${f.field}` : f.fn));
    const having = rng.chance(0.3)
      ? [
          {
            alias: rng.pick(aliases),
            op: rng.pick(['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte']),
            value: rng.pick([0, 1, 2, 3, 50, 100]),
          },
        ]
      : [];
    const keys = [...aliases, ...groupBy];
    const sort = rng.chance(0.5) ? rng.sample(keys, rng.int(1, 2)).map((key) => ({ key, desc: rng.chance(0.5) })) : [];
    return {
      kind: 'aggregate',
      table,
      filters: this.filters(view, table, false, 2),
      fns,
      groupBy,
      having,
      sort,
      ...(rng.chance(0.2) ? { limit: rng.int(1, 5) } : {}),
    };
  }

  read(view: View): ReadReq {
    const readable = TABLES.filter((t) => view.tables[t].readable);
    const table = readable.length && this.rng.chance(0.93) ? this.rng.pick(readable) : this.rng.pick(TABLES);
    const x = this.rng.next();
    if (x < 0.5) return this.list(view, table, 'get');
    if (x < 0.65) return this.list(view, table, 'query');
    if (x < 0.8 && table !== 'OrderItem') return this.get(view, table);
    return this.aggregate(view, table);
  }

  // ----------------------------------------------------------------------------------------------
  // writes

  private writable(p: Principal, action: 'create' | 'update' | 'delete'): Table[] {
    const ok = TABLES.filter((t) => grants(this.roles, p, t, action).length > 0);
    return ok.length && this.rng.chance(0.9) ? ok : [...TABLES];
  }

  /** Body fields: mostly the ones some role lists for the action. */
  private trim(p: Principal, table: Table, action: 'create' | 'update', body: Row): Row {
    const listed = new Set(grants(this.roles, p, table, action).flatMap((g) => g.fields ?? fieldNames(table)));
    if (this.rng.chance(0.2)) return body;
    return Object.fromEntries(
      Object.entries(body).filter(([f]) => listed.has(f) || (f === 'customerId' && this.rng.chance(0.3))),
    );
  }

  createBody(p: Principal, db: Db, table: Table): Row {
    const row = newRow(this.rng, db, table, Date.now()) ?? { orderId: 1, productId: 1 };
    delete row.createdAt;
    delete row.updatedAt;
    if (SCHEMA[table].serial) delete row.id;
    for (const f of Object.keys(row))
      if (!SCHEMA[table].fields[f]?.required && f !== 'id' && this.rng.chance(0.4)) delete row[f];
    if (table === 'Order' && this.rng.chance(0.4)) delete row.customerId;
    if (table === 'Order' && p.context?.customer && this.rng.chance(0.3)) row.customerId = p.context.customer;
    if (table === 'Order' && p.user && this.rng.chance(0.3)) row.customerId = p.user.id;
    if (table === 'Product' && this.rng.chance(0.3)) row.price = this.rng.pick([0.5, 0.99, 1, 150]);
    if (table === 'OrderItem' && p.context?.customer && this.rng.chance(0.5)) {
      const own = db.Order.filter(
        (o) =>
          o.customerId === p.context!.customer &&
          !db.OrderItem.some((i) => i.orderId === o.id && i.productId === row.productId),
      );
      if (own.length) row.orderId = this.rng.pick(own).id!;
    }
    return this.trim(p, table, 'create', row);
  }

  private patchBody(p: Principal, db: Db, table: Table): Row {
    const fields = fieldNames(table).filter(
      (f) =>
        !SCHEMA[table].key.includes(f) &&
        !SCHEMA[table].fields[f]!.readOnly &&
        !SCHEMA[table].fields[f]!.unique &&
        f !== 'id',
    );
    const body: Row = {};
    for (const f of this.rng.sample(fields, this.rng.int(1, 2)))
      body[f] =
        SCHEMA[table].fields[f]!.nullable && this.rng.chance(0.2)
          ? null
          : randomValue(this.rng, db, table, f, Date.now());
    if (table === 'Order' && 'total' in body && this.rng.chance(0.3)) body.total = this.rng.pick([99, 100, 150]);
    return this.trim(p, table, 'update', body);
  }

  private target(view: View, table: Table): Row | undefined {
    const visible = view.tables[table].rows.map((r) => r.row);
    const rows = visible.length && this.rng.chance(0.6) ? visible : view.db[table];
    return rows.length ? this.rng.pick(rows) : undefined;
  }

  write(view: View): WriteReq {
    const p = view.p;
    const rng = this.rng;
    const x = rng.next();
    const mode = (): { mode?: Mode; modeVia: 'body' | 'query' } => ({
      ...(rng.chance(0.8) ? { mode: rng.pick(['ALL_OR_NOTHING', 'BEST_EFFORT'] as const) } : {}),
      modeVia: rng.chance(0.3) ? 'query' : 'body',
    });
    if (x < 0.25) {
      const table = rng.pick(this.writable(p, 'create'));
      return { kind: 'create', table, body: this.createBody(p, view.db, table) };
    }
    if (x < 0.35) {
      const table = rng.pick(this.writable(p, 'create'));
      const items: Row[] = [];
      const db = structuredClone(view.db);
      for (let i = rng.int(1, 4); i > 0; i--) {
        const body = this.createBody(p, db, table);
        items.push(body);
        if (table === 'OrderItem' && body.orderId !== undefined) db.OrderItem.push({ ...body });
      }
      return { kind: 'bulkCreate', table, items, ...mode() };
    }
    if (x < 0.6) {
      const table = rng.pick(
        this.writable(p, 'update')
          .filter((t) => t !== 'OrderItem')
          .concat(['Order']),
      );
      const row = this.target(view, table);
      return {
        kind: 'patch',
        table,
        id: row?.id ?? 99_999,
        body: rng.chance(0.08) ? {} : this.patchBody(p, view.db, table),
      };
    }
    if (x < 0.75) {
      const table = rng.pick(this.writable(p, 'update'));
      const filters = rng.chance(0.05) ? [] : this.filters(view, table, false, 2);
      if (filters.length === 0 && rng.chance(0.9)) filters.push(this.leaf(view, table, false));
      return { kind: 'patchWhere', table, filters, body: rng.chance(0.15) ? {} : this.patchBody(p, view.db, table) };
    }
    if (x < 0.88) {
      const table = rng.pick(
        this.writable(p, 'delete')
          .filter((t) => t !== 'OrderItem')
          .concat(['Order']),
      );
      const row = this.target(view, table);
      return { kind: 'delete', table, id: row?.id ?? 99_999 };
    }
    const table = rng.pick(this.writable(p, 'delete'));
    const rows = Array.from({ length: rng.int(1, 4) }, () => this.target(view, table)).filter(
      (r): r is Row => r !== undefined,
    );
    const keyed = rows.map((r) => Object.fromEntries(SCHEMA[table].key.map((k) => [k, r[k]!])));
    if (table !== 'OrderItem' && rng.chance(0.6))
      return { kind: 'bulkDelete', table, ids: keyed.map((k) => k.id!), ...mode() };
    return {
      kind: 'bulkDelete',
      table,
      filters: keyed.length ? keyed : [{ ...Object.fromEntries(SCHEMA[table].key.map((k) => [k, 99_999])) }],
      ...mode(),
    };
  }
}
