/**
 * TypeScript types from the JSON Schemas of endpoints (openapi-endpoints.ts), for the typed client:
 * objects (required and optional members, additionalProperties as a record), arrays and tuples,
 * enums and consts, unions, nullable types, and the scalars. Anything else is `unknown`.
 */
import type { SchemaObject } from 'openapi3-ts/oas31';

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function key(name: string): string {
  return IDENTIFIER.test(name) ? name : JSON.stringify(name);
}

function union(types: readonly string[]): string {
  const unique = [...new Set(types)];
  return unique.length === 0 ? 'never' : unique.join(' | ');
}

/** The TypeScript type of a value `schema` accepts, indented for nested objects by `indent`. */
export function typeOf(schema: SchemaObject | boolean | undefined, indent = ''): string {
  if (schema === undefined || schema === true) return 'unknown';
  if (schema === false) return 'never';
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return union(schema.enum.map((v) => JSON.stringify(v)));
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return union(alternatives.map((s) => wrap(typeOf(s as SchemaObject, indent))));
  if (schema.allOf && schema.allOf.length > 0)
    return schema.allOf.map((s) => wrap(typeOf(s as SchemaObject, indent))).join(' & ');
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : [];
  if (types.length === 0) return schema.properties ? objectType(schema, indent) : 'unknown';
  return union(types.map((t) => scalar(t, schema, indent)));
}

function wrap(type: string): string {
  return type.includes(' ') && !type.startsWith('{') ? `(${type})` : type;
}

function scalar(type: string, schema: SchemaObject, indent: string): string {
  switch (type) {
    case 'string':
      return 'string';
    case 'number':
    case 'integer':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'null':
      return 'null';
    case 'array': {
      if (schema.prefixItems) return `[${schema.prefixItems.map((s) => typeOf(s as SchemaObject, indent)).join(', ')}]`;
      return `${wrap(typeOf(schema.items as SchemaObject | undefined, indent))}[]`;
    }
    case 'object':
      return objectType(schema, indent);
    default:
      return 'unknown';
  }
}

function objectType(schema: SchemaObject, indent: string): string {
  const inner = `${indent}  `;
  const required = new Set(schema.required ?? []);
  const members = Object.entries(schema.properties ?? {}).map(
    ([name, s]) => `${inner}${key(name)}${required.has(name) ? '' : '?'}: ${typeOf(s as SchemaObject, inner)};`,
  );
  const extra = schema.additionalProperties;
  if (extra !== undefined && extra !== false) {
    const value = typeOf(extra as SchemaObject | boolean, inner);
    if (members.length === 0) return `Record<string, ${value}>`;
    members.push(`${inner}[key: string]: unknown;`);
  }
  return members.length === 0 ? 'Record<string, never>' : `{\n${members.join('\n')}\n${indent}}`;
}
