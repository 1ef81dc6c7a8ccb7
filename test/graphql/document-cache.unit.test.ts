import { buildSchema, Kind, parse, specifiedRules, type ValidationRule } from 'graphql';
import { describe, expect, it, vi } from 'vitest';
import { documentCache } from '../../runtime/graphql/document-cache.ts';

const schema = buildSchema('type Query { order(id: Int!): Order } type Order { id: Int total: Float }');
const rules: readonly ValidationRule[] = [...specifiedRules];

describe('documentCache', () => {
  it('parses a query text once and answers the same document for it again', () => {
    const parser = vi.fn(parse);
    const cache = documentCache(parser);
    const first = cache.parse('{ order(id: 1) { id } }');
    expect(cache.parse('{ order(id: 1) { id } }')).toBe(first);
    expect(cache.parse({ body: '{ order(id: 1) { id } }' })).toBe(first);
    expect(cache.parse('{ order(id: 2) { id } }')).not.toBe(first);
    expect(parser).toHaveBeenCalledTimes(2);
  });

  it('drops the least recently used document past 500, and keeps no document of a text over 10,000 characters', () => {
    const parser = vi.fn(parse);
    const cache = documentCache(parser);
    const text = (i: number) => `{ order(id: ${i}) { id } }`;
    for (let i = 0; i < 500; i++) cache.parse(text(i));
    cache.parse(text(0)); // now the most recently used: text(1) goes first
    cache.parse(text(500));
    parser.mockClear();
    cache.parse(text(0));
    expect(parser).not.toHaveBeenCalled();
    cache.parse(text(1));
    expect(parser).toHaveBeenCalledTimes(1);

    const long = `{ order(id: 1) { id ${'total '.repeat(2000)} } }`;
    expect(long.length).toBeGreaterThan(10_000);
    parser.mockClear();
    cache.parse(long);
    cache.parse(long);
    expect(parser).toHaveBeenCalledTimes(2);
  });

  it('does not keep a parse error', () => {
    const parser = vi.fn(parse);
    const cache = documentCache(parser);
    expect(() => cache.parse('{ order(')).toThrow('Syntax Error');
    expect(() => cache.parse('{ order(')).toThrow('Syntax Error');
    expect(parser).toHaveBeenCalledTimes(2);
  });

  it('validates a document once per schema and rule set, and a document with errors every time', () => {
    const cache = documentCache(parse);
    const seen: string[] = [];
    const counting: ValidationRule = () => ({
      enter(node) {
        if (node.kind === Kind.DOCUMENT) seen.push('validated');
      },
    });
    const withCounting = [...rules, counting];
    const valid = cache.parse('{ order(id: 1) { id total } }');
    expect(cache.validate(schema, valid, withCounting)).toEqual([]);
    expect(cache.validate(schema, valid, withCounting)).toEqual([]);
    expect(seen).toEqual(['validated']);

    // another rule set or schema: validated again
    const otherRules = [...withCounting];
    expect(cache.validate(schema, valid, otherRules)).toEqual([]);
    const otherSchema = buildSchema('type Query { order(id: Int!): Order } type Order { id: Int total: Float }');
    expect(cache.validate(otherSchema, valid, withCounting)).toEqual([]);
    expect(seen).toHaveLength(3);

    const invalid = cache.parse('{ order(id: 1) { id nope } }');
    const errors = cache.validate(schema, invalid, withCounting);
    expect(errors.map((e) => e.message)).toEqual(['Cannot query field "nope" on type "Order".']);
    expect(cache.validate(schema, invalid, withCounting).map((e) => e.message)).toEqual([
      'Cannot query field "nope" on type "Order".',
    ]);
    expect(seen).toHaveLength(5);
  });
});
