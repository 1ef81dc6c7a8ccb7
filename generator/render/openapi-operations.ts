/** The OpenAPI operation of each generated data route. */
import type { OperationObject, ParameterObject, ReferenceObject, SchemaObject } from 'openapi3-ts/oas31';
import { LIMITS, type RouteSpec, type TableSpec } from '../../runtime/model/index.ts';
import {
  FILTER_DESCRIPTION,
  MAX_AGGREGATE_ROWS,
  fieldFilterParameters,
  groupParameterRefs,
} from './openapi-filters.ts';
import type { ProblemKind } from '../../runtime/model/problem-kinds.ts';
import {
  BODY,
  CHECKED_REQUEST,
  dataEnvelope,
  listResponse,
  problemResponses,
  ref,
  scalarSchema,
} from './openapi-shared.ts';

/** What every data request can be answered (docs/api.md §2 "Order of checks"), besides an operation's own kinds. */
function dataErrors(kinds: readonly ProblemKind[], notes: Partial<Record<ProblemKind, string>> = {}) {
  return problemResponses([...CHECKED_REQUEST, 'unknown-table', 'rate-limited', ...kinds], notes);
}

const RECORD_NOT_FOUND = 'no such record, or the caller may not read it';
const UNIQUE_TAKEN = 'a unique field already has this value';
const FIELDS_INVALID = 'validation failed; errors name the fields';

/** POST or DELETE /<table>/_bulk: the body's own members plus transactionMode, the bulk envelope back. */
function bulkOperation(
  table: TableSpec,
  verb: 'Create' | 'Delete',
  summary: string,
  body: { required?: string[]; properties: Record<string, SchemaObject | ReferenceObject> },
  ok: [status: string, description: string],
  errors: ReturnType<typeof dataErrors>,
): OperationObject {
  return {
    tags: [table.name],
    operationId: `bulk${verb}${table.name}`,
    summary,
    parameters: [{ name: 'mode', in: 'query', schema: ref('TransactionMode') }],
    requestBody: {
      required: true,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            additionalProperties: false,
            ...body,
            properties: { ...body.properties, transactionMode: ref('TransactionMode') },
          },
        },
      },
    },
    responses: {
      [ok[0]]: { description: ok[1], content: dataEnvelope(ref('BulkResult')) },
      '207': { description: 'BEST_EFFORT with failures', content: dataEnvelope(ref('BulkResult')) },
      ...errors,
    },
  };
}

