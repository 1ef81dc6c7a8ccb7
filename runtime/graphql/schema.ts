/**
 * The GraphQL schema of the read API (docs/graphql.md), built from the table descriptions and what
 * a caller may see. One builder serves the server (a schema per set of roles) and the generator
 * (generated/schema.graphql, everything visible), so the two cannot drift. It imports only
 * runtime/model, graphql and ./exact-numbers.ts: the generator may use it without the server's runtime.
 *
 * The schema only names things; every rule about what a caller may read lives in the query layer
 * (runtime/query), which the server's resolvers go through. The names and the metadata in
 * `extensions.svcgen` are what the server's translation reads back.
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
  GraphQLScalarType,
  GraphQLSchema,
  GraphQLString,
  Kind,
  validateSchema,
  valueFromASTUntyped,
  type GraphQLFieldConfig,
  type GraphQLFieldConfigMap,
  type GraphQLFieldResolver,
  type GraphQLInputFieldConfigMap,
  type GraphQLInputType,
  type GraphQLOutputType,
  type ValueNode,
} from 'graphql';
import { decimalMarker, RawNumber } from './exact-numbers.ts';
import {
  aggregateMismatch,
  fieldOperators,
  fileReferenceDescription,
  OPERATOR_DEFINITIONS,
  type AggregateFunction,
  type OperandShape,
  type FieldSpec,
  type Operator,
  type RelationSpec,
  type TableSpec,
} from '../model/index.ts';

/** What the schema shows: tables and fields a caller may read (a relation shows when both ends and its link fields do). */
export interface SchemaVisibility {
  table(table: string): boolean;
  field(table: string, field: string): boolean;
}

export const EVERYTHING_VISIBLE: SchemaVisibility = { table: () => true, field: () => true };

export type WriteAction = 'create' | 'update' | 'delete';

/** What a caller may write: the fields of an action's grant (null: all), undefined when the action is not granted. */
export type WriteVisibility = (table: string, action: WriteAction) => ReadonlySet<string> | null | undefined;

export const EVERYTHING_WRITABLE: WriteVisibility = () => null;

/** Root field kinds; `extensions.svcgen` of a root field says which, and of which table. */
export type RootKind = 'list' | 'byKey' | 'page' | 'aggregate';

/** Mutation root field kinds, each the twin of one REST write (docs/graphql.md "Mutations"). */
export type MutationKind = 'create' | 'createMany' | 'update' | 'updateWhere' | 'delete' | 'deleteWhere';

export interface MutationFieldMeta {
  readonly kind: MutationKind;
  readonly table: string;
  /** Whether the answer is the written record as the caller reads it (false: the table is not readable, answers true). */
  readonly returnsRecord: boolean;
}

/** The names of a table's mutation fields: `Order` → createOrder, createOrderMany, updateOrder, updateOrderWhere, deleteOrder, deleteOrderWhere. */
export function mutationFieldNames(table: string): Record<MutationKind, string> {
  return {
    create: `create${table}`,
    createMany: `create${table}Many`,
    update: `update${table}`,
    updateWhere: `update${table}Where`,
    delete: `delete${table}`,
    deleteWhere: `delete${table}Where`,
  };
}

export interface RootFieldMeta {
  readonly kind: RootKind;
  readonly table: string;
}

/** `extensions.svcgen` of a field of a table's object type. */
export type ObjectFieldMeta = { readonly field: string } | { readonly relation: string };

/** The names of a table's root fields: `Order` → order, orderList, orderPage, orderAggregate. */
export function rootFieldNames(table: string): Record<RootKind, string> {
  const base = table.charAt(0).toLowerCase() + table.slice(1);
  return { byKey: base, list: `${base}List`, page: `${base}Page`, aggregate: `${base}Aggregate` };
}

/** The subscription field of a table (docs/realtime.md): `Order` → orderChanged. */
export function subscriptionFieldName(table: string): string {
  return `${table.charAt(0).toLowerCase()}${table.slice(1)}Changed`;
}

/** `extensions.svcgen` of a Subscription field. */
export interface SubscriptionFieldMeta {
  readonly table: string;
}

/** What a change did to its record, as webhook events name it. */
export const ChangeEvent = new GraphQLEnumType({
  name: 'ChangeEvent',
  values: { INSERT: { value: 'INSERT' }, UPDATE: { value: 'UPDATE' }, DELETE: { value: 'DELETE' } },
});

