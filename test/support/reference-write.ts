/**
 * Reference answers of the data API's writes (docs/api.md 5.11–5.15) under docs/permissions.md
 * "Writing" and "Several roles", for test/query/authorization-differential.test.ts: which fields a
 * row may take (the union of the lists of the roles allowing the action on it), presets, which rows
 * an update or delete may touch, the after-the-fact row_filter check, and the database afterwards.
 */
import {
  clone,
  DEFAULTS,
  FOREIGN_KEYS,
  keyOf,
  SCHEMA,
  type Db,
  type Row,
  type Table,
  type Value,
} from './authz-schema.ts';
import {
  and3,
  cannotName,
  filterHolds,
  grants,
  variable,
  viewOf,
  type Grant,
  type Principal,
  type RolesConfig,
} from './reference-policy.ts';
import { evalCond, leafParam, problem, project, type Cond, type Expected, type Leaf } from './reference-read.ts';

export type Mode = 'ALL_OR_NOTHING' | 'BEST_EFFORT';
export interface CreateReq {
  kind: 'create';
  table: Table;
  body: Row;
}
export interface PatchReq {
  kind: 'patch';
  table: Table;
  id: Value;
  body: Row;
}
export interface PatchWhereReq {
  kind: 'patchWhere';
  table: Table;
  filters: Cond[];
  body: Row;
}
export interface DeleteReq {
  kind: 'delete';
  table: Table;
  id: Value;
}
export interface BulkCreateReq {
  kind: 'bulkCreate';
  table: Table;
  items: Row[];
  mode?: Mode;
  modeVia: 'body' | 'query';
}
export interface BulkDeleteReq {
  kind: 'bulkDelete';
  table: Table;
  ids?: Value[];
  filters?: Row[];
  mode?: Mode;
  modeVia: 'body' | 'query';
}
export type WriteReq = CreateReq | PatchReq | PatchWhereReq | DeleteReq | BulkCreateReq | BulkDeleteReq;

/** Marks a value the database generates (serial id, createdAt, updatedAt of a new row). */
export const GEN = '<generated>';

export interface WriteOutcome {
  /** The database afterwards; created rows carry GEN where the database fills in. */
  predicted: Db;
  /** Created rows, in insertion order. */
  created: { table: Table; row: Row }[];
  /** Keys (`Table/key`) of rows an update changed: their updatedAt must move. */
  touched: Set<string>;
  /** The expected answer, given the created rows as the database made them and the state afterwards. */
  answer(created: Row[], after: Db): Expected;
}

interface Env {
  roles: RolesConfig;
  p: Principal;
  now: number;
}
type ItemError = { status: number; kind: string; rule: string; alternatives?: Expected[]; why?: string };
type ItemResult = { error: ItemError } | { row: Row };

/** Fields a variable entry of the filter fills on create (`field: "$user.id"` or `{ equals: "$..." }`). */
function presetVariables(g: Grant): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(g.filter ?? {})) {
    if (k.includes('.')) continue;
    const text =
      typeof v === 'string'
        ? v
        : v && typeof v === 'object' && Object.keys(v).length === 1
          ? (v as { equals?: unknown }).equals
          : undefined;
    if (typeof text === 'string' && text.startsWith('$')) out[k] = text;
  }
  return out;
}

/**
 * CONTRACT §5 "Several roles": a row's writable fields are the union of the lists of the roles
 * that allow the action on that row. So `fields` may be written on `row` when each of them is
 * listed by some grant whose filter holds there; with no fields, when some grant's filter holds.
 */
const listing = (g: Grant, f: string) => g.fields === null || g.fields.includes(f);

/** The fields of `fields` that no grant whose filter holds on `row` lists (all of them writable: []). */
function unwritableOn(env: Env, db: Db, table: Table, row: Row, gs: Grant[], fields: string[]): string[] {
  const holding = gs.filter((g) => filterHolds(db, env.p, table, row, g.filter, env.now));
  return fields.filter((f) => !holding.some((g) => listing(g, f)));
}

function writableOn(env: Env, db: Db, table: Table, row: Row, gs: Grant[], fields: string[]): boolean {
  if (fields.length === 0) return gs.some((g) => filterHolds(db, env.p, table, row, g.filter, env.now));
  return unwritableOn(env, db, table, row, gs, fields).length === 0;
}

/** Body fields that no grant lists at all: 403 forbidden_field before anything else. */
const unlisted = (gs: Grant[], fields: string[]) => fields.filter((f) => !gs.some((g) => listing(g, f)));

/**
 * The grants bearing on a body: those listing one of its fields (all when it has none). Their
 * presets fill what the body leaves out; a preset field named in the body is the body's.
 */
