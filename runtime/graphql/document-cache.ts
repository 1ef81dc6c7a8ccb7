/**
 * Parsed and validated GraphQL documents, kept for the next request with the same query text: a
 * client sends the same few documents again and again (with other variables), and parsing plus
 * graphql-js validation cost more than executing a small query (bench/RESULTS.md, "GraphQL").
 * The usual practice of GraphQL servers (graphql-jit, mercurius, grafserv, yoga's parser cache).
 *
 * - documents by query text, least recently used dropped past MAX_DOCUMENTS; texts longer than
 *   MAX_CACHED_TEXT are parsed every time (a cache of a few hundred small documents stays small);
 * - a successful validation per (schema, rule set, document): the schema is that of a set of roles,
 *   the rule set one of a few fixed arrays (the caller passes the same array for the same rules);
 *   held weakly, so a document dropped from the cache takes its validations along. A document with
 *   errors is validated again each time (its errors are built per request).
 *
 * Sharing one DocumentNode between requests is safe: graphql-js never mutates a document.
 */
import { validate, type DocumentNode, type GraphQLError, type GraphQLSchema, type ValidationRule } from 'graphql';

const MAX_DOCUMENTS = 500;
const MAX_CACHED_TEXT = 10_000;

export interface DocumentCache {
  /** `parse(text)`, or the document parsed earlier for the same text. Parse errors are thrown, never kept. */
  parse(source: string | { body: string }): DocumentNode;
  /** graphql-js `validate`, answered from the cache for a document already found valid against the same schema and rules. */
  validate(schema: GraphQLSchema, document: DocumentNode, rules: readonly ValidationRule[]): readonly GraphQLError[];
}

export function documentCache(parse: (text: string) => DocumentNode): DocumentCache {
  const documents = new Map<string, DocumentNode>();
  const valid = new WeakMap<GraphQLSchema, WeakMap<readonly ValidationRule[], WeakSet<DocumentNode>>>();
  return {
    parse(source) {
      const text = typeof source === 'string' ? source : source.body;
      const cached = documents.get(text);
      if (cached) {
        // Map keeps insertion order: re-inserting marks it as the most recently used.
        documents.delete(text);
        documents.set(text, cached);
        return cached;
      }
      const document = parse(text);
      if (text.length <= MAX_CACHED_TEXT) {
        if (documents.size >= MAX_DOCUMENTS) documents.delete(documents.keys().next().value!);
        documents.set(text, document);
      }
      return document;
    },
    validate(schema, document, rules) {
      let byRules = valid.get(schema);
      if (!byRules) valid.set(schema, (byRules = new WeakMap()));
      let documents = byRules.get(rules);
      if (!documents) byRules.set(rules, (documents = new WeakSet()));
      if (documents.has(document)) return [];
      const errors = validate(schema, document, rules);
      if (errors.length === 0) documents.add(document);
      return errors;
    },
  };
}
