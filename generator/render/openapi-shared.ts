/** Pieces shared by the OpenAPI builders: references, record schemas, common responses. */
import type { ResponseObject, SchemaObject } from 'openapi3-ts/oas31';
import type { FieldSpec, TableSpec } from '../../runtime/model/index.ts';
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
    schema = schema.type && !Array.isArray(schema.type) && !schema.enum ? { ...schema, type: [schema.type, 'null'] } : { oneOf: [schema, { type: 'null' }] };
  }
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
      ...(relation.kind === 'many' ? { type: 'array', items: ref(relation.target) } : { oneOf: [ref(relation.target), { type: 'null' }] }),
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

export const problem = (description: string): ResponseObject => ({
  description,
  content: { 'application/problem+json': { schema: ref('Problem') } },
});

export const COMMON_ERRORS: Record<string, ResponseObject> = {
  '400': problem('Missing X-Project-Id or an invalid query parameter'),
  '401': problem('Missing, malformed, revoked or wrong-environment credentials'),
  '403': problem('The role may not do this'),
  '404': problem('Unknown project, environment, table or record'),
  '429': problem('Rate limit exceeded'),
};

export function dataEnvelope(schema: SchemaObject | { $ref: string }): ResponseObject['content'] {
  return { 'application/json': { schema: { type: 'object', required: ['data'], properties: { data: schema } } } };
}

export function listResponse(table: TableSpec): ResponseObject {
  return {
    description: 'A page of records',
    content: {
      'application/json': {
        schema: { type: 'object', required: ['data', 'meta'], properties: { data: { type: 'array', items: ref(table.name) }, meta: ref('ListMeta') } },
      },
    },
  };
}
