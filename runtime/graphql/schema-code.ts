/**
 * Root fields for the project's own code (docs/own-code.md "Endpoints" and "Database functions",
 * docs/graphql.md "Your own code"): an endpoint whose input and output JSON Schemas map to GraphQL
 * becomes a field named as the endpoint (GET → Query, other methods → Mutation), its arguments the
 * input's properties; a database function becomes `rpc_<name>` (VOLATILE → Mutation, else Query)
 * answering `Json`. The fields only name things: the server's resolver runs the same steps as the
 * REST route (runtime/server/endpoints.ts, runtime/functions). Imports only runtime/model and graphql,
 * as ./schema.ts does.
 */
import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigArgumentMap,
  type GraphQLInputType,
  type GraphQLOutputType,
} from 'graphql';
import type { FunctionSpec, FunctionType } from '../model/index.ts';
import { BigIntScalar, DecimalScalar, JsonScalar } from './schema-shared-types.ts';

/** A JSON Schema as z.toJSONSchema writes it (draft 2020-12, reused parts written in place). */
export type JsonSchema = { readonly [key: string]: unknown };

/** An endpoint as the GraphQL schema needs it: its name, method, access and JSON Schemas. */
export interface EndpointField {
  readonly name: string;
  readonly method: string;
  readonly input: JsonSchema;
  readonly output: JsonSchema;
}

/** What a code field's `extensions.svcgen` holds: the server's resolver finds the endpoint or function by it. */
export interface CodeFieldMeta {
  readonly code: 'endpoint' | 'function';
  readonly name: string;
}

/** The project's own code in the schema; `visible` says which fields a caller sees (all when absent). */
export interface CodeFields {
  readonly endpoints: readonly EndpointField[];
  readonly functions: readonly FunctionSpec[];
  readonly visible?: (meta: CodeFieldMeta) => boolean;
}

export const NO_CODE: CodeFields = { endpoints: [], functions: [] };

/** The root field name of a database function. */
export function functionFieldName(name: string): string {
  return `rpc_${name}`;
}

const NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

class Unmapped extends Error {}

function pascal(name: string): string {
  return name
    .split(/[^0-9A-Za-z]+/)
    .filter(Boolean)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}

/** The one non-null member of `anyOf: [X, { type: 'null' }]`, or the schema itself; and whether null is allowed. */
function unwrapNull(schema: JsonSchema): { schema: JsonSchema; nullable: boolean } {
  const anyOf = schema.anyOf as JsonSchema[] | undefined;
  if (Array.isArray(anyOf)) {
    const rest = anyOf.filter((s) => s.type !== 'null');
    if (rest.length === 1 && anyOf.length === 2) return { schema: rest[0]!, nullable: true };
    throw new Unmapped('a union (anyOf) other than "or null"');
  }
  if (Array.isArray(schema.type)) {
    const types = (schema.type as string[]).filter((t) => t !== 'null');
    if (types.length === 1)
      return { schema: { ...schema, type: types[0] }, nullable: types.length < schema.type.length };
    throw new Unmapped(`a value of several types (${(schema.type as string[]).join(', ')})`);
  }
  return { schema, nullable: false };
}

/**
 * Builds GraphQL types from JSON Schemas, in one direction (input or output). Type names are the
 * endpoint's in PascalCase with the path of the member: `CheckoutInput_Items`, `CheckoutOutput`.
 */
class Mapper {
  readonly types = new Map<string, GraphQLObjectType | GraphQLInputObjectType | GraphQLEnumType>();

  constructor(private readonly direction: 'input' | 'output') {}

  type(schema: JsonSchema, name: string, where: string): GraphQLInputType & GraphQLOutputType {
    const { schema: s, nullable } = unwrapNull(schema);
    const type = this.nonNull(s, name, where);
    return (nullable ? type : new GraphQLNonNull(type)) as never;
  }

