/**
 * The OpenAPI paths of the database functions (docs/own-code.md "Database functions"):
 * `POST /gw/api/rest/rpc/<name>`, its body the named arguments, its answer `{ data }` of what the
 * function returns, as PostgreSQL's JSON writes it.
 */
import type { OpenApiBuilder, SchemaObject } from 'openapi3-ts/oas31';
import {
  functionTypeDescription,
  type FunctionReturns,
  type FunctionSpec,
  type FunctionType,
} from '../../runtime/model/index.ts';
import { BASE, BODY, CHECKED_REQUEST, dataEnvelope, problemResponses } from './openapi-shared.ts';

/** One value of `type` in a request (`input`: what the server accepts) or an answer. */
export function functionTypeSchema(type: FunctionType, input: boolean): SchemaObject {
  const one = ((): SchemaObject => {
    switch (type.base) {
      case 'int2':
        return { type: 'integer', minimum: -32768, maximum: 32767 };
      case 'int4':
        return { type: 'integer', minimum: -2147483648, maximum: 2147483647 };
      case 'int8':
        return input
          ? { oneOf: [{ type: 'integer' }, { type: 'string', pattern: '^-?[0-9]{1,19}$' }] }
          : { type: 'integer' };
      case 'numeric':
        return input ? { oneOf: [{ type: 'number' }, { type: 'string' }] } : { type: 'number' };
      case 'float4':
      case 'float8':
        return { type: 'number' };
      case 'text':
      case 'varchar':
        return { type: 'string' };
      case 'bool':
        return { type: 'boolean' };
      case 'date':
        return { type: 'string', format: 'date' };
      case 'timestamp':
      case 'timestamptz':
        return { type: 'string', format: 'date-time' };
      case 'uuid':
        return { type: 'string', format: 'uuid' };
      case 'json':
      case 'jsonb':
        return {};
      case 'enum':
        return { type: 'string', enum: [...(type.enumValues ?? [])] };
    }
  })();
  const nullable = (s: SchemaObject): SchemaObject => ({ anyOf: [s, { type: 'null' }] });
  return nullable(type.array ? { type: 'array', items: nullable(one) } : one);
}

export function functionResultSchema(returns: FunctionReturns): SchemaObject {
  switch (returns.kind) {
    case 'void':
      return { type: 'null' };
    case 'scalar':
      return returns.set
        ? { type: 'array', items: functionTypeSchema(returns.type, false) }
        : functionTypeSchema(returns.type, false);
    case 'table':
      return {
        type: 'array',
        items: {
          type: 'object',
          required: returns.columns.map((c) => c.name),
          properties: Object.fromEntries(
            returns.columns.map((c) => [c.name, c.type === 'other' ? {} : functionTypeSchema(c.type, false)]),
          ),
        },
      };
    case 'rows':
      return {
        type: 'array',
        description: `Rows of ${returns.table}, every column by its field name, as the function returned them`,
        items: {
          type: 'object',
          required: returns.columns.map((c) => c.name),
          properties: Object.fromEntries(returns.columns.map((c) => [c.name, {}])),
        },
      };
  }
}

export function functionPaths(builder: OpenApiBuilder, functions: readonly FunctionSpec[]): void {
  for (const spec of functions) {
    const required = spec.arguments.filter((a) => !a.hasDefault).map((a) => a.name);
    builder.addPath(`${BASE}/rpc/${spec.name}`, {
      parameters: [{ $ref: '#/components/parameters/environment' }],
      post: {
        tags: ['Database functions'],
        operationId: `rpc_${spec.name}`,
        summary: `Call the database function ${spec.name} (${spec.volatility.toUpperCase()})`,
        description:
          'Only callers with one of the roles of `functions.' +
          spec.name +
          "` in the config may call it. It runs with the server's database privileges, outside role filters; " +
          "it reads the caller from `current_setting('svcgen.user_id', true)` and the other `svcgen.*` settings.",
        requestBody: {
          required: required.length > 0,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                additionalProperties: false,
                ...(required.length > 0 ? { required } : {}),
                properties: Object.fromEntries(
                  spec.arguments.map((a) => [
                    a.name,
                    {
                      ...functionTypeSchema(a.type, true),
                      description: `${functionTypeDescription(a.type)}${a.hasDefault ? "; optional: the function's DEFAULT applies" : ''}`,
                    },
                  ]),
                ),
              },
            },
          },
        },
        responses: {
          '200': {
            description: 'What the function returned',
            content: dataEnvelope(functionResultSchema(spec.returns)),
          },
          ...problemResponses([...CHECKED_REQUEST, ...BODY, 'rate-limited', 'validation'], {
            'bad-request': 'the function raised an exception (SQLSTATE P0001): `detail` is its message',
            forbidden: 'no role of the caller may call this function, or the credential is a management token',
          }),
        },
      },
    });
  }
}
