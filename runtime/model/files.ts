/**
 * File metadata (docs/storage.md) as a table description, so that the query layer lists, filters,
 * sorts and permits it exactly as it does a model table, and the generator can describe it in
 * OpenAPI. The rows live in the system table svcgen.files; `environment` scopes them and is never
 * shown to callers (every bucket rule lists only FILE_FIELDS).
 */
import type { FieldSpec, TableSpec } from './index.ts';

/** The table name of file metadata: in webhook subscriptions and events, and in messages. */
export const FILES_TABLE = '_files';

function field(name: string, column: string, type: FieldSpec['type'], extra: Partial<FieldSpec> = {}): FieldSpec {
  return {
    name,
    column,
    type,
    list: false,
    nullable: false,
    id: false,
    unique: false,
    dbDefault: false,
    managed: false,
    ...extra,
  };
}

export const FILES_SPEC: TableSpec = {
  name: FILES_TABLE,
  dbName: 'files',
  primaryKey: ['id'],
  fields: [
    field('id', 'id', 'String', { nativeType: ['Uuid', []], id: true }),
    field('bucket', 'bucket', 'String'),
    field('name', 'name', 'String'),
    field('contentType', 'content_type', 'String'),
    // Int: filters take values up to 2^31-1; the column is bigint, so larger files are stored and shown.
    field('size', 'size', 'Int'),
    field('sha256', 'sha256', 'String'),
    field('ownerId', 'owner_id', 'String', { nullable: true }),
    field('createdAt', 'created_at', 'DateTime', { dbDefault: true, managed: true }),
    field('environment', 'environment', 'String'),
  ],
  relations: [],
  indexes: [
    { fields: ['id'], unique: true },
    { fields: ['environment', 'bucket', 'createdAt'], unique: false },
    { fields: ['environment', 'bucket', 'ownerId'], unique: false },
  ],
};

/** The metadata fields callers see, filter and sort on (all but `environment`), in answer order. */
export const FILE_FIELDS: readonly string[] = FILES_SPEC.fields.map((f) => f.name).filter((n) => n !== 'environment');

/** Fields a bucket rule's filter may name (`bucket` and `environment` are the bucket's own). */
export const FILE_FILTER_FIELDS: readonly string[] = FILE_FIELDS.filter((n) => n !== 'bucket');

/** How OpenAPI and GraphQL describe a field that references files (docs/storage.md "Records that reference files"). */
export function fileReferenceDescription(file: {
  readonly bucket: string;
  readonly onDelete: 'keep' | 'delete';
}): string {
  const deletes = file.onDelete === 'delete' ? ' (and delete); deleting the record deletes the file' : '';
  return `The id of a file of bucket ${file.bucket} (/_files/${file.bucket}/{id}); a write must name one the caller may read${deletes}.`;
}

/** Bucket names: they are path segments and storage keys. */
export const BUCKET_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
