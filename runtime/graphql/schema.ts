/**
 * The GraphQL schema of the read API (docs/graphql.md), built from the table descriptions and what
 * a caller may see. One builder serves the server (a schema per set of roles) and the generator
 * (generated/schema.graphql, everything visible), so the two cannot drift. It and its contributors
 * (./schema-*.ts) import only runtime/model, graphql and ./exact-numbers.ts: the generator may use
 * it without the server's runtime.
 *
 * The schema only names things; every rule about what a caller may read lives in the query layer
 * (runtime/query), which the server's resolvers go through. The names and the metadata in
 * `extensions.svcgen` (./schema-names.ts) are what the server's translation reads back.
 *
 * One contributor per concern: shared types (./schema-shared-types.ts), filter inputs
 * (./schema-filters.ts), object types (./schema-objects.ts), the Query root with its aggregates
 * (./schema-queries.ts, ./schema-aggregates.ts), mutations (./schema-mutations.ts) and
 * subscriptions (./schema-subscriptions.ts), over one context (./schema-context.ts) that knows
 * what the caller sees and which type names are taken.
 */
import { GraphQLObjectType, GraphQLSchema, validateSchema, type GraphQLFieldResolver } from 'graphql';
import type { TableSpec } from '../model/index.ts';
import { codeRootFields, NO_CODE, type CodeFields } from './schema-code.ts';
import { SchemaContext } from './schema-context.ts';
import { FilterInputs } from './schema-filters.ts';
import { mutationFields } from './schema-mutations.ts';
import {
  EVERYTHING_WRITABLE,
  mutationFieldNames,
  rootFieldNames,
  type SchemaVisibility,
  type WriteVisibility,
} from './schema-names.ts';
import { ObjectTypes } from './schema-objects.ts';
import { queryFields } from './schema-queries.ts';
import { subscriptionFields } from './schema-subscriptions.ts';

export * from './schema-names.ts';
export {
  type CodeFieldMeta,
  type CodeFields,
  type EndpointField,
  functionFieldName,
  type JsonSchema,
  NO_CODE,
} from './schema-code.ts';
export {
  BigIntScalar,
  BytesScalar,
  ChangeEvent,
  DateTimeScalar,
  DecimalScalar,
  JsonScalar,
  SortDirection,
} from './schema-shared-types.ts';

/**
 * The schema for `tables` as `visible` shows them. `resolveField` reads a table record's member
 * (the server passes one that reads the response key; the generator none). `code` adds the
 * project's endpoints and database functions (./schema-code.ts); `omit` hears each one left out.
 */
export function buildGraphQLSchema(
  tables: readonly TableSpec[],
  visible: SchemaVisibility,
  resolveField?: GraphQLFieldResolver<unknown, unknown>,
  writable: WriteVisibility = EVERYTHING_WRITABLE,
  code: CodeFields = NO_CODE,
  omit?: (name: string, reason: string) => void,
): GraphQLSchema {
  // The order below is the order types are named in: a name collision is reported the same way.
  const ctx = new SchemaContext(tables, visible, resolveField);
  const inputs = new FilterInputs(ctx);
  const objects = new ObjectTypes(ctx, inputs);
  const query = queryFields(ctx, inputs, objects);
  const mutation = mutationFields(tables, writable, {
    object: (t) => (visible.table(t.name) ? objects.objectOf(t) : undefined),
    value: (t, f) => ctx.valueType(t, f),
    scalar: (t, f) => ctx.scalarOf(t, f),
    where: (t) => (visible.table(t.name) ? inputs.whereOf(t) : undefined),
  });
  const subscription = subscriptionFields(ctx, inputs);
  // The code's fields come after the tables': a table's field keeps its name (docs/graphql.md "Your own code").
  const own = codeRootFields(
    code,
    // Every table's names, seen or not: a field's name does not depend on who asks.
    {
      query: new Set([...Object.keys(query), ...tables.flatMap((t) => Object.values(rootFieldNames(t.name)))]),
      mutation: new Set([
        ...Object.keys(mutation),
        ...tables.flatMap((t) => Object.values(mutationFieldNames(t.name))),
      ]),
    },
    omit,
  );
  Object.assign(query, own.query);
  Object.assign(mutation, own.mutation);
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: query }),
    ...(Object.keys(mutation).length
      ? { mutation: new GraphQLObjectType({ name: 'Mutation', fields: mutation }) }
      : {}),
    ...(Object.keys(subscription).length
      ? { subscription: new GraphQLObjectType({ name: 'Subscription', fields: subscription }) }
      : {}),
  });
  // What graphql-js would otherwise find only when it first executes (an enum value named true, ...).
  const invalid = validateSchema(schema);
  if (invalid.length)
    throw new Error(`the model has no valid GraphQL schema: ${invalid.map((e) => e.message).join('; ')}`);
  return schema;
}
