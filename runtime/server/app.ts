/**
 * The HTTP front: the addresses of docs/api.md §1, each handed to the pipeline. Data routes (the hot path)
 * are matched from the generated route table before Express; Express serves everything else.
 * Express 5 re-prototypes every request and response and walks its layer stack, which measured
 * at about half of the data API's throughput (bench/RESULTS.md).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import express from 'express';
import { authHandlers } from '../auth/index.ts';
import { adapt, assignRequestId, corsStage, DATABASE_RETRY_AFTER_SECONDS, jsonReply, nodeRequest, noteRoute, Problem, requestIdOf, requestObserver, run, type ApiRequest, type Handler } from '../http/index.ts';
import { docsHandlers } from './docs-page.ts';
import { metrics, metricsHandler } from '../observability/index.ts';
import { webhookHandlers } from '../webhooks/index.ts';
import { managementHandlers } from './management.ts';
import { dataHandler } from './pipeline.ts';
import type { Services } from './services.ts';

export const DATA_BASE_PATH = '/gw/api/rest';

function errorLogger(services: Services) {
  // pino's err serializer keeps type, message and stack; the request is named by id, never by its headers.
  return (error: unknown, req: ApiRequest) =>
    services.logger.error({ reqId: requestIdOf(req), method: req.method, path: req.path, err: error }, 'request failed');
}

export function createApp(services: Services): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('case sensitive routing', true); // table names are exact model names
  app.set('etag', false);
  app.set('query parser', false);
  const options = { bodyLimit: services.config.limits.bodyBytes, log: errorLogger(services) };
  const route = (handler: Handler) => adapt(handler, options);

  // Off (404) unless config metrics.enabled; the token is required then (startServer checks).
  if (services.metricsToken) app.get('/metrics', route(metricsHandler({ token: services.metricsToken })));
  app.get('/healthz', route(async () => jsonReply(200, { status: 'ok' })));
  app.get(
    '/readyz',
    route(async () => {
      // Cached state (runtime/db/readiness.ts): a load balancer polling this costs no query.
      const report = services.readiness.report();
      if (report.ready) return jsonReply(200, { status: 'ready', checks: report.checks });
      throw new Problem('unavailable', `not ready: ${report.reasons.join('; ')}`, [], { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) }, { checks: report.checks });
    }),
  );

  const auth = authHandlers(services.auth);
  app.post('/auth/signup', route(auth.signup));
  app.post('/auth/confirm-signup', route(auth.confirmSignup));
  app.post('/auth/login', route(auth.login));
  app.post('/auth/recover-password', route(auth.recoverPassword));
  app.post('/auth/reset-password', route(auth.resetPassword));
  app.post('/auth/refresh-token', route(auth.refreshToken));
  app.post('/auth/logout', route(auth.logout));
  app.get('/auth/.well-known/jwks.json', route(auth.jwks));

  // Data routes are registered on the app itself: a mounted sub-router costs ~30 µs a request.
  const at = (path: string) => `${DATA_BASE_PATH}${path}`;
  app.get(at('/_openapi'), route(async () => jsonReply(200, services.service.openapi)));
  const docs = docsHandlers({ basePath: DATA_BASE_PATH, openapi: services.service.openapi });
  app.get(at('/_docs'), docs.page);
  app.get(at('/_docs/:file'), docs.asset);

  const keys = managementHandlers(services);
  app.post(at('/_apikeys'), route(keys.create));
  app.get(at('/_apikeys'), route(keys.list));
  app.delete(at('/_apikeys/:id'), route(keys.revoke));

  const webhooks = webhookHandlers(services);
  app.post(at('/_webhooks'), route(webhooks.create));
  app.get(at('/_webhooks'), route(webhooks.list));
  app.get(at('/_webhooks/:id'), route(webhooks.get));
  app.patch(at('/_webhooks/:id'), route(webhooks.update));
  app.delete(at('/_webhooks/:id'), route(webhooks.remove));
  app.post(at('/_webhooks/:id/deliveries/:deliveryId/redeliver'), route(webhooks.redeliver));

  app.use(
    route(async (req) => {
      throw new Problem('not-found', `nothing is served at ${req.method} ${req.path}`);
    }),
  );
  // Errors Express raises before a handler runs (a path segment that is not valid percent-encoding)
  // get a Problem body like every other 4xx.
  app.use((error: unknown, req: express.Request, res: express.Response, _next: express.NextFunction) => {
    const status = (error as { status?: number }).status;
    const problem =
      error instanceof URIError || status === 400
        ? new Problem('bad-request', 'the path is not valid percent-encoding (RFC 3986)')
        : error;
    route(async () => {
      throw problem;
    })(req, res);
  });
  return app;
}

/** Paths under the data API that Express serves (documents, key and webhook management). */
const EXPRESS_SEGMENTS = new Set(['_openapi', '_docs', '_apikeys', '_webhooks']);

/** Data routes by `<METHOD> <table> <shape>`, where shape is '', a literal like `_bulk`, or `:id`. */
function dataRoutes(services: Services) {
  const routes = new Map<string, Handler>();
  const literals = new Set<string>();
  for (const r of services.service.routes) {
    const [, , sub = ''] = r.path.split('/');
    if (sub !== '' && !sub.startsWith(':')) literals.add(sub);
    routes.set(`${r.method} ${r.table} ${sub}`, dataHandler(services, r.operation, r.table));
  }
  // Anything else under the data API still goes through tenancy and authentication before its 404.
  const unknown = dataHandler(services, undefined, undefined);
  return { routes, literals, unknown };
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

export function createRequestListener(services: Services): RequestListener {
  const app = createApp(services);
  const { routes, literals, unknown } = dataRoutes(services);
  const bodyLimit = services.config.limits.bodyBytes;
  const log = errorLogger(services);
  const prefix = `${DATA_BASE_PATH}/`;
  const cors = corsStage(services.config.cors);
  const metered = services.metricsToken !== undefined;
  const observe = requestObserver({ logger: services.logger, record: metered ? metrics.request : undefined });
  return (req: IncomingMessage, res: ServerResponse) => {
    assignRequestId(req, res);
    observe?.(req, res);
    if (cors?.(req, res)) return;
    const url = req.url ?? '/';
    if (url.startsWith(prefix)) {
      const q = url.indexOf('?');
      const segments = (q === -1 ? url : url.slice(0, q)).slice(prefix.length).split('/');
      const table = decodeSegment(segments[0]!);
      if (table !== undefined && table !== '' && !EXPRESS_SEGMENTS.has(table)) {
        const params: Record<string, string> = { table };
        let handler: Handler = unknown;
        let shape = '';
        if (segments.length === 1 || (segments.length === 2 && segments[1] === '')) {
          handler = routes.get(`${req.method} ${table} `) ?? unknown;
        } else if (segments.length === 2) {
          const sub = decodeSegment(segments[1]!);
          if (sub !== undefined) {
            shape = literals.has(sub) ? sub : ':id';
            if (shape === ':id') params.id = sub;
            handler = routes.get(`${req.method} ${table} ${shape}`) ?? unknown;
          }
        }
        // A route pattern, never the raw path: table names come from the model, unknown ones share one label.
        if (metered) noteRoute(res, handler === unknown ? `${prefix}*` : `${prefix}${table}${shape && `/${shape}`}`);
        run(handler, nodeRequest(req, res, url, params, bodyLimit), res, log);
        return;
      }
    }
    app(req, res);
  };
}
