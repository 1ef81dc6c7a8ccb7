/** GET /<table>/<id>, GET /<table> and POST /<table>/_query (docs/api.md §5.3, §5.4, §5.10). */
import { header, Problem, rawJsonReply, type Reply } from '../http/index.ts';
import {
  and,
  compactJson,
  compileRead,
  CursorError,
  parseKey,
  queryFingerprint,
  PerCallerCache,
  type Condition,
  type Grant,
  type SelectItem,
} from '../query/index.ts';
import { budgeted, cursorOwnerOf, readScope, filterContext, type DataContext } from './context.ts';
import { listCost, readOneCost } from './cost.ts';
import { parseListParams, type ListParams } from './list-params.ts';

/** The row condition `<pk> = <id>` for a path id, or a 404 when the id cannot name a record. */
export function keyCondition(ctx: DataContext): Condition & { kind: 'compare' } {
  const field = ctx.table.idField!;
  const raw = ctx.req.params.id!;
  const value = parseKey(field, raw);
  if (value === undefined) throw notFound(ctx, raw);
  return { kind: 'compare', path: [field.name], op: 'equals', value };
}

export function notFound(ctx: DataContext, id: string): Problem {
  return new Problem(
    'not-found',
    `no ${ctx.table.spec.name} record with ${ctx.table.idField?.name ?? 'id'} ${JSON.stringify(id)}`,
  );
}

interface OneRead {
  sql: string;
  values: unknown[];
  select: SelectItem[] | null;
  /** The record may hold jsonb text to compact (CompiledRead.jsonb). */
  jsonb: boolean;
}

function compileOne(ctx: DataContext, key: Condition, select: SelectItem[] | null): OneRead {
  const scope = readScope(ctx);
  const { sql, jsonb } = compileRead(
    scope,
    { table: ctx.table.spec.name, select, where: { kind: 'true' }, key, orderBy: [], limit: 1, offset: 0 },
    { single: true },
  );
  return { sql, values: scope.params.values, select, jsonb };
}

/** A whole-record GET by id compiled for a grant and environment, with the key's value left out. */
interface KeyedRead {
  sql: string;
  values: unknown[];
  jsonb: boolean;
  /** Where the key's value goes in `values`. */
  keyAt: number;
}

// Grants are cached per principal (runtime/query/policy.ts) for as long as its credential is, so they
// key this cache; the values of a row permission are the principal's own and never change.
const keyedReads = new WeakMap<Grant, Map<string, KeyedRead | null>>();
const KEY_PLACEHOLDER = Symbol('key');

/** The whole-record read of `where` (the key condition) without compiling it again, or undefined when it cannot be kept. */
function keyedRead(ctx: DataContext, where: Condition & { kind: 'compare' }): OneRead | undefined {
  let byEnvironment = keyedReads.get(ctx.grant);
  if (!byEnvironment) keyedReads.set(ctx.grant, (byEnvironment = new Map()));
  let keyed = byEnvironment.get(ctx.tenant.environment);
  if (keyed === undefined) {
    const compiled = compileOne(ctx, { ...where, value: KEY_PLACEHOLDER }, null);
    const keyAt = compiled.values.indexOf(KEY_PLACEHOLDER);
    // A row permission that is FALSE leaves the key out of the statement: nothing to keep.
    keyed = keyAt === -1 ? null : { sql: compiled.sql, values: compiled.values, jsonb: compiled.jsonb, keyAt };
    byEnvironment.set(ctx.tenant.environment, keyed);
  }
  if (!keyed) return undefined;
  const values = keyed.values.slice();
  values[keyed.keyAt] = where.value;
  return { sql: keyed.sql, values, select: null, jsonb: keyed.jsonb };
}

export async function readOne(ctx: DataContext): Promise<Reply> {
  const where = keyCondition(ctx);
  const selectText = ctx.req.query.get('select');
  const { sql, values, select, jsonb } =
    selectText === null
      ? (keyedRead(ctx, where) ?? compileOne(ctx, where, null))
      : compileOne(
          ctx,
          where,
          parseListParams(filterContext(ctx), ctx.table, new URLSearchParams({ select: selectText })).select,
        );
  const cost = readOneCost(ctx.catalog, ctx.table, select);
  const rows = await (cost === undefined
    ? ctx.db.queryArrays(sql, values)
    : budgeted(ctx, cost, () => ctx.db.queryArrays(sql, values)));
  if (rows.length === 0) throw notFound(ctx, ctx.req.params.id!);
  const record = rows[0]![0] as string;
  return rawJsonReply(200, `{"data":${jsonb ? compactJson(record) : record}}`);
}

function wantsCount(ctx: DataContext): boolean {
  return /\bcount=exact\b/.test(header(ctx.req, 'prefer') ?? '');
}

/**
 * Runs a list query as one statement and answers with the list envelope; an expensive one
 * (cost.ts) holds a slot of the expensive-read budget from the cursor check to the envelope.
 */
export function respondWithList(ctx: DataContext, params: ListParams, afterName = 'after'): Promise<Reply> {
  const count = wantsCount(ctx);
  const cost = listCost(ctx.catalog, ctx.table, { ...params, where: and(params.where, ctx.grant.rows), count });
  return budgeted(ctx, cost, () => runList(ctx, params, count, afterName));
}

/** A page's statement: its text, parameters, cursor columns and the fingerprint its cursors are bound to. */
interface PageStatement {
  sql: string;
  values: unknown[];
  keyColumns: number;
  jsonb: boolean;
  fingerprint: string;
}

