/**
 * The runner of test/query/authorization-differential.test.ts: sends generated cases, compares every
 * answer (and after writes the database) with the reference model, shrinks the cases that differ,
 * and runs the non-interference check. Failures are collected and reported together.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Database } from '../../runtime/db/index.ts';
import { keyOf, SCHEMA, sortDb, TABLES, type Db, type Row, type Table } from './authz-schema.ts';
import { invisibleChanges } from './authz-generator.ts';
import {
  close,
  loadDb,
  mismatch,
  normalize,
  performRead,
  renderRead,
  renderWrite,
  writeDb,
  type Send,
} from './authz-http.ts';
import { DATE_HELPERS, type RequestGen } from './authz-requests.ts';
import { shrink, shrinkDataset } from './authz-shrink.ts';
import { viewOf, type Principal, type RolesConfig, type View } from './reference-policy.ts';
import { answerRead, type Cond, type Expected, type ReadReq, type SelectItem } from './reference-read.ts';
import { GEN, modelWrite, type WriteReq } from './reference-write.ts';
import type { Rng } from './authz-schema.ts';

export interface Failure {
  phase: string;
  principal: Principal;
  original: ReadReq | WriteReq;
  minimal: ReadReq | WriteReq;
  expected: unknown;
  actual: unknown;
  why: string;
  signature: string;
  /** The smaller dataset that still shows the difference (thorough shrinking only). */
  dataset?: Db;
}

export interface Ctx {
  seed: number;
  roles: RolesConfig;
  send: Send;
  sql: Database;
  /** The model's copy of the database, always equal to the database between cases. */
  db: Db;
  failures: Failure[];
  /** Failures per signature that were shrunk already (the rest are counted only). */
  shrunk: Map<string, number>;
  counts: Record<string, number>;
  /** Also shrink the dataset of differing reads (slow: for replaying one seed). */
  thorough?: boolean;
}

/** The filters of an embed, at any depth of a select. */
const embedFilters = (items: SelectItem[] | undefined): Cond[] =>
  (items ?? []).flatMap((it) => (it.kind === 'embed' ? [...(it.filters ?? []), ...embedFilters(it.items)] : []));

const usesDates = (req: ReadReq | WriteReq) => {
  const own: Cond[] =
    'filters' in req &&
    Array.isArray(req.filters) &&
    req.filters.every((c) => typeof c === 'object' && c && 'kind' in c)
      ? (req.filters as Cond[])
      : [];
  const conds = [...own, ...('select' in req ? embedFilters(req.select) : [])];
  const leaves = (c: Cond): boolean => (c.kind === 'leaf' ? DATE_HELPERS.includes(c.op) : c.items.some(leaves));
  return conds.some(leaves);
};

/** The expected answer of a read; date helpers are evaluated at both ends of the request (a day may turn meanwhile). */
async function checkRead(ctx: Ctx, view: View, p: Principal, req: ReadReq) {
  const expected = answerRead({ ...view, now: Date.now() }, req);
  const actual = await performRead(ctx.send, p, req);
  let why = mismatch(expected, actual.status, actual.body);
  if (
    why &&
    usesDates(req) &&
    mismatch(answerRead({ ...view, now: Date.now() }, req), actual.status, actual.body) === null
  )
    why = null;
  return { expected, actual, why };
}

const signatureOf = (phase: string, req: ReadReq | WriteReq, expected: Expected, status: number, why: string) =>
  `${phase}: ${req.kind}${'via' in req ? `/${req.via}` : ''} ${req.table}: expected ${expected.status} got ${status}${why.startsWith('status') ? '' : ` (${why})`}`;

/**
 * Shrinking costs requests: the first failure of each signature is shrunk, at most
 * SVCGEN_AUTHZ_SHRINKS (default 8) per phase, half of that in the non-interference phase (each of
 * its tries rewrites the database twice).
 */
const SHRINKS = Number(process.env.SVCGEN_AUTHZ_SHRINKS ?? 8);
function record(ctx: Ctx, f: Failure): boolean {
  ctx.failures.push(f);
  const key = `${f.phase}\n${f.signature}`;
  const inPhase = [...ctx.shrunk.keys()].filter((k) => k.startsWith(`${f.phase}\n`)).length;
  if (ctx.shrunk.has(key) || inPhase >= (f.phase === 'non-interference' ? SHRINKS / 2 : SHRINKS)) return false;
  ctx.shrunk.set(key, 1);
  return true;
}

