/**
 * The Query root: per table the caller may read, a list, one record by key, a page after a cursor
 * and an aggregate, each the twin of a REST read (docs/graphql.md).
 */
import {
  GraphQLBoolean,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
} from 'graphql';
import type { TableSpec } from '../model/index.ts';
import { aggregateField } from './schema-aggregates.ts';
import type { SchemaContext } from './schema-context.ts';
import type { FilterInputs } from './schema-filters.ts';
import { rootFieldNames, typeNames, type RootFieldMeta, type RootKind } from './schema-names.ts';
import type { ObjectTypes } from './schema-objects.ts';
import { PageInfo } from './schema-shared-types.ts';

export function queryFields(
  ctx: SchemaContext,
  inputs: FilterInputs,
  objects: ObjectTypes,
): GraphQLFieldConfigMap<unknown, unknown> {
  const query: GraphQLFieldConfigMap<unknown, unknown> = {};
  const rootNames = new Map<string, string>();
  for (const t of ctx.shown) {
    const names = rootFieldNames(t.name);
    for (const n of Object.values(names)) {
      const before = rootNames.get(n);
      if (before)
        throw new Error(`GraphQL root field ${n} of table ${t.name} is also one of table ${before}; rename a model`);
      rootNames.set(n, t.name);
    }
    Object.assign(query, tableQueries(ctx, inputs, objects, t));
  }
  // A schema needs one query field: a caller who may read nothing still gets a valid, empty one.
  if (Object.keys(query).length === 0)
    query._nothingReadable = { type: GraphQLBoolean, description: 'Your roles may read no table', resolve: () => null };
  return query;
}

function tableQueries(
  ctx: SchemaContext,
  inputs: FilterInputs,
  objects: ObjectTypes,
  t: TableSpec,
): GraphQLFieldConfigMap<unknown, unknown> {
  const names = rootFieldNames(t.name);
  const meta = (kind: RootKind) => ({ svcgen: { kind, table: t.name } satisfies RootFieldMeta });
  const object = objects.objectOf(t);
  const query: GraphQLFieldConfigMap<unknown, unknown> = {};
  // Root fields are nullable: one that fails is null with its error, the others still answer.
  query[names.list] = {
    type: new GraphQLList(new GraphQLNonNull(object)),
    description: `${t.name} records (GET /gw/api/rest/${t.name})`,
    args: { ...inputs.listArgs(t, 'limit'), offset: { type: GraphQLInt } },
    extensions: meta('list'),
  };
  query[names.byKey] = {
    type: object,
    description: `One ${t.name} record by its primary key, or null`,
    args: Object.fromEntries(
      t.primaryKey.map((k) => [k, { type: new GraphQLNonNull(ctx.scalarOf(t, t.fields.find((f) => f.name === k)!)) }]),
    ),
    extensions: meta('byKey'),
  };
  query[names.page] = {
    type: new GraphQLObjectType({
      name: typeNames(t.name).page,
      fields: {
        nodes: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(object))) },
        pageInfo: { type: new GraphQLNonNull(PageInfo) },
        totalCount: {
          type: new GraphQLNonNull(GraphQLInt),
          description: "Records matching where, on every page (REST's Prefer: count=exact): counted only when selected",
        },
      },
    }),
    description: `A page of ${t.name} records after a cursor (keyset pagination)`,
    args: { ...inputs.listArgs(t, 'first'), after: { type: GraphQLString } },
    extensions: meta('page'),
  };
  const aggregate = aggregateField(ctx, t, inputs.whereOf(t));
  if (aggregate) query[names.aggregate] = { ...aggregate, extensions: meta('aggregate') };
  return query;
}
