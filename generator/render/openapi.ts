/** The OpenAPI 3.1 document of the generated API, built with openapi3-ts from the table descriptions. */
import { OpenApiBuilder, type OperationObject, type ParameterObject, type ResponseObject, type SchemaObject } from 'openapi3-ts/oas31';
import type { FieldSpec, RouteSpec, TableSpec } from '../../runtime/model/index.ts';
import { writableFields } from './zod-expressions.ts';

const BASE = '/gw/api/rest';
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

function scalarSchema(field: FieldSpec): SchemaObject {
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

function recordSchemas(table: TableSpec): Record<string, SchemaObject> {
  const record: SchemaObject = {
    type: 'object',
    description: `A ${table.name} record. Fields a role may not read are left out.`,
    properties: Object.fromEntries(table.fields.map((f) => [f.name, fieldSchema(f, false)])),
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

const problem = (description: string): ResponseObject => ({
  description,
  content: { 'application/problem+json': { schema: ref('Problem') } },
});

const COMMON_ERRORS: Record<string, ResponseObject> = {
  '400': problem('Missing X-Project-Id or an invalid query parameter'),
  '401': problem('Missing, malformed, revoked or wrong-environment credentials'),
  '403': problem('The role may not do this'),
  '404': problem('Unknown project, environment, table or record'),
  '429': problem('Rate limit exceeded'),
};

function dataEnvelope(schema: SchemaObject | { $ref: string }): ResponseObject['content'] {
  return { 'application/json': { schema: { type: 'object', required: ['data'], properties: { data: schema } } } };
}

function listResponse(table: TableSpec): ResponseObject {
  return {
    description: 'A page of records',
    content: {
      'application/json': {
        schema: { type: 'object', required: ['data', 'meta'], properties: { data: { type: 'array', items: ref(table.name) }, meta: ref('ListMeta') } },
      },
    },
  };
}

function operationFor(route: RouteSpec, table: TableSpec): OperationObject {
  const tags = [table.name];
  const idParam: ParameterObject = {
    name: 'id',
    in: 'path',
    required: true,
    schema: scalarSchema(table.fields.find((f) => f.name === table.primaryKey[0])!),
  };
  switch (route.operation) {
    case 'list':
      return {
        tags,
        operationId: `list${table.name}`,
        summary: `List ${table.name} records`,
        parameters: [
          { $ref: '#/components/parameters/limit' },
          { $ref: '#/components/parameters/offset' },
          { $ref: '#/components/parameters/after' },
          { $ref: '#/components/parameters/sort' },
          { $ref: '#/components/parameters/select' },
          { $ref: '#/components/parameters/filter' },
          { $ref: '#/components/parameters/PreferCount' },
        ],
        responses: { '200': listResponse(table), ...COMMON_ERRORS },
      };
    case 'create':
      return {
        tags,
        operationId: `create${table.name}`,
        summary: `Create a ${table.name} record`,
        parameters: [{ $ref: '#/components/parameters/Prefer' }],
        requestBody: { required: true, content: { 'application/json': { schema: ref(`${table.name}Create`) } } },
        responses: {
          '201': { description: 'Created (no body with Prefer: return=minimal)', headers: { Location: { schema: { type: 'string' } } }, content: dataEnvelope(ref(table.name)) },
          ...COMMON_ERRORS,
          '409': problem('A unique field already has this value'),
          '413': problem('Body too large'),
          '415': problem('Body is not application/json'),
          '422': problem('Validation failed; errors name the fields'),
        },
      };
    case 'read':
      return {
        tags,
        operationId: `get${table.name}`,
        summary: `Read one ${table.name} record`,
        parameters: [idParam, { $ref: '#/components/parameters/select' }],
        responses: { '200': { description: 'The record', content: dataEnvelope(ref(table.name)) }, ...COMMON_ERRORS },
      };
    case 'update':
      return {
        tags,
        operationId: `update${table.name}`,
        summary: `Update a ${table.name} record (JSON Merge Patch)`,
        parameters: [idParam],
        requestBody: {
          required: true,
          content: { 'application/merge-patch+json': { schema: ref(`${table.name}Update`) }, 'application/json': { schema: ref(`${table.name}Update`) } },
        },
        responses: {
          '200': { description: 'The updated record', content: dataEnvelope(ref(table.name)) },
          ...COMMON_ERRORS,
          '409': problem('A unique field already has this value'),
          '415': problem('Body is not JSON'),
          '422': problem('Validation failed; errors name the fields'),
        },
      };
    case 'delete':
      return {
        tags,
        operationId: `delete${table.name}`,
        summary: `Delete a ${table.name} record`,
        parameters: [idParam],
        responses: { '204': { description: 'Deleted' }, ...COMMON_ERRORS, '409': problem('Other records still reference it') },
      };
    case 'updateMany':
      return {
        tags,
        operationId: `update${table.name}Where`,
        summary: `Update every ${table.name} record matching the filters (at least one filter)`,
        parameters: [{ $ref: '#/components/parameters/filter' }],
        requestBody: {
          required: true,
          content: { 'application/merge-patch+json': { schema: ref(`${table.name}Update`) }, 'application/json': { schema: ref(`${table.name}Update`) } },
        },
        responses: {
          '200': { description: 'How many records matched', content: dataEnvelope({ type: 'object', required: ['count'], properties: { count: { type: 'integer' } } }) },
          ...COMMON_ERRORS,
          '422': problem('No filter, or validation failed'),
        },
      };
    case 'bulkCreate':
      return {
        tags,
        operationId: `bulkCreate${table.name}`,
        summary: `Create up to 100 ${table.name} records`,
        parameters: [{ name: 'mode', in: 'query', schema: ref('TransactionMode') }],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: false,
                required: ['items'],
                properties: { items: { type: 'array', maxItems: 100, items: ref(`${table.name}Create`) }, transactionMode: ref('TransactionMode') },
              },
            },
          },
        },
        responses: {
          '201': { description: 'All inserted', content: dataEnvelope(ref('BulkResult')) },
          '207': { description: 'BEST_EFFORT with failures', content: dataEnvelope(ref('BulkResult')) },
          ...COMMON_ERRORS,
          '422': problem('ALL_OR_NOTHING with a failure (nothing inserted; the envelope is in `data`), or more than 100 items'),
        },
      };
    case 'bulkDelete':
      return {
        tags,
        operationId: `bulkDelete${table.name}`,
        summary: `Delete up to 100 ${table.name} records by key`,
        parameters: [{ name: 'mode', in: 'query', schema: ref('TransactionMode') }],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: false,
                properties: {
                  ids: { type: 'array', maxItems: 100, items: { type: ['string', 'integer'] } },
                  filters: { type: 'array', maxItems: 100, items: { type: 'object' } },
                  transactionMode: ref('TransactionMode'),
                },
              },
            },
          },
        },
        responses: {
          '200': { description: 'All deleted', content: dataEnvelope(ref('BulkResult')) },
          '207': { description: 'BEST_EFFORT with failures', content: dataEnvelope(ref('BulkResult')) },
          ...COMMON_ERRORS,
          '422': problem('ALL_OR_NOTHING with a failure (nothing deleted), ids and filters mixed, or ids on a composite key'),
        },
      };
    case 'aggregate':
      return {
        tags,
        operationId: `aggregate${table.name}`,
        summary: `Aggregate ${table.name} records`,
        parameters: [
          { name: 'fn', in: 'query', description: 'count, sum:<field>, avg:<field>, min:<field>, max:<field>, count_distinct:<field>', schema: { type: 'string' } },
          { name: 'groupBy', in: 'query', schema: { type: 'string' } },
          { name: 'having', in: 'query', description: 'e.g. count.gt.10', schema: { type: 'string' } },
          { name: 'sort', in: 'query', description: 'aggregate alias or groupBy field, - for descending', schema: { type: 'string' } },
          { $ref: '#/components/parameters/filter' },
        ],
        responses: {
          '200': {
            description: 'One row per group: the groupBy fields and the aliases',
            content: dataEnvelope({ type: 'object', required: ['aggregates'], properties: { aggregates: { type: 'array', items: { type: 'object' } } } }),
          },
          ...COMMON_ERRORS,
        },
      };
    case 'query':
      return {
        tags,
        operationId: `query${table.name}`,
        summary: `Query ${table.name} records with a JSON body (read-only)`,
        parameters: [{ $ref: '#/components/parameters/PreferCount' }],
        requestBody: { required: true, content: { 'application/json': { schema: ref('QueryBody') } } },
        responses: {
          '200': listResponse(table),
          ...COMMON_ERRORS,
        },
      };
  }
}