function bearing(gs: Grant[], fields: string[]): Grant[] {
  return fields.length === 0 ? gs : gs.filter((g) => fields.some((f) => listing(g, f)));
}

function forbidden(gs: Grant[], fields: string[]): Expected {
  const listed = new Set(gs.flatMap((g) => g.fields ?? fields));
  return problem(403, 'forbidden', { rules: ['forbidden_field'], params: fields.filter((f) => !listed.has(f)) });
}

function fkError(db: Db, table: Table, row: Row): boolean {
  return FOREIGN_KEYS.some(
    (fk) =>
      fk.table === table &&
      row[fk.field] !== null &&
      row[fk.field] !== undefined &&
      !db[fk.target].some((r) => r.id === row[fk.field]),
  );
}
function uniqueError(db: Db, table: Table, row: Row, self?: string): boolean {
  const spec = SCHEMA[table];
  const others = db[table].filter((r) => keyOf(table, r) !== self);
  if (
    spec.key.every((k) => row[k] !== undefined && row[k] !== GEN) &&
    others.some((r) => keyOf(table, r) === keyOf(table, row))
  )
    return true;
  return Object.entries(spec.fields).some(([f, s]) => s.unique && others.some((r) => r[f] === row[f]));
}

/** One create, applied to `db` when it succeeds: the new row must take every field of the body (writableOn). */
function createOne(env: Env, db: Db, table: Table, body: Row, gs: Grant[]): ItemResult {
  const fields = Object.keys(body);
  const ds = bearing(gs, fields);
  const presets = new Map<string, string | null>();
  for (const g of ds) {
    for (const [f, text] of Object.entries(presetVariables(g))) {
      const v = variable(env.p, text) ?? null;
      presets.set(f, presets.has(f) && presets.get(f) !== v ? null : v);
    }
  }
  const row: Row = { ...DEFAULTS[table], ...body };
  for (const [f, v] of presets) if (!(f in body) && v !== null) row[f] = v;
  const missing = Object.entries(SCHEMA[table].fields).some(
    ([f, s]) => s.required && (row[f] === undefined || row[f] === null),
  );
  const next: Row = { ...row };
  if (SCHEMA[table].serial && next.id === undefined) next.id = GEN;
  next.createdAt = GEN;
  next.updatedAt = GEN;
  const rowFilter = () => !writableOn(env, { ...db, [table]: [...db[table], next] }, table, next, gs, fields);
  if (missing) {
    // a preset the caller has no value for leaves the field out: the row could not match the filter either
    const unfilled = ds.some((g) => Object.keys(presetVariables(g)).some((f) => !(f in body) && !presets.get(f)));
    return unfilled
      ? {
          error: {
            status: 422,
            kind: 'validation',
            rule: 'required',
            alternatives: [problem(403, 'forbidden', { rules: ['row_filter'] })],
            why: 'a preset variable the caller lacks: 422 required or 403 row_filter',
          },
        }
      : { error: { status: 422, kind: 'validation', rule: 'required' } };
  }
  const fk = fkError(db, table, next);
  const unique = uniqueError(db, table, next);
  const filterFails = rowFilter();
  const errors: ItemError[] = [];
  if (fk) errors.push({ status: 422, kind: 'validation', rule: 'foreign_key' });
  if (unique) errors.push({ status: 409, kind: 'conflict', rule: 'unique' });
  if (filterFails) errors.push({ status: 403, kind: 'forbidden', rule: 'row_filter' });
  if (errors.length) {
    const [first, ...rest] = errors;
    return {
      error: rest.length
        ? {
            ...first!,
            alternatives: rest.map((e) => problem(e.status, e.kind, { rules: [e.rule] })),
            why: 'several errors at once',
          }
        : first!,
    };
  }
  db[table].push(next);
  return { row: next };
}

const asExpected = (e: ItemError): Expected => ({
  ...problem(e.status, e.kind, e.rule === 'row_filter' || e.rule === 'forbidden_field' ? { rules: [e.rule] } : {}),
  alternatives: e.alternatives,
  why: e.why,
});

/** The visible record of `row` for the caller, `{}` when the row is not visible. */
function recordOf(env: Env, after: Db, table: Table, row: Row): Record<string, unknown> {
  const view = viewOf(env.roles, env.p, after, env.now);
  const r = view.tables[table].byKey.get(keyOf(table, row));
  return r ? project(view, table, r) : {};
}

function deleteCascade(db: Db, table: Table, row: Row): void {
  db[table] = db[table].filter((r) => r !== row);
  for (const fk of FOREIGN_KEYS) {
    if (fk.target !== table) continue;
    for (const child of db[fk.table].filter((r) => r[fk.field] === row.id)) {
      if (fk.onDelete === 'cascade') deleteCascade(db, fk.table, child);
      else if (fk.onDelete === 'setNull') child[fk.field] = null;
    }
  }
}
const restricted = (db: Db, table: Table, row: Row) =>
  FOREIGN_KEYS.some(
    (fk) => fk.target === table && fk.onDelete === 'restrict' && db[fk.table].some((r) => r[fk.field] === row.id),
  );

