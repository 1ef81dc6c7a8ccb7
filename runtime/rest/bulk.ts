/** POST /<table>/_bulk and DELETE /<table>/_bulk (docs/api.md §5.15): runtime/data's bulk writes, `?mode=` read here. */
import { jsonReply, readJson, type Reply } from '../http/index.ts';
import { createMany, deleteMany, type BulkAnswer, type DataContext } from '../data/index.ts';

function bulkReply({ status, data }: BulkAnswer): Reply {
  return jsonReply(status, { data });
}

export async function bulkCreate(ctx: DataContext): Promise<Reply> {
  return bulkReply(await createMany(ctx, await readJson(ctx.req), ctx.req.query.get('mode')));
}

export async function bulkDelete(ctx: DataContext): Promise<Reply> {
  return bulkReply(await deleteMany(ctx, await readJson(ctx.req), ctx.req.query.get('mode')));
}
