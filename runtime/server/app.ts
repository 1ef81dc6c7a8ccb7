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

/** A feature route that can answer outside Express (a framework-free handler or stream). */
type DirectTarget = Exclude<Route, { readonly express: unknown }>;

interface PatternRoute {
  readonly path: string;
  /** The path split at '/': literal segments, and `:name` for a parameter. */
  readonly segments: readonly string[];
  /** A pattern this matcher does not read (`*`, `{…}`, a parameter inside a segment): Express decides from here on. */
  readonly opaque: boolean;
  /** Undefined for an Express-native route. */
  readonly target: DirectTarget | undefined;
}

const PARAMETER = /^:[A-Za-z_$][\w$]*$/;

function targetOf(route: Route): DirectTarget | undefined {
  return 'express' in route ? undefined : route;
}

/**
 * Feature routes Express need not route (the GraphQL API at a literal path: Express cost it ~15 %
 * of its throughput, bench/RESULTS.md "GraphQL"; file uploads and downloads at
 * `/_files/:bucket/...`: Express's layer walk allocated ~18 KiB of a 1-byte upload's 120). A request
 * whose method and exact path the first matching route (in registration order, as Express tries
 * them) is framework-free goes straight to it, with its parameters decoded as Express decodes them;
 * anything else (an Express-native route, a trailing slash, HEAD, a pattern read only by Express,
 * a parameter that is not valid percent-encoding) goes through Express, which answers as before.
 */
class DirectRoutes {
  /** `<METHOD> <path>` of routes at a literal path that no route registered before could match. */
  private readonly literal = new Map<string, DirectTarget>();
  private readonly byMethod = new Map<string, PatternRoute[]>();

  constructor(routes: readonly Route[]) {
    for (const route of routes) {
      const method = route.method.toUpperCase();
      const segments = route.path.split('/');
      const opaque = segments.some((s) => /[:*?(){}]/.test(s) && !PARAMETER.test(s));
      const target = targetOf(route);
      let list = this.byMethod.get(method);
      if (!list) this.byMethod.set(method, (list = []));
      const literalPath = !opaque && segments.every((s) => !s.startsWith(':'));
      const shadowed = list.some(
        (earlier) => earlier.opaque || matchSegments(earlier.segments, segments) !== undefined,
      );
      const key = `${method} ${route.path}`;
      if (target && literalPath && !shadowed && !this.literal.has(key)) this.literal.set(key, target);
      list.push({ path: route.path, segments, opaque, target });
    }
  }

  /** The route that answers `method` `path` outside Express, with its parameters and its metrics label; undefined: Express. */
  find(
    method: string | undefined,
    path: string,
  ): { target: DirectTarget; params: Record<string, string>; label: string } | undefined {
    const literal = this.literal.get(`${method} ${path}`);
    if (literal) return { target: literal, params: {}, label: path };
    const routes = this.byMethod.get(method ?? '');
    if (!routes) return undefined;
    const segments = path.split('/');
    for (const route of routes) {
      if (route.opaque) return undefined;
      const params = matchSegments(route.segments, segments);
      if (params === undefined) continue;
      if (params === null || !route.target) return undefined;
      return { target: route.target, params, label: route.path };
    }
    return undefined;
  }
}

/**
 * The parameters of `path` (split at '/') under `pattern` (split likewise), undefined when it does
 * not match, null when it matches but a parameter is not valid percent-encoding (Express answers that).
 */
function matchSegments(pattern: readonly string[], path: readonly string[]): Record<string, string> | null | undefined {
  if (pattern.length !== path.length) return undefined;
  let params: Record<string, string> | undefined;
  let undecodable = false;
  for (let i = 0; i < pattern.length; i++) {
    const want = pattern[i]!;
    const got = path[i]!;
    if (!want.startsWith(':')) {
      if (want !== got) return undefined;
      continue;
    }
    // A pattern compared with a pattern (shadowing): a parameter may match anything.
    if (got === '') return undefined;
    const value = decodeSegment(got);
    if (value === undefined) undecodable = true;
    else (params ??= {})[want.slice(1)] = value;
  }
  return undecodable ? null : (params ?? {});
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
  const { routes, literals, unknown } = dataRoutes(services);
  const direct = new DirectRoutes(featureRoutes);
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
    const found = direct.find(req.method, path);
    if (found) {
      if (metered) noteRoute(res, found.label);
      const apiReq = nodeRequest(req, res, url, found.params, bodyLimit);
      if ('handler' in found.target) run(found.target.handler, apiReq, res, log);
      else {
        // A streamed response writes its own head: the request id goes on the response first.
        if (!cors) res.setHeader('x-request-id', requestIdOf(req)!);
        runStream(found.target.stream, apiReq, req, res, log);
      }
      return;
    }
    if (!cors) res.setHeader('x-request-id', requestIdOf(req)!);
    beforeExpress?.(res);
    app(req, res);
  };
}