  /** A member of an object: nullable when optional or nullable. */
  member(schema: JsonSchema, required: boolean, name: string, where: string): GraphQLInputType & GraphQLOutputType {
    const { schema: s, nullable } = unwrapNull(schema);
    const type = this.nonNull(s, name, where);
    return (nullable || !required ? type : new GraphQLNonNull(type)) as never;
  }

  private nonNull(s: JsonSchema, name: string, where: string) {
    if (Array.isArray(s.enum)) {
      const values = s.enum as unknown[];
      if (!values.every((v) => typeof v === 'string' && NAME.test(v) && !['true', 'false', 'null'].includes(v)))
        throw new Unmapped(`${where}: an enum whose values are not all GraphQL names`);
      return this.named(
        name,
        () =>
          new GraphQLEnumType({
            name,
            values: Object.fromEntries(values.map((v) => [v as string, { value: v }])),
          }),
      );
    }
    if ('const' in s) throw new Unmapped(`${where}: a literal (const)`);
    switch (s.type) {
      case 'string':
        return GraphQLString;
      case 'number':
        return GraphQLFloat;
      case 'integer':
        return GraphQLInt;
      case 'boolean':
        return GraphQLBoolean;
      case 'array': {
        if (Array.isArray(s.prefixItems) || typeof s.items !== 'object' || s.items === null)
          throw new Unmapped(`${where}: a tuple or a list without one item type`);
        return new GraphQLList(this.type(s.items as JsonSchema, `${name}Item`, `${where}[]`));
      }
      case 'object':
        return this.object(s, name, where);
      default:
        throw new Unmapped(`${where}: ${s.type === undefined ? 'any value' : `a value of type ${String(s.type)}`}`);
    }
  }

  private named<T extends GraphQLObjectType | GraphQLInputObjectType | GraphQLEnumType>(name: string, make: () => T) {
    const known = this.types.get(name);
    if (known) return known as T;
    const made = make();
    this.types.set(name, made);
    return made;
  }

  /** The fields of an object with named properties (a record of any keys does not map). */
  fields(s: JsonSchema, name: string, where: string) {
    const properties = (s.properties ?? {}) as Record<string, JsonSchema>;
    const extra = s.additionalProperties;
    if (extra !== undefined && extra !== false)
      throw new Unmapped(`${where || 'the value'}: an object with keys of its own (a record)`);
    if (s.patternProperties) throw new Unmapped(`${where || 'the value'}: an object with pattern keys`);
    const required = new Set((s.required ?? []) as string[]);
    const entries = Object.entries(properties);
    for (const [key] of entries)
      if (!NAME.test(key) || key.startsWith('__'))
        throw new Unmapped(`${where ? `${where}.` : ''}${key}: not a GraphQL name`);
    return entries.map(([key, member]) => ({
      key,
      type: this.member(member, required.has(key), `${name}_${pascal(key)}`, `${where ? `${where}.` : ''}${key}`),
    }));
  }

  private object(s: JsonSchema, name: string, where: string) {
    const fields = this.fields(s, name, where);
    if (fields.length === 0) throw new Unmapped(`${where || 'the value'}: an object without properties`);
    return this.named(name, () =>
      this.direction === 'input'
        ? new GraphQLInputObjectType({
            name,
            fields: () => Object.fromEntries(fields.map((f) => [f.key, { type: f.type as GraphQLInputType }])),
          })
        : new GraphQLObjectType({
            name,
            fields: () => Object.fromEntries(fields.map((f) => [f.key, { type: f.type as GraphQLOutputType }])),
          }),
    );
  }
}

