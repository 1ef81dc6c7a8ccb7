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
  app.set('case sensitive routing', true); // table names are exact model names
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

  // Data routes are registered on the app itself: a mounted sub-router costs ~30 µs a request.
  const at = (path: string) => `${DATA_BASE_PATH}${path}`;
  app.get(at('/_openapi'), route(async () => jsonReply(200, services.service.openapi)));
  app.get(at('/_docs'), route(async () => ({ status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: renderDocsPage(at('/_openapi')) })));

  const keys = managementHandlers(services);
  app.post(at('/_apikeys'), route(keys.create));
  app.get(at('/_apikeys'), route(keys.list));
  app.delete(at('/_apikeys/:id'), route(keys.revoke));

  // The generated route table, looked up by method, table and path shape: three Express layers
  // instead of one per route keep routing cost flat however many tables the model has.
  const routes = new Map<string, express.RequestHandler>();
  const literals = new Set<string>();
  for (const r of services.service.routes) {
    const [, , sub = ''] = r.path.split('/');
    if (sub !== '' && !sub.startsWith(':')) literals.add(sub);
    routes.set(`${r.method} ${r.table} ${sub}`, route(dataHandler(services, r.operation, r.table)));
  }
  // Anything else under the data API still goes through tenancy and authentication before its 404.
  const unknown = route(dataHandler(services, undefined, undefined));
  const dispatch: express.RequestHandler = (req, res, next) => {
    const params = req.params as Record<string, string>;
    const sub = params.sub === undefined ? '' : literals.has(params.sub) ? params.sub : ':id';
    if (sub === ':id') params.id = params.sub!;
    (routes.get(`${req.method} ${params.table} ${sub}`) ?? unknown)(req, res, next);
  };
  app.all(at('/:table'), dispatch);
  app.all(at('/:table/:sub'), dispatch);
  app.all(at('/:table/*rest'), unknown);

  app.use(
    route(async (req) => {
      throw new Problem('not-found', `nothing is served at ${req.method} ${req.path}`);
    }),
  );
  return app;
}
