/**
 * The API reference page (`GET /gw/api/rest/_docs`): Swagger UI from the swagger-ui-dist package,
 * served by this server from node_modules so it works offline and sends nothing to another origin.
 * Every URL in the page is relative, so it keeps working when a proxy mounts the service under a
 * prefix. The page has no inline script, which lets it carry a strict Content-Security-Policy.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import type { NextFunction, Request, Response } from 'express';

const gzip = promisify(gzipCallback);

/** The files of swagger-ui-dist the page uses; nothing else in the package is served. */
const PACKAGE_FILES: Readonly<Record<string, string>> = {
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui.css': 'text/css; charset=utf-8',
  'index.css': 'text/css; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

/**
 * Starts Swagger UI. It fetches the document itself to resolve `servers`: svcgen's are relative to
 * the service root ("/"), which behind a prefix-mounting proxy is where this page is mounted, not the
 * host's root (Swagger UI would resolve "/" against the host). The page is served by the project's
 * own server, which knows the project id: it fills in the X-Project-Id scheme, so a reader only
 * pastes a credential into Authorize.
 */
const INIT_SCRIPT = `'use strict';
(function () {
  var root = document.getElementById('swagger-ui');
  var documentUrl = new URL(root.dataset.openapi, document.baseURI).href;
  var serviceRoot = new URL(root.dataset.serviceRoot, document.baseURI).href;
  var projectId = root.dataset.projectId;
  function resolveServer(url) {
    try {
      if (url.charAt(0) === '/' && url.charAt(1) !== '/') return new URL(url.slice(1), serviceRoot).href;
      return new URL(url, documentUrl).href;
    } catch (e) {
      return url; // a templated URL ({variables}) is left to Swagger UI
    }
  }
  function projectScheme(spec) {
    var schemes = (spec.components && spec.components.securitySchemes) || {};
    return Object.keys(schemes).filter(function (name) {
      var s = schemes[name];
      return s.type === 'apiKey' && s.in === 'header' && String(s.name).toLowerCase() === 'x-project-id';
    })[0];
  }
  fetch(documentUrl, { headers: { accept: 'application/json' } })
    .then(function (res) {
      if (!res.ok) throw new Error('HTTP ' + res.status);
      return res.json();
    })
    .then(function (spec) {
      var servers = spec.servers && spec.servers.length ? spec.servers : [{ url: '/' }];
      spec.servers = servers.map(function (s) { return Object.assign({}, s, { url: resolveServer(s.url) }); });
      var scheme = projectScheme(spec);
      window.ui = SwaggerUIBundle({
        spec: spec,
        dom_id: '#swagger-ui',
        presets: [SwaggerUIBundle.presets.apis],
        layout: 'BaseLayout',
        deepLinking: true,
        persistAuthorization: true,
        displayRequestDuration: true,
        filter: true,
        validatorUrl: null,
        onComplete: function () {
          if (scheme && projectId) window.ui.preauthorizeApiKey(scheme, projectId);
        }
      });
    })
    .catch(function (error) {
      root.textContent = 'Could not load the OpenAPI document at ' + documentUrl + ': ' + error.message;
    });
})();
`;

/** No inline script or style, no other origin; Swagger UI's icons are data: URIs in its CSS. */
export const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

interface Asset {
  body: Buffer;
  type: string;
  /** Short content hash in the page's asset URLs: a changed file gets a new URL, so a long cache is safe. */
  version: string;
  gzipped?: Promise<Buffer>;
}

function loadAssets(): Map<string, Asset> {
  const dir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  const assets = new Map<string, Asset>();
  const add = (name: string, body: Buffer, type: string) =>
    assets.set(name, { body, type, version: createHash('sha256').update(body).digest('hex').slice(0, 12) });
  for (const [name, type] of Object.entries(PACKAGE_FILES)) add(name, readFileSync(path.join(dir, name)), type);
  add('init.js', Buffer.from(INIT_SCRIPT), 'text/javascript; charset=utf-8');
  return assets;
}

/** The `v` query parameter (the app turns Express's query parser off). */
function versionOf(req: Request): string | null {
  const q = req.originalUrl.indexOf('?');
  return q === -1 ? null : new URLSearchParams(req.originalUrl.slice(q + 1)).get('v');
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function acceptsGzip(req: Request): boolean {
  const header = req.headers['accept-encoding'];
  if (typeof header !== 'string') return false;
  return header.split(',').some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    if (coding !== 'gzip' && coding !== '*') return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/**
 * Handlers for the page at `<basePath>/_docs` and its files at `<basePath>/_docs/<file>`. The
 * canonical address has no trailing slash; `_docs/` redirects to it.
 */
export function docsHandlers(options: {
  basePath: string;
  openapi: unknown /** Filled in as X-Project-Id. */;
  projectId?: string;
}) {
  let assets: Map<string, Asset> | undefined;
  let html: string | undefined;
  // Loaded on the first request: a server whose docs nobody opens never reads the 1.7 MB bundle.
  const getAssets = () => (assets ??= loadAssets());
  const pagePath = `${options.basePath}/_docs`;
  const serviceRoot = '../'.repeat(options.basePath.split('/').length - 1);

  function renderPage(): string {
    const files = getAssets();
    const href = (name: string) => `_docs/${name}?v=${files.get(name)!.version}`;
    const title = escapeHtml((options.openapi as { info?: { title?: string } }).info?.title ?? 'API');
    const projectId = options.projectId ? ` data-project-id="${escapeHtml(options.projectId)}"` : '';
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title} reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/png" href="${href('favicon-32x32.png')}">
<link rel="stylesheet" href="${href('swagger-ui.css')}">
<link rel="stylesheet" href="${href('index.css')}">
</head><body>
<div id="swagger-ui" data-openapi="_openapi" data-service-root="${serviceRoot}"${projectId}></div>
<noscript>The reference page needs JavaScript; the OpenAPI document is at <a href="_openapi">_openapi</a>.</noscript>
<script src="${href('swagger-ui-bundle.js')}"></script>
<script src="${href('init.js')}"></script>
</body></html>
`;
  }

  function page(req: Request, res: Response): void {
    // Express matches `_docs/` here too (non-strict routing); relative URLs in the page need one form.
    if (req.path !== pagePath) {
      const q = req.originalUrl.indexOf('?');
      res.writeHead(308, { location: `../_docs${q === -1 ? '' : req.originalUrl.slice(q)}` }).end();
      return;
    }
    res
      .writeHead(200, {
        'content-type': 'text/html; charset=utf-8',
        'cache-control': 'no-cache',
        'content-security-policy': DOCS_CSP,
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'no-referrer',
      })
      .end((html ??= renderPage()));
  }

  function asset(req: Request, res: Response, next: NextFunction): void {
    const file = getAssets().get(req.params.file as string);
    if (file === undefined) {
      next();
      return;
    }
    const headers: Record<string, string> = {
      'content-type': file.type,
      // Only the URL the page links to is immutable; any other `v` may be an older page's.
      'cache-control': versionOf(req) === file.version ? 'public, max-age=31536000, immutable' : 'no-cache',
      'x-content-type-options': 'nosniff',
    };
    const send = (body: Buffer, more: Record<string, string> = {}) =>
      res.writeHead(200, { ...headers, ...more, 'content-length': String(body.length) }).end(body);
    if (file.type.startsWith('image/')) {
      send(file.body);
      return;
    }
    headers.vary = 'accept-encoding';
    if (!acceptsGzip(req)) {
      send(file.body);
      return;
    }
    file.gzipped ??= gzip(file.body, { level: 9 });
    file.gzipped.then(
      (body) => send(body, { 'content-encoding': 'gzip' }),
      (error: unknown) => {
        file.gzipped = undefined;
        next(error);
      },
    );
  }

  return { page, asset };
}
