/** The OpenAPI paths of file storage (docs/storage.md): /_files/{bucket}, present when the config has buckets. */
import type { OpenApiBuilder, ParameterObject, SchemaObject } from 'openapi3-ts/oas31';
import { FILE_FIELDS, FILES_SPEC, SERVICE_PATHS, type TableSpec } from '../../runtime/model/index.ts';
import type { ProblemKind } from '../../runtime/model/problem-kinds.ts';
import { fileName, signedUrlBody } from '../../runtime/model/wire/index.ts';
import { fieldFilterParameters, groupParameterRefs } from './openapi-filters.ts';
import { BASE, CHECKED_REQUEST, dataEnvelope, problemResponses, ref } from './openapi-shared.ts';
import { wireBody, wireSchema } from './openapi-wire.ts';

/** What a bucket says about itself in the document. */
export interface BucketSummary {
  readonly name: string;
  readonly maxBytes: number;
  readonly contentTypes: readonly string[];
  readonly public: boolean;
}

const TAG = 'Files';
const NOT_FOUND = 'no such bucket, or no such file the caller may read';

function fileErrors(kinds: readonly ProblemKind[], notes: Partial<Record<ProblemKind, string>> = {}) {
  return problemResponses([...CHECKED_REQUEST, 'not-found', 'rate-limited', ...kinds], {
    'not-found': NOT_FOUND,
    ...notes,
  });
}

/** The metadata fields callers see: `_files` without its hidden environment. */
const VISIBLE: TableSpec = { ...FILES_SPEC, fields: FILES_SPEC.fields.filter((f) => FILE_FIELDS.includes(f.name)) };

const FILE_SCHEMA: SchemaObject = {
  type: 'object',
  description:
    'A stored file (its metadata); `size` in bytes, `sha256` of its bytes in hex, `ownerId` the uploading user.',
  required: [...FILE_FIELDS],
  properties: {
    id: { type: 'string', format: 'uuid' },
    bucket: { type: 'string' },
    name: { type: 'string' },
    contentType: { type: 'string' },
    size: { type: 'integer', minimum: 0 },
    sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
    ownerId: { type: ['string', 'null'] },
    createdAt: { type: 'string', format: 'date-time' },
  },
};

