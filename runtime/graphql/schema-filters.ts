/**
 * The input types that pick and order records: per-field filters (one member per operator of the
 * table runtime/model/operators.ts), `<T>Where` with its and/or/not groups and relation members,
 * `<T>OrderBy`, and the arguments of a list (docs/graphql.md "Filters: `where`").
 */
import {
  GraphQLBoolean,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  type GraphQLInputFieldConfigMap,
  type GraphQLInputType,
} from 'graphql';
import {
  fieldOperators,
  OPERATOR_DEFINITIONS,
  type FieldSpec,
  type OperandShape,
  type Operator,
  type TableSpec,
} from '../model/index.ts';
import { sortable, type SchemaContext } from './schema-context.ts';
import { typeNames } from './schema-names.ts';
import { SortDirection } from './schema-shared-types.ts';

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

export class FilterInputs {
  private readonly filters = new Map<string, GraphQLInputObjectType>();
  private readonly wheres = new Map<string, GraphQLInputObjectType>();
  private readonly orderBys = new Map<string, GraphQLInputObjectType | undefined>();

  constructor(private readonly ctx: SchemaContext) {}

  /**
   * Filter inputs are shared by the fields that take the same operators on the same type. A
   * filter's name depends only on the field's own type: `StringFilter` for what a String without
   * a native type takes, `StringUuidFilter` for a native type that takes other operators. Never on
   * which field was met first, or removing one field would rename the filter of others, a
   * breaking change to clients that name the type in a variable (docs/diff.md).
   */
  filterOf(t: TableSpec, f: FieldSpec): GraphQLInputObjectType {
    const scalar = this.ctx.scalarOf(t, f);
    const ops = fieldOperators(f);
    const plain = ops.join(',') === fieldOperators({ ...f, nativeType: undefined }).join(',');
    const list = f.list ? 'List' : '';
    const shared = `${scalar.name}${plain ? '' : (f.nativeType?.[0] ?? '')}${list}Filter`;
    // A name a model's type already has: this field's own filter (named after it, so still stable).
    const name = this.ctx.isClaimed(shared) && !this.filters.has(shared) ? `${t.name}_${f.name}Filter` : shared;
    let filter = this.filters.get(name);
    if (filter) return filter;
    this.ctx.claim(name, `filter of ${t.name}.${f.name}`);
    const fields: GraphQLInputFieldConfigMap = {};
    for (const op of ops) fields[op] = { type: operandType(op, scalar) };
    filter = new GraphQLInputObjectType({
      name,
      description: 'The operators of docs/api.md §5.5; conditions given together must all hold',
      fields,
    });
    this.filters.set(name, filter);
    return filter;
  }

  whereOf(t: TableSpec): GraphQLInputObjectType {
    let w = this.wheres.get(t.name);
    if (!w) {
      const where: GraphQLInputObjectType = new GraphQLInputObjectType({
        name: typeNames(t.name).where,
        description: `Conditions on ${t.name} records; members given together must all hold`,
        fields: () => {
          const fields: GraphQLInputFieldConfigMap = {};
          for (const f of this.ctx.fieldsOf(t)) fields[f.name] = { type: this.filterOf(t, f) };
          for (const r of this.ctx.relationsOf(t)) {
            fields[r.name] = {
              type: this.whereOf(this.ctx.byName.get(r.target)!),
              description: r.kind === 'many' ? `Some related ${r.target} record matches each condition` : undefined,
            };
          }
          fields.and = { type: new GraphQLList(new GraphQLNonNull(where)), description: 'Every one holds' };
          fields.or = { type: new GraphQLList(new GraphQLNonNull(where)), description: 'At least one holds' };
          fields.not = { type: where, description: 'Does not hold' };
          return fields;
        },
      });
      this.wheres.set(t.name, (w = where));
    }
    return w;
  }

  orderByOf(t: TableSpec): GraphQLInputObjectType | undefined {
    if (!this.orderBys.has(t.name)) {
      const fields = this.ctx.fieldsOf(t).filter(sortable);
      // An input type needs a field: a table with nothing sortable to the caller takes no orderBy.
      const input = fields.length
        ? new GraphQLInputObjectType({
            name: typeNames(t.name).orderBy,
            description: 'One field per list member, in order of precedence; the primary key ends every order',
            fields: Object.fromEntries(fields.map((f) => [f.name, { type: SortDirection }])),
          })
        : undefined;
      this.orderBys.set(t.name, input);
    }
    return this.orderBys.get(t.name);
  }

  /** `where`, `orderBy` and a page size, as a list of `t` takes them. */
  listArgs(t: TableSpec, limitName: 'limit' | 'first', limitDescription = 'Page size: default 100, at most 1000') {
    const orderBy = this.orderByOf(t);
    return {
      where: { type: this.whereOf(t) },
      ...(orderBy ? { orderBy: { type: new GraphQLList(new GraphQLNonNull(orderBy)) } } : {}),
      [limitName]: { type: GraphQLInt, description: limitDescription },
    };
  }
}