/** Aggregate functions by the field of an aggregate row (`sum_total`), as the REST _aggregate names them. */
export interface AggregateName {
  readonly fn: AggregateFunction;
  readonly field?: string;
}

// --- scalars -------------------------------------------------------------------------------------

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

const PageInfo = new GraphQLObjectType({
  name: 'PageInfo',
  description: 'Where a page ends: pass endCursor as `after` for the next one (the same cursors as the REST API)',
  fields: { endCursor: { type: GraphQLString }, hasNextPage: { type: new GraphQLNonNull(GraphQLBoolean) } },
});

const HAVING_OPERATORS = ['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte'] as const;
const HavingFilter = new GraphQLInputObjectType({
  name: 'HavingFilter',
  description:
    'Compares an aggregate with a number (a decimal string or number of at most 30 digits before and after the point)',
  fields: Object.fromEntries(HAVING_OPERATORS.map((op) => [op, { type: DecimalScalar }])),
});

const RESERVED_TYPE_NAMES = new Set([
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

// --- the builder ---------------------------------------------------------------------------------

const NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

function sortable(field: FieldSpec): boolean {
  return !field.list && field.type !== 'Json' && field.type !== 'Bytes';
}

/** Aggregate row members of a field (`sum_total`, ...), in REST's naming. */
function aggregateMembers(field: FieldSpec): { name: string; fn: Exclude<AggregateFunction, 'count'> }[] {
  return (['count_distinct', 'sum', 'avg', 'min', 'max'] as const)
    .filter((fn) => aggregateMismatch(field, fn) === undefined)
    .map((fn) => ({ name: `${fn}_${field.name}`, fn }));
}

/** A table's type names, checked for collisions with each other and the shared types. */
export function typeNames(table: string) {
  return {
    object: table,
    where: `${table}Where`,
    orderBy: `${table}OrderBy`,
    page: `${table}Page`,
    aggregate: `${table}Aggregate`,
    groupField: `${table}GroupField`,
    having: `${table}Having`,
    aggregateOrderBy: `${table}AggregateOrderBy`,
    createInput: `${table}CreateInput`,
    updateInput: `${table}UpdateInput`,
    change: `${table}Change`,
    record: `${table}Record`,
  };
}

/**
 * The schema for `tables` as `visible` shows them. `resolveField` reads a table record's member
 * (the server passes one that reads the response key; the generator none).
 */
export function buildGraphQLSchema(
  tables: readonly TableSpec[],
  visible: SchemaVisibility,
  resolveField?: GraphQLFieldResolver<unknown, unknown>,
  writable: WriteVisibility = EVERYTHING_WRITABLE,
): GraphQLSchema {
  const byName = new Map(tables.map((t) => [t.name, t]));
  const shown = tables.filter((t) => visible.table(t.name));
  const typeOwners = new Map<string, string>();
  const claim = (name: string, owner: string) => {
    if (!NAME.test(name)) throw new Error(`${owner}: "${name}" is not a GraphQL name`);
    const before = typeOwners.get(name);
    if (before !== undefined || RESERVED_TYPE_NAMES.has(name))
      throw new Error(
        `GraphQL type name ${name} of ${owner} is also used by ${before ?? 'the schema itself'}; rename the model or enum`,
      );
    typeOwners.set(name, owner);
  };
  for (const t of tables) for (const name of Object.values(typeNames(t.name))) claim(name, `table ${t.name}`);

  const fieldVisible = (t: TableSpec, f: string) => visible.table(t.name) && visible.field(t.name, f);
  const relationVisible = (t: TableSpec, r: RelationSpec) => {
    const target = byName.get(r.target);
    return (
      target !== undefined &&
      visible.table(target.name) &&
      r.fields.every((f) => fieldVisible(t, f)) &&
      r.targetFields.every((f) => fieldVisible(target, f))
    );
  };
  const fieldsOf = (t: TableSpec) => t.fields.filter((f) => fieldVisible(t, f.name));
  const relationsOf = (t: TableSpec) => t.relations.filter((r) => relationVisible(t, r));

  const enums = new Map<string, GraphQLEnumType>();
  const enumOf = (t: TableSpec, f: FieldSpec): GraphQLEnumType => {
    const name = f.enumDbName && NAME.test(f.enumDbName) ? f.enumDbName : `${t.name}_${f.name}`;
    let e = enums.get(name);
    if (!e) {
      claim(name, `enum of ${t.name}.${f.name}`);
      e = new GraphQLEnumType({ name, values: Object.fromEntries((f.enumValues ?? []).map((v) => [v, { value: v }])) });
      enums.set(name, e);
    }
    return e;
  };
  const scalarOf = (t: TableSpec, f: FieldSpec): GraphQLScalarType | GraphQLEnumType => {
    switch (f.type) {
      case 'String':
        return GraphQLString;
      case 'Int':
        return GraphQLInt;
      case 'Float':
        return GraphQLFloat;
      case 'Boolean':
        return GraphQLBoolean;
      case 'BigInt':
        return BigIntScalar;
      case 'Decimal':
        return DecimalScalar;
      case 'DateTime':
        return DateTimeScalar;
      case 'Json':
        return JsonScalar;
      case 'Bytes':
        return BytesScalar;
      case 'Enum':
        return enumOf(t, f);
    }
  };
  const valueType = (t: TableSpec, f: FieldSpec): GraphQLInputType & GraphQLOutputType => {
    const scalar = scalarOf(t, f);
    return f.list ? new GraphQLList(new GraphQLNonNull(scalar)) : scalar;
  };

  // Filter inputs are shared by the fields that take the same operators on the same type. A
  // filter's name depends only on the field's own type: `StringFilter` for what a String without
  // a native type takes, `StringUuidFilter` for a native type that takes other operators. Never on
  // which field was met first, or removing one field would rename the filter of others, a
  // breaking change to clients that name the type in a variable (docs/diff.md).
  const filters = new Map<string, GraphQLInputObjectType>();
  const filterOf = (t: TableSpec, f: FieldSpec): GraphQLInputObjectType => {
    const scalar = scalarOf(t, f);
    const ops = fieldOperators(f);
    const plain = ops.join(',') === fieldOperators({ ...f, nativeType: undefined }).join(',');
    const list = f.list ? 'List' : '';
    const shared = `${scalar.name}${plain ? '' : (f.nativeType?.[0] ?? '')}${list}Filter`;
    // A name a model's type already has: this field's own filter (named after it, so still stable).
    const name = typeOwners.has(shared) && !filters.has(shared) ? `${t.name}_${f.name}Filter` : shared;
    let filter = filters.get(name);
    if (filter) return filter;
    claim(name, `filter of ${t.name}.${f.name}`);
    const fields: GraphQLInputFieldConfigMap = {};
    for (const op of ops) fields[op] = { type: operandType(op, scalar) };
    filter = new GraphQLInputObjectType({
      name,
      description: 'The operators of docs/api.md §5.5; conditions given together must all hold',
      fields,
    });
    filters.set(name, filter);
    return filter;
  };

  const objects = new Map<string, GraphQLObjectType>();
  const wheres = new Map<string, GraphQLInputObjectType>();
  const orderBys = new Map<string, GraphQLInputObjectType | undefined>();
  const whereOf = (t: TableSpec): GraphQLInputObjectType => {
    let w = wheres.get(t.name);
    if (!w) {
      const names = typeNames(t.name);
      w = new GraphQLInputObjectType({
        name: names.where,
        description: `Conditions on ${t.name} records; members given together must all hold`,
        fields: () => {
          const fields: GraphQLInputFieldConfigMap = {};
          for (const f of fieldsOf(t)) fields[f.name] = { type: filterOf(t, f) };
          for (const r of relationsOf(t)) {
            fields[r.name] = {
              type: whereOf(byName.get(r.target)!),
              description: r.kind === 'many' ? `Some related ${r.target} record matches each condition` : undefined,
            };
          }
          fields.and = { type: new GraphQLList(new GraphQLNonNull(w!)), description: 'Every one holds' };
          fields.or = { type: new GraphQLList(new GraphQLNonNull(w!)), description: 'At least one holds' };
          fields.not = { type: w!, description: 'Does not hold' };
          return fields;
        },
      });
      wheres.set(t.name, w);
    }
    return w;
  };
  const orderByOf = (t: TableSpec): GraphQLInputObjectType | undefined => {
    if (!orderBys.has(t.name)) {
      const fields = fieldsOf(t).filter(sortable);
      // An input type needs a field: a table with nothing sortable to the caller takes no orderBy.
      const input = fields.length
        ? new GraphQLInputObjectType({
            name: typeNames(t.name).orderBy,
            description: 'One field per list member, in order of precedence; the primary key ends every order',
            fields: Object.fromEntries(fields.map((f) => [f.name, { type: SortDirection }])),
          })
        : undefined;
      orderBys.set(t.name, input);
    }
    return orderBys.get(t.name);
  };
  const listArgs = (
    t: TableSpec,
    limitName: 'limit' | 'first',
    limitDescription = 'Page size: default 100, at most 1000',
  ) => {
    const orderBy = orderByOf(t);
    return {
      where: { type: whereOf(t) },
      ...(orderBy ? { orderBy: { type: new GraphQLList(new GraphQLNonNull(orderBy)) } } : {}),
      [limitName]: { type: GraphQLInt, description: limitDescription },
    };
  };
  const objectOf = (t: TableSpec): GraphQLObjectType => {
    let o = objects.get(t.name);
    if (!o) {
      o = new GraphQLObjectType({
        name: t.name,
        fields: () => {
          const fields: GraphQLFieldConfigMap<unknown, unknown> = {};
          // Nullable: with several roles, a field may be hidden on some rows (docs/permissions.md).
          for (const f of fieldsOf(t))
            fields[f.name] = {
              type: valueType(t, f),
              ...(f.file ? { description: fileReferenceDescription(f.file) } : {}),
              resolve: resolveField,
              extensions: { svcgen: { field: f.name } satisfies ObjectFieldMeta },
            };
          for (const r of relationsOf(t)) {
            const target = byName.get(r.target)!;
            const meta = { svcgen: { relation: r.name } satisfies ObjectFieldMeta };
            fields[r.name] =
              r.kind === 'one'
                ? { type: objectOf(target), resolve: resolveField, extensions: meta }
                : {
                    type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(objectOf(target)))),
                    args: {
                      ...listArgs(target, 'limit', 'At most 1000; every related record when left out'),
                      offset: { type: GraphQLInt },
                    },
                    resolve: resolveField,
                    extensions: meta,
                  };
          }
          return fields;
        },
      });
      objects.set(t.name, o);
    }
    return o;
  };

  const query: GraphQLFieldConfigMap<unknown, unknown> = {};
  const rootNames = new Map<string, string>();
  for (const t of shown) {
    const names = rootFieldNames(t.name);
    for (const n of Object.values(names)) {
      const before = rootNames.get(n);
      if (before)
        throw new Error(`GraphQL root field ${n} of table ${t.name} is also one of table ${before}; rename a model`);
      rootNames.set(n, t.name);
    }
    const meta = (kind: RootKind) => ({ svcgen: { kind, table: t.name } satisfies RootFieldMeta });
    const object = objectOf(t);
    // Root fields are nullable: one that fails is null with its error, the others still answer.
    query[names.list] = {
      type: new GraphQLList(new GraphQLNonNull(object)),
      description: `${t.name} records (GET /gw/api/rest/${t.name})`,
      args: { ...listArgs(t, 'limit'), offset: { type: GraphQLInt } },
      extensions: meta('list'),
    };
    query[names.byKey] = {
      type: object,
      description: `One ${t.name} record by its primary key, or null`,
      args: Object.fromEntries(
        t.primaryKey.map((k) => [k, { type: new GraphQLNonNull(scalarOf(t, t.fields.find((f) => f.name === k)!)) }]),
      ),
      extensions: meta('byKey'),
    };
    query[names.page] = {
      type: new GraphQLObjectType({
        name: typeNames(t.name).page,
        fields: {
          nodes: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(object))) },
          pageInfo: { type: new GraphQLNonNull(PageInfo) },
          totalCount: {
            type: new GraphQLNonNull(GraphQLInt),
            description:
              "Records matching where, on every page (REST's Prefer: count=exact): counted only when selected",
          },
        },
      }),
      description: `A page of ${t.name} records after a cursor (keyset pagination)`,
      args: { ...listArgs(t, 'first'), after: { type: GraphQLString } },
      extensions: meta('page'),
    };
    const aggregate = aggregateField(t, fieldsOf(t), scalarOf, whereOf(t));
    if (aggregate) query[names.aggregate] = { ...aggregate, extensions: meta('aggregate') };
  }
  // A schema needs one query field: a caller who may read nothing still gets a valid, empty one.
  if (Object.keys(query).length === 0)
    query._nothingReadable = { type: GraphQLBoolean, description: 'Your roles may read no table', resolve: () => null };
  const mutation = mutationFields(tables, writable, {
    object: (t) => (visible.table(t.name) ? objectOf(t) : undefined),
    value: valueType,
    scalar: scalarOf,
    where: (t) => (visible.table(t.name) ? whereOf(t) : undefined),
  });
  const subscription: GraphQLFieldConfigMap<unknown, unknown> = {};
  for (const t of shown) {
    const fields = fieldsOf(t);
    // A record type needs a field; a table none of whose fields the caller may read has no subscription.
    if (fields.length === 0) continue;
    const names = typeNames(t.name);
    const record = new GraphQLObjectType({
      name: names.record,
      description: `A ${t.name} record as a change carries it: its fields, no relations`,
      fields: Object.fromEntries(fields.map((f) => [f.name, { type: valueType(t, f) }])),
    });
    const change = new GraphQLObjectType({
      name: names.change,
      description: `A committed change to a ${t.name} record (docs/realtime.md)`,
      fields: {
        id: { type: new GraphQLNonNull(GraphQLString), description: 'The event id, as webhook payloads carry it' },
        event: { type: new GraphQLNonNull(ChangeEvent) },
        record: {
          type: new GraphQLNonNull(record),
          description: 'The record after the change; for DELETE, as it was before',
        },
        changedFields: {
          type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(GraphQLString))),
          description: 'For UPDATE, the fields the change set (those you may read); empty otherwise',
        },
        timestamp: { type: new GraphQLNonNull(DateTimeScalar), description: 'When the change was captured' },
      },
    });
    subscription[subscriptionFieldName(t.name)] = {
      type: new GraphQLNonNull(change),
      description: `Committed changes to ${t.name} records you may read, from now on, in commit order`,
      args: {
        where: { type: whereOf(t), description: 'Only changes whose record matches (no relation conditions)' },
        events: {
          type: new GraphQLList(new GraphQLNonNull(ChangeEvent)),
          description: 'Only these kinds of change (all when left out)',
        },
      },
      extensions: { svcgen: { table: t.name } satisfies SubscriptionFieldMeta },
    };
  }
  const schema = new GraphQLSchema({
    query: new GraphQLObjectType({ name: 'Query', fields: query }),
    ...(Object.keys(mutation).length
      ? { mutation: new GraphQLObjectType({ name: 'Mutation', fields: mutation }) }
      : {}),
    ...(Object.keys(subscription).length
      ? { subscription: new GraphQLObjectType({ name: 'Subscription', fields: subscription }) }
      : {}),
  });
  // What graphql-js would otherwise find only when it first executes (an enum value named true, ...).
  const invalid = validateSchema(schema);
  if (invalid.length)
    throw new Error(`the model has no valid GraphQL schema: ${invalid.map((e) => e.message).join('; ')}`);
  return schema;
}

