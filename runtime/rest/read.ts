/** GET /<table>/<id>, GET /<table> and POST /<table>/_query (docs/api.md §5.3, §5.4, §5.10). */
import { header, Problem, rawJsonReply, type Reply } from '../http/index.ts';
import {
  and,
  compactJson,
  compileRead,
  keptKeyedRead,
  keptRecordRead,
  type Condition,
  type SelectItem,
} from '../query/index.ts';
import {
  budgeted,
  filterContext,
  keyCondition,
  listCost,
  notFound,
  readOneCost,
  readPage,
  readScope,
  type DataContext,
} from '../data/index.ts';
import { parseListParams, type ListParams } from './list-params.ts';

function compileOne(ctx: DataContext, key: Condition, select: SelectItem[] | null) {
  const scope = readScope(ctx);
  const { sql, jsonb } = compileRead(
    scope,
    { table: ctx.table.spec.name, select, where: { kind: 'true' }, key, orderBy: [], limit: 1, offset: 0 },
    { single: true },
  );
  return { sql, values: scope.params.values, jsonb };
}

export async function readOne(ctx: DataContext): Promise<Reply> {
  const where = keyCondition(ctx, ctx.req.params.id!);
  const selectText = ctx.req.query.get('select');
  const select =
    selectText === null
      ? null
      : parseListParams(filterContext(ctx), ctx.table, new URLSearchParams({ select: selectText })).select;
  const { sql, values, jsonb } =
    (select === null
      ? keptKeyedRead(readScope(ctx), ctx.grant, ctx.table, where)
      : keptRecordRead(readScope(ctx), ctx.table, where, select)) ?? compileOne(ctx, where, select);
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

async function runList(ctx: DataContext, params: ListParams, count: boolean, afterName: string): Promise<Reply> {
  const page = await readPage(ctx, params, {
    count,
    badCursor: (message) =>
      new Problem('invalid-parameter', `${afterName}: ${message}`, [{ field: afterName, rule: 'cursor', message }]),
  });
  const last = page.rows[page.rows.length - 1];
  const pagination = {
    limit: params.limit,
    offset: params.offset,
    hasNextPage: page.hasNextPage,
    hasPreviousPage: params.offset > 0 || params.after !== undefined,
    nextCursor: page.hasNextPage && last ? page.cursorAfter(last) : null,
    ...(page.totalCount !== undefined ? { totalCount: page.totalCount } : {}),
  };
  const headers: Record<string, string> = count ? { 'preference-applied': 'count=exact' } : {};
  const records = page.rows.map((r) => (page.jsonb ? compactJson(r[0] as string) : (r[0] as string)));
  return rawJsonReply(
    200,
    `{"data":[${records.join(',')}],"meta":{"pagination":${JSON.stringify(pagination)}}}`,
    headers,
  );
}

export async function list(ctx: DataContext): Promise<Reply> {
  return respondWithList(ctx, parseListParams(filterContext(ctx), ctx.table, ctx.req.query));
}
