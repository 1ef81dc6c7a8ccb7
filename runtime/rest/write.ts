/**
 * POST /<table>, PATCH /<table>/<id>, DELETE /<table>/<id>. Each mutation is one SQL statement
 * (a data-modifying CTE), which makes it atomic on its own; the webhook outbox will be one more
 * CTE of the same statement, so an event commits exactly when its mutation does.
 */
import { ident } from '../db/index.ts';
import { header, Problem, rawJsonReply, readJson, type Reply } from '../http/index.ts';
import { compileCondition, fieldExpression, newAlias, recordProjection, type CatalogTable, type Grant } from '../query/index.ts';
import { filterContext, grantOf, readScope, type DataContext } from './context.ts';
import { parseFilters } from './list-params.ts';
import { FilterError, filterProblem } from './parse-filter.ts';
import { databaseProblem } from './database-errors.ts';
import { keyCondition, notFound } from './read.ts';
import { checkWritableFields, requireObject, validateRecord } from './validate-body.ts';
import { clientDefaultValue, toParameter } from './values.ts';

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

/** Column list and parameter placeholders of an INSERT for one validated record. */
export function insertColumns(table: CatalogTable, record: Record<string, unknown>, add: (v: unknown) => string) {
  const columns: string[] = [];
  const values: string[] = [];
  for (const field of table.spec.fields) {
    if (field.name in record) {
      columns.push(ident(field.column));
      values.push(add(toParameter(field, record[field.name])));
    } else if (field.managed && field.name === 'updatedAt') {
      columns.push(ident(field.column));
      values.push('now()');
    } else if (field.clientDefault) {
      columns.push(ident(field.column));
      values.push(add(toParameter(field, clientDefaultValue(field.clientDefault))));
    } else if (field.list && !field.dbDefault) {
      columns.push(ident(field.column));
      values.push(add([]));
    }
  }
  return { columns, values };
}

/** The key fields of the row `alias` as a JSON object, each value as the API writes it. */
export function keyJson(table: CatalogTable, alias: string): string {
  const pairs = table.spec.primaryKey.map((k) => `'${k.replace(/'/g, "''")}', ${fieldExpression(alias, table.fields.get(k)!)}`);
  return `json_build_object(${pairs.join(', ')})`;
}

/** `SELECT <record json under the read grant>, <key fields json>` over the CTE `w`. */
function returningSelect(ctx: DataContext, scope: ReturnType<typeof readScope>, readGrant: Grant): string {
  const alias = newAlias(scope);
  const visible = compileCondition(scope, ctx.table, alias, readGrant.rows);
  const projection = recordProjection(scope, ctx.table, alias, readGrant);
  return `SELECT (SELECT row_to_json(r)::text FROM (SELECT ${projection} FROM w ${alias} WHERE ${visible}) r),
    ${keyJson(ctx.table, 'w')}::text FROM w`;
}

export async function create(ctx: DataContext): Promise<Reply> {
  const body = requireObject(await readJson(ctx.req));
  checkWritableFields(ctx.table, ctx.grant, body);
  const record = validateRecord(ctx.table, ctx.table.module.validators.create, body, 'create');
  const scope = readScope(ctx);
  const add = (v: unknown) => scope.params.add(v);
  const { columns, values } = insertColumns(ctx.table, record, add);
  const insert = columns.length
    ? `INSERT INTO ${ctx.table.qualified(ctx.tenant.environment)} (${columns.join(', ')}) VALUES (${values.join(', ')}) RETURNING *`
    : `INSERT INTO ${ctx.table.qualified(ctx.tenant.environment)} DEFAULT VALUES RETURNING *`;
  const readGrant = grantOf(ctx, ctx.table.spec.name, 'read') ?? NO_GRANT;
  const sql = `WITH w AS (${insert}) ${returningSelect(ctx, scope, readGrant)}`;
  const rows = await run(ctx, sql, scope.params.values);
  const [json, keyJson] = rows[0] as [string | null, string];
  const headers = { location: location(ctx, JSON.parse(keyJson) as Record<string, unknown>) };
  if (/\breturn=minimal\b/.test(header(ctx.req, 'prefer') ?? '')) {
    return { status: 201, headers: { ...headers, 'preference-applied': 'return=minimal' } };
  }
  return rawJsonReply(201, `{"data":${json ?? '{}'}}`, headers);
}