const BulkMode = new GraphQLEnumType({
  name: 'BulkMode',
  description: "A bulk create's transaction mode, as REST's transactionMode (docs/api.md)",
  values: { ALL_OR_NOTHING: { value: 'ALL_OR_NOTHING' }, BEST_EFFORT: { value: 'BEST_EFFORT' } },
});
const BulkItemError = new GraphQLObjectType({
  name: 'BulkItemError',
  fields: { index: { type: new GraphQLNonNull(GraphQLInt) }, message: { type: new GraphQLNonNull(GraphQLString) } },
});
const BulkCreateResult = new GraphQLObjectType({
  name: 'BulkCreateResult',
  description: 'The answer of a bulk create, member for member the `data` of REST POST /<table>/_bulk',
  fields: {
    success: { type: new GraphQLNonNull(GraphQLBoolean) },
    transactionMode: { type: new GraphQLNonNull(BulkMode) },
    totalRequested: { type: new GraphQLNonNull(GraphQLInt) },
    totalSucceeded: { type: new GraphQLNonNull(GraphQLInt) },
    totalFailed: { type: new GraphQLNonNull(GraphQLInt) },
    items: {
      type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(JsonScalar))),
      description: 'The primary keys of the created records ({"id": 1})',
    },
    errors: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(BulkItemError))) },
  },
});
const WriteCount = new GraphQLObjectType({
  name: 'WriteCount',
  fields: { count: { type: new GraphQLNonNull(GraphQLInt), description: 'Records changed' } },
});

