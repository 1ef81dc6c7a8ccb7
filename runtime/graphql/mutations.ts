/**
 * GraphQL mutations (docs/graphql.md "Mutations"): each root field is its REST twin run as REST
 * runs it, through the same writes of runtime/data: create, update and delete by key, bulk create,
 * update and delete by condition, with the field's input as the body. Permissions, presets, row
 * filters, validation messages, webhook capture and the written record are the REST route's;
 * GraphQL adds no rule of its own.
 */
import { Kind, type GraphQLObjectType, type GraphQLResolveInfo } from 'graphql';
import { jsonBodyProblem, parseJsonBody, Problem } from '../http/index.ts';
import {
  answeringQueryErrors,
  createMany,
  createRecord,
  deleteMatching,
  deleteRecord,
  requireObject,
  tableContext,
  updateMatching,
  updateRecord,
  type DataContext,
} from '../data/index.ts';
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

/**
 * The input as the REST route reads it from its JSON body, with the same checks (an unpaired
 * surrogate escape is 400 invalid-json there, so it is here).
 */
function jsonBody(value: unknown): unknown {
  if (value === undefined) throw new Problem('invalid-json', 'the request needs a JSON body');
  try {
    return parseJsonBody(Buffer.from(JSON.stringify(value)));
  } catch (error) {
    throw jsonBodyProblem(error);
  }
}

/** A written record's JSON text as its values, numbers keeping their digits (Decimal answers as stored). */
function recordData(text: string): Record<string, unknown> {
  return parseKeepingNumbers(text) as Record<string, unknown>;
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
  // The schema shows only granted writes; a grant gone missing is refused as the REST pipeline refuses it.
  const ctx: DataContext = tableContext(data, table, ACTION[meta.kind]);
  const selected =
    meta.returnsRecord && (meta.kind === 'create' || meta.kind === 'update') ? selectedFields(info) : undefined;
  const record = (text: string) => (selected ? asSelected(recordData(text), selected) : true);
  const id = table.idField?.name;
  return answeringQueryErrors(async () => {
    switch (meta.kind) {
      case 'create':
        return record((await createRecord(ctx, jsonBody(args.data))).record);
      case 'createMany':
        return (await createMany(ctx, jsonBody({ items: args.data, transactionMode: args.mode ?? 'ALL_OR_NOTHING' })))
          .data;
      case 'update':
        return record(await updateRecord(ctx, String(args[id!]), jsonBody(args.data)));
      case 'delete':
        await deleteRecord(ctx, String(args[id!]));
        return true;
      case 'updateWhere':
        return updateWhere(ctx, args);
      case 'deleteWhere':
        return deleteWhere(ctx, args);
    }
  });
}

/** The update by filter of REST's PATCH /<table>?<filters> (runtime/data/write.ts updateMatching) with its condition from `where`. */
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

/** Delete by condition (runtime/data/write.ts deleteMatching), guarded as updateWhere is: an empty `where` deletes nothing. */
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
