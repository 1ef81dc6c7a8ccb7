/**
 * GraphQL mutations (docs/graphql.md "Mutations"): each root field is its REST twin run as REST
 * runs it. Create, update and delete by key and bulk create call the REST operation handlers with
 * the field's input as the request body, so permissions, presets, row filters, validation
 * messages, webhook capture and the answer are the REST route's; update by condition is REST's
 * update-by-filter with the condition from `where`. GraphQL adds no rule of its own.
 */
import { Kind, type GraphQLObjectType, type GraphQLResolveInfo } from 'graphql';
import { Problem, type ApiRequest, type Reply } from '../http/index.ts';
import type { DataContext } from '../rest/context.ts';
import { OPERATIONS } from '../rest/index.ts';
import { answeringQueryErrors } from '../rest/query-problems.ts';
import { requireObject } from '../rest/validate-body.ts';
import { deleteMatching, updateMatching } from '../rest/write.ts';
import { parseKeepingNumbers } from './exact-numbers.ts';
import type { MutationFieldMeta, WriteAction } from './schema.ts';
import { collectFields, whereCondition } from './translate.ts';
import type { GraphQLContext } from './execute.ts';

const ACTION: Record<MutationFieldMeta['kind'], WriteAction> = {
  create: 'create',
  createMany: 'create',
  update: 'update',
  updateWhere: 'update',
  delete: 'delete',
  deleteWhere: 'delete',
};

/** The request the REST route would have received: this one's caller and timing, the input as its JSON body. */
function restRequest(
  req: ApiRequest,
  method: string,
  path: string,
  body: unknown,
  params: Record<string, string> = {},
): ApiRequest {
  const text = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return {
    method,
    path,
    query: new URLSearchParams(),
    headers: text ? { 'content-type': 'application/json' } : {},
    params,
    ip: req.ip,
    receivedAt: req.receivedAt,
    readBody: async () => text,
    onClientGone: (listener) => req.onClientGone(listener),
  };
}

/** The `data` member of a REST answer, numbers keeping their digits (Decimal answers as stored). */
function answerData(reply: Reply): unknown {
  return (parseKeepingNumbers(reply.body!) as { data: unknown }).data;
}

/** A written record keyed by the selection's response keys, as the query resolvers build records. */
function asSelected(record: Record<string, unknown>, fields: Map<string, string>) {
  return Object.fromEntries([...fields].map(([key, field]) => [key, record[field] ?? null]));
}

/**
 * The selected fields of the answer by response key. A written record is the REST answer: the
 * record's own fields, so relations are refused before anything is written.
 */
function selectedFields(info: GraphQLResolveInfo): Map<string, string> {
  const type = info.returnType as GraphQLObjectType;
  const set = {
    kind: Kind.SELECTION_SET,
    selections: info.fieldNodes.flatMap((n) => n.selectionSet?.selections ?? []),
  } as const;
  const selected = collectFields({ fragments: info.fragments, variables: info.variableValues }, type, set);
  const out = new Map<string, string>();
  for (const [key, nodes] of selected) {
    const name = nodes[0]!.name.value;
    if (name === '__typename') continue;
    const meta = type.getFields()[name]?.extensions.svcgen as { field?: string } | undefined;
    if (meta?.field === undefined)
      throw new Problem(
        'invalid-parameter',
        `${info.fieldName}.${key}: a mutation answers the written record's own fields (as the REST API does); read ${name} with a query`,
        [{ field: `${info.fieldName}.${key}`, rule: 'select', message: 'relations are not answered by mutations' }],
      );
    out.set(key, meta.field);
  }
  return out;
}

export async function resolveMutation(
  meta: MutationFieldMeta,
  args: Record<string, unknown>,
  context: GraphQLContext,
  info: GraphQLResolveInfo,
): Promise<unknown> {
  const data = context.data;
  const table = data.catalog.require(meta.table);
  const action = ACTION[meta.kind];
  // The schema shows only granted writes; a grant gone missing is refused as the REST pipeline refuses it.
  const grant = data.access.grant(meta.table, action);
  if (!grant) throw new Problem('forbidden', `your role may not ${action} ${meta.table} records`);
  const base = `${data.basePath}/${encodeURIComponent(meta.table)}`;
  const ctx = (req: ApiRequest): DataContext => ({ ...data, table, grant, req });
  const selected =
    meta.returnsRecord && (meta.kind === 'create' || meta.kind === 'update') ? selectedFields(info) : undefined;
  const record = (reply: Reply) =>
    selected ? asSelected(answerData(reply) as Record<string, unknown>, selected) : true;
  const id = table.idField?.name;
  switch (meta.kind) {
    case 'create':
      return record(await OPERATIONS.create!.handle(ctx(restRequest(data.req, 'POST', base, args.data))));
    case 'createMany': {
      const body = { items: args.data, transactionMode: args.mode ?? 'ALL_OR_NOTHING' };
      return answerData(await OPERATIONS.bulkCreate!.handle(ctx(restRequest(data.req, 'POST', `${base}/_bulk`, body))));
    }
    case 'update': {
      const key = String(args[id!]);
      const req = restRequest(data.req, 'PATCH', `${base}/${encodeURIComponent(key)}`, args.data, { id: key });
      return record(await OPERATIONS.update!.handle(ctx(req)));
    }
    case 'delete': {
      const key = String(args[id!]);
      await OPERATIONS.delete!.handle(
        ctx(restRequest(data.req, 'DELETE', `${base}/${encodeURIComponent(key)}`, undefined, { id: key })),
      );
      return true;
    }
    case 'updateWhere':
      return answeringQueryErrors(() => updateWhere(ctx(restRequest(data.req, 'PATCH', base, args.data)), args));
    case 'deleteWhere':
      return answeringQueryErrors(() => deleteWhere(ctx(restRequest(data.req, 'DELETE', base, undefined)), args));
  }
}

/** REST's update-by-filter (runtime/rest/write.ts updateMany) with its condition from `where`. */
async function updateWhere(ctx: DataContext, args: Record<string, unknown>): Promise<{ count: number }> {
  const where = whereCondition(ctx, ctx.table, args.where);
  if (where.kind === 'true') {
    throw new Problem(
      'validation',
      `update${ctx.table.spec.name}Where needs at least one condition in where (as PATCH on a table needs a filter); to change one record use update${ctx.table.spec.name}`,
      [{ field: 'where', rule: 'required', message: 'at least one condition is required' }],
    );
  }
  return { count: await updateMatching(ctx, where, requireObject(args.data, 'data')) };
}

/** Delete by condition (runtime/rest/write.ts deleteMatching), guarded as updateWhere is: an empty `where` deletes nothing. */
async function deleteWhere(ctx: DataContext, args: Record<string, unknown>): Promise<{ count: number }> {
  const where = whereCondition(ctx, ctx.table, args.where);
  if (where.kind === 'true') {
    throw new Problem(
      'validation',
      `delete${ctx.table.spec.name}Where needs at least one condition in where; to delete one record use delete${ctx.table.spec.name}`,
      [{ field: 'where', rule: 'required', message: 'at least one condition is required' }],
    );
  }
  return { count: await deleteMatching(ctx, where) };
}