interface MutationBuilders {
  object(t: TableSpec): GraphQLObjectType | undefined;
  value(t: TableSpec, f: FieldSpec): GraphQLInputType & GraphQLOutputType;
  scalar(t: TableSpec, f: FieldSpec): GraphQLScalarType | GraphQLEnumType;
  where(t: TableSpec): GraphQLInputObjectType | undefined;
}

/**
 * The Mutation root: per table, the writes its grants allow, each the twin of a REST route (input
 * fields are the fields the grant lets it write; every value is checked by the REST validators, so
 * all are nullable here). By-key writes exist where REST has /<id> routes (a single-field key).
 */
function mutationFields(
  tables: readonly TableSpec[],
  writable: WriteVisibility,
  build: MutationBuilders,
): GraphQLFieldConfigMap<unknown, unknown> {
  const fields: GraphQLFieldConfigMap<unknown, unknown> = {};
  for (const t of tables) {
    const names = mutationFieldNames(t.name);
    for (const n of Object.values(names))
      if (fields[n])
        throw new Error(`GraphQL mutation ${n} of table ${t.name} is also another table's; rename a model`);
    const typeName = typeNames(t.name);
    const object = build.object(t);
    const meta = (kind: MutationKind) => ({
      svcgen: { kind, table: t.name, returnsRecord: object !== undefined } satisfies MutationFieldMeta,
    });
    const answer = object ?? new GraphQLNonNull(GraphQLBoolean);
    const readNote = object ? '' : ` (your roles may not read ${t.name}: true once written)`;
    const input = (action: 'create' | 'update', name: string) => {
      const allowed = writable(t.name, action);
      if (allowed === undefined) return undefined;
      const members = t.fields.filter((f) => allowed === null || allowed.has(f.name));
      if (!members.length) return undefined;
      return new GraphQLInputObjectType({
        name,
        description: `A ${t.name} ${action === 'create' ? 'record to create' : 'merge patch'}: the JSON body of the REST route`,
        fields: Object.fromEntries(
          members.map((f) => [
            f.name,
            { type: build.value(t, f), ...(f.file ? { description: fileReferenceDescription(f.file) } : {}) },
          ]),
        ),
      });
    };
    const id = t.primaryKey.length === 1 ? t.fields.find((f) => f.name === t.primaryKey[0]) : undefined;
    const keyArgs = id ? { [id.name]: { type: new GraphQLNonNull(build.scalar(t, id)) } } : undefined;
    const create = input('create', typeName.createInput);
    if (create) {
      fields[names.create] = {
        type: answer,
        description: `Creates one ${t.name} record (POST /gw/api/rest/${t.name})${readNote}`,
        args: { data: { type: new GraphQLNonNull(create) } },
        extensions: meta('create'),
      };
      fields[names.createMany] = {
        type: new GraphQLNonNull(BulkCreateResult),
        description: `Creates ${t.name} records in bulk (POST /gw/api/rest/${t.name}/_bulk)`,
        args: {
          data: { type: new GraphQLNonNull(new GraphQLList(new GraphQLNonNull(create))) },
          mode: { type: BulkMode, defaultValue: 'ALL_OR_NOTHING' },
        },
        extensions: meta('createMany'),
      };
    }
    const update = input('update', typeName.updateInput);
    if (update) {
      if (keyArgs)
        fields[names.update] = {
          type: answer,
          description: `Changes one ${t.name} record by a merge patch (PATCH /gw/api/rest/${t.name}/<id>)${readNote}`,
          args: { ...keyArgs, data: { type: new GraphQLNonNull(update) } },
          extensions: meta('update'),
        };
      const where = build.where(t);
      if (where)
        fields[names.updateWhere] = {
          type: new GraphQLNonNull(WriteCount),
          description: `Applies one merge patch to every matching ${t.name} record (PATCH /gw/api/rest/${t.name}?<filters>); where needs a condition`,
          args: { where: { type: new GraphQLNonNull(where) }, data: { type: new GraphQLNonNull(update) } },
          extensions: meta('updateWhere'),
        };
    }
    if (writable(t.name, 'delete') !== undefined) {
      if (keyArgs)
        fields[names.delete] = {
          type: new GraphQLNonNull(GraphQLBoolean),
          description: `Deletes one ${t.name} record (DELETE /gw/api/rest/${t.name}/<id>, answered 204): true`,
          args: keyArgs,
          extensions: meta('delete'),
        };
      const where = build.where(t);
      if (where)
        fields[names.deleteWhere] = {
          type: new GraphQLNonNull(WriteCount),
          description: `Deletes every matching ${t.name} record the caller may delete; where needs a condition`,
          args: { where: { type: new GraphQLNonNull(where) } },
          extensions: meta('deleteWhere'),
        };
    }
  }
  return fields;
}

