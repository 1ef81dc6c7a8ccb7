/**
 * The GraphQL API at /gw/api/graphql (docs/graphql.md): the handler is runtime/graphql's; this
 * feature hands it the server's services and serves it. Request logs, metrics, CORS and fault
 * answers are the HTTP front's, shared by every route.
 */
import { graphqlHandler, schemaCache } from '../../graphql/index.ts';
import { keyOperations } from '../../keys/index.ts';
import { GRAPHQL_PATH } from '../../model/index.ts';
import { webhookOperations } from '../../webhooks/index.ts';
import type { ServerFeature } from '../feature.ts';
import { fileAccess } from '../file-access.ts';
import { dataLimits } from '../../data/index.ts';

export const graphqlFeature: ServerFeature = {
  name: 'graphql',
  start() {
    return {
      routes(services) {
        const { config, logger } = services;
        const handler = graphqlHandler({
          config,
          db: services.db,
          catalog: services.catalog,
          policy: services.policy,
          expensiveReads: services.expensiveReads,
          cursors: services.cursors,
          watchedTables: services.watchedTables,
          basePath: services.basePath,
          writeHooks: services.writeHooks,
          files: (principal) => fileAccess(config, principal),
          schemaFor: schemaCache(
            Object.values(services.service.tables).map((t) => t.spec),
            services.policy,
          ),
          limits: dataLimits(services),
          keys: keyOperations(services),
          webhooks: webhookOperations(services),
          logFault: (error) => logger.error({ path: GRAPHQL_PATH, err: error }, 'graphql field failed'),
        });
        // GET and POST answer; every other method gets a 405 Problem with Allow (runtime/graphql/http.ts).
        return (['get', 'post', 'all'] as const).map((method) => ({ method, path: GRAPHQL_PATH, handler }));
      },
    };
  },
};
