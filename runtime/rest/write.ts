/**
 * POST /<table>, PATCH /<table>/<id>, DELETE /<table>/<id>, PATCH /<table>?<filters>. Each is one
 * statement from compileWrite, atomic on its own and carrying its webhook events.
 */
import { header, Problem, rawJsonReply, readJson, type Reply } from '../http/index.ts';
import { RESERVED_PARAMETERS } from '../model/index.ts';
import { and, type Grant } from '../query/index.ts';
import { compileWrite } from './compile-write.ts';
import { capturesEvents, filterContext, grantOf, readScope, type DataContext } from './context.ts';
import { parseFilters } from './list-params.ts';
import { FilterError, filterProblem } from './parse-filter.ts';
import { databaseProblem } from './database-errors.ts';
import { keyCondition, notFound } from './read.ts';
import { checkWritableFields, requireObject, validateRecord } from './validate-body.ts';

const UPDATE_MANY_RESERVED: ReadonlySet<string> = new Set(RESERVED_PARAMETERS.updateMany);

const NO_GRANT: Grant = { rows: { kind: 'false' }, fields: new Set() };

async function run(ctx: DataContext, sql: string, values: unknown[]): Promise<unknown[][]> {
  try {
    return await ctx.db.queryArrays(sql, values);
  } catch (error) {
    throw databaseProblem(error, ctx.table) ?? error;
  }
}

/** Location of a created record: its `/<id>` route, or a filter on the key for composite keys. */
function location(ctx: DataContext, key: Record<string, unknown>): string {
  const base = `${ctx.basePath}/${encodeURIComponent(ctx.table.spec.name)}`;
  const pk = ctx.table.spec.primaryKey;
  if (ctx.table.idField) return `${base}/${encodeURIComponent(String(key[pk[0]!]))}`;
  return `${base}?${pk.map((k) => `${encodeURIComponent(k)}=equals.${encodeURIComponent(String(key[k]))}`).join('&')}`;
}

export async function create(ctx: DataContext): Promise<Reply> {
  const body = requireObject(await readJson(ctx.req));
  checkWritableFields(ctx.table, ctx.grant, body);
  const values = validateRecord(ctx.table, ctx.table.module.validators.create, body, 'create');
  const scope = readScope(ctx);
  const grant = grantOf(ctx, ctx.table.spec.name, 'read') ?? NO_GRANT;
  const rows = await run(ctx, compileWrite(scope, { kind: 'insert', table: ctx.table, values }, { kind: 'record', grant }, await capturesEvents(ctx)), scope.params.values);
  const [json, keyJson] = rows[0] as [string | null, string];
  const headers = { location: location(ctx, JSON.parse(keyJson) as Record<string, unknown>) };
  if (/\breturn=minimal\b/.test(header(ctx.req, 'prefer') ?? '')) {
    return { status: 201, headers: { ...headers, 'preference-applied': 'return=minimal' } };
  }
  return rawJsonReply(201, `{"data":${json ?? '{}'}}`, headers);
}

export async function update(ctx: DataContext): Promise<Reply> {
  const body = requireObject(await readJson(ctx.req, ['application/json', 'application/merge-patch+json']));
  checkWritableFields(ctx.table, ctx.grant, body);
  const patch = validateRecord(ctx.table, ctx.table.module.validators.update, body, 'update');
  const where = and(keyCondition(ctx), ctx.grant.rows); // existence comes after validation (CONTRACT §7)
  const scope = readScope(ctx);
  const grant = grantOf(ctx, ctx.table.spec.name, 'read') ?? NO_GRANT;
  const rows = await run(ctx, compileWrite(scope, { kind: 'update', table: ctx.table, where, patch }, { kind: 'record', grant }, await capturesEvents(ctx)), scope.params.values);
  if (rows.length === 0) throw notFound(ctx, ctx.req.params.id!);
  return rawJsonReply(200, `{"data":${(rows[0]![0] as string | null) ?? '{}'}}`);
}

export async function remove(ctx: DataContext): Promise<Reply> {
  const where = and(keyCondition(ctx), ctx.grant.rows);
  const scope = readScope(ctx);
  const rows = await run(ctx, compileWrite(scope, { kind: 'delete', table: ctx.table, where }, { kind: 'key' }, await capturesEvents(ctx)), scope.params.values);
  if (rows.length === 0) throw notFound(ctx, ctx.req.params.id!);
  return { status: 204 };
}

/** PATCH /<table>?<filters>: one merge patch applied to every matching record; 200 { data: { count } }. */
export async function updateMany(ctx: DataContext): Promise<Reply> {
  let where;
  try {
    where = parseFilters(filterContext(ctx), ctx.req.query, UPDATE_MANY_RESERVED);
  } catch (error) {
    if (error instanceof FilterError) throw filterProblem(error);
    throw error;
  }
  const body = requireObject(await readJson(ctx.req, ['application/json', 'application/merge-patch+json']));
  if (where.kind === 'true') {
    throw new Problem('validation', 'PATCH on a table needs at least one filter (e.g. ?status=equals.open); to change one record use PATCH /<table>/<id>', [
      { field: 'filter', rule: 'required', message: 'at least one filter is required' },
    ]);
  }
  checkWritableFields(ctx.table, ctx.grant, body);
  const patch = validateRecord(ctx.table, ctx.table.module.validators.update, body, 'update');
  const scope = readScope(ctx);
  const write = { kind: 'update', table: ctx.table, where: and(where, ctx.grant.rows), patch } as const;
  const rows = await run(ctx, compileWrite(scope, write, { kind: 'count' }, await capturesEvents(ctx)), scope.params.values);
  return rawJsonReply(200, `{"data":{"count":${Number(rows[0]![0])}}}`);
}
