/**
 * The GraphQL playground (docs/graphql.md "Playground"): GraphiQL at /gw/api/graphql/_playground,
 * and at /gw/api/graphql for a browser opening it. Listed before the GraphQL feature, so its GET
 * route sees a request to the endpoint first and passes on all that is not a browser's.
 */
import { GRAPHQL_PATH, GRAPHQL_PLAYGROUND_PATH } from '../../model/index.ts';
import { DEFAULT_ENVIRONMENT } from '../../tenancy/index.ts';
import type { ServerFeature } from '../feature.ts';
import { playgroundHandlers } from '../graphql-playground.ts';

/** The environment the page prefills: the one a request without the header gets, if it is served. */
function prefilledEnvironment(environments: readonly string[]): string {
  return environments.includes(DEFAULT_ENVIRONMENT) ? DEFAULT_ENVIRONMENT : environments[0]!;
}

export const graphqlPlaygroundFeature: ServerFeature = {
  name: 'graphql-playground',
  start({ config }) {
    return {
      routes() {
        const playground = playgroundHandlers({
          projectId: config.project.id,
          environment: prefilledEnvironment(config.environments),
        });
        return [
          { method: 'get', path: GRAPHQL_PATH, express: playground.negotiate },
          { method: 'get', path: GRAPHQL_PLAYGROUND_PATH, express: playground.page },
          { method: 'get', path: `${GRAPHQL_PLAYGROUND_PATH}/:file`, express: playground.asset },
        ];
      },
    };
  },
};
