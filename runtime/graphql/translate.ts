/**
 * GraphQL arguments and selections → the query layer's descriptions (runtime/query), which compile
 * under the caller's access exactly as the REST API's do: every name is checked again there, so a
 * schema that showed too much still could not leak (docs/graphql.md "Permissions").
 */
import {
  getArgumentValues,
  getDirectiveValues,
  GraphQLIncludeDirective,
  GraphQLSkipDirective,
  Kind,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLField,
  type GraphQLObjectType,
  type SelectionSetNode,
} from 'graphql';
import { LIMITS, MAX_AGGREGATE_ROWS, OPERATOR_DEFINITIONS, takesList } from '../model/index.ts';
import {
  and,
  canReadField,
  FilterValueError,
  followable,
  isOperator,
  MAX_CONDITIONS,
  MAX_GROUP_DEPTH,
  operandValue,
  QueryError,
  scalarValue,
  type Access,
  type AggregateTerm,
  type Catalog,
  type CatalogTable,
  type Condition,
  type HavingTerm,
  type OrderTerm,
  type SelectItem,
} from '../query/index.ts';
import type { AggregateName, ObjectFieldMeta } from './schema.ts';

/** What a root field's translation reads: the document's fragments and variables. */
export interface Selection {
  readonly fragments: Readonly<Record<string, FragmentDefinitionNode>>;
  readonly variables: Readonly<Record<string, unknown>>;
}

/** The fields of a selection set by response key, fragments flattened, @skip/@include applied (like graphql-js's collectFields). */
export function collectFields(
  sel: Selection,
  type: GraphQLObjectType,
  set: SelectionSetNode,
  out = new Map<string, FieldNode[]>(),
  seen = new Set<string>(),
): Map<string, FieldNode[]> {
  for (const s of set.selections) {
    const skip = getDirectiveValues(GraphQLSkipDirective, s, sel.variables as Record<string, unknown>);
    const include = getDirectiveValues(GraphQLIncludeDirective, s, sel.variables as Record<string, unknown>);
    if (skip?.if === true || include?.if === false) continue;
    if (s.kind === Kind.FIELD) {
      const key = s.alias?.value ?? s.name.value;
      const list = out.get(key);
      if (list) list.push(s);
      else out.set(key, [s]);
    } else if (s.kind === Kind.INLINE_FRAGMENT) {
      // The schema has object types only: a condition matches when it names this type.
      if (!s.typeCondition || s.typeCondition.name.value === type.name)
        collectFields(sel, type, s.selectionSet, out, seen);
    } else {
      const name = s.name.value;
      const fragment = sel.fragments[name];
      if (seen.has(name) || !fragment || fragment.typeCondition.name.value !== type.name) continue;
      seen.add(name);
      collectFields(sel, type, fragment.selectionSet, out, seen);
    }
  }
  return out;
}

function subSelection(nodes: readonly FieldNode[]): SelectionSetNode {
  return { kind: Kind.SELECTION_SET, selections: nodes.flatMap((n) => n.selectionSet?.selections ?? []) };
}

function valueError(parameter: string, error: unknown): never {
  if (error instanceof FilterValueError) throw new QueryError(parameter, error.message);
  throw error;
}

export interface TranslateContext {
  readonly catalog: Catalog;
  readonly access: Access;
}

/** `<T>Where` → a condition; paths as REST's `rel.field` (at most 3 relations, 100 conditions, 8 groups). */
export function whereCondition(
  ctx: TranslateContext,
  table: CatalogTable,
  where: unknown,
  parameter = 'where',
): Condition {
  if (where === undefined || where === null) return { kind: 'true' };
  const count = { n: 0 };
  return whereOf(ctx, table, where as Record<string, unknown>, [], parameter, count, 0);
}

