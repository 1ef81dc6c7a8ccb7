/**
 * The data API's addresses (docs/api.md §1): where it lives and the path names that are not table
 * names. The generator refuses a model with one of these names, the server routes them past the
 * data pipeline, and generated routes use the table sub-paths.
 */

export const DATA_BASE_PATH = '/gw/api/rest';

/** The GraphQL read API (docs/graphql.md): beside the REST API, through the same pipeline. */
export const GRAPHQL_PATH = '/gw/api/graphql';

/**
 * The GraphQL playground (GraphiQL, docs/graphql.md "Playground") and its files at `<this>/<file>`.
 * A browser opening GRAPHQL_PATH itself (Accept: text/html) gets the same page.
 */
export const GRAPHQL_PLAYGROUND_PATH = `${GRAPHQL_PATH}/_playground`;

/** Services beside the tables: `/gw/api/rest/<name>`. */
export const SERVICE_PATHS = {
  openapi: '_openapi',
  docs: '_docs',
  apiKeys: '_apikeys',
  webhooks: '_webhooks',
  files: '_files',
  /** PostgreSQL functions: `/gw/api/rest/rpc/<name>` (docs/own-code.md "Database functions"). */
  rpc: 'rpc',
} as const;

/** A table's literal sub-paths: `/gw/api/rest/<table>/<name>`, never taken for an id. */
export const TABLE_SUB_PATHS = {
  bulk: '_bulk',
  aggregate: '_aggregate',
  query: '_query',
} as const;

/** Names a model may not have: each would collide with one of the paths above. */
export const RESERVED_PATH_NAMES: ReadonlySet<string> = new Set([
  ...Object.values(SERVICE_PATHS),
  ...Object.values(TABLE_SUB_PATHS),
]);
