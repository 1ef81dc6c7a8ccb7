/**
 * `<T>Aggregate`: REST's _aggregate (docs/api.md §5.9) as a root field, its members named as REST
 * names them, with `having`, `orderBy`, `groupBy` and `limit`.
 */
import {
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigMap,
  type GraphQLInputType,
  type GraphQLOutputType,
} from 'graphql';
import { aggregateMismatch, type AggregateFunction, type FieldSpec, type TableSpec } from '../model/index.ts';
import { sortable, type SchemaContext } from './schema-context.ts';
import { typeNames, type AggregateName } from './schema-names.ts';
import { DecimalScalar, HavingFilter, SortDirection } from './schema-shared-types.ts';

/** Aggregate row members of a field (`sum_total`, ...), in REST's naming. */
function aggregateMembers(field: FieldSpec): { name: string; fn: Exclude<AggregateFunction, 'count'> }[] {
  return (['count_distinct', 'sum', 'avg', 'min', 'max'] as const)
    .filter((fn) => aggregateMismatch(field, fn) === undefined)
    .map((fn) => ({ name: `${fn}_${field.name}`, fn }));
}

/** `<T>Aggregate`: REST's _aggregate with its members named as REST names them (count, sum_total, ...). */
export function aggregateField(
  ctx: SchemaContext,
  t: TableSpec,
  where: GraphQLInputObjectType,
): GraphQLFieldConfig<unknown, unknown> | undefined {
  const fields = ctx.fieldsOf(t);
  const names = typeNames(t.name);
  const members: GraphQLFieldConfigMap<unknown, unknown> = {
    count: { type: new GraphQLNonNull(GraphQLInt), extensions: { svcgen: { fn: 'count' } satisfies AggregateName } },
  };
  const numeric: string[] = ['count'];
  for (const f of fields) {
    for (const { name, fn } of aggregateMembers(f)) {
      let type: GraphQLOutputType;
      if (fn === 'count_distinct') type = new GraphQLNonNull(GraphQLInt);
      else if (fn === 'avg') type = GraphQLFloat;
      else if (fn === 'sum') type = f.type === 'Int' || f.type === 'Float' ? GraphQLFloat : DecimalScalar;
      else type = ctx.scalarOf(t, f);
      members[name] = { type, extensions: { svcgen: { fn, field: f.name } satisfies AggregateName } };
      if (fn !== 'min' && fn !== 'max') numeric.push(name);
      else if (['Int', 'BigInt', 'Float', 'Decimal'].includes(f.type)) numeric.push(name);
    }
  }
  const aggregateNames = Object.keys(members);
  const groupable = fields.filter((f) => sortable(f) && !Object.hasOwn(members, f.name));
  for (const f of groupable)
    members[f.name] = {
      type: ctx.scalarOf(t, f),
      description: 'The group (with groupBy)',
      extensions: { svcgen: { field: f.name } },
    };
  const args: Record<string, { type: GraphQLInputType; description?: string }> = {
    where: { type: where },
    having: {
      type: new GraphQLInputObjectType({
        name: names.having,
        fields: Object.fromEntries(numeric.map((n) => [n, { type: HavingFilter }])),
      }),
    },
    orderBy: {
      type: new GraphQLList(
        new GraphQLNonNull(
          new GraphQLInputObjectType({
            name: names.aggregateOrderBy,
            fields: Object.fromEntries(
              [...aggregateNames, ...groupable.map((f) => f.name)].map((n) => [n, { type: SortDirection }]),
            ),
          }),
        ),
      ),
    },
    limit: { type: GraphQLInt, description: 'Most groups answered: at most 10000' },
  };
  if (groupable.length) {
    args.groupBy = {
      type: new GraphQLList(
        new GraphQLNonNull(
          new GraphQLEnumType({
            name: names.groupField,
            values: Object.fromEntries(groupable.map((f) => [f.name, { value: f.name }])),
          }),
        ),
      ),
    };
  }
  return {
    type: new GraphQLList(new GraphQLNonNull(new GraphQLObjectType({ name: names.aggregate, fields: members }))),
    description: `Aggregates of ${t.name} records, one row per group (GET /gw/api/rest/${t.name}/_aggregate)`,
    args,
  };
}