/** A page statement kept for its shape, with the limit and offset left to each page. */
interface KeptPage extends Omit<PageStatement, 'values'> {
  values: readonly unknown[];
  limitAt: number;
  offsetAt: number | undefined;
}

// Every value a page statement takes from its caller (row permissions of every table it reads,
// embeds included) is that principal's own and never changes while its Access lives, so a
// statement compiled for one caller, table and page shape serves that caller's next pages.
const keptPages = new PerCallerCache<KeptPage>(1_000);
/** Longer statements (very wide selects) are compiled afresh each time (a bound on what the cache holds). */
const MAX_KEPT_PAGE_CHARS = 20_000;

/**
 * The page statement of a list without the caller's own filters and cursor (the common "next
 * page" shape): compiled once per caller and shape, then only the limit and offset change.
 */
function keptPage(ctx: DataContext, params: ListParams, count: boolean): PageStatement {
  const key = `${ctx.table.spec.name}\n${ctx.tenant.environment}\n${count}\n${params.offset > 0}\n${JSON.stringify(params.select)}\n${JSON.stringify(params.orderBy)}`;
  let kept = keptPages.get(ctx.access, key);
  if (!kept) {
    const compiled = compilePage(ctx, params, count, undefined);
    kept = { ...compiled, limitAt: compiled.limitAt!, offsetAt: compiled.offsetAt };
    if (kept.sql.length <= MAX_KEPT_PAGE_CHARS) keptPages.set(ctx.access, key, kept);
  }
  const values = kept.values.slice();
  values[kept.limitAt] = params.limit + 1;
  if (kept.offsetAt !== undefined) values[kept.offsetAt] = params.offset;
  return { sql: kept.sql, values, keyColumns: kept.keyColumns, jsonb: kept.jsonb, fingerprint: kept.fingerprint };
}

function compilePage(
  ctx: DataContext,
  params: ListParams,
  count: boolean,
  after: (string | null)[] | undefined,
  fingerprint = listFingerprint(ctx, params),
): PageStatement & { limitAt?: number; offsetAt?: number } {
  const scope = readScope(ctx);
  const compiled = compileRead(
    scope,
    {
      table: ctx.table.spec.name,
      select: params.select,
      where: params.where,
      orderBy: params.orderBy,
      limit: params.limit + 1,
      offset: params.offset,
      after,
    },
    { count },
  );
  return { ...compiled, values: scope.params.values, fingerprint };
}

/** What a list's cursors are bound to besides their caller (cursorOwnerOf): table, environment, order and filter. */
function listFingerprint(ctx: DataContext, params: ListParams): string {
  return queryFingerprint([ctx.table.spec.name, ctx.tenant.environment, params.orderBy, params.where]);
}

async function runList(ctx: DataContext, params: ListParams, count: boolean, afterName: string): Promise<Reply> {
  let compiled: PageStatement;
  let after: (string | null)[] | undefined;
  if (params.after === undefined && params.where.kind === 'true') {
    compiled = keptPage(ctx, params, count);
  } else {
    const fingerprint = listFingerprint(ctx, params);
    if (params.after !== undefined) {
      try {
        after = ctx.cursors.decode(cursorOwnerOf(ctx), fingerprint, params.after);
      } catch (error) {
        if (!(error instanceof CursorError)) throw error;
        throw new Problem('invalid-parameter', `${afterName}: ${error.message}`, [
          { field: afterName, rule: 'cursor', message: error.message },
        ]);
      }
    }
    compiled = compilePage(ctx, params, count, after, fingerprint);
    if (after && after.length !== compiled.keyColumns) {
      throw new Problem('invalid-parameter', `${afterName}: not a cursor of this query`, [
        { field: afterName, rule: 'cursor', message: 'not a cursor of this query' },
      ]);
    }
  }
  let rows = await ctx.db.queryArrays(compiled.sql, compiled.values);
  let totalCount: number | undefined;
  if (count) {
    totalCount = Number(rows[0]?.[compiled.keyColumns + 1] ?? 0);
    if (rows.length === 1 && rows[0]![0] === null) rows = [];
  }
  const hasNextPage = rows.length > params.limit;
  const page = hasNextPage ? rows.slice(0, params.limit) : rows;
  const last = page[page.length - 1];
  const nextCursor =
    hasNextPage && last
      ? ctx.cursors.encode(
          cursorOwnerOf(ctx),
          compiled.fingerprint,
          last.slice(1, 1 + compiled.keyColumns) as (string | null)[],
        )
      : null;
  const pagination = {
    limit: params.limit,
    offset: params.offset,
    hasNextPage,
    hasPreviousPage: params.offset > 0 || after !== undefined,
    nextCursor,
    ...(totalCount !== undefined ? { totalCount } : {}),
  };
  const headers: Record<string, string> = count ? { 'preference-applied': 'count=exact' } : {};
  const records = page.map((r) => (compiled.jsonb ? compactJson(r[0] as string) : (r[0] as string)));
  return rawJsonReply(
    200,
    `{"data":[${records.join(',')}],"meta":{"pagination":${JSON.stringify(pagination)}}}`,
    headers,
  );
}

export async function list(ctx: DataContext): Promise<Reply> {
  return respondWithList(ctx, parseListParams(filterContext(ctx), ctx.table, ctx.req.query));
}
