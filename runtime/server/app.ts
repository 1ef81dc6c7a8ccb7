/**
 * The HTTP front: the addresses of docs/api.md §1, each handed to the pipeline. Data routes (the hot path)
 * are matched from the generated route table before Express; Express serves everything else.
 * Express 5 re-prototypes every request and response and walks its layer stack, which measured
 * at about half of the data API's throughput (bench/RESULTS.md).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import express from 'express';
import {
  adapt,
  assignRequestId,
  corsStage,
  nodeRequest,
  noteRoute,
  Problem,
  requestId,
  requestIdOf,
  requestObserver,
  run,
  type ApiRequest,
  type Handler,
} from '../http/index.ts';
import { DATA_BASE_PATH } from '../model/index.ts';
import { metrics } from '../observability/index.ts';
import type { Route } from './feature.ts';
import { dataHandler } from './pipeline.ts';
import type { Services } from './services.ts';

export { DATA_BASE_PATH };

function errorLogger(services: Services) {
  // pino's err serializer keeps type, message and stack; the request is named by id, never by its headers.
  return (error: unknown, req: ApiRequest) =>
    services.logger.error(
      { reqId: requestIdOf(req), method: req.method, path: req.path, err: error },
      'request failed',
    );
}

/** Express with the routes the features registered (./features), then a 404 Problem for anything else. */
export function createApp(services: Services, routes: readonly Route[]): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('case sensitive routing', true); // table names are exact model names
  app.set('etag', false);
  app.set('query parser', false);
  const options = { bodyLimit: services.config.limits.bodyBytes, log: errorLogger(services) };
  // On the app itself: a mounted sub-router costs ~30 µs a request.
  for (const r of routes) app[r.method](r.path, 'handler' in r ? adapt(r.handler, options) : r.express);

  app.use(
    adapt(async (req) => {
      throw new Problem('not-found', `nothing is served at ${req.method} ${req.path}`);
    }, options),
  );
  // Errors Express raises before a handler runs (a path segment that is not valid percent-encoding)
  // get a Problem body like every other 4xx.
  app.use((error: unknown, req: express.Request, res: express.Response, _next: express.NextFunction) => {
    const status = (error as { status?: number }).status;
    const problem =
      error instanceof URIError || status === 400
        ? new Problem('bad-request', 'the path is not valid percent-encoding (RFC 3986)')
        : error;
    adapt(async () => {
      throw problem;
    }, options)(req, res);
  });
  return app;
}

/** First segments under the data API that a feature serves through Express (documents, key and webhook management). */
function expressSegments(routes: readonly Route[]): ReadonlySet<string> {
  const prefix = `${DATA_BASE_PATH}/`;
  return new Set(
    routes.filter((r) => r.path.startsWith(prefix)).map((r) => r.path.slice(prefix.length).split('/')[0]!),
  );
}

/**
 * Data routes by method, table and shape, where shape is '', a literal like `_bulk`, or `:id`
 * (nested maps: no key string to build per request).
 */
class DataRouteTable {
  private readonly byMethod = new Map<string, Map<string, Map<string, Handler>>>();

  set(method: string, table: string, shape: string, handler: Handler): void {
    let byTable = this.byMethod.get(method);
    if (!byTable) this.byMethod.set(method, (byTable = new Map()));
    let byShape = byTable.get(table);
    if (!byShape) byTable.set(table, (byShape = new Map()));
    byShape.set(shape, handler);
  }

  get(method: string | undefined, table: string, shape: string): Handler | undefined {
    return this.byMethod
      .get(method ?? '')
      ?.get(table)
      ?.get(shape);
  }
}

