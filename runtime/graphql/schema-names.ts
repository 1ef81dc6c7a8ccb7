/**
 * The names the GraphQL schema gives things (types, root, mutation and subscription fields) and the
 * metadata in `extensions.svcgen` the server's translation reads back (./translate.ts); what a
 * schema shows and what a caller may write. No GraphQL types here: the generator's diff
 * (generator/diff/diff-graphql.ts) reads these names too.
 */
import type { AggregateFunction } from '../model/index.ts';

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

/** Aggregate functions by the field of an aggregate row (`sum_total`), as the REST _aggregate names them. */
export interface AggregateName {
  readonly fn: AggregateFunction;
  readonly field?: string;
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
