/**
 * The GraphQL API at /gw/api/graphql (docs/graphql.md): the handler is runtime/graphql's; this
 * feature hands it the server's services and serves it. Request logs, metrics, CORS and fault
 * answers are the HTTP front's, shared by every route.
 */
import { callFunction, parseArguments, requireFunctionGrant } from '../../functions/index.ts';
import {
  graphqlHandler,
  schemaCache,
  type CodeRunner,
  type CodeSchema,
  type EndpointField,
} from '../../graphql/index.ts';
import { requestIdOf } from '../../http/index.ts';
import { endpointJsonSchemas } from '../../usercode/index.ts';
import { checkAccess, runEndpoint } from '../endpoints.ts';
import type { Services } from '../services.ts';
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
            codeSchema(services),
          ),
          code: codeRunner(services),
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

/**
 * The project's endpoints and database functions as GraphQL fields (docs/graphql.md "Your own
 * code"): a caller's schema shows those it may call, as it shows the tables it may read.
 */
function codeSchema(services: Services): CodeSchema | undefined {
  const endpoints: EndpointField[] = [];
  for (const endpoint of services.code.endpoints) {
    try {
      endpoints.push(endpointJsonSchemas(endpoint));
    } catch {
      // A zod type JSON Schema cannot express: generate refuses it; left out of GraphQL here.
    }
  }
  const functions = [...services.functions.values()];
  if (endpoints.length === 0 && functions.length === 0) return undefined;
  const byName = new Map(services.code.endpoints.map((e) => [e.name, e]));
  return {
    fields: { endpoints, functions },
    byKind: services.code.endpoints.some((e) => e.access === 'signed-in'),
    allows: (meta, caller) => {
      if (meta.code === 'function')
        return (services.config.functions[meta.name]?.roles ?? []).some((role) => caller.roles.includes(role));
      const access = byName.get(meta.name)?.access;
      if (access === undefined) return false;
      if (access === 'public') return true;
      if (access === 'signed-in') return caller.kind === 'user';
      return caller.roles.some((role) => access.roles.includes(role));
    },
  };
}

/**
 * Runs a code field after the GraphQL request's admission, with the REST route's own steps:
 * runtime/server/endpoints.ts (access rule, input, handler, output, errors) and runtime/functions
 * (grant, arguments, call). The access rule is checked again here: a schema is kept per role set.
 */
function codeRunner(services: Services): CodeRunner | undefined {
  if (services.code.endpoints.length === 0 && services.functions.size === 0) return undefined;
  const byName = new Map(services.code.endpoints.map((e) => [e.name, e]));
  return async (meta, args, { tenant, principal, req }) => {
    if (meta.code === 'endpoint') {
      const endpoint = byName.get(meta.name)!;
      checkAccess(endpoint, principal);
      return runEndpoint(services, endpoint, args, {
        tenant,
        principal,
        anonymous: false,
        requestId: requestIdOf(req) ?? '',
      });
    }
    const spec = services.functions.get(meta.name)!;
    requireFunctionGrant(services.config, spec.name, principal);
    const parsed = parseArguments(spec, args);
    return JSON.parse(await callFunction(services.db, spec, principal, tenant.environment, parsed));
  };
}
