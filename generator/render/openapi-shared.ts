/** Pieces shared by the OpenAPI builders: references, record schemas, common responses. */
import type { HeaderObject, ReferenceObject, ResponseObject, SchemaObject } from 'openapi3-ts/oas31';
import { fileReferenceDescription, type FieldSpec, type TableSpec } from '../../runtime/model/index.ts';
import { PROBLEM_HEADERS, PROBLEM_KINDS, type ProblemKind } from '../../runtime/model/problem-kinds.ts';
import { writableFields } from './zod-expressions.ts';

export const BASE = '/gw/api/rest';
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

export function scalarSchema(field: FieldSpec): SchemaObject {
  switch (field.type) {
    case 'String':
      if (field.nativeType?.[0] === 'Uuid') return { type: 'string', format: 'uuid' };
      if ((field.nativeType?.[0] === 'VarChar' || field.nativeType?.[0] === 'Char') && field.nativeType[1][0]) {
        return { type: 'string', maxLength: Number(field.nativeType[1][0]) };
      }
      return { type: 'string' };
    case 'Int':
      return { type: 'integer', format: 'int32' };
    case 'BigInt':
      return { type: 'string', format: 'int64', pattern: '^-?\\d+$' };
    case 'Float':
      return { type: 'number', format: 'double' };
    case 'Decimal':
      return { type: 'number' };
    case 'Boolean':
      return { type: 'boolean' };
    case 'DateTime':
      return { type: 'string', format: 'date-time' };
    case 'Json':
      return {};
    case 'Bytes':
      return { type: 'string', contentEncoding: 'base64' };
    case 'Enum':
      return { type: 'string', enum: [...(field.enumValues ?? [])] };
  }
}

function fieldSchema(field: FieldSpec, input: boolean): SchemaObject {
  let schema = scalarSchema(field);
  if (field.list) schema = { type: 'array', items: schema };
  if (input && field.type === 'BigInt') schema = { oneOf: [{ type: 'integer' }, schema] };
  if (field.nullable) {
    schema =
      schema.type && !Array.isArray(schema.type) && !schema.enum
        ? { ...schema, type: [schema.type, 'null'] }
        : { oneOf: [schema, { type: 'null' }] };
  }
  if (field.file) schema = { ...schema, format: 'uuid', description: fileReferenceDescription(field.file) };
  return schema;
}

export function recordSchemas(table: TableSpec): Record<string, SchemaObject> {
  const record: SchemaObject = {
    type: 'object',
    description: `A ${table.name} record. Every field is present (nullable ones as null) unless a select names fewer or a role may not read it.`,
    properties: Object.fromEntries(table.fields.map((f) => [f.name, fieldSchema(f, false)])),
    // Required for typed clients (non-null fields are not optional); a select or a role's field
    // list can still leave some out.
    required: table.fields.filter((f) => !f.nullable).map((f) => f.name),
  };
  for (const relation of table.relations) {
    record.properties![relation.name] = {
      description: `Embedded ${relation.target} (only when named in select)`,
      ...(relation.kind === 'many'
        ? { type: 'array', items: ref(relation.target) }
        : { oneOf: [ref(relation.target), { type: 'null' }] }),
    };
  }
  const create = writableFields(table.fields, 'create');
  const update = writableFields(table.fields, 'update');
  return {
    [table.name]: record,
    [`${table.name}Create`]: {
      type: 'object',
      additionalProperties: false,
      properties: Object.fromEntries(create.map((f) => [f.name, fieldSchema(f, true)])),
      required: create.filter((f) => !f.nullable && !f.list && !f.dbDefault && !f.clientDefault).map((f) => f.name),
    },
    [`${table.name}Update`]: {
      type: 'object',
      additionalProperties: false,
      description: 'JSON Merge Patch (RFC 7396): fields left out are unchanged, null sets null.',
      properties: Object.fromEntries(update.map((f) => [f.name, fieldSchema(f, true)])),
    },
  };
}