function apiKeyPaths(builder: OpenApiBuilder): void {
  const keyFields = {
    id: { type: 'string' },
    name: { type: 'string' },
    prefix: { type: 'string' },
    roles: { type: 'array', items: { type: 'string' } },
    environment: { type: 'string' },
    createdAt: { type: 'string', format: 'date-time' },
  } satisfies Record<string, SchemaObject>;
  const security = [{ managementToken: [] }];
  builder.addPath(`${BASE}/_apikeys`, {
    parameters: [{ $ref: '#/components/parameters/projectId' }, { $ref: '#/components/parameters/environment' }],
    post: {
      tags: ['API keys'],
      operationId: 'createApiKey',
      summary: 'Create an API key (its value is shown only in this response)',
      security,
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: {
              type: 'object',
              additionalProperties: false,
              required: ['name', 'prefix', 'roles', 'environment'],
              properties: {
                name: { type: 'string' },
                prefix: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_-]{0,31}$' },
                roles: { type: 'array', items: { type: 'string' }, minItems: 1 },
                context: { type: 'object', additionalProperties: { type: 'string' } },
                environment: { type: 'string' },
              },
            },
          },
        },
      },
      responses: {
        '201': { description: 'The new key', content: dataEnvelope({ type: 'object', properties: { ...keyFields, key: { type: 'string' } } }) },
        ...COMMON_ERRORS,
        '422': problem('Validation failed'),
      },
    },
    get: {
      tags: ['API keys'],
      operationId: 'listApiKeys',
      summary: 'List the API keys of the environment (no key values)',
      security,
      responses: {
        '200': {
          description: 'Keys',
          content: dataEnvelope({
            type: 'array',
            items: {
              type: 'object',
              properties: {
                ...keyFields,
                context: { type: 'object', additionalProperties: { type: 'string' } },
                lastUsedAt: { type: ['string', 'null'], format: 'date-time' },
              },
            },
          }),
        },
        ...COMMON_ERRORS,
      },
    },
  });
  builder.addPath(`${BASE}/_apikeys/{id}`, {
    parameters: [
      { $ref: '#/components/parameters/projectId' },
      { $ref: '#/components/parameters/environment' },
      { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
    ],
    delete: {
      tags: ['API keys'],
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key',
      security,
      responses: { '204': { description: 'Revoked' }, ...COMMON_ERRORS },
    },
  });
}

