/**
 * PostgreSQL functions served as endpoints (docs/own-code.md "Database functions"): at start the
 * configured functions are checked against the database, then served at
 * `POST /gw/api/rest/rpc/<name>`. The `rpc` segment is reserved whether or not any are configured.
 */
import { checkFunctions, functionHandler } from '../../functions/index.ts';
import { methodNotAllowed } from '../../http/index.ts';
import { DATA_BASE_PATH, SERVICE_PATHS, type FunctionSpec } from '../../model/index.ts';
import type { ServerFeature } from '../feature.ts';

export const functionsFeature: ServerFeature<{ functions: ReadonlyMap<string, FunctionSpec> }> = {
  name: 'functions',
  async start({ config, service, db }) {
    const generated = new Map((service.functions ?? []).map((f) => [f.name, f]));
    const missing = Object.keys(config.functions).filter((name) => !generated.has(name));
    if (missing.length > 0)
      throw new Error(
        `functions ${missing.join(', ')} of svcgen.config.json are not in generated/: run \`svcgen generate\`, which reads their signatures from the migrations`,
      );
    const functions = new Map([...generated].filter(([name]) => Object.hasOwn(config.functions, name)));
    await checkFunctions(db, config.environments, [...functions.values()]);
    return {
      services: { functions },
      routes(services) {
        const at = `${DATA_BASE_PATH}/${SERVICE_PATHS.rpc}/:name`;
        return [
          { method: 'post', path: at, handler: functionHandler(services) },
          {
            method: 'all',
            path: at,
            handler: async (req) => {
              throw methodNotAllowed(req, 'POST');
            },
          },
        ];
      },
    };
  },
};
