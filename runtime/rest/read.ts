/** GET /<table>/<id> and GET /<table> (interface "Data endpoints"). */
import { Problem } from '../http/index.ts';
import { rawJsonReply, type Reply } from '../http/index.ts';
import { compileRead, type Condition } from '../query/index.ts';
import { readScope, type DataContext } from './context.ts';
import { parseListParams } from './list-params.ts';
import { parseKey } from './values.ts';

/** The row condition `<pk> = <id>` for a path id, or a 404 when the id cannot name a record. */
export function keyCondition(ctx: DataContext): Condition {
  const field = ctx.table.idField!;
  const raw = ctx.req.params.id!;
  const value = parseKey(field, raw);
  if (value === undefined) throw notFound(ctx, raw);
  return { kind: 'compare', path: [field.name], op: 'equals', value };
}

export function notFound(ctx: DataContext, id: string): Problem {
  return new Problem('not-found', `no ${ctx.table.spec.name} record with ${ctx.table.idField?.name ?? 'id'} ${JSON.stringify(id)}`);
}

export async function readOne(ctx: DataContext): Promise<Reply> {
  const where = keyCondition(ctx);
  const scope = readScope(ctx);
  const sql = compileRead(scope, { table: ctx.table.spec.name, select: null, where, orderBy: [], limit: 1, offset: 0 }, ctx.grant);
  const rows = await ctx.db.queryArrays(sql, scope.params.values);
  if (rows.length === 0) throw notFound(ctx, ctx.req.params.id!);
  return rawJsonReply(200, `{"data":${rows[0]![0] as string}}`);
}

export async function list(ctx: DataContext): Promise<Reply> {
  const params = parseListParams(ctx.req.query);
  const scope = readScope(ctx);
  const sql = compileRead(
    scope,
    { table: ctx.table.spec.name, select: null, where: params.where, orderBy: params.orderBy, limit: params.limit + 1, offset: params.offset },
    ctx.grant,
  );
  const rows = await ctx.db.queryArrays(sql, scope.params.values);
  const hasNextPage = rows.length > params.limit;
  const page = hasNextPage ? rows.slice(0, params.limit) : rows;
  const pagination = { limit: params.limit, offset: params.offset, hasNextPage, hasPreviousPage: params.offset > 0 };
  return rawJsonReply(200, `{"data":[${page.map((r) => r[0] as string).join(',')}],"meta":{"pagination":${JSON.stringify(pagination)}}}`);
}
