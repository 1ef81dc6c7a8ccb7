/**
 * OpenAPI schemas of the server's own request bodies, derived from the zod schemas the runtime
 * validates them with (runtime/model/wire/), so a rule such as the e-mail length is written once.
 */
import type { SchemaObject } from 'openapi3-ts/oas31';
import { z } from 'zod';

/**
 * The JSON Schema of what a client may send: `io: 'input'` (a field with a default is optional),
 * draft 2020-12 (the dialect of OpenAPI 3.1; the 'openapi-3.0' target writes `nullable`, which
 * 3.1 dropped). A zod type JSON Schema cannot express throws rather than becoming `{}`, and reused
 * parts are written out in place: the document names its components itself. A record's
 * `propertyNames: { type: 'string' }` is left out: every JSON key is a string.
 */
export function wireSchema(schema: z.ZodType): SchemaObject {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'throw',
    reused: 'inline',
    override: ({ jsonSchema }) => {
      const names = jsonSchema.propertyNames;
      if (typeof names === 'object' && Object.keys(names).length === 1 && names.type === 'string')
        delete jsonSchema.propertyNames;
    },
  });
  return json as SchemaObject;
}

/** A required JSON request body of this schema. */
export function wireBody(schema: z.ZodType) {
  return { required: true, content: { 'application/json': { schema: wireSchema(schema) } } };
}