/** Rows an update or delete may act on: visible to the caller, and some grant's filter holds (the grants allowing the action). */
function targets(env: Env, db: Db, table: Table, ds: Grant[]): Row[] {
  const view = viewOf(env.roles, env.p, db, env.now);
  return view.tables[table].rows
    .map((r) => r.row)
    .filter((row) => ds.some((g) => filterHolds(db, env.p, table, row, g.filter, env.now)));
}

const done = (
  predicted: Db,
  answer: WriteOutcome['answer'],
  created: WriteOutcome['created'] = [],
  touched = new Set<string>(),
): WriteOutcome => ({ predicted, created, touched, answer });
const fixed = (db: Db, e: Expected) => done(db, () => e);

export function modelWrite(
  roles: RolesConfig,
  p: Principal,
  before: Db,
  req: WriteReq,
  now = Date.now(),
): WriteOutcome {
  const env: Env = { roles, p, now };
  const db = clone(before);
  const action =
    req.kind === 'create' || req.kind === 'bulkCreate'
      ? 'create'
      : req.kind === 'delete' || req.kind === 'bulkDelete'
        ? 'delete'
        : 'update';
  const gs = grants(roles, p, req.table, action);
  if (gs.length === 0) return fixed(before, problem(403, 'forbidden'));

  if (req.kind === 'create' || req.kind === 'bulkCreate') {
    const bodies = req.kind === 'create' ? [req.body] : req.items;
    const bad = bodies.find((b) => unlisted(gs, Object.keys(b)).length > 0);
    if (bad) return fixed(before, forbidden(gs, Object.keys(bad)));
    const results = bodies.map((b) => createOne(env, db, req.table, b, gs));
    return createOutcome(env, before, db, req, results);
  }

  if (req.kind === 'delete' || req.kind === 'bulkDelete') {
    if (req.kind === 'delete') {
      const row = targets(env, db, req.table, gs).find((r) => keyOf(req.table, r) === String(req.id));
      if (!row) return fixed(before, problem(404, 'not-found'));
      if (restricted(db, req.table, row)) return fixed(before, problem(409, 'conflict'));
      deleteCascade(db, req.table, row);
      return fixed(db, { status: 204 });
    }
    const mode = req.mode ?? 'ALL_OR_NOTHING';
    const entries = req.ids ?? req.filters!;
    const errors: number[] = [];
    const items: unknown[] = [];
    entries.forEach((e, index) => {
      const key = req.ids ? String(e) : SCHEMA[req.table].key.map((k) => String((e as Row)[k])).join('/');
      const row = targets(env, db, req.table, gs).find((r) => keyOf(req.table, r) === key);
      if (!row || restricted(db, req.table, row)) errors.push(index);
      else deleteCascade(db, req.table, row), items.push(req.ids ? { id: e } : e);
    });
    return bulkOutcome(before, db, mode, entries.length, errors, () => items, 200);
  }

  // updates
  const fields = Object.keys(req.body);
  // PATCH /T?<filters>: docs/api.md does not order a forbidden body field (403) against the query (400, 422)
  let queryError: Expected | undefined;
  if (req.kind === 'patchWhere') {
    const leaves = (c: Cond): Leaf[] => (c.kind === 'leaf' ? [c] : c.items.flatMap(leaves));
    const view = viewOf(roles, p, db, now);
    const bad = req.filters.filter((c) => leaves(c).some((l) => cannotName(view, req.table, l.path)));
    if (req.filters.length === 0) queryError = problem(422, 'validation', { params: ['filter'] });
    else if (bad.length)
      queryError = problem(400, 'invalid-parameter', {
        params: bad.flatMap((c) => (c.kind === 'leaf' ? [leafParam(c), c.path.join('.')] : [c.kind])),
      });
  }
  if (unlisted(gs, fields).length > 0) {
    const e = forbidden(gs, fields);
    return fixed(
      before,
      queryError
        ? {
            ...e,
            alternatives: [queryError],
            why: 'a forbidden body field and a bad query: the order is not specified',
          }
        : e,
    );
  }
  if (queryError) return fixed(before, queryError);
  let rows: Row[];
  if (req.kind === 'patch') {
    // A row no grant may update is not found; one some grant may update, but not with every field
    // of the body, is a 403 naming the fields none of its grants lists (CONTRACT §5).
    rows = targets(env, db, req.table, gs).filter((r) => keyOf(req.table, r) === String(req.id));
    if (rows.length === 0) return fixed(before, problem(404, 'not-found'));
    const bad = unwritableOn(env, db, req.table, rows[0]!, gs, fields);
    if (bad.length) return fixed(before, problem(403, 'forbidden', { rules: ['forbidden_field'], params: bad }));
  } else {
    // By filter: rows on which the body's fields are not all writable are not touched and not counted.
    const view = viewOf(roles, p, db, now);
    const chosen = new Set(
      targets(env, db, req.table, gs).filter((r) => writableOn(env, db, req.table, r, gs, fields)),
    );
    rows = view.tables[req.table].rows
      .filter((r) => chosen.has(r.row) && and3(req.filters.map((c) => evalCond(view, req.table, r, c))) === true)
      .map((r) => r.row);
  }
  const touched = new Set<string>();
  if (fields.length > 0) {
    const changed = rows.map((r) => ({ old: r, next: { ...r, ...req.body } }));
    const trial = clone(db);
    trial[req.table] = trial[req.table].map(
      (r) => changed.find((c) => keyOf(req.table, c.old) === keyOf(req.table, r))?.next ?? r,
    );
    // After the change every field of the body must still be writable on the row.
    if (changed.some((c) => !writableOn(env, trial, req.table, c.next, gs, fields)))
      return fixed(before, problem(403, 'forbidden', { rules: ['row_filter'] }));
    if (changed.some((c) => fkError(db, req.table, c.next))) return fixed(before, problem(422, 'validation'));
    if (changed.some((c) => uniqueError(trial, req.table, c.next, keyOf(req.table, c.old))))
      return fixed(before, problem(409, 'conflict'));
    for (const c of changed) {
      Object.assign(c.old, req.body);
      c.old.updatedAt = GEN;
      touched.add(`${req.table}/${keyOf(req.table, c.old)}`);
    }
  }
  if (req.kind === 'patchWhere')
    return done(db, () => ({ status: 200, body: { data: { count: rows.length } } }), [], touched);
  const target = rows[0]!;
  return done(
    db,
    (_c, after) => ({
      status: 200,
      body: {
        data: recordOf(
          env,
          after,
          req.table,
          after[req.table].find((r) => keyOf(req.table, r) === keyOf(req.table, target))!,
        ),
      },
    }),
    [],
    touched,
  );
}

