/**
 * An endpoint's input and output as JSON Schema (draft 2020-12, parts written in place), as
 * openapi.json describes them: the GraphQL schema maps these (runtime/graphql/schema-code.ts),
 * in the server and in generated/schema.graphql alike. A zod type JSON Schema cannot express
 * throws (generate refuses such an endpoint already, docs/own-code.md "Endpoints").
 */
import { z } from 'zod';
import type { EndpointDefinition } from './definitions.ts';

type JsonSchema = { readonly [key: string]: unknown };

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    unrepresentable: 'throw',
    io,
    reused: 'inline',
  });
  return json;
}

/** The endpoint's fields for the GraphQL schema: name, method and both JSON Schemas. */
export function endpointJsonSchemas(endpoint: Pick<EndpointDefinition, 'name' | 'method' | 'input' | 'output'>): {
  name: string;
  method: string;
  input: JsonSchema;
  output: JsonSchema;
} {
  return {
    name: endpoint.name,
    method: endpoint.method,
    input: jsonSchema(endpoint.input as z.ZodType, 'input'),
    output: jsonSchema(endpoint.output as z.ZodType, 'output'),
  };
}
