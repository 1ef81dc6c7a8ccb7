/** The Express application: addresses of CONTRACT §6, each handed to the pipeline. */
import express from 'express';
import { adapt, jsonReply, Problem, type ApiRequest, type Handler } from '../http/index.ts';
import { renderDocsPage } from './docs-page.ts';
import { managementHandlers } from './management.ts';
import { dataHandler } from './pipeline.ts';
import type { Services } from './services.ts';

export const DATA_BASE_PATH = '/gw/api/rest';

export function createApp(services: Services): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', false);
  const options = {
    bodyLimit: services.config.limits.bodyBytes,
    log: (error: unknown, req: ApiRequest) =>
      services.log(`error on ${req.method} ${req.path}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`),
  };
  const route = (handler: Handler) => adapt(handler, options);

  app.get('/healthz', route(async () => jsonReply(200, { status: 'ok' })));
  app.get(
    '/readyz',
    route(async () => {
      try {
        await services.db.query('SELECT 1');
        return jsonReply(200, { status: 'ready' });
      } catch {
        throw new Problem('unavailable', 'the database is not reachable');
      }
    }),
  );

  const rest = express.Router({ caseSensitive: true, strict: false });
  rest.get('/_openapi', route(async () => jsonReply(200, services.service.openapi)));
  rest.get('/_docs', route(async () => ({ status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: renderDocsPage(`${DATA_BASE_PATH}/_openapi`) })));

  const keys = managementHandlers(services);
  rest.post('/_apikeys', route(keys.create));
  rest.get('/_apikeys', route(keys.list));
  rest.delete('/_apikeys/:id', route(keys.revoke));

  for (const r of services.service.routes) {
    const handler = route(dataHandler(services, r.operation, r.table));
    const method = r.method.toLowerCase() as 'get' | 'post' | 'patch' | 'delete';
    rest[method](r.path, handler);
  }
  // Anything else under the data API still goes through tenancy and authentication before its 404.
  const unknown = route(dataHandler(services, undefined, undefined));
  rest.all('/:table', unknown);
  rest.all('/:table/*rest', unknown);
  app.use(DATA_BASE_PATH, rest);

  app.use(
    route(async (req) => {
      throw new Problem('not-found', `nothing is served at ${req.method} ${req.path}`);
    }),
  );
  return app;
}