export function operationFor(route: RouteSpec, table: TableSpec): OperationObject {
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
        description: FILTER_DESCRIPTION,
        parameters: [
          { $ref: '#/components/parameters/limit' },
          { $ref: '#/components/parameters/offset' },
          { $ref: '#/components/parameters/after' },
          { $ref: '#/components/parameters/sort' },
          { $ref: '#/components/parameters/select' },
          ...groupParameterRefs(),
          ...fieldFilterParameters(table, 'list'),
          { $ref: '#/components/parameters/PreferCount' },
        ],
        responses: { '200': listResponse(table), ...dataErrors(['invalid-parameter']) },
      };
    case 'create':
      return {
        tags,
        operationId: `create${table.name}`,
        summary: `Create a ${table.name} record`,
        parameters: [{ $ref: '#/components/parameters/Prefer' }],
        requestBody: { required: true, content: { 'application/json': { schema: ref(`${table.name}Create`) } } },
        responses: {
          '201': {
            description: 'Created (no body with Prefer: return=minimal)',
            headers: { Location: { schema: { type: 'string' } } },
            content: dataEnvelope(ref(table.name)),
          },
          ...dataErrors([...BODY, 'validation', 'conflict'], {
            conflict: `${UNIQUE_TAKEN}, or a request with this Idempotency-Key is still in flight`,
            validation: `${FIELDS_INVALID}; or the Idempotency-Key was used with another body`,
          }),
        },
      };
    case 'read':
      return {
        tags,
        operationId: `get${table.name}`,
        summary: `Read one ${table.name} record`,
        parameters: [idParam, { $ref: '#/components/parameters/select' }],
        responses: {
          '200': { description: 'The record', content: dataEnvelope(ref(table.name)) },
          ...dataErrors(['invalid-parameter', 'not-found'], { 'not-found': RECORD_NOT_FOUND }),
        },
      };
    case 'update':
      return {
        tags,
        operationId: `update${table.name}`,
        summary: `Update a ${table.name} record (JSON Merge Patch)`,
        parameters: [idParam],
        requestBody: {
          required: true,
          content: {
            'application/merge-patch+json': { schema: ref(`${table.name}Update`) },
            'application/json': { schema: ref(`${table.name}Update`) },
          },
        },
        responses: {
          '200': { description: 'The updated record', content: dataEnvelope(ref(table.name)) },
          ...dataErrors([...BODY, 'validation', 'conflict', 'not-found'], {
            conflict: UNIQUE_TAKEN,
            validation: FIELDS_INVALID,
            'not-found': RECORD_NOT_FOUND,
            'unsupported-media-type': 'the body is not application/json or application/merge-patch+json',
          }),
        },
      };
    case 'delete':
      return {
        tags,
        operationId: `delete${table.name}`,
        summary: `Delete a ${table.name} record`,
        parameters: [idParam],
        responses: {
          '204': { description: 'Deleted' },
          ...dataErrors(['not-found', 'conflict'], {
            conflict: 'other records still reference it',
            'not-found': RECORD_NOT_FOUND,
          }),
        },
      };
    case 'updateMany':
      return {
        tags,
        operationId: `update${table.name}Where`,
        summary: `Update every ${table.name} record matching the filters (at least one filter)`,
        description: FILTER_DESCRIPTION,
        parameters: [...groupParameterRefs(), ...fieldFilterParameters(table, 'updateMany')],
        requestBody: {
          required: true,
          content: {
            'application/merge-patch+json': { schema: ref(`${table.name}Update`) },
            'application/json': { schema: ref(`${table.name}Update`) },
          },
        },
        responses: {
          '200': {
            description: 'How many records matched',
            content: dataEnvelope({ type: 'object', required: ['count'], properties: { count: { type: 'integer' } } }),
          },
          ...dataErrors(['invalid-parameter', ...BODY, 'validation', 'conflict'], {
            conflict: UNIQUE_TAKEN,
            validation: `no filter, or ${FIELDS_INVALID}`,
            'unsupported-media-type': 'the body is not application/json or application/merge-patch+json',
          }),
        },
      };
    case 'bulkCreate':
      return bulkOperation(
        table,
        'Create',
        `Create up to ${LIMITS.maxBulkItems} ${table.name} records`,
        {
          required: ['items'],
          properties: { items: { type: 'array', maxItems: LIMITS.maxBulkItems, items: ref(`${table.name}Create`) } },
        },
        ['201', 'All inserted'],
        dataErrors(['invalid-parameter', ...BODY, 'validation', 'conflict'], {
          conflict: 'a request with this Idempotency-Key is still in flight',
          validation: `ALL_OR_NOTHING with a failure (nothing inserted; the envelope is in \`data\`), more than ${LIMITS.maxBulkItems} items, or the Idempotency-Key was used with another body`,
        }),
      );
    case 'bulkDelete':
      return bulkOperation(
        table,
        'Delete',
        `Delete up to ${LIMITS.maxBulkItems} ${table.name} records by key`,
        {
          properties: {
            ids: { type: 'array', maxItems: LIMITS.maxBulkItems, items: { type: ['string', 'integer'] } },
            filters: { type: 'array', maxItems: LIMITS.maxBulkItems, items: { type: 'object' } },
          },
        },
        ['200', 'All deleted'],
        dataErrors(['invalid-parameter', ...BODY, 'validation'], {
          validation: `ALL_OR_NOTHING with a failure (nothing deleted; the envelope is in \`data\`), more than ${LIMITS.maxBulkItems} items, ids and filters mixed, or ids on a composite key`,
        }),
      );
    case 'aggregate':
      return {
        tags,
        operationId: `aggregate${table.name}`,
        summary: `Aggregate ${table.name} records`,
        description: `Filters apply before aggregation. ${FILTER_DESCRIPTION}`,
        parameters: [
          {
            name: 'fn',
            in: 'query',
            description: 'count, sum:<field>, avg:<field>, min:<field>, max:<field>, count_distinct:<field>',
            schema: { type: 'string' },
          },
          { name: 'groupBy', in: 'query', schema: { type: 'string' } },
          { name: 'having', in: 'query', description: 'e.g. count.gt.10', schema: { type: 'string' } },
          {
            name: 'sort',
            in: 'query',
            description: 'aggregate alias or groupBy field, - for descending',
            schema: { type: 'string' },
          },
          {
            name: 'limit',
            in: 'query',
            description: 'Most rows returned',
            schema: { type: 'integer', minimum: 1, maximum: MAX_AGGREGATE_ROWS },
          },
          ...groupParameterRefs(),
          ...fieldFilterParameters(table, 'aggregate'),
        ],
        responses: {
          '200': {
            description: 'One row per group: the groupBy fields and the aliases',
            content: dataEnvelope({
              type: 'object',
              required: ['aggregates'],
              properties: { aggregates: { type: 'array', items: { type: 'object' } } },
            }),
          },
          ...dataErrors(['invalid-parameter']),
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
          ...dataErrors(['invalid-parameter', ...BODY]),
        },
      };
  }
}
