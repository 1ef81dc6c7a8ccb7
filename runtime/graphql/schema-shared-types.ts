/**
 * The types every schema shares, whatever the tables: scalars (values pass as the JSON forms of
 * docs/api.md §5.2), sort direction, page info, the aggregate `having` filter and change events.
 */
import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLInputObjectType,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLScalarType,
  GraphQLString,
  Kind,
  valueFromASTUntyped,
  type ValueNode,
} from 'graphql';
import { decimalMarker, RawNumber } from './exact-numbers.ts';

/** What a change did to its record, as webhook events name it. */
export const ChangeEvent = new GraphQLEnumType({
  name: 'ChangeEvent',
  values: { INSERT: { value: 'INSERT' }, UPDATE: { value: 'UPDATE' }, DELETE: { value: 'DELETE' } },
});

/**
 * Values pass as the JSON forms of docs/api.md §5.2; the query layer checks them as it does for
 * REST. Literals keep their source text (an integer literal past 2^53 keeps its digits).
 */
function jsonScalar(
  name: string,
  description: string,
  literalKinds: readonly Kind[],
  valueTypes: readonly string[],
): GraphQLScalarType {
  const takes = `${name} takes ${valueTypes.join(' or ')}`;
  return new GraphQLScalarType({
    name,
    description,
    serialize: (value) => value,
    parseValue(value) {
      if (!valueTypes.includes(typeof value)) throw new TypeError(takes);
      return value;
    },
    parseLiteral(ast: ValueNode) {
      if (!literalKinds.includes(ast.kind)) throw new TypeError(takes);
      return (ast as { value: string }).value;
    },
  });
}

export const DateTimeScalar = jsonScalar(
  'DateTime',
  'An ISO 8601 timestamp in UTC, e.g. 2025-01-31T09:30:00.000Z',
  [Kind.STRING],
  ['string'],
);
export const BigIntScalar = jsonScalar(
  'BigInt',
  'A 64-bit integer, answered as a string of digits (JSON numbers lose precision past 2^53); an integer or such a string as input',
  [Kind.STRING, Kind.INT],
  ['string', 'number'],
);
export const DecimalScalar = jsonScalar(
  'Decimal',
  'A decimal number, answered as a JSON number written as stored (12.50); a number or a decimal string ("12.50") as input',
  [Kind.STRING, Kind.INT, Kind.FLOAT],
  ['string', 'number'],
);
// A stored value keeps its digits: the HTTP layer writes the marker back as the number's text.
DecimalScalar.serialize = (value) => (value instanceof RawNumber ? decimalMarker(value) : value);
export const BytesScalar = jsonScalar('Bytes', 'Binary data as base64 text', [Kind.STRING], ['string']);
export const JsonScalar = new GraphQLScalarType({
  name: 'Json',
  description: 'Any JSON value',
  serialize: (value) => value,
  parseValue: (value) => value,
  parseLiteral: (ast, variables) => valueFromASTUntyped(ast, variables),
});

export const SortDirection = new GraphQLEnumType({
  name: 'SortDirection',
  values: { ASC: { value: 'asc' }, DESC: { value: 'desc' } },
});

export const PageInfo = new GraphQLObjectType({
  name: 'PageInfo',
  description: 'Where a page ends: pass endCursor as `after` for the next one (the same cursors as the REST API)',
  fields: { endCursor: { type: GraphQLString }, hasNextPage: { type: new GraphQLNonNull(GraphQLBoolean) } },
});

const HAVING_OPERATORS = ['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte'] as const;
export const HavingFilter = new GraphQLInputObjectType({
  name: 'HavingFilter',
  description:
    'Compares an aggregate with a number (a decimal string or number of at most 30 digits before and after the point)',
  fields: Object.fromEntries(HAVING_OPERATORS.map((op) => [op, { type: DecimalScalar }])),
});

/** Names of the types every schema has: no table or enum may take one. */
export const RESERVED_TYPE_NAMES = new Set([
  'Query',
  'Mutation',
  'Subscription',
  'ChangeEvent',
  'PageInfo',
  'SortDirection',
  'HavingFilter',
  'BulkMode',
  'BulkCreateResult',
  'BulkItemError',
  'WriteCount',
  'DateTime',
  'BigInt',
  'Decimal',
  'Bytes',
  'Json',
  'String',
  'Int',
  'Float',
  'Boolean',
  'ID',
]);