export function filePaths(builder: OpenApiBuilder, buckets: readonly BucketSummary[]): void {
  if (buckets.length === 0) return;
  builder.addSchema('File', FILE_SCHEMA);
  const bucketParameter: ParameterObject = {
    name: 'bucket',
    in: 'path',
    required: true,
    description: buckets
      .map(
        (b) =>
          `\`${b.name}\`: up to ${b.maxBytes} bytes of ${b.contentTypes.join(', ')}${b.public ? '; public (read by id without credentials)' : ''}`,
      )
      .join('; '),
    schema: { type: 'string', enum: buckets.map((b) => b.name) },
  };
  const idParameter: ParameterObject = {
    name: 'id',
    in: 'path',
    required: true,
    schema: { type: 'string', format: 'uuid' },
  };
  const at = `${BASE}/${SERVICE_PATHS.files}/{bucket}`;
  const common = [{ $ref: '#/components/parameters/environment' }, bucketParameter];
  const created = { description: 'The stored file', content: dataEnvelope(ref('File')) };
  builder.addPath(at, {
    parameters: common,
    post: {
      tags: [TAG],
      operationId: 'uploadFile',
      summary:
        'Upload a file: multipart/form-data with a `file` part, or the raw bytes with their Content-Type and ?name=',
      description:
        'The bytes stream to storage; the size limit applies while they arrive and the declared type is checked against the first bytes. ' +
        'The file is listed only once completely stored; a refused upload keeps nothing.',
      parameters: [
        {
          name: 'name',
          in: 'query',
          description: 'The file name, for a raw body',
          schema: wireSchema(fileName),
        },
      ],
      requestBody: {
        required: true,
        content: {
          'multipart/form-data': {
            schema: {
              type: 'object',
              required: ['file'],
              properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' } },
            },
          },
          '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } },
        },
      },
      responses: {
        '201': { ...created, headers: { Location: { schema: { type: 'string' } } } },
        ...fileErrors(
          [
            'request-timeout',
            'conflict',
            'payload-too-large',
            'quota-exceeded',
            'unsupported-media-type',
            'validation',
            'storage-unavailable',
          ],
          {
            'request-timeout':
              'no byte arrived for storage.uploadIdleTimeoutMs, the upload arrived slower than storage.limits.minUploadBytesPerSecond, or it outlasted storage.uploadTimeoutMs; nothing kept',
            conflict: 'an upload with this Idempotency-Key is still arriving',
            'payload-too-large': "the file is larger than the bucket's maxBytes",
            'quota-exceeded': "the file would pass the bucket's maxTotalBytes or maxFiles; nothing kept",
            'rate-limited':
              "the rate limit is reached, or the caller's uploads a minute, bytes a day or uploads in progress (storage.limits); retry after Retry-After seconds",
            'unsupported-media-type': 'the bucket does not accept the type, or the bytes are not of the declared type',
            validation:
              'no file part, no name, a name with control characters, or the Idempotency-Key was used with another upload',
          },
        ),
      },
    },
    get: {
      tags: [TAG],
      operationId: 'listFiles',
      summary: "List the bucket's files the caller may read: the data API's filters, sort, select and pages",
      parameters: [
        { $ref: '#/components/parameters/limit' },
        { $ref: '#/components/parameters/offset' },
        { $ref: '#/components/parameters/after' },
        { $ref: '#/components/parameters/sort' },
        { $ref: '#/components/parameters/select' },
        { $ref: '#/components/parameters/PreferCount' },
        ...groupParameterRefs(),
        ...fieldFilterParameters(VISIBLE, 'list'),
      ],
      responses: {
        '200': {
          description: 'A page of files',
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['data', 'meta'],
                properties: { data: { type: 'array', items: ref('File') }, meta: ref('ListMeta') },
              },
            },
          },
        },
        ...fileErrors(['invalid-parameter']),
      },
    },
  });
  builder.addPath(`${at}/{id}`, {
    parameters: [...common, idParameter],
    get: {
      tags: [TAG],
      operationId: 'getFile',
      summary: "A file's metadata",
      responses: { '200': created, ...fileErrors([]) },
    },
    delete: {
      tags: [TAG],
      operationId: 'deleteFile',
      summary: 'Delete a file: its metadata at once, its bytes shortly after',
      responses: { '204': { description: 'Deleted' }, ...fileErrors([]) },
    },
  });
  builder.addPath(`${at}/{id}/content`, {
    parameters: [...common, idParameter],
    get: {
      tags: [TAG],
      operationId: 'downloadFile',
      summary: "A file's bytes (one Range; If-None-Match), always as an attachment",
      description:
        'Also answered without credentials: with `token` from a signed URL, or from a public bucket (then give the project as `project_id`).',
      parameters: [
        { name: 'token', in: 'query', description: 'From a signed URL', schema: { type: 'string' } },
        { name: 'Range', in: 'header', description: 'One range, e.g. bytes=0-1023', schema: { type: 'string' } },
        { name: 'If-None-Match', in: 'header', description: 'The ETag of a copy', schema: { type: 'string' } },
      ],
      responses: {
        '200': {
          description: 'The bytes (Content-Type as stored, ETag, Content-Disposition attachment, nosniff)',
          content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
        },
        '206': { description: 'The requested range (Content-Range)' },
        '304': { description: 'The copy with this ETag is current' },
        ...fileErrors(['range-not-satisfiable', 'storage-unavailable'], {
          unauthorized: 'missing or invalid credentials, or a signed URL token that is invalid or expired',
          'rate-limited':
            "the rate limit is reached, or the caller's downloads in progress (storage.limits.concurrentDownloadsPerCaller; per client address without credentials); retry after Retry-After seconds",
        }),
      },
    },
  });
  builder.addPath(`${at}/{id}/signed-url`, {
    parameters: [...common, idParameter],
    post: {
      tags: [TAG],
      operationId: 'signFileUrl',
      summary: 'A download URL that works without credentials until it expires (for <img src>)',
      requestBody: { ...wireBody(signedUrlBody), required: false },
      responses: {
        '200': {
          description: 'The URL (a path on this server) and when it expires',
          content: dataEnvelope({
            type: 'object',
            required: ['url', 'expiresAt'],
            properties: { url: { type: 'string' }, expiresAt: { type: 'string', format: 'date-time' } },
          }),
        },
        ...fileErrors(['invalid-json', 'unsupported-media-type', 'validation']),
      },
    },
  });
}