/** SET list of a merge patch: every named field, `null` included (RFC 7396), plus updatedAt. */
export function setList(table: CatalogTable, patch: Record<string, unknown>, add: (v: unknown) => string): string[] {
  const sets: string[] = [];
  for (const field of table.spec.fields) {
    if (field.name in patch) sets.push(`${ident(field.column)} = ${add(toParameter(field, patch[field.name]))}`);
    else if (field.managed && field.name === 'updatedAt') sets.push(`${ident(field.column)} = now()`);
  }
  return sets;
}

export async function update(ctx: DataContext): Promise<Reply> {
  const body = requireObject(await readJson(ctx.req, ['application/json', 'application/merge-patch+json']));
  checkWritableFields(ctx.table, ctx.grant, body);
  const patch = validateRecord(ctx.table, ctx.table.module.validators.update, body, 'update');
  const where = keyCondition(ctx); // existence comes after validation (CONTRACT §7)
  const scope = readScope(ctx);
  const target = newAlias(scope);
  const condition = compileCondition(scope, ctx.table, target, { kind: 'and', items: [where, ctx.grant.rows] });
  const readGrant = grantOf(ctx, ctx.table.spec.name, 'read') ?? NO_GRANT;
  const q = ctx.table.qualified(ctx.tenant.environment);
  // An empty patch changes nothing (RFC 7396), so it neither writes nor bumps updatedAt.
  const mutation = Object.keys(patch).length
    ? `UPDATE ${q} AS ${target} SET ${setList(ctx.table, patch, (v) => scope.params.add(v)).join(', ')} WHERE ${condition} RETURNING ${target}.*`
    : `SELECT ${target}.* FROM ${q} ${target} WHERE ${condition}`;
  const sql = `WITH w AS (${mutation}) ${returningSelect(ctx, scope, readGrant)}`;
  const rows = await run(ctx, sql, scope.params.values);
  if (rows.length === 0) throw notFound(ctx, ctx.req.params.id!);
  return rawJsonReply(200, `{"data":${(rows[0]![0] as string | null) ?? '{}'}}`);
}

export async function remove(ctx: DataContext): Promise<Reply> {
  const where = keyCondition(ctx);
  const scope = readScope(ctx);
  const target = newAlias(scope);
  const condition = compileCondition(scope, ctx.table, target, { kind: 'and', items: [where, ctx.grant.rows] });
  const sql = `DELETE FROM ${ctx.table.qualified(ctx.tenant.environment)} AS ${target} WHERE ${condition} RETURNING 1`;
  const rows = await run(ctx, sql, scope.params.values);
  if (rows.length === 0) throw notFound(ctx, ctx.req.params.id!);
  return { status: 204 };
}

/** PATCH /<table>?<filters>: one merge patch applied to every matching record; 200 { data: { count } }. */
export async function updateMany(ctx: DataContext): Promise<Reply> {
  let where;
  try {
    where = parseFilters(filterContext(ctx), ctx.req.query, new Set(['project_id']));
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
  const target = newAlias(scope);
  const condition = compileCondition(scope, ctx.table, target, { kind: 'and', items: [where, ctx.grant.rows] });
  const q = ctx.table.qualified(ctx.tenant.environment);
  const sql = Object.keys(patch).length
    ? `WITH w AS (UPDATE ${q} AS ${target} SET ${setList(ctx.table, patch, (v) => scope.params.add(v)).join(', ')} WHERE ${condition} RETURNING 1) SELECT count(*)::int FROM w`
    : `SELECT count(*)::int FROM ${q} ${target} WHERE ${condition}`;
  const rows = await run(ctx, sql, scope.params.values);
  return rawJsonReply(200, `{"data":{"count":${Number(rows[0]![0])}}}`);
}