function whereOf(
  ctx: TranslateContext,
  table: CatalogTable,
  where: Record<string, unknown>,
  prefix: string[],
  parameter: string,
  count: { n: number },
  depth: number,
): Condition {
  if (depth > MAX_GROUP_DEPTH) throw new QueryError(parameter, `groups nest at most ${MAX_GROUP_DEPTH} levels`);
  const items: Condition[] = [];
  for (const [name, value] of Object.entries(where)) {
    if (value === undefined) continue;
    const at = `${parameter}.${name}`;
    if (name === 'and' || name === 'or') {
      if (value === null) throw new QueryError(at, `${name} takes a list of conditions`);
      const list = (value as Record<string, unknown>[]).map((w, i) =>
        whereOf(ctx, table, w, prefix, `${at}[${i}]`, count, depth + 1),
      );
      if (list.length === 0) throw new QueryError(at, `${name} needs at least one condition`);
      items.push({ kind: name, items: list });
    } else if (name === 'not') {
      if (value === null) throw new QueryError(at, 'not takes a condition');
      items.push({
        kind: 'not',
        item: whereOf(ctx, table, value as Record<string, unknown>, prefix, at, count, depth + 1),
      });
    } else if (table.fields.has(name) && canReadField(ctx.access, table, name)) {
      if (value === null) throw new QueryError(at, 'give operators, e.g. { equals: ... }');
      const field = table.fields.get(name)!;
      for (const [op, operand] of Object.entries(value as Record<string, unknown>)) {
        if (operand === undefined) continue;
        if (++count.n > MAX_CONDITIONS)
          throw new QueryError(parameter, `at most ${MAX_CONDITIONS} conditions per request`);
        if (!isOperator(op)) throw new QueryError(`${at}.${op}`, `unknown operator "${op}"`);
        const isList = takesList(op);
        if (operand === null && OPERATOR_DEFINITIONS[op].operand.kind !== 'nullable')
          throw new QueryError(`${at}.${op}`, `${op} takes a value, not null`);
        try {
          const typed = operandValue(
            field,
            op,
            isList ? undefined : operand,
            isList ? (operand as unknown[]) : undefined,
          );
          items.push({ kind: 'compare', path: [...prefix, name], op, value: typed });
        } catch (error) {
          valueError(`${at}.${op}`, error);
        }
      }
    } else {
      const relation = followable(ctx.access, ctx.catalog, table, name);
      if (!relation) throw new QueryError(at, `${table.spec.name} has no field or relation "${name}"`);
      if (prefix.length >= 3) throw new QueryError(at, 'relation filters go at most 3 relations deep');
      if (value === null) throw new QueryError(at, 'give conditions on the related records');
      items.push(
        whereOf(
          ctx,
          ctx.catalog.require(relation.target),
          value as Record<string, unknown>,
          [...prefix, name],
          at,
          count,
          depth,
        ),
      );
    }
  }
  return and(...items);
}

/** `[<T>OrderBy!]` → order terms: one field per member, as REST's sort. */
export function orderTerms(
  ctx: TranslateContext,
  table: CatalogTable,
  orderBy: unknown,
  parameter = 'orderBy',
): OrderTerm[] {
  if (orderBy === undefined || orderBy === null) return [];
  const terms: OrderTerm[] = [];
  (orderBy as Record<string, 'asc' | 'desc' | null>[]).forEach((member, i) => {
    const entries = Object.entries(member).filter(([, v]) => v !== undefined);
    if (entries.length !== 1 || entries[0]![1] === null)
      throw new QueryError(
        `${parameter}[${i}]`,
        'name exactly one field per orderBy member, e.g. [{ createdAt: DESC }, { id: ASC }]',
      );
    const [field, direction] = entries[0]! as [string, 'asc' | 'desc'];
    if (!canReadField(ctx.access, table, field))
      throw new QueryError(`${parameter}[${i}]`, `${table.spec.name} has no field "${field}" to sort by`);
    if (terms.some((t) => t.field === field)) throw new QueryError(`${parameter}[${i}]`, `${field} appears twice`);
    terms.push({ field, direction });
  });
  if (terms.length > 10) throw new QueryError(parameter, 'at most 10 sort fields');
  return terms;
}

/** A page size or offset argument, within REST's bounds. */
export function bounded(value: unknown, parameter: string, fallback: number, min: number, max: number): number {
  if (value === undefined || value === null) return fallback;
  const n = value as number;
  if (n < min || n > max) throw new QueryError(parameter, `must be a whole number from ${min} to ${max}`);
  return n;
}

export const MAX_OFFSET = 100_000_000;

/** The key arguments of a by-key root field → the record's address (not a filter: not held to the read list, as REST's /<id>). */
export function keyCondition(table: CatalogTable, args: Record<string, unknown>): Condition {
  return and(
    ...table.spec.primaryKey.map((k): Condition => {
      try {
        return { kind: 'compare', path: [k], op: 'equals', value: scalarValue(table.fields.get(k)!, args[k]) };
      } catch (error) {
        valueError(k, error);
      }
    }),
  );
}

/**
 * A table type's selection → select items keyed by response key, so two aliases of one relation
 * with different arguments each get their own embed. `__typename` is answered by graphql-js.
 */