/** An endpoint's root field, or why it has none (docs/own-code.md "Endpoints" "GraphQL"). */
export function endpointField(
  endpoint: EndpointField,
): { field: GraphQLFieldConfig<unknown, unknown> } | { omitted: string } {
  try {
    if (!NAME.test(endpoint.name) || endpoint.name.startsWith('__'))
      throw new Unmapped('its name is not a GraphQL name');
    const base = pascal(endpoint.name);
    const input = unwrapNull(endpoint.input);
    if (input.nullable || input.schema.type !== 'object')
      throw new Unmapped('its input is not an object (its properties are the arguments)');
    const args: GraphQLFieldConfigArgumentMap = {};
    for (const { key, type } of new Mapper('input').fields(input.schema, `${base}Input`, ''))
      args[key] = { type: type as GraphQLInputType };
    // Nullable at the root, as every field that may fail: its error leaves the document's other fields.
    const { schema: output } = unwrapNull(endpoint.output);
    const type = new Mapper('output').member(output, false, `${base}Output`, 'output') as GraphQLOutputType;
    const meta: CodeFieldMeta = { code: 'endpoint', name: endpoint.name };
    return { field: { type, args, extensions: { svcgen: meta } } };
  } catch (error) {
    if (error instanceof Unmapped) return { omitted: error.message };
    throw error;
  }
}

function scalarOfFunction(type: FunctionType): GraphQLInputType {
  switch (type.base) {
    case 'int2':
    case 'int4':
      return GraphQLInt;
    case 'int8':
      return BigIntScalar;
    case 'numeric':
      return DecimalScalar;
    case 'float4':
    case 'float8':
      return GraphQLFloat;
    case 'bool':
      return GraphQLBoolean;
    case 'json':
    case 'jsonb':
      return JsonScalar;
    default:
      // Text, dates, timestamps, uuids and enums: strings, checked by the call as REST checks them.
      return GraphQLString;
  }
}

/** A database function's root field: its arguments by name (required unless DEFAULT), its answer Json. */
export function functionField(spec: FunctionSpec): GraphQLFieldConfig<unknown, unknown> {
  const args: GraphQLFieldConfigArgumentMap = {};
  for (const argument of spec.arguments) {
    const scalar = scalarOfFunction(argument.type);
    const type = argument.type.array ? new GraphQLList(scalar) : scalar;
    args[argument.name] = { type: argument.hasDefault ? type : new GraphQLNonNull(type) };
  }
  const meta: CodeFieldMeta = { code: 'function', name: spec.name };
  return { type: JsonScalar, args, extensions: { svcgen: meta } };
}

/**
 * The code's Query and Mutation fields beside `taken` (the tables' root fields): an endpoint that
 * does not map, or whose name a table's field holds, is left out and reported to `omit`.
 */
export function codeRootFields(
  code: CodeFields,
  taken: { query: ReadonlySet<string>; mutation: ReadonlySet<string> },
  omit: (name: string, reason: string) => void = () => {},
): {
  query: Record<string, GraphQLFieldConfig<unknown, unknown>>;
  mutation: Record<string, GraphQLFieldConfig<unknown, unknown>>;
} {
  const query: Record<string, GraphQLFieldConfig<unknown, unknown>> = {};
  const mutation: Record<string, GraphQLFieldConfig<unknown, unknown>> = {};
  const visible = code.visible ?? (() => true);
  for (const endpoint of code.endpoints) {
    const root = endpoint.method === 'GET' ? 'query' : 'mutation';
    const into = root === 'query' ? query : mutation;
    if (taken[root].has(endpoint.name) || endpoint.name in into) {
      omit(endpoint.name, `a ${root === 'query' ? 'Query' : 'Mutation'} field of that name exists already`);
      continue;
    }
    const made = endpointField(endpoint);
    if ('omitted' in made) omit(endpoint.name, made.omitted);
    else if (visible({ code: 'endpoint', name: endpoint.name })) into[endpoint.name] = made.field;
  }
  for (const spec of code.functions) {
    const root = spec.volatility === 'volatile' ? 'mutation' : 'query';
    const into = root === 'query' ? query : mutation;
    const name = functionFieldName(spec.name);
    if (taken[root].has(name) || name in into) {
      omit(name, `a ${root === 'query' ? 'Query' : 'Mutation'} field of that name exists already`);
      continue;
    }
    if (visible({ code: 'function', name: spec.name })) into[name] = functionField(spec);
  }
  return { query, mutation };
}
