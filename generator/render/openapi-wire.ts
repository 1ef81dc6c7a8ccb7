/**
 * OpenAPI schemas of the server's own request bodies, derived from the zod schemas the runtime
 * validates them with (runtime/model/wire/), so a rule such as the e-mail length is written once.
 */
import type { SchemaObject } from 'openapi3-ts/oas31';
import { z } from 'zod';
import { WIRE_COMPONENTS } from '../../runtime/model/wire/index.ts';

/**
 * Both directions. Left out, as they say nothing a client can use: a record's `propertyNames: {
 * type: 'string' }` (every JSON key is a string) and the safe-integer bounds zod gives every int.
 */
const OPTIONS = {
  target: 'draft-2020-12',
  unrepresentable: 'throw',
  override: ({ jsonSchema }) => {
    const names = jsonSchema.propertyNames;
    if (typeof names === 'object' && Object.keys(names).length === 1 && names.type === 'string')
      delete jsonSchema.propertyNames;
    if (jsonSchema.type === 'integer') {
      if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
      if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
    }
  },
} as const satisfies z.core.ToJSONSchemaParams;

/**
 * The JSON Schema of what a client may send: `io: 'input'` (a field with a default is optional),
 * draft 2020-12 (the dialect of OpenAPI 3.1; the 'openapi-3.0' target writes `nullable`, which
 * 3.1 dropped). A zod type JSON Schema cannot express throws rather than becoming `{}`, and reused
 * parts are written out in place.
 */
export function wireSchema(schema: z.ZodType): SchemaObject {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { ...OPTIONS, io: 'input', reused: 'inline' });
  return json as SchemaObject;
}

/** The JSON Schema of an answer the server sends, written out in place. */
export function wireAnswer(schema: z.ZodType): SchemaObject {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { ...OPTIONS, io: 'output', reused: 'inline' });
  return json as SchemaObject;
}

/**
 * components.schemas of the answers runtime/model/wire names (WIRE_COMPONENTS), as the server
 * sends them (`io: 'output'`); one that contains another refers to its component.
 */
export function wireComponents(): Record<string, SchemaObject> {
  const { schemas } = z.toJSONSchema(WIRE_COMPONENTS, {
    ...OPTIONS,
    io: 'output',
    uri: (id) => `#/components/schemas/${id}`,
  });
  return Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _dialect, $id: _id, ...json }]) => [id, json as SchemaObject]),
  );
}

/** A required JSON request body of this schema. */
export function wireBody(schema: z.ZodType) {
  return { required: true, content: { 'application/json': { schema: wireSchema(schema) } } };
}
