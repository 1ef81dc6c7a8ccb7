// The schema builder shared by the server (per role) and the generator (generated/schema.graphql),
// and the document bounds checked before parsing, without a database.
import { lexicographicSortSchema, printSchema, type GraphQLObjectType } from 'graphql';
import { describe, expect, it } from 'vitest';
import { service } from '../../examples/shop/generated/index.ts';
import {
  buildGraphQLSchema,
  EVERYTHING_VISIBLE,
  rootFieldNames,
  type SchemaVisibility,
} from '../../runtime/graphql/schema.ts';
import { documentNesting } from '../../runtime/graphql/rules.ts';
import {
  decimalMarker,
  parseKeepingNumbers,
  plainNumber,
  RawNumber,
  unmarkDecimals,
} from '../../runtime/graphql/exact-numbers.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { ModelError } from '../../generator/model/describe-model.ts';
import { renderGraphqlSchema } from '../../generator/render/graphql.ts';

const tables: TableSpec[] = Object.values(service.tables).map((t) => t.spec);
const print = (visible: SchemaVisibility) => printSchema(lexicographicSortSchema(buildGraphQLSchema(tables, visible)));
const fieldsOf = (visible: SchemaVisibility, type: string) =>
  Object.keys(
    (buildGraphQLSchema(tables, visible).getType(type) as GraphQLObjectType | undefined)?.getFields() ?? {},
  ).sort();

describe('schema builder', () => {
  it('prints byte for byte the same on every build', () => {
    expect(print(EVERYTHING_VISIBLE)).toBe(print(EVERYTHING_VISIBLE));
  });

  it('names root fields after the model, first letter lower-cased', () => {
    expect(rootFieldNames('OrderItem')).toEqual({
      byKey: 'orderItem',
      list: 'orderItemList',
      page: 'orderItemPage',
      aggregate: 'orderItemAggregate',
    });
  });

  it('leaves out hidden tables, fields, and relations whose link field or target is hidden', () => {
    const visible: SchemaVisibility = {
      table: (t) => t !== 'OrderItem',
      field: (t, f) => !(t === 'Customer' && f === 'cityId'),
    };
    // customer stays (customerId and Customer.id visible); items go with OrderItem.
    expect(fieldsOf(visible, 'Order')).toEqual([
      'createdAt',
      'customer',
      'customerId',
      'id',
      'invoiceId',
      'note',
      'placedAt',
      'receiptId',
      'status',
      'total',
      'updatedAt',
    ]);
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
    expect(() => buildGraphQLSchema([...tables, { ...city, name: 'PageInfo' }], EVERYTHING_VISIBLE)).toThrow(
      /PageInfo of table PageInfo is also used by the schema itself/,
    );
    expect(() => buildGraphQLSchema([...tables, { ...city, name: 'CityWhere' }], EVERYTHING_VISIBLE)).toThrow(
      /CityWhere/,
    );
    const order = tables.find((t) => t.name === 'Order')!;
    const oddEnum = {
      ...order,
      fields: order.fields.map((f) => (f.name === 'status' ? { ...f, enumValues: ['open', 'true'] } : f)),
    };
    expect(() =>
      buildGraphQLSchema(
        tables.map((t) => (t.name === 'Order' ? oddEnum : t)),
        EVERYTHING_VISIBLE,
      ),
    ).toThrow(/true/);
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

describe('numbers kept as written', () => {
  it('parses like JSON.parse, keeping the text of numbers a JavaScript number would write differently', () => {
    const text =
      '{"a":1,"b":-2.5,"c":12.50,"d":"x\\"y\\u00e9","e":[true,false,null,[]],"f":{},"g":1e-07,"h":12345678901234567890,"__proto__":{"z":3.00}}';
    const parsed = parseKeepingNumbers(text) as Record<string, unknown>;
    expect(parsed.a).toBe(1);
    expect(parsed.b).toBe(-2.5);
    expect(parsed.c).toEqual(new RawNumber('12.50'));
    expect(parsed.g).toEqual(new RawNumber('1e-07'));
    expect(parsed.h).toEqual(new RawNumber('12345678901234567890'));
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
    expect(plainNumber(parsed)).toEqual(JSON.parse(text));
    expect(Object.keys(plainNumber(parsed) as object)).toEqual(Object.keys(JSON.parse(text)));
  });

  it('a marker becomes the number text in the finished body, nothing else does', () => {
    const body = JSON.stringify({
      data: { price: decimalMarker(new RawNumber('19.00')), note: '\u0000decimal:guess:1.0' },
    });
    expect(unmarkDecimals(body)).toBe('{"data":{"price":19.00,"note":"\\u0000decimal:guess:1.0"}}');
  });
});
