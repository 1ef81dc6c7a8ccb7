/**
 * The `fileChanged` subscription field (docs/realtime.md "File changes"): added to a caller's
 * schema for the real-time transports when storage has buckets. File metadata (`_files`) is
 * captured like a table's rows (runtime/storage writes it through the same statements); matching.ts
 * checks each change against the caller's read rule of the bucket, in memory.
 */
import {
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLOutputType,
} from 'graphql';

/** `extensions.svcgen` of the fileChanged field. */
export interface FileFieldMeta {
  readonly files: true;
}

export const FILE_CHANGED_FIELD = 'fileChanged';

const extended = new WeakMap<GraphQLSchema, GraphQLSchema>();

/** `schema` with `Subscription.fileChanged(bucket: String!, events: [ChangeEvent!])`, built once per schema. */
export function withFileChanges(schema: GraphQLSchema): GraphQLSchema {
  let result = extended.get(schema);
  if (result) return result;
  const config = schema.toConfig();
  const existing = schema.getSubscriptionType();
  const changeEvent =
    (schema.getType('ChangeEvent') as GraphQLEnumType | undefined) ??
    new GraphQLEnumType({ name: 'ChangeEvent', values: { INSERT: {}, UPDATE: {}, DELETE: {} } });
  const dateTime = (schema.getType('DateTime') as GraphQLOutputType | undefined) ?? GraphQLString;
  const record = new GraphQLObjectType({
    name: 'FileRecord',
    description: "A file's metadata as a change carries it",
    fields: {
      id: { type: new GraphQLNonNull(GraphQLString) },
      bucket: { type: GraphQLString },
      name: { type: GraphQLString },
      contentType: { type: GraphQLString },
      size: { type: GraphQLFloat, description: 'Bytes' },
      sha256: { type: GraphQLString },
      ownerId: { type: GraphQLString },
      createdAt: { type: dateTime },
    },
  });
  const change = new GraphQLObjectType({
    name: 'FileChange',
    description: "A committed change to a file's metadata: INSERT on upload, DELETE on removal (docs/realtime.md)",
    fields: {
      id: { type: new GraphQLNonNull(GraphQLString), description: 'The event id, as webhook payloads carry it' },
      event: { type: new GraphQLNonNull(changeEvent) },
      record: { type: new GraphQLNonNull(record) },
      changedFields: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(GraphQLString))) },
      timestamp: { type: new GraphQLNonNull(dateTime), description: 'When the change was captured' },
    },
  });
  const fields: GraphQLFieldConfigMap<unknown, unknown> = {
    ...(existing?.toConfig().fields ?? {}),
    [FILE_CHANGED_FIELD]: {
      type: new GraphQLNonNull(change),
      description: 'Committed changes to the files of a bucket you may read, from now on, in commit order',
      args: {
        bucket: { type: new GraphQLNonNull(GraphQLString) },
        events: { type: new GraphQLList(new GraphQLNonNull(changeEvent)), description: 'All when left out' },
      },
      extensions: { svcgen: { files: true } satisfies FileFieldMeta },
    },
  };
  const subscription = new GraphQLObjectType({ name: 'Subscription', fields });
  result = new GraphQLSchema({
    ...config,
    subscription,
    types: config.types.filter((t) => t.name !== 'Subscription'),
  });
  extended.set(schema, result);
  return result;
}