/** One Problem response for kinds of one status; the description says when each `type` is answered. */
function problemResponse(
  group: readonly ProblemKind[],
  notes: Partial<Record<ProblemKind, string>> = {},
): ResponseObject {
  const types = group.map((k) => `/errors/${k}`);
  const headers = [...new Set(group.flatMap((k) => PROBLEM_HEADERS[k] ?? []))];
  return {
    description: group.map((k) => `\`/errors/${k}\`: ${notes[k] ?? PROBLEM_KINDS[k].description}`).join('; '),
    ...(headers.length
      ? { headers: Object.fromEntries(headers.map((h) => [h, { $ref: `#/components/headers/${h}` }])) }
      : {}),
    content: {
      'application/problem+json': { schema: { allOf: [ref('Problem'), { properties: { type: { enum: types } } }] } },
    },
  };
}

const RESPONSE_REF = '#/components/responses/';

/**
 * The Problem responses of an operation from the kinds it can answer (runtime/model/problem-kinds.ts,
 * the table the server answers from), one response per status naming its `type`s. `notes` replace a
 * kind's general description where the operation says more (e.g. what a 409 means for a delete);
 * a status without notes refers to a shared response named after its kinds (see problemComponents),
 * which keeps the document small.
 */
export function problemResponses(
  kinds: readonly ProblemKind[],
  notes: Partial<Record<ProblemKind, string>> = {},
): Record<string, ResponseObject | ReferenceObject> {
  const byStatus = new Map<number, ProblemKind[]>();
  for (const kind of new Set(kinds)) {
    const { status } = PROBLEM_KINDS[kind];
    byStatus.set(status, [...(byStatus.get(status) ?? []), kind]);
  }
  const responses: Record<string, ResponseObject | ReferenceObject> = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[String(status)] = group.some((k) => notes[k] !== undefined)
      ? problemResponse(group, notes)
      : { $ref: `${RESPONSE_REF}${group.join('.')}` };
  }
  return responses;
}

/** components.responses for every shared Problem response `paths` refers to. */
export function problemComponents(paths: object): Record<string, ResponseObject> {
  const names = new Set<string>();
  JSON.stringify(paths, (key, value: unknown) => {
    if (key === '$ref' && typeof value === 'string' && value.startsWith(RESPONSE_REF))
      names.add(value.slice(RESPONSE_REF.length));
    return value;
  });
  return Object.fromEntries([...names].sort().map((name) => [name, problemResponse(name.split('.') as ProblemKind[])]));
}

/** The headers PROBLEM_HEADERS names, for components.headers. */
export const PROBLEM_HEADER_OBJECTS: Record<string, HeaderObject> = {
  'Retry-After': {
    description: 'Seconds to wait before sending the request again',
    schema: { type: 'integer', minimum: 0 },
  },
  'WWW-Authenticate': { description: 'Bearer', schema: { type: 'string' } },
  'RateLimit-Limit': { description: 'Requests allowed in the current window', schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the current window', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets', schema: { type: 'integer' } },
};

/** What the server can answer to any request, before it is routed. */
export const ANY_REQUEST: readonly ProblemKind[] = [
  'bad-request',
  'request-timeout',
  'request-header-too-large',
  'internal',
];
/** Kinds of every request that reaches the database with a checked project and credential. */
export const CHECKED_REQUEST: readonly ProblemKind[] = [
  ...ANY_REQUEST,
  'missing-project',
  'unknown-project',
  'unknown-environment',
  'unauthorized',
  'forbidden',
  'database-unavailable',
  'database-busy',
  'statement-timeout',
];
/** Kinds of a request with a JSON body. */
export const BODY: readonly ProblemKind[] = ['invalid-json', 'payload-too-large', 'unsupported-media-type'];

/** The Problem responses of a management (API key, webhook) operation: no table and no rate limit. */
export function managementErrors(
  kinds: readonly ProblemKind[] = [],
  notes: Partial<Record<ProblemKind, string>> = {},
): Record<string, ResponseObject | ReferenceObject> {
  return problemResponses([...CHECKED_REQUEST, ...kinds], {
    forbidden: 'the credential is not a management token',
    ...notes,
  });
}

export function dataEnvelope(schema: SchemaObject | { $ref: string }): ResponseObject['content'] {
  return { 'application/json': { schema: { type: 'object', required: ['data'], properties: { data: schema } } } };
}

export function listResponse(table: TableSpec): ResponseObject {
  return {
    description: 'A page of records',
    content: {
      'application/json': {
        schema: {
          type: 'object',
          required: ['data', 'meta'],
          properties: { data: { type: 'array', items: ref(table.name) }, meta: ref('ListMeta') },
        },
      },
    },
  };
}