/** The GraphQL type of an operator's operand (runtime/model/operators.ts), for a field of `scalar`. */
const OPERAND_TYPES: Record<OperandShape['kind'], (scalar: GraphQLInputType) => GraphQLInputType> = {
  value: (scalar) => scalar,
  nullable: (scalar) => scalar,
  list: (scalar) => new GraphQLList(new GraphQLNonNull(scalar)),
  pair: (scalar) => new GraphQLList(new GraphQLNonNull(scalar)),
  flag: () => GraphQLBoolean,
  true: () => GraphQLBoolean,
  count: () => GraphQLInt,
};

function operandType(op: Operator, scalar: GraphQLInputType): GraphQLInputType {
  return OPERAND_TYPES[OPERATOR_DEFINITIONS[op].operand.kind](scalar);
}

/** `<T>Aggregate`: REST's _aggregate with its members named as REST names them (count, sum_total, ...). */
function aggregateField(
  t: TableSpec,
  fields: readonly FieldSpec[],
  scalarOf: (t: TableSpec, f: FieldSpec) => GraphQLScalarType | GraphQLEnumType,
  where: GraphQLInputObjectType,
): GraphQLFieldConfig<unknown, unknown> | undefined {
  const names = typeNames(t.name);
  const members: GraphQLFieldConfigMap<unknown, unknown> = {
    count: { type: new GraphQLNonNull(GraphQLInt), extensions: { svcgen: { fn: 'count' } satisfies AggregateName } },
  };
  const numeric: string[] = ['count'];
  for (const f of fields) {
    for (const { name, fn } of aggregateMembers(f)) {
      let type: GraphQLOutputType;
      if (fn === 'count_distinct') type = new GraphQLNonNull(GraphQLInt);
      else if (fn === 'avg') type = GraphQLFloat;
      else if (fn === 'sum') type = f.type === 'Int' || f.type === 'Float' ? GraphQLFloat : DecimalScalar;
      else type = scalarOf(t, f);
      members[name] = { type, extensions: { svcgen: { fn, field: f.name } satisfies AggregateName } };
      if (fn !== 'min' && fn !== 'max') numeric.push(name);
      else if (['Int', 'BigInt', 'Float', 'Decimal'].includes(f.type)) numeric.push(name);
    }
  }
  const aggregateNames = Object.keys(members);
  const groupable = fields.filter((f) => sortable(f) && !Object.hasOwn(members, f.name));
  for (const f of groupable)
    members[f.name] = {
      type: scalarOf(t, f),
      description: 'The group (with groupBy)',
      extensions: { svcgen: { field: f.name } },
    };
  const args: Record<string, { type: GraphQLInputType; description?: string }> = {
    where: { type: where },
    having: {
      type: new GraphQLInputObjectType({
        name: names.having,
        fields: Object.fromEntries(numeric.map((n) => [n, { type: HavingFilter }])),
      }),
    },
    orderBy: {
      type: new GraphQLList(
        new GraphQLNonNull(
          new GraphQLInputObjectType({
            name: names.aggregateOrderBy,
            fields: Object.fromEntries(
              [...aggregateNames, ...groupable.map((f) => f.name)].map((n) => [n, { type: SortDirection }]),
            ),
          }),
        ),
      ),
    },
    limit: { type: GraphQLInt, description: 'Most groups answered: at most 10000' },
  };
  if (groupable.length) {
    args.groupBy = {
      type: new GraphQLList(
        new GraphQLNonNull(
          new GraphQLEnumType({
            name: names.groupField,
            values: Object.fromEntries(groupable.map((f) => [f.name, { value: f.name }])),
          }),
        ),
      ),
    };
  }
  return {
    type: new GraphQLList(new GraphQLNonNull(new GraphQLObjectType({ name: names.aggregate, fields: members }))),
    description: `Aggregates of ${t.name} records, one row per group (GET /gw/api/rest/${t.name}/_aggregate)`,
    args,
  };
}
