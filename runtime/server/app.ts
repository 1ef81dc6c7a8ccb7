/**
 * The HTTP front: the addresses of docs/api.md §1, each handed to the pipeline. Data routes (the hot path)
 * are matched from the generated route table before Express, and so are framework-free feature
 * routes at their exact paths (DirectRoutes); Express serves everything else.
 * Express 5 re-prototypes every request and response and walks its layer stack, which measured
 * at about half of the data API's throughput (bench/RESULTS.md).
 */
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import express from 'express';
import {
  adapt,
  adaptStream,
  assignRequestId,
  corsStage,
  nodeRequest,
  noteRoute,
  Problem,
  requestId,
  requestIdOf,
  requestObserver,
  run,
  runStream,
  type ApiRequest,
  type Handler,
} from '../http/index.ts';
import { PatternRouter } from '../http/pattern-router.ts';
import { decodeSegment } from '../http/router.ts';
import { TableRouter } from '../http/table-router.ts';
import { DATA_BASE_PATH } from '../model/index.ts';
import { metrics, requestLineWriter } from '../observability/index.ts';
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
  for (const r of routes)
    app[r.method](
      r.path,
      'handler' in r ? adapt(r.handler, options) : 'stream' in r ? adaptStream(r.stream, options) : r.express,
    );

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

function dataRoutes(services: Services) {
  const routes = new TableRouter<Handler>(DATA_BASE_PATH);
  for (const r of services.service.routes)
    routes.add(r.method, `${DATA_BASE_PATH}${r.path}`, dataHandler(services, r.operation, r.table));
  // Anything else under the data API still goes through tenancy and authentication before its 404.
  const unknown = dataHandler(services, undefined, undefined);
  return { routes, unknown };
}

/** A feature route that can answer outside Express (a framework-free handler or stream). */
type DirectTarget = Exclude<Route, { readonly express: unknown }>;

/** An Express-native route: found by the direct routes only to leave the request to Express. */
const EXPRESS = Symbol('express');

/**
 * Feature routes Express need not route (the GraphQL API at a literal path: Express cost it ~15 %
 * of its throughput, bench/RESULTS.md "GraphQL"; file uploads and downloads at
 * `/_files/:bucket/...`: Express's layer walk allocated ~18 KiB of a 1-byte upload's 120). A request
 * whose method and exact path the first matching route (in registration order, as Express tries
 * them) is framework-free goes straight to it, with its parameters decoded as Express decodes them;
 * anything else (an Express-native route, a trailing slash, HEAD, a pattern read only by Express,
 * a parameter that is not valid percent-encoding) goes through Express, which answers as before.
 * `all` routes (a 405 with Allow) are Express's: no request method is `ALL`.
 */
function directRoutes(routes: readonly Route[]): PatternRouter<DirectTarget | typeof EXPRESS> {
  const direct = new PatternRouter<DirectTarget | typeof EXPRESS>();
  for (const route of routes)
    if (route.method !== 'all')
      direct.add(route.method.toUpperCase(), route.path, 'express' in route ? EXPRESS : route);
  return direct;
}

export interface RequestListenerOptions {
  /** Called with each response before Express takes it over (runtime/http/drain.ts `follow`). */
  beforeExpress?: (res: ServerResponse) => void;
}

/** The data routes of the generated table first; the features' routes (`featureRoutes`) through Express. */
export function createRequestListener(
  services: Services,
  featureRoutes: readonly Route[],
  { beforeExpress }: RequestListenerOptions = {},
): RequestListener {
  const app = createApp(services, featureRoutes);
  const served = expressSegments(featureRoutes);
  const { routes, unknown } = dataRoutes(services);
  const direct = directRoutes(featureRoutes);
  const bodyLimit = services.config.limits.bodyBytes;
  const log = errorLogger(services);
  const prefix = `${DATA_BASE_PATH}/`;
  const cors = corsStage(services.config.cors);
  const metered = services.metricsToken !== undefined;
  const observe = requestObserver({
    logger: services.logger,
    record: metered ? metrics.request : undefined,
    infoLine: requestLineWriter(services.logger),
  });
  return (req: IncomingMessage, res: ServerResponse) => {
    // On the response now only where something else may answer (CORS, Express); requests answered
    // by run() get it from send(), so that their headers take node's fast path (node-adapter.ts).
    if (cors) assignRequestId(req, res);
    else requestId(req);
    observe?.(req, res);
    if (cors?.(req, res)) return;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    if (path.startsWith(prefix)) {
      const slash = path.indexOf('/', prefix.length);
      const table = decodeSegment(path.slice(prefix.length, slash === -1 ? undefined : slash));
      if (table !== undefined && table !== '' && !served.has(table)) {
        const found = routes.match(req.method ?? '', path);
        const route = found && 'handler' in found ? found : undefined;
        // A route pattern, never the raw path: table names come from the model, unknown ones share one label.
        if (metered) noteRoute(res, route ? route.pattern : `${prefix}*`);
        run(route?.handler ?? unknown, nodeRequest(req, res, url, route?.params ?? { table }, bodyLimit), res, log);
        return;
      }
    }
    const found = direct.match(req.method ?? '', path);
    if (found && 'handler' in found && found.handler !== EXPRESS) {
      const target = found.handler;
      if (metered) noteRoute(res, found.pattern);
      const apiReq = nodeRequest(req, res, url, found.params, bodyLimit);
      if ('handler' in target) run(target.handler, apiReq, res, log);
      else {
        // A streamed response writes its own head: the request id goes on the response first.
        if (!cors) res.setHeader('x-request-id', requestIdOf(req)!);
        runStream(target.stream, apiReq, req, res, log);
      }
      return;
    }
    if (!cors) res.setHeader('x-request-id', requestIdOf(req)!);
    beforeExpress?.(res);
    app(req, res);
  };
}
