/** The GraphQL API (docs/graphql.md): its HTTP endpoint and the schema each set of roles sees. */
export { graphqlHandler, type GraphQLHttpDeps } from './http.ts';
export { schemaCache } from './schema-cache.ts';
