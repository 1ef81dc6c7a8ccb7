/**
 * The API reference page (`GET /gw/api/rest/_docs`): Swagger UI from the swagger-ui-dist package,
 * served by this server from node_modules so it works offline and sends nothing to another origin.
 * Every URL in the page is relative, so it keeps working when a proxy mounts the service under a
 * prefix. The page has no inline script, which lets it carry a strict Content-Security-Policy.
 */
import type { Request, Response } from 'express';
import { CSS, escapeHtml, JS, PageAssets, packageFile, PNG, redirectTrailingSlash, sendPage } from './page-assets.ts';

/** The files of swagger-ui-dist the page uses; nothing else in the package is served. */
const PACKAGE_FILES: Readonly<Record<string, string>> = {
  'swagger-ui-bundle.js': JS,
  'swagger-ui.css': CSS,
  'index.css': CSS,
  'favicon-32x32.png': PNG,
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

function loadAssets() {
  const files = Object.fromEntries(
    Object.entries(PACKAGE_FILES).map(([name, type]) => [name, packageFile('swagger-ui-dist', name, type)]),
  );
  return { ...files, 'init.js': { body: Buffer.from(INIT_SCRIPT), type: JS } };
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
  // Read on the first request: a server whose docs nobody opens never reads the 1.7 MB bundle.
  const assets = new PageAssets(loadAssets);
  let html: string | undefined;
  const pagePath = `${options.basePath}/_docs`;
  const serviceRoot = '../'.repeat(options.basePath.split('/').length - 1);

  function renderPage(): string {
    const href = (name: string) => assets.href('_docs/', name);
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
    if (redirectTrailingSlash(req, res, pagePath)) return;
    sendPage(res, (html ??= renderPage()), DOCS_CSP);
  }

  return { page, asset: assets.serve };
}