export function selectItems(
  ctx: TranslateContext,
  sel: Selection,
  table: CatalogTable,
  type: GraphQLObjectType,
  set: SelectionSetNode | undefined,
  path: string,
): SelectItem[] {
  const embeds = { n: 0 };
  const walk = (
    t: CatalogTable,
    objectType: GraphQLObjectType,
    s: SelectionSetNode | undefined,
    depth: number,
    at: string,
  ): SelectItem[] => {
    const items: SelectItem[] = [];
    if (!s) return items;
    for (const [key, nodes] of collectFields(sel, objectType, s)) {
      const name = nodes[0]!.name.value;
      if (name === '__typename') continue;
      if (key.length > 63) throw new QueryError(`${at}.${key}`, 'aliases are at most 63 characters');
      const def = objectType.getFields()[name];
      const meta = def?.extensions.svcgen as ObjectFieldMeta | undefined;
      if (!def || !meta) throw new QueryError(`${at}.${key}`, `${t.spec.name} has no field "${name}"`);
      if ('field' in meta) {
        items.push({ kind: 'field', field: meta.field, alias: key });
        continue;
      }
      const relation = followable(ctx.access, ctx.catalog, t, meta.relation);
      if (!relation) throw new QueryError(`${at}.${key}`, `${t.spec.name} has no relation "${meta.relation}"`);
      if (depth + 1 > LIMITS.maxEmbedDepth)
        throw new QueryError(`${at}.${key}`, `embedded relations nest at most ${LIMITS.maxEmbedDepth} levels`);
      if (++embeds.n > LIMITS.maxEmbeds)
        throw new QueryError(`${at}.${key}`, `at most ${LIMITS.maxEmbeds} embedded relations per root field`);
      const target = ctx.catalog.require(relation.target);
      const targetType = unwrap(def);
      const sub = walk(target, targetType, subSelection(nodes), depth + 1, `${at}.${key}`);
      if (relation.kind === 'one') {
        items.push({ kind: 'embed', relation: relation.name, alias: key, items: sub });
        continue;
      }
      const args = getArgumentValues(def, nodes[0]!, sel.variables as Record<string, unknown>);
      const where = whereCondition(ctx, target, args.where, `${at}.${key}.where`);
      const orderBy = orderTerms(ctx, target, args.orderBy, `${at}.${key}.orderBy`);
      items.push({
        kind: 'embed',
        relation: relation.name,
        alias: key,
        items: sub,
        ...(where.kind !== 'true' ? { where } : {}),
        ...(orderBy.length ? { orderBy } : {}),
        ...(args.limit !== undefined && args.limit !== null
          ? { limit: bounded(args.limit, `${at}.${key}.limit`, LIMITS.defaultPageSize, 1, LIMITS.maxPageSize) }
          : {}),
        ...(args.offset !== undefined && args.offset !== null
          ? { offset: bounded(args.offset, `${at}.${key}.offset`, 0, 0, MAX_OFFSET) }
          : {}),
      });
    }
    return items;
  };
  return walk(table, type, set, 0, path);
}

/** The object type inside list and non-null wrappers. */
export function unwrap(def: GraphQLField<unknown, unknown>): GraphQLObjectType {
  let type: unknown = def.type;
  while (type && typeof type === 'object' && 'ofType' in type) type = (type as { ofType: unknown }).ofType;
  return type as GraphQLObjectType;
}

/** An aggregate root field's selection and arguments → the aggregate query of REST's _aggregate. */
export function aggregateQuery(
  ctx: TranslateContext,
  sel: Selection,
  table: CatalogTable,
  rowType: GraphQLObjectType,
  set: SelectionSetNode | undefined,
  args: Record<string, unknown>,
) {
  const groupBy = (args.groupBy as string[] | undefined) ?? [];
  if (new Set(groupBy).size !== groupBy.length) throw new QueryError('groupBy', 'a field appears twice');
  const terms = new Map<string, AggregateTerm>();
  const fields = rowType.getFields();
  const term = (name: string, parameter: string) => {
    const meta = fields[name]?.extensions.svcgen as AggregateName | { field: string } | undefined;
    if (!meta) throw new QueryError(parameter, `${name} is not an aggregate of ${table.spec.name}`);
    if (!('fn' in meta)) {
      if (!groupBy.includes(meta.field))
        throw new QueryError(parameter, `${name} is a group field: list it in groupBy`);
      return;
    }
    if (!terms.has(name)) terms.set(name, { fn: meta.fn, ...(meta.field ? { field: meta.field } : {}), alias: name });
  };
  for (const [key, nodes] of collectFields(sel, rowType, set ?? { kind: Kind.SELECTION_SET, selections: [] })) {
    const name = nodes[0]!.name.value;
    if (name !== '__typename') term(name, key);
  }
  const having: HavingTerm[] = [];
  for (const [name, filter] of Object.entries(
    (args.having as Record<string, Record<string, unknown> | null> | undefined) ?? {},
  )) {
    if (!filter) continue;
    term(name, `having.${name}`);
    for (const [op, value] of Object.entries(filter)) {
      if (value === undefined || value === null) continue;
      const text = String(value);
      if (!/^-?\d{1,30}(\.\d{1,30})?$/.test(text))
        throw new QueryError(
          `having.${name}.${op}`,
          'must be a number of at most 30 digits before and after the point',
        );
      having.push({ alias: name, op: op as HavingTerm['op'], value: text });
    }
  }
  const orderBy = ((args.orderBy as Record<string, 'asc' | 'desc'>[] | undefined) ?? []).map((member, i) => {
    const entries = Object.entries(member).filter(([, v]) => v !== undefined && v !== null);
    if (entries.length !== 1) throw new QueryError(`orderBy[${i}]`, 'name exactly one member per orderBy entry');
    const [name, direction] = entries[0]!;
    if (!groupBy.includes(name)) term(name, `orderBy[${i}]`);
    return { name, direction };
  });
  if (terms.size > 20) throw new QueryError('selection', 'at most 20 aggregates');
  return {
    table: table.spec.name,
    terms: [...terms.values()],
    groupBy,
    where: whereCondition(ctx, table, args.where),
    having,
    orderBy,
    limit: bounded(args.limit, 'limit', MAX_AGGREGATE_ROWS, 1, MAX_AGGREGATE_ROWS),
  };
}
