// The schema builder shared by the server (per role) and the generator (generated/schema.graphql),
// and the document bounds checked before parsing, without a database.
import { lexicographicSortSchema, printSchema, type GraphQLObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { service } from '../../examples/shop/generated/index.ts';
import { buildGraphQLSchema, EVERYTHING_VISIBLE, rootFieldNames, type SchemaVisibility } from '../../runtime/graphql/schema.ts';
import { documentNesting } from '../../runtime/graphql/rules.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { ModelError } from '../../generator/model/describe-model.ts';
import { renderGraphqlSchema } from '../../generator/render/graphql.ts';

const tables: TableSpec[] = Object.values(service.tables).map((t) => t.spec);
const print = (visible: SchemaVisibility) => printSchema(lexicographicSortSchema(buildGraphQLSchema(tables, visible)));
const fieldsOf = (visible: SchemaVisibility, type: string) => Object.keys((buildGraphQLSchema(tables, visible).getType(type) as GraphQLObjectType | undefined)?.getFields() ?? {}).sort();

describe('schema builder', () => {
  it('prints byte for byte the same on every build', () => {
    expect(print(EVERYTHING_VISIBLE)).toBe(print(EVERYTHING_VISIBLE));
  });

  it('names root fields after the model, first letter lower-cased', () => {
    expect(rootFieldNames('OrderItem')).toEqual({ byKey: 'orderItem', list: 'orderItemList', page: 'orderItemPage', aggregate: 'orderItemAggregate' });
  });

  it('leaves out hidden tables, fields, and relations whose link field or target is hidden', () => {
    const visible: SchemaVisibility = {
      table: (t) => t !== 'OrderItem',
      field: (t, f) => !(t === 'Customer' && f === 'cityId'),
    };
    // customer stays (customerId and Customer.id visible); items go with OrderItem.
    expect(fieldsOf(visible, 'Order')).toEqual(['createdAt', 'customer', 'customerId', 'id', 'note', 'placedAt', 'status', 'total', 'updatedAt']);
    // city goes with its link field cityId.
    expect(fieldsOf(visible, 'Customer')).toEqual(['createdAt', 'email', 'id', 'name', 'orders', 'updatedAt', 'vip']);
    expect(buildGraphQLSchema(tables, visible).getType('OrderItem')).toBeUndefined();
    expect(Object.keys(buildGraphQLSchema(tables, visible).getQueryType()!.getFields())).not.toContain('orderItemList');
  });

  it('a caller who may read nothing still gets a valid schema', () => {
    const schema = buildGraphQLSchema(tables, { table: () => false, field: () => false });
    expect(Object.keys(schema.getQueryType()!.getFields())).toEqual(['_nothingReadable']);
  });

  it('refuses models whose type names collide', () => {
    const city = tables.find((t) => t.name === 'City')!;
    expect(() => buildGraphQLSchema([...tables, { ...city, name: 'PageInfo' }], EVERYTHING_VISIBLE)).toThrow(/PageInfo of table PageInfo is also used by the schema itself/);
    expect(() => buildGraphQLSchema([...tables, { ...city, name: 'CityWhere' }], EVERYTHING_VISIBLE)).toThrow(/CityWhere/);
    const order = tables.find((t) => t.name === 'Order')!;
    const oddEnum = { ...order, fields: order.fields.map((f) => (f.name === 'status' ? { ...f, enumValues: ['open', 'true'] } : f)) };
    expect(() => buildGraphQLSchema(tables.map((t) => (t.name === 'Order' ? oddEnum : t)), EVERYTHING_VISIBLE)).toThrow(/true/);
    // svcgen generate says it as a model problem (schema.prisma cannot be served: ...).
    expect(() => renderGraphqlSchema([...tables, { ...city, name: 'Query' }], '')).toThrow(ModelError);
  });
});

describe('document nesting scan', () => {
  it('counts braces, brackets and parentheses outside strings and comments', () => {
    expect(documentNesting('{ a(x: [1, {b: 2}]) { c } }')).toBe(4);
    expect(documentNesting('{ a(x: "{{{{[[[(((") # {{{{{{\n }')).toBe(2);
    expect(documentNesting('{ a(x: """ {{{ \\""" {{{ """) }')).toBe(2);
    expect(documentNesting('{ a(x: "\\" {{{") }')).toBe(2);
  });
});
