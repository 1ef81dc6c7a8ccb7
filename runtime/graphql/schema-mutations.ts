/**
 * The Mutation root of the GraphQL schema (docs/graphql.md "Mutations"): per table, the writes the
 * caller's grants allow, each the twin of a REST write.
 */
import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLScalarType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLInputType,
  type GraphQLOutputType,
} from 'graphql';
import { fileReferenceDescription, type FieldSpec, type TableSpec } from '../model/index.ts';
import {
  mutationFieldNames,
  typeNames,
  type MutationFieldMeta,
  type MutationKind,
  type WriteVisibility,
} from './schema-names.ts';
import { JsonScalar } from './schema-shared-types.ts';

const BulkMode = new GraphQLEnumType({
  name: 'BulkMode',
  description: "A bulk create's transaction mode, as REST's transactionMode (docs/api.md)",
  values: { ALL_OR_NOTHING: { value: 'ALL_OR_NOTHING' }, BEST_EFFORT: { value: 'BEST_EFFORT' } },
});
const BulkItemError = new GraphQLObjectType({
  name: 'BulkItemError',
  fields: { index: { type: new GraphQLNonNull(GraphQLInt) }, message: { type: new GraphQLNonNull(GraphQLString) } },
});
const BulkCreateResult = new GraphQLObjectType({
  name: 'BulkCreateResult',
  description: 'The answer of a bulk create, member for member the `data` of REST POST /<table>/_bulk',
  fields: {
    success: { type: new GraphQLNonNull(GraphQLBoolean) },
    transactionMode: { type: new GraphQLNonNull(BulkMode) },
    totalRequested: { type: new GraphQLNonNull(GraphQLInt) },
    totalSucceeded: { type: new GraphQLNonNull(GraphQLInt) },
    totalFailed: { type: new GraphQLNonNull(GraphQLInt) },
    items: {
      type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(JsonScalar))),
      description: 'The primary keys of the created records ({"id": 1})',
    },
    errors: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(BulkItemError))) },
  },
});
const WriteCount = new GraphQLObjectType({
  name: 'WriteCount',
  fields: { count: { type: new GraphQLNonNull(GraphQLInt), description: 'Records changed' } },
});

export interface MutationBuilders {
  object(t: TableSpec): GraphQLObjectType | undefined;
  value(t: TableSpec, f: FieldSpec): GraphQLInputType & GraphQLOutputType;
  scalar(t: TableSpec, f: FieldSpec): GraphQLScalarType | GraphQLEnumType;
  where(t: TableSpec): GraphQLInputObjectType | undefined;
}

/**
 * The Mutation root: per table, the writes its grants allow, each the twin of a REST route (input
 * fields are the fields the grant lets it write; every value is checked by the REST validators, so
 * all are nullable here). By-key writes exist where REST has /<id> routes (a single-field key).
 */
export function mutationFields(
  tables: readonly TableSpec[],
  writable: WriteVisibility,
  build: MutationBuilders,
): GraphQLFieldConfigMap<unknown, unknown> {
  const fields: GraphQLFieldConfigMap<unknown, unknown> = {};
  for (const t of tables) {
    const names = mutationFieldNames(t.name);
    for (const n of Object.values(names))
      if (fields[n])
        throw new Error(`GraphQL mutation ${n} of table ${t.name} is also another table's; rename a model`);
    const typeName = typeNames(t.name);
    const object = build.object(t);
    const meta = (kind: MutationKind) => ({
      svcgen: { kind, table: t.name, returnsRecord: object !== undefined } satisfies MutationFieldMeta,
    });
    const answer = object ?? new GraphQLNonNull(GraphQLBoolean);
    const readNote = object ? '' : ` (your roles may not read ${t.name}: true once written)`;
    const input = (action: 'create' | 'update', name: string) => {
      const allowed = writable(t.name, action);
      if (allowed === undefined) return undefined;
      const members = t.fields.filter((f) => allowed === null || allowed.has(f.name));
      if (!members.length) return undefined;
      return new GraphQLInputObjectType({
        name,
        description: `A ${t.name} ${action === 'create' ? 'record to create' : 'merge patch'}: the JSON body of the REST route`,
        fields: Object.fromEntries(
          members.map((f) => [
            f.name,
            { type: build.value(t, f), ...(f.file ? { description: fileReferenceDescription(f.file) } : {}) },
          ]),
        ),
      });
    };
    const id = t.primaryKey.length === 1 ? t.fields.find((f) => f.name === t.primaryKey[0]) : undefined;
    const keyArgs = id ? { [id.name]: { type: new GraphQLNonNull(build.scalar(t, id)) } } : undefined;
    const create = input('create', typeName.createInput);
    if (create) {
      fields[names.create] = {
        type: answer,
        description: `Creates one ${t.name} record (POST /gw/api/rest/${t.name})${readNote}`,
        args: { data: { type: new GraphQLNonNull(create) } },
        extensions: meta('create'),
      };
      fields[names.createMany] = {
        type: new GraphQLNonNull(BulkCreateResult),
        description: `Creates ${t.name} records in bulk (POST /gw/api/rest/${t.name}/_bulk)`,
        args: {
          data: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(create))) },
          mode: { type: BulkMode, defaultValue: 'ALL_OR_NOTHING' },
        },
        extensions: meta('createMany'),
      };
    }
    const update = input('update', typeName.updateInput);
    if (update) {
      if (keyArgs)
        fields[names.update] = {
          type: answer,
          description: `Changes one ${t.name} record by a merge patch (PATCH /gw/api/rest/${t.name}/<id>)${readNote}`,
          args: { ...keyArgs, data: { type: new GraphQLNonNull(update) } },
          extensions: meta('update'),
        };
      const where = build.where(t);
      if (where)
        fields[names.updateWhere] = {
          type: new GraphQLNonNull(WriteCount),
          description: `Applies one merge patch to every matching ${t.name} record (PATCH /gw/api/rest/${t.name}?<filters>); where needs a condition`,
          args: { where: { type: new GraphQLNonNull(where) }, data: { type: new GraphQLNonNull(update) } },
          extensions: meta('updateWhere'),
        };
    }
    if (writable(t.name, 'delete') !== undefined) {
      if (keyArgs)
        fields[names.delete] = {
          type: new GraphQLNonNull(GraphQLBoolean),
          description: `Deletes one ${t.name} record (DELETE /gw/api/rest/${t.name}/<id>, answered 204): true`,
          args: keyArgs,
          extensions: meta('delete'),
        };
      const where = build.where(t);
      if (where)
        fields[names.deleteWhere] = {
          type: new GraphQLNonNull(WriteCount),
          description: `Deletes every matching ${t.name} record the caller may delete; where needs a condition`,
          args: { where: { type: new GraphQLNonNull(where) } },
          extensions: meta('deleteWhere'),
        };
    }
  }
  return fields;
}
