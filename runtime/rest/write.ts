/**
 * POST /<table>, PATCH /<table>/<id>, DELETE /<table>/<id>, PATCH /<table>?<filters>: the request
 * read into a write of runtime/data (which checks and runs it), its outcome written as the answer.
 */
import { header, Problem, rawJsonReply, readJson, type Reply } from '../http/index.ts';
import { RESERVED_PARAMETERS } from '../model/index.ts';
import {
  createRecord,
  deleteRecord,
  filterContext,
  requireObject,
  updateMatching,
  updateRecord,
  type DataContext,
} from '../data/index.ts';
import { parseFilters } from './list-params.ts';

const UPDATE_MANY_RESERVED: ReadonlySet<string> = new Set(RESERVED_PARAMETERS.updateMany);
const PATCH_TYPES = ['application/json', 'application/merge-patch+json'];

/** Location of a created record: its `/<id>` route, or a filter on the key for composite keys. */
function location(ctx: DataContext, key: Record<string, unknown>): string {
  const base = `${ctx.basePath}/${encodeURIComponent(ctx.table.spec.name)}`;
  const pk = ctx.table.spec.primaryKey;
  if (ctx.table.idField) return `${base}/${encodeURIComponent(String(key[pk[0]!]))}`;
  return `${base}?${pk.map((k) => `${encodeURIComponent(k)}=equals.${encodeURIComponent(String(key[k]))}`).join('&')}`;
}

export async function create(ctx: DataContext): Promise<Reply> {
  const { record, key } = await createRecord(ctx, await readJson(ctx.req));
  const headers = { location: location(ctx, key) };
  if (/\breturn=minimal\b/.test(header(ctx.req, 'prefer') ?? '')) {
    return { status: 201, headers: { ...headers, 'preference-applied': 'return=minimal' } };
  }
  return rawJsonReply(201, `{"data":${record}}`, headers);
}

export async function update(ctx: DataContext): Promise<Reply> {
  const body = await readJson(ctx.req, PATCH_TYPES);
  return rawJsonReply(200, `{"data":${await updateRecord(ctx, ctx.req.params.id!, body)}}`);
}

export async function remove(ctx: DataContext): Promise<Reply> {
  await deleteRecord(ctx, ctx.req.params.id!);
  return { status: 204 };
}

/** PATCH /<table>?<filters>: one merge patch applied to every matching record; 200 { data: { count } }. */
export async function updateMany(ctx: DataContext): Promise<Reply> {
  const where = parseFilters(filterContext(ctx), ctx.req.query, UPDATE_MANY_RESERVED);
  const body = requireObject(await readJson(ctx.req, PATCH_TYPES));
  if (where.kind === 'true') {
    throw new Problem(
      'validation',
      'PATCH on a table needs at least one filter (e.g. ?status=equals.open); to change one record use PATCH /<table>/<id>',
      [{ field: 'filter', rule: 'required', message: 'at least one filter is required' }],
    );
  }
  return rawJsonReply(200, `{"data":{"count":${await updateMatching(ctx, where, body)}}}`);
}
