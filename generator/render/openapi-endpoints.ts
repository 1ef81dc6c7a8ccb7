/**
 * The OpenAPI operations of a project's own endpoints (docs/own-code.md "Endpoints"): request and
 * response schemas from their zod input and output (openapi-wire.ts), security per access rule,
 * and the Problem responses the server's endpoint route can answer (runtime/server/endpoints.ts).
 */
import type { OpenApiBuilder, OperationObject, ParameterObject, SchemaObject } from 'openapi3-ts/oas31';
import type { ProblemKind } from '../../runtime/model/problem-kinds.ts';
import type { CodeRegistry } from '../../runtime/usercode/index.ts';
import { ModelError } from '../model/describe-model.ts';
import { BASE, BODY, CHECKED_REQUEST, problemResponses } from './openapi-shared.ts';
import { wireAnswer, wireSchema } from './openapi-wire.ts';

export type Endpoint = CodeRegistry['endpoints'][number];

/** An endpoint's input and output as JSON Schema (what a client sends, what the server answers). */
export interface EndpointSchemas {
  readonly endpoint: Endpoint;
  readonly input: SchemaObject;
  readonly output: SchemaObject;
  /** `:name` segments of the path. */
  readonly pathParameters: readonly string[];
  /** GET and DELETE take their input as query and path parameters; the others as a JSON body. */
  readonly inQuery: boolean;
}

function fail(endpoint: Endpoint, message: string): never {
  throw new ModelError([`endpoint ${JSON.stringify(endpoint.name)}: ${message}`]);
}

/** The JSON Schemas of each endpoint; one that JSON Schema cannot express fails generate, naming it. */
export function endpointSchemas(endpoints: readonly Endpoint[]): EndpointSchemas[] {
  return endpoints.map((endpoint) => {
    const convert = (part: 'input' | 'output') => {
      try {
        return part === 'input' ? wireSchema(endpoint.input) : wireAnswer(endpoint.output);
      } catch (error) {
        return fail(endpoint, `its ${part} schema has no JSON Schema (${(error as Error).message})`);
      }
    };
    const input = convert('input');
    const inQuery = endpoint.method === 'GET' || endpoint.method === 'DELETE';
    if (inQuery && (input.type !== 'object' || input.properties === undefined))
      fail(endpoint, `a ${endpoint.method} endpoint's input must be a z.object of its query and path parameters`);
    const pathParameters = endpoint.path
      .split('/')
      .filter((s) => s.startsWith(':'))
      .map((s) => s.slice(1));
    return { endpoint, input, output: convert('output'), pathParameters, inQuery };
  });
}

/** The security requirements of an access rule (the schemes of openapi.ts). */
function security(endpoint: Endpoint): Record<string, string[]>[] {
  const user = { bearerJwt: [], projectId: [] };
  const key = { apiKey: [], projectId: [] };
  if (endpoint.access === 'signed-in') return [user];
  if (endpoint.access === 'public') return [{ projectId: [] }, key, user];
  return [key, user];
}

function accessText(endpoint: Endpoint): string {
  const access = endpoint.access;
  if (access === 'public') return 'Public: callable without credentials (credentials sent are still verified).';
  if (access === 'signed-in') return 'Signed-in users only (a user access token; API keys are refused).';
  // The roles themselves are not listed: the document is public, like the tables' (whose grants it does not list either).
  return 'Callers (API keys or users) holding one of the roles the endpoint allows.';
}

function parameters(schemas: EndpointSchemas): ParameterObject[] {
  const { input, pathParameters } = schemas;
  const properties = (input.properties ?? {}) as Record<string, SchemaObject>;
  const required = new Set(input.required ?? []);
  const out: ParameterObject[] = pathParameters.map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: properties[name] ?? { type: 'string' },
  }));
  if (!schemas.inQuery) return out;
  for (const [name, schema] of Object.entries(properties)) {
    if (pathParameters.includes(name)) continue;
    out.push({ name, in: 'query', required: required.has(name), schema });
  }
  return out;
}

/** Adds each endpoint's path; an operationId another operation has already fails generate. */
export function endpointPaths(builder: OpenApiBuilder, all: readonly EndpointSchemas[]): void {
  const taken = new Set<string>();
  for (const item of Object.values(builder.getSpec().paths ?? {}))
    for (const operation of Object.values(item as Record<string, OperationObject>))
      if (typeof operation === 'object' && operation?.operationId) taken.add(operation.operationId);
  const byPath = new Map<string, Record<string, OperationObject>>();
  for (const schemas of all) {
    const { endpoint } = schemas;
    if (taken.has(endpoint.name))
      fail(endpoint, `its name is the operationId of one of the service's own operations; choose another`);
    const kinds: ProblemKind[] = [...CHECKED_REQUEST, 'rate-limited', 'validation'];
    if (!schemas.inQuery) kinds.push(...BODY);
    const status = String(endpoint.status ?? 200);
    const operation: OperationObject = {
      tags: ['Endpoints'],
      operationId: endpoint.name,
      summary: endpoint.summary ?? endpoint.name,
      description: `${accessText(endpoint)} An endpoint of the project's own code; it may also answer the Problems its code throws.`,
      security: security(endpoint),
      parameters: parameters(schemas),
      ...(schemas.inQuery
        ? {}
        : { requestBody: { required: true, content: { 'application/json': { schema: schemas.input } } } }),
      responses: {
        [status]: { description: 'The answer', content: { 'application/json': { schema: schemas.output } } },
        ...problemResponses(kinds, {
          forbidden: 'the caller holds none of the roles the endpoint allows, or is of a kind it refuses',
          validation: 'the input does not match the endpoint’s schema, or the code refused it (each field named)',
        }),
      },
      'x-svcgen-access': typeof endpoint.access === 'string' ? endpoint.access : 'roles',
    };
    const path = `${BASE}${endpoint.path.replace(/:(\w+)/g, '{$1}')}`;
    const item = byPath.get(path) ?? {};
    item[endpoint.method.toLowerCase()] = operation;
    byPath.set(path, item);
  }
  for (const [path, operations] of [...byPath].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    builder.addPath(path, { parameters: [{ $ref: '#/components/parameters/environment' }], ...operations });
}