function dataRoutes(services: Services) {
  const routes = new DataRouteTable();
  const literals = new Set<string>();
  for (const r of services.service.routes) {
    const [, , sub = ''] = r.path.split('/');
    if (sub !== '' && !sub.startsWith(':')) literals.add(sub);
    routes.set(r.method, r.table, sub, dataHandler(services, r.operation, r.table));
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

/** Whether Express would match `pattern` (a route path with `:name` parameters) against the literal path `path`. */
function patternMatches(pattern: string, path: string): boolean {
  const want = pattern.split('/');
  const got = path.split('/');
  return want.length === got.length && want.every((segment, i) => segment.startsWith(':') || segment === got[i]);
}

/**
 * Feature routes Express need not route: `<METHOD> <path>` of a framework-free handler at a literal
 * path that no route registered before it matches (Express would run that one first). Requests to
 * exactly that path skip Express (the GraphQL API is one: Express cost it ~15 % of its throughput,
 * bench/RESULTS.md "GraphQL"); any other spelling (a trailing slash, HEAD, percent-encoding) still
 * goes through Express, which answers it as before.
 */
function directRoutes(routes: readonly Route[]): Map<string, Handler> {
  const direct = new Map<string, Handler>();
  routes.forEach((route, i) => {
    if (!('handler' in route) || /[:*?(]/.test(route.path)) return;
    const shadowed = routes
      .slice(0, i)
      .some((earlier) => earlier.method === route.method && patternMatches(earlier.path, route.path));
    if (!shadowed) direct.set(`${route.method.toUpperCase()} ${route.path}`, route.handler);
  });
  return direct;
}

/** The data routes of the generated table first; the features' routes (`featureRoutes`) through Express. */
export function createRequestListener(services: Services, featureRoutes: readonly Route[]): RequestListener {
  const app = createApp(services, featureRoutes);
  const served = expressSegments(featureRoutes);
  const { routes, literals, unknown } = dataRoutes(services);
  const direct = directRoutes(featureRoutes);
  const bodyLimit = services.config.limits.bodyBytes;
  const log = errorLogger(services);
  const prefix = `${DATA_BASE_PATH}/`;
  const cors = corsStage(services.config.cors);
  const metered = services.metricsToken !== undefined;
  const observe = requestObserver({ logger: services.logger, record: metered ? metrics.request : undefined });
  return (req: IncomingMessage, res: ServerResponse) => {
    // On the response now only where something else may answer (CORS, Express); requests answered
    // by run() get it from send(), so that their headers take node's fast path (node-adapter.ts).
    if (cors) assignRequestId(req, res);
    else requestId(req);
    observe?.(req, res);
    if (cors?.(req, res)) return;
    const url = req.url ?? '/';
    if (url.startsWith(prefix)) {
      const q = url.indexOf('?');
      // `<table>`, `<table>/` or `<table>/<sub>`; more segments are no data route.
      const rest = q === -1 ? url.slice(prefix.length) : url.slice(prefix.length, q);
      const slash = rest.indexOf('/');
      const table = decodeSegment(slash === -1 ? rest : rest.slice(0, slash));
      if (table !== undefined && table !== '' && !served.has(table)) {
        let params: Record<string, string> = { table };
        let handler: Handler = unknown;
        let shape = '';
        const second = slash === -1 ? '' : rest.slice(slash + 1);
        if (second === '') {
          handler = routes.get(req.method, table, '') ?? unknown;
        } else if (!second.includes('/')) {
          const sub = decodeSegment(second);
          if (sub !== undefined) {
            shape = literals.has(sub) ? sub : ':id';
            if (shape === ':id') params = { table, id: sub };
            handler = routes.get(req.method, table, shape) ?? unknown;
          }
        }
        // A route pattern, never the raw path: table names come from the model, unknown ones share one label.
        if (metered) noteRoute(res, handler === unknown ? `${prefix}*` : `${prefix}${table}${shape && `/${shape}`}`);
        run(handler, nodeRequest(req, res, url, params, bodyLimit), res, log);
        return;
      }
    }
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const handler = direct.get(`${req.method} ${path}`);
    if (handler) {
      if (metered) noteRoute(res, path);
      run(handler, nodeRequest(req, res, url, {}, bodyLimit), res, log);
      return;
    }
    if (!cors) res.setHeader('x-request-id', requestIdOf(req)!);
    app(req, res);
  };
}