export function buildOpenApi(tables: readonly TableSpec[], routes: readonly RouteSpec[], info: { title: string; version: string }): object {
  const builder = OpenApiBuilder.create({
    openapi: '3.1.0',
    info: {
      title: info.title,
      version: info.version,
      description: 'Generated by svcgen from schema.prisma. Data routes need X-Project-Id and an API key or access token.',
    },
    paths: {},
    components: {},
  });
  builder.addSecurityScheme('bearer', { type: 'http', scheme: 'bearer', description: 'An API key or a user access token' });
  builder.addSecurityScheme('apiKey', {
    type: 'apiKey',
    in: 'header',
    name: 'Authorization',
    description: '"<key prefix> <API key>", the scheme word chosen when the key was created',
  });
  builder.addSecurityScheme('managementToken', { type: 'http', scheme: 'bearer', description: 'A management token (API keys, webhooks)' });
  builder.addParameter('projectId', { name: 'X-Project-Id', in: 'header', required: true, schema: { type: 'string' } });
  builder.addParameter('environment', { name: 'environment', in: 'header', required: false, schema: { type: 'string', default: 'master' } });
  builder.addParameter('limit', { name: 'limit', in: 'query', description: 'Page size (alias first)', schema: { type: 'integer', minimum: 0, maximum: 1000, default: 100 } });
  builder.addParameter('offset', { name: 'offset', in: 'query', description: 'Rows to skip (alias skip)', schema: { type: 'integer', minimum: 0, default: 0 } });
  builder.addParameter('after', { name: 'after', in: 'query', description: 'Cursor from meta.pagination.nextCursor', schema: { type: 'string' } });
  builder.addParameter('sort', { name: 'sort', in: 'query', description: 'a,-b or a.asc,b.desc', schema: { type: 'string' } });
  builder.addParameter('select', {
    name: 'select',
    in: 'query',
    description: 'a,b,original:alias,relation(c,d); embeds nest up to 3 levels, at most 10',
    schema: { type: 'string' },
  });
  builder.addParameter('filter', {
    name: 'filter',
    in: 'query',
    description:
      'Any other parameter filters: <field>=<operator>.<value> or <relation>.<field>=<operator>.<value>; or=(...), and=(...), not=(...). Operators: equals, not_equals, gt, gte, lt, lte, contains, starts_with, ends_with, in, not_in, between, is_empty, is_not_empty, today, yesterday, this_week, this_month, last_days, last_weeks, last_months.',
    style: 'form',
    explode: true,
    schema: { type: 'object', additionalProperties: { type: 'string' } },
  });
  builder.addParameter('PreferCount', { name: 'Prefer', in: 'header', description: 'count=exact adds meta.pagination.totalCount', schema: { type: 'string' } });
  builder.addParameter('Prefer', { name: 'Prefer', in: 'header', description: 'return=minimal answers 201 with no body', schema: { type: 'string' } });
  builder.addSchema('Problem', {
    type: 'object',
    description: 'Problem Details (RFC 9457)',
    required: ['type', 'title', 'status', 'detail', 'instance', 'errors'],
    properties: {
      type: { type: 'string' },
      title: { type: 'string' },
      status: { type: 'integer' },
      detail: { type: 'string' },
      instance: { type: 'string' },
      errors: {
        type: 'array',
        items: { type: 'object', required: ['field', 'rule', 'message'], properties: { field: { type: 'string' }, rule: { type: 'string' }, message: { type: 'string' } } },
      },
    },
  });
  builder.addSchema('ListMeta', {
    type: 'object',
    required: ['pagination'],
    properties: {
      pagination: {
        type: 'object',
        required: ['limit', 'offset', 'hasNextPage', 'hasPreviousPage'],
        properties: {
          limit: { type: 'integer' },
          offset: { type: 'integer' },
          hasNextPage: { type: 'boolean' },
          hasPreviousPage: { type: 'boolean' },
          nextCursor: { type: ['string', 'null'] },
          totalCount: { type: 'integer' },
        },
      },
    },
  });
  builder.addSchema('TransactionMode', { type: 'string', enum: ['ALL_OR_NOTHING', 'BEST_EFFORT'], default: 'ALL_OR_NOTHING' });
  builder.addSchema('BulkResult', {
    type: 'object',
    required: ['success', 'transactionMode', 'totalRequested', 'totalSucceeded', 'totalFailed', 'items', 'errors'],
    properties: {
      success: { type: 'boolean' },
      transactionMode: ref('TransactionMode'),
      totalRequested: { type: 'integer' },
      totalSucceeded: { type: 'integer' },
      totalFailed: { type: 'integer' },
      items: { type: 'array', items: { type: 'object' } },
      errors: { type: 'array', items: { type: 'object', required: ['index', 'message'], properties: { index: { type: 'integer' }, message: { type: 'string' } } } },
    },
  });
  builder.addSchema('QueryBody', {
    type: 'object',
    additionalProperties: false,
    properties: {
      filter: {
        type: 'array',
        items: { type: 'object', required: ['field', 'operator'], properties: { field: { type: 'string' }, operator: { type: 'string' }, value: {} } },
      },
      sort: { type: 'array', items: { type: 'object', required: ['field'], properties: { field: { type: 'string' }, direction: { type: 'string', enum: ['asc', 'desc', 'ASC', 'DESC'] } } } },
      pagination: { type: 'object', properties: { first: { type: 'integer', minimum: 1, maximum: 1000 }, skip: { type: 'integer', minimum: 0 }, after: { type: 'string' } } },
      select: { type: 'array', items: ref('SelectItem') },
    },
  });
  builder.addSchema('SelectItem', {
    type: 'object',
    required: ['field'],
    properties: { field: { type: 'string' }, alias: { type: 'string' }, children: { type: 'array', items: ref('SelectItem') } },
  });
  for (const table of tables) for (const [name, schema] of Object.entries(recordSchemas(table))) builder.addSchema(name, schema);

  const byTable = new Map(tables.map((t) => [t.name, t]));
  const paths = new Map<string, Record<string, OperationObject>>();
  for (const route of routes) {
    const path = `${BASE}${route.path.replace(/:(\w+)/g, '{$1}')}`;
    const item = paths.get(path) ?? {};
    item[route.method.toLowerCase()] = operationFor(route, byTable.get(route.table)!);
    paths.set(path, item);
  }
  for (const [path, operations] of paths) {
    builder.addPath(path, {
      parameters: [{ $ref: '#/components/parameters/projectId' }, { $ref: '#/components/parameters/environment' }],
      ...operations,
    });
  }
  apiKeyPaths(builder);
  const doc = builder.getSpec();
  doc.security = [{ bearer: [] }, { apiKey: [] }];
  doc.servers = [{ url: '/' }];
  return doc;
}
