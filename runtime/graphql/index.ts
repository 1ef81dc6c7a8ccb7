/** The GraphQL API (docs/graphql.md): its HTTP endpoint and the schema each set of roles sees. */
export { graphqlHandler, type CodeRunner, type GraphQLHttpDeps } from './http.ts';
export { schemaCache, type CodeSchema } from './schema-cache.ts';
export type { CodeFieldMeta, EndpointField, JsonSchema } from './schema.ts';
