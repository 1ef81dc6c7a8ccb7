/**
 * The arguments of a call, checked against the function's signature before any SQL runs
 * (docs/own-code.md "Database functions"): a JSON object of named arguments, each of its type,
 * none unknown, every one without a DEFAULT given. Every failure is a 422 naming the argument.
 */
import { z } from 'zod';
import { Problem, type FieldError } from '../http/index.ts';
import { functionTypeDescription, type FunctionSpec, type FunctionType } from '../model/index.ts';

const INT_RANGE = {
  int2: [-32768, 32767],
  int4: [-2147483648, 2147483647],
} as const;
const INT8_MIN = -(2n ** 63n);
const INT8_MAX = 2n ** 63n - 1n;

function fitsInt8(value: string | number): boolean {
  const n = BigInt(value);
  return n >= INT8_MIN && n <= INT8_MAX;
}

/** One value of `type` (not an array): null is SQL NULL and always passes, as PostgreSQL takes it. */
function scalarSchema(type: FunctionType): z.ZodType {
  switch (type.base) {
    case 'int2':
    case 'int4':
      return z.number().int().min(INT_RANGE[type.base][0]).max(INT_RANGE[type.base][1]);
    case 'int8':
      return z.union([z.number().int(), z.string().regex(/^-?[0-9]{1,19}$/)]).refine(fitsInt8);
    case 'numeric':
      return z.union([z.number().finite(), z.string().regex(/^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/)]);
    case 'float4':
    case 'float8':
      return z.number().finite();
    case 'text':
    case 'varchar':
      // PostgreSQL text holds no NUL character.
      return z.string().refine((s) => !s.includes('\u0000'));
    case 'bool':
      return z.boolean();
    case 'date':
      return z.iso.date();
    case 'timestamp':
      return z.iso.datetime({ local: true });
    case 'timestamptz':
      return z.iso.datetime({ offset: true });
    case 'uuid':
      return z.uuid();
    case 'json':
    case 'jsonb':
      return z.json();
    case 'enum':
      return z.enum((type.enumValues ?? []) as [string, ...string[]]);
  }
}

function typeSchema(type: FunctionType): z.ZodType {
  const one = scalarSchema(type).nullable();
  return type.array ? z.array(one).nullable() : one;
}

const schemas = new WeakMap<FunctionSpec, Map<string, z.ZodType>>();

function argumentSchemas(spec: FunctionSpec): Map<string, z.ZodType> {
  let found = schemas.get(spec);
  if (!found) {
    found = new Map(spec.arguments.map((a) => [a.name, typeSchema(a.type)]));
    schemas.set(spec, found);
  }
  return found;
}

/**
 * The arguments of `body` in the function's order, each its value or `undefined` (left out: its
 * DEFAULT applies), or a 422 naming every argument that is wrong, unknown or missing.
 */
export function parseArguments(spec: FunctionSpec, body: unknown): Map<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new Problem('validation', `the body must be a JSON object of ${spec.name}'s arguments by name`, [
      { field: '', rule: 'type', message: 'the body must be a JSON object' },
    ]);
  const given = body as Record<string, unknown>;
  const errors: FieldError[] = [];
  const names = new Set(spec.arguments.map((a) => a.name));
  for (const key of Object.keys(given))
    if (!names.has(key))
      errors.push({
        field: key,
        rule: 'unknown_field',
        message: `${spec.name} has no argument "${key}"${names.size > 0 ? ` (arguments: ${[...names].join(', ')})` : ' (it takes none)'}`,
      });
  const values = new Map<string, unknown>();
  const schema = argumentSchemas(spec);
  for (const argument of spec.arguments) {
    const expected = functionTypeDescription(argument.type);
    if (!Object.hasOwn(given, argument.name)) {
      if (!argument.hasDefault)
        errors.push({
          field: argument.name,
          rule: 'required',
          message: `${argument.name} is required: expected ${expected}`,
        });
      continue;
    }
    const parsed = schema.get(argument.name)!.safeParse(given[argument.name]);
    if (!parsed.success) {
      const at = parsed.error.issues[0]?.path ?? [];
      const field = `${argument.name}${at.length > 0 && typeof at[0] === 'number' ? `[${at[0]}]` : ''}`;
      const rule = argument.type.base === 'enum' ? 'enum' : 'type';
      errors.push({ field, rule, message: `${field}: expected ${expected}` });
      continue;
    }
    values.set(argument.name, parsed.data);
  }
  if (errors.length > 0) throw new Problem('validation', errors.map((e) => e.message).join('; '), errors);
  return values;
}
