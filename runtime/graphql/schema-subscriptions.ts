/**
 * The Subscription root (docs/realtime.md): per table the caller may read, its committed changes,
 * each carrying the record's fields (no relations) and filtered by the table's `where`.
 */
import { GraphQLList, GraphQLNonNull, GraphQLObjectType, GraphQLString, type GraphQLFieldConfigMap } from 'graphql';
import type { SchemaContext } from './schema-context.ts';
import type { FilterInputs } from './schema-filters.ts';
import { subscriptionFieldName, typeNames, type SubscriptionFieldMeta } from './schema-names.ts';
import { ChangeEvent, DateTimeScalar } from './schema-shared-types.ts';

export function subscriptionFields(ctx: SchemaContext, inputs: FilterInputs): GraphQLFieldConfigMap<unknown, unknown> {
  const subscription: GraphQLFieldConfigMap<unknown, unknown> = {};
  for (const t of ctx.shown) {
    const fields = ctx.fieldsOf(t);
    // A record type needs a field; a table none of whose fields the caller may read has no subscription.
    if (fields.length === 0) continue;
    const names = typeNames(t.name);
    const record = new GraphQLObjectType({
      name: names.record,
      description: `A ${t.name} record as a change carries it: its fields, no relations`,
      fields: Object.fromEntries(fields.map((f) => [f.name, { type: ctx.valueType(t, f) }])),
    });
    const change = new GraphQLObjectType({
      name: names.change,
      description: `A committed change to a ${t.name} record (docs/realtime.md)`,
      fields: {
        id: { type: new GraphQLNonNull(GraphQLString), description: 'The event id, as webhook payloads carry it' },
        event: { type: new GraphQLNonNull(ChangeEvent) },
        record: {
          type: new GraphQLNonNull(record),
          description: 'The record after the change; for DELETE, as it was before',
        },
        changedFields: {
          type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(GraphQLString))),
          description: 'For UPDATE, the fields the change set (those you may read); empty otherwise',
        },
        timestamp: { type: new GraphQLNonNull(DateTimeScalar), description: 'When the change was captured' },
      },
    });
    subscription[subscriptionFieldName(t.name)] = {
      type: new GraphQLNonNull(change),
      description: `Committed changes to ${t.name} records you may read, from now on, in commit order`,
      args: {
        where: { type: inputs.whereOf(t), description: 'Only changes whose record matches (no relation conditions)' },
        events: {
          type: new GraphQLList(new GraphQLNonNull(ChangeEvent)),
          description: 'Only these kinds of change (all when left out)',
        },
      },
      extensions: { svcgen: { table: t.name } satisfies SubscriptionFieldMeta },
    };
  }
  return subscription;
}
