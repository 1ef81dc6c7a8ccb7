/**
 * What every contributor to one GraphQL schema shares: the tables, what the caller may see of them,
 * the type names already taken (a model whose names collide is refused, never silently renamed),
 * and the GraphQL type of each field's values.
 */
import {
  GraphQLBoolean,
  GraphQLEnumType,
  GraphQLFloat,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  type GraphQLScalarType,
  GraphQLString,
  type GraphQLFieldResolver,
  type GraphQLInputType,
  type GraphQLOutputType,
} from 'graphql';
import type { FieldSpec, RelationSpec, TableSpec } from '../model/index.ts';
import { typeNames, type SchemaVisibility } from './schema-names.ts';
import {
  BigIntScalar,
  BytesScalar,
  DateTimeScalar,
  DecimalScalar,
  JsonScalar,
  RESERVED_TYPE_NAMES,
} from './schema-shared-types.ts';

export const NAME = /^[_A-Za-z][_0-9A-Za-z]*$/;

/** Fields a list can be sorted and grouped by. */
export function sortable(field: FieldSpec): boolean {
  return !field.list && field.type !== 'Json' && field.type !== 'Bytes';
}

export class SchemaContext {
  readonly byName: ReadonlyMap<string, TableSpec>;
  /** The tables the caller may read. */
  readonly shown: readonly TableSpec[];
  private readonly typeOwners = new Map<string, string>();
  private readonly enums = new Map<string, GraphQLEnumType>();

  constructor(
    readonly tables: readonly TableSpec[],
    readonly visible: SchemaVisibility,
    /** Reads a table record's member (the server passes one; the generator none). */
    readonly resolveField: GraphQLFieldResolver<unknown, unknown> | undefined,
  ) {
    this.byName = new Map(tables.map((t) => [t.name, t]));
    this.shown = tables.filter((t) => visible.table(t.name));
    for (const t of tables) for (const name of Object.values(typeNames(t.name))) this.claim(name, `table ${t.name}`);
  }

  /** Takes a type name for `owner`; a name already taken is an error naming both owners. */
  claim(name: string, owner: string): void {
    if (!NAME.test(name)) throw new Error(`${owner}: "${name}" is not a GraphQL name`);
    const before = this.typeOwners.get(name);
    if (before !== undefined || RESERVED_TYPE_NAMES.has(name))
      throw new Error(
        `GraphQL type name ${name} of ${owner} is also used by ${before ?? 'the schema itself'}; rename the model or enum`,
      );
    this.typeOwners.set(name, owner);
  }

  isClaimed(name: string): boolean {
    return this.typeOwners.has(name);
  }

  private fieldVisible(t: TableSpec, f: string): boolean {
    return this.visible.table(t.name) && this.visible.field(t.name, f);
  }

  fieldsOf(t: TableSpec): FieldSpec[] {
    return t.fields.filter((f) => this.fieldVisible(t, f.name));
  }

  /** Relations whose both ends and link fields the caller may see. */
  relationsOf(t: TableSpec): RelationSpec[] {
    return t.relations.filter((r) => {
      const target = this.byName.get(r.target);
      return (
        target !== undefined &&
        this.visible.table(target.name) &&
        r.fields.every((f) => this.fieldVisible(t, f)) &&
        r.targetFields.every((f) => this.fieldVisible(target, f))
      );
    });
  }

  private enumOf(t: TableSpec, f: FieldSpec): GraphQLEnumType {
    const name = f.enumDbName && NAME.test(f.enumDbName) ? f.enumDbName : `${t.name}_${f.name}`;
    let e = this.enums.get(name);
    if (!e) {
      this.claim(name, `enum of ${t.name}.${f.name}`);
      e = new GraphQLEnumType({ name, values: Object.fromEntries((f.enumValues ?? []).map((v) => [v, { value: v }])) });
      this.enums.set(name, e);
    }
    return e;
  }

  scalarOf(t: TableSpec, f: FieldSpec): GraphQLScalarType | GraphQLEnumType {
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
        return this.enumOf(t, f);
    }
  }

  valueType(t: TableSpec, f: FieldSpec): GraphQLInputType & GraphQLOutputType {
    const scalar = this.scalarOf(t, f);
    return f.list ? new GraphQLList(new GraphQLNonNull(scalar)) : scalar;
  }
}