function bulkOutcome(
  before: Db,
  db: Db,
  mode: Mode,
  total: number,
  errors: number[],
  items: (created: Row[]) => unknown[],
  okStatus: number,
  created: WriteOutcome['created'] = [],
  validationErrors: number[] = [],
): WriteOutcome {
  const envelope = (its: unknown[]) => ({
    success: errors.length === 0,
    transactionMode: mode,
    totalRequested: total,
    totalSucceeded: its.length,
    totalFailed: errors.length,
    items: its,
    errors: errors.map((index) => ({ index })),
  });
  if (errors.length && mode === 'ALL_OR_NOTHING') {
    const data = { ...envelope([]), totalFailed: total };
    // docs/api.md does not say whether the other items are still tried once one fails validation
    const onlyValidation =
      validationErrors.length && validationErrors.length < errors.length
        ? { ...data, errors: validationErrors.map((index) => ({ index })) }
        : undefined;
    return done(before, () => ({
      ...problem(422, 'validation'),
      body: { data },
      ...(onlyValidation
        ? {
            alternatives: [{ ...problem(422, 'validation'), body: { data: onlyValidation } }],
            why: 'items failing validation stop the others from being tried',
          }
        : {}),
    }));
  }
  return done(db, (c) => ({ status: errors.length ? 207 : okStatus, body: { data: envelope(items(c)) } }), created);
}

function createOutcome(
  env: Env,
  before: Db,
  db: Db,
  req: CreateReq | BulkCreateReq,
  results: ItemResult[],
): WriteOutcome {
  const created = results.flatMap((r) => ('row' in r ? [{ table: req.table, row: r.row }] : []));
  if (req.kind === 'create') {
    const r = results[0]!;
    if ('error' in r) return fixed(before, asExpected(r.error));
    return done(db, (c, after) => ({ status: 201, body: { data: recordOf(env, after, req.table, c[0]!) } }), created);
  }
  const errors = results.flatMap((r, i) => ('error' in r ? [i] : []));
  const keys = (c: Row[]) => c.map((row) => Object.fromEntries(SCHEMA[req.table].key.map((k) => [k, row[k]])));
  const invalid = results.flatMap((r, i) => ('error' in r && r.error.rule === 'required' ? [i] : []));
  return bulkOutcome(before, db, req.mode ?? 'ALL_OR_NOTHING', results.length, errors, keys, 201, created, invalid);
}