export async function pool<T, R>(items: T[], width: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** Read cases against the current state, `width` in flight; differing ones are shrunk afterwards. */
export async function runReads(
  ctx: Ctx,
  phase: string,
  cases: { p: Principal; req: ReadReq }[],
  width = 8,
): Promise<void> {
  const views = new Map<Principal, View>();
  const viewFor = (p: Principal) => views.get(p) ?? views.set(p, viewOf(ctx.roles, p, ctx.db)).get(p)!;
  const results = await pool(cases, width, async ({ p, req }) => checkRead(ctx, viewFor(p), p, req));
  ctx.counts[phase] = (ctx.counts[phase] ?? 0) + cases.length;
  for (const [i, r] of results.entries()) {
    if (!r.why) continue;
    const { p, req } = cases[i]!;
    const f: Failure = {
      phase,
      principal: p,
      original: req,
      minimal: req,
      expected: r.expected,
      actual: { status: r.actual.status, body: r.actual.body },
      why: r.why,
      signature: signatureOf(phase, req, r.expected, r.actual.status, r.why),
    };
    if (!record(ctx, f)) continue;
    const small = await shrink(req, async (c) => (await checkRead(ctx, viewFor(p), p, c)).why !== null, 50);
    let last = await checkRead(ctx, viewFor(p), p, small.req);
    if (ctx.thorough && last.why) {
      const onData = async (d: Db) => {
        await writeDb(ctx.sql, d);
        return (await checkRead(ctx, viewOf(ctx.roles, p, d), p, small.req)).why !== null;
      };
      f.dataset = await shrinkDataset(ctx.db, onData);
      await writeDb(ctx.sql, f.dataset);
      last = await checkRead(ctx, viewOf(ctx.roles, p, f.dataset), p, small.req);
      await writeDb(ctx.sql, ctx.db);
    }
    Object.assign(f, {
      minimal: small.req,
      expected: last.expected,
      actual: { status: last.actual.status, body: last.actual.body },
      why: last.why ?? f.why,
    });
  }
}

// ------------------------------------------------------------------------------------------------
// writes

/** Compares the database after a write with the model's prediction; returns the created rows (in the model's order) and the differences. */
export function diffDb(
  before: Db,
  predicted: Db,
  createdModel: { table: Table; row: Row }[],
  touched: Set<string>,
  after: Db,
): { created: Row[]; problems: string[] } {
  const problems: string[] = [];
  const created: Row[] = [];
  for (const t of TABLES) {
    const had = new Map(before[t].map((r) => [keyOf(t, r), r]));
    const fresh = after[t].filter((r) => !had.has(keyOf(t, r))).sort((a, b) => Number(a.id) - Number(b.id));
    const want = createdModel.filter((c) => c.table === t).map((c) => c.row);
    if (fresh.length !== want.length) problems.push(`${t}: ${fresh.length} rows created, expected ${want.length}`);
    want.forEach((w, i) => {
      const got = SCHEMA[t].serial ? fresh[i] : fresh.find((r) => keyOf(t, r) === keyOf(t, w));
      created.push(got ?? w);
      if (!got) return;
      for (const [f, v] of Object.entries(w))
        if (v !== GEN && JSON.stringify(got[f]) !== JSON.stringify(v))
          problems.push(
            `${t} new row ${keyOf(t, got)}: ${f} = ${JSON.stringify(got[f])}, expected ${JSON.stringify(v)}`,
          );
    });
    const now = new Map(after[t].filter((r) => had.has(keyOf(t, r))).map((r) => [keyOf(t, r), r]));
    const kept = new Map(predicted[t].filter((r) => r.id !== GEN && had.has(keyOf(t, r))).map((r) => [keyOf(t, r), r]));
    for (const k of new Set([...now.keys(), ...kept.keys()])) {
      const a = now.get(k);
      const e = kept.get(k);
      if (!a || !e) {
        problems.push(`${t} ${k}: ${a ? 'still there, expected gone' : 'gone, expected kept'}`);
        continue;
      }
      for (const f of Object.keys(SCHEMA[t].fields)) {
        if (f === 'updatedAt' && touched.has(`${t}/${k}`)) {
          if (a.updatedAt === had.get(k)!.updatedAt) problems.push(`${t} ${k}: updatedAt did not move`);
        } else if (JSON.stringify(a[f]) !== JSON.stringify(e[f]))
          problems.push(`${t} ${k}: ${f} = ${JSON.stringify(a[f])}, expected ${JSON.stringify(e[f])}`);
      }
    }
  }
  return { created, problems };
}

async function checkWrite(ctx: Ctx, p: Principal, req: WriteReq) {
  const before = ctx.db;
  const outcome = modelWrite(ctx.roles, p, before, req);
  const res = await ctx.send(p, renderWrite(req));
  const after = await loadDb(ctx.sql);
  let { created, problems } = diffDb(before, outcome.predicted, outcome.created, outcome.touched, after);
  let expected: Expected;
  try {
    expected = outcome.answer(created, after);
  } catch {
    expected = { status: -1 };
  }
  const why = mismatch(expected, res.status, res.body);
  // an error answer the spec also allows (an alternative) changes nothing
  if (why === null && mismatch({ ...expected, alternatives: [] }, res.status, res.body) !== null && res.status >= 400) {
    ({ created, problems } = diffDb(before, before, [], new Set(), after));
  }
  const dbWhy = problems.length ? `database: ${problems.slice(0, 4).join('; ')}` : null;
  return { expected, actual: { status: res.status, body: res.body }, why: why ?? dbWhy, after };
}

/** One write case: model, send, compare answer and database; the model takes the database's state afterwards. */
export async function runWrite(ctx: Ctx, phase: string, p: Principal, req: WriteReq): Promise<void> {
  const before = ctx.db;
  const r = await checkWrite(ctx, p, req);
  ctx.counts[phase] = (ctx.counts[phase] ?? 0) + 1;
  ctx.db = r.after;
  if (!r.why) return;
  const f: Failure = {
    phase,
    principal: p,
    original: req,
    minimal: req,
    expected: r.expected,
    actual: r.actual,
    why: r.why,
    signature: signatureOf(phase, req, r.expected, r.actual.status, r.why),
  };
  if (!record(ctx, f)) return;
  const stillFails = async (c: WriteReq) => {
    await writeDb(ctx.sql, before);
    ctx.db = before;
    return (await checkWrite(ctx, p, c)).why !== null;
  };
  const small = await shrink(req, stillFails, 25);
  await writeDb(ctx.sql, before);
  ctx.db = before;
  const last = await checkWrite(ctx, p, small.req);
  Object.assign(f, { minimal: small.req, expected: last.expected, actual: last.actual, why: last.why ?? f.why });
  await writeDb(ctx.sql, r.after);
  ctx.db = await loadDb(ctx.sql);
}

// ------------------------------------------------------------------------------------------------
// non-interference

/**
 * Asks `reqs` as `p`, changes through SQL only data `p` cannot see (the model checks that every
 * visible row and field stays the same), asks again: every answer must be the same.
 */
export async function runNonInterference(
  ctx: Ctx,
  phase: string,
  p: Principal,
  gen: RequestGen,
  rng: Rng,
  n: number,
): Promise<string[]> {
  const view = viewOf(ctx.roles, p, ctx.db);
  const reqs: ReadReq[] = [];
  gen.relationBias = 0.8;
  while (reqs.length < n) {
    const r = gen.read(view);
    if (!usesDates(r) && (r.kind !== 'list' || r.filters.length || r.select)) reqs.push(r);
  }
  gen.relationBias = 0.35;
  const ask = (rs: ReadReq[]) => pool(rs, 8, (r) => performRead(ctx.send, p, r));
  const before = ctx.db;
  const first = await ask(reqs);
  const { db: changedState, changes } = invisibleChanges(ctx.roles, p, before, rng, 8, Date.now());
  const changed = sortDb(changedState);
  await writeDb(ctx.sql, changed);
  const loaded = await loadDb(ctx.sql);
  if (!isDeepStrictEqual(loaded, changed)) {
    const t = TABLES.find((x) => !isDeepStrictEqual(loaded[x], changed[x]))!;
    const i = loaded[t].findIndex((r, k) => !isDeepStrictEqual(r, changed[t][k]));
    throw new Error(
      `the database does not hold the changed state: ${t} ${JSON.stringify(loaded[t][i])} ≠ ${JSON.stringify(changed[t][i])}`,
    );
  }
  ctx.db = loaded;
  const second = await ask(reqs);
  ctx.counts[phase] = (ctx.counts[phase] ?? 0) + n;
  const same = (a: { status: number; body: unknown }, b: { status: number; body: unknown }) =>
    a.status === b.status && close(normalize(a.body), normalize(b.body));
  for (const [i, req] of reqs.entries()) {
    if (same(first[i]!, second[i]!)) continue;
    const f: Failure = {
      phase,
      principal: p,
      original: req,
      minimal: req,
      expected: { before: first[i]!.body, status: first[i]!.status },
      actual: { after: second[i]!.body, status: second[i]!.status },
      why: `the answer changed after changes to data the principal cannot see: ${changes.join('; ')}`,
      signature: `${phase}: ${req.kind}${'via' in req ? `/${req.via}` : ''} ${req.table} answer changed`,
    };
    if (!record(ctx, f)) continue;
    const differsNow = async (c: ReadReq) => {
      await writeDb(ctx.sql, before);
      const a = await performRead(ctx.send, p, c);
      await writeDb(ctx.sql, changed);
      return !same(a, await performRead(ctx.send, p, c));
    };
    const small = await shrink(req, differsNow, 12);
    await writeDb(ctx.sql, before);
    const a = await performRead(ctx.send, p, small.req);
    await writeDb(ctx.sql, changed);
    const b = await performRead(ctx.send, p, small.req);
    Object.assign(f, {
      minimal: small.req,
      expected: { status: a.status, before: a.body },
      actual: { status: b.status, after: b.body },
    });
  }
  return changes;
}

// ------------------------------------------------------------------------------------------------
// reporting

const clip = (x: unknown, n = 1200) => {
  const s = typeof x === 'string' ? x : JSON.stringify(x);
  return s.length > n ? `${s.slice(0, n)}…` : s;
};

export function report(ctx: Ctx, phase: string): string {
  const mine = ctx.failures.filter((f) => f.phase === phase);
  const bySignature = new Map<string, Failure[]>();
  for (const f of mine) bySignature.set(f.signature, [...(bySignature.get(f.signature) ?? []), f]);
  const cases = process.env.SVCGEN_AUTHZ_CASES ? ` SVCGEN_AUTHZ_CASES=${process.env.SVCGEN_AUTHZ_CASES}` : '';
  const lines = [
    `${mine.length} of ${ctx.counts[phase] ?? 0} cases differ (seed ${ctx.seed}; replay with SVCGEN_AUTHZ_SEED=${ctx.seed}${cases})`,
  ];
  for (const [sig, fs] of [...bySignature].sort((a, b) => b[1].length - a[1].length)) {
    lines.push(
      `\n▶ ${fs.length}× ${sig}${fs.some((x) => x.minimal !== x.original) ? ' (shrunk example)' : ' (smallest example, not shrunk)'}`,
    );
    const size = (x: Failure) => JSON.stringify(x.minimal).length;
    const example = fs.find((x) => x.minimal !== x.original) ?? [...fs].sort((a, b) => size(a) - size(b))[0]!;
    for (const f of [example]) {
      const call =
        f.minimal.kind === 'list' || f.minimal.kind === 'get' || f.minimal.kind === 'aggregate'
          ? renderRead(f.minimal)
          : renderWrite(f.minimal);
      lines.push(
        `  principal: ${f.principal.name}${f.principal.user ? ` (user ${f.principal.user.id} ${f.principal.user.email})` : ''}`,
        `  request:   ${call.method} ${decodeURIComponent(call.path)}${call.body !== undefined ? ` ${clip(call.body, 600)}` : ''}${f.minimal.kind === 'list' && f.minimal.walk ? ` (cursor walk, pages of ${f.minimal.walk})` : ''}`,
        `  why:       ${clip(f.why, 600)}`,
        ...(f.dataset ? [`  dataset:   ${clip(Object.fromEntries(TABLES.map((t) => [t, f.dataset![t]])), 3000)}`] : []),
        `  expected:  ${clip(f.expected)}`,
        `  actual:    ${clip(f.actual)}`,
      );
    }
  }
  return lines.join('\n');
}
