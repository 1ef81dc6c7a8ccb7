/**
 * The GraphQL playground (docs/graphql.md "Playground"): GraphiQL 3 from the graphiql package with
 * the React 18 builds it runs on, served by this server from node_modules so it works offline and
 * sends nothing to another origin. Every URL in the page is relative, so it keeps working when a
 * proxy mounts the service under a prefix. The page has no inline script, which lets it carry a
 * strict Content-Security-Policy.
 *
 * It answers at GRAPHQL_PLAYGROUND_PATH, and at GRAPHQL_PATH itself for a browser opening it (a GET
 * whose Accept prefers text/html); every other request there is GraphQL over HTTP.
 */
import { randomBytes } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { GRAPHQL_PATH, GRAPHQL_PLAYGROUND_PATH } from '../model/index.ts';
import { CSS, escapeHtml, JS, PageAssets, packageFile, redirectTrailingSlash, sendPage } from './page-assets.ts';

/**
 * Starts GraphiQL against the endpoint, with the headers every request of this API needs already in
 * its Headers editor: the project id and environment from the server's config, and a placeholder
 * for the credential. GraphiQL keeps what the reader writes there (localStorage), as the reference
 * page keeps its credentials, so a reload does not ask again.
 */
const INIT_SCRIPT = `'use strict';
(function () {
  var root = document.getElementById('graphiql');
  var data = root.dataset;
  // The nonce the CSP lets <style> elements in with; GraphiQL's bundle (react-remove-scroll-bar) reads this name.
  window.__webpack_nonce__ = data.styleNonce;
  var headers = {};
  if (data.projectId) headers['X-Project-Id'] = data.projectId;
  if (data.environment) headers.environment = data.environment;
  headers.Authorization = 'Bearer <API-key-or-user-access-token>';
  var fetcher = GraphiQL.createFetcher({ url: new URL(data.endpoint, document.baseURI).href });
  root.textContent = '';
  ReactDOM.createRoot(root).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultHeaders: JSON.stringify(headers, null, 2),
      shouldPersistHeaders: true,
      defaultEditorToolsVisibility: 'headers',
      defaultQuery:
        '# Write your credential into Authorization under Headers below, then press\\n' +
        '# "Re-fetch GraphQL schema" (the arrows at the left) to load the docs explorer.\\n' +
        '# Run a query with Ctrl-Enter.\\n\\n'
    })
  );
})();
`;

const PAGE_CSS = `html, body, #graphiql { height: 100%; margin: 0; }
body { font-family: system-ui, sans-serif; }
`;

/**
 * No inline script, no other origin. GraphiQL's fonts and icons are data: URIs in its CSS. Its
 * dialogs (settings, shortcuts) lock page scrolling with a <style> element they add
 * (react-remove-scroll-bar): that element carries the response's nonce, so no other inline style
 * is allowed.
 */
export function playgroundCsp(styleNonce: string): string {
  return (
    `default-src 'none'; script-src 'self'; style-src 'self' 'nonce-${styleNonce}'; img-src 'self' data:; ` +
    "font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
  );
}

function loadAssets() {
  return {
    'react.production.min.js': packageFile('react', 'umd/react.production.min.js', JS),
    'react-dom.production.min.js': packageFile('react-dom', 'umd/react-dom.production.min.js', JS),
    'graphiql.min.js': packageFile('graphiql', 'graphiql.min.js', JS),
    'graphiql.min.css': packageFile('graphiql', 'graphiql.min.css', CSS),
    'playground.css': { body: Buffer.from(PAGE_CSS), type: CSS },
    'playground.js': { body: Buffer.from(INIT_SCRIPT), type: JS },
  };
}

/**
 * Whether a request to the endpoint is a browser opening it: its Accept lists text/html ahead of
 * the JSON types GraphQL answers in (a navigation's Accept lists no JSON type; a GraphQL client's
 * lists no text/html, and `*` ranges count for neither).
 */
export function prefersHtml(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  let html = 0;
  let json = 0;
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.split(';').map((p) => p.trim().toLowerCase());
    const qParam = params.find((p) => p.startsWith('q='));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    if (!(q > 0)) continue;
    if (range === 'text/html') html = Math.max(html, q);
    else if (range === 'application/json' || range === 'application/graphql-response+json') json = Math.max(json, q);
  }
  return html > json;
}

export interface PlaygroundOptions {
  /** Prefilled as X-Project-Id. */
  readonly projectId: string;
  /** Prefilled as the environment header. */
  readonly environment: string;
}

/** Handlers for the page at GRAPHQL_PLAYGROUND_PATH (and GRAPHQL_PATH) and its files below the former. */
export function playgroundHandlers(options: PlaygroundOptions) {
  const assets = new PageAssets(loadAssets);
  const fileDir = GRAPHQL_PLAYGROUND_PATH.slice(GRAPHQL_PATH.length + 1);
  const endpointName = GRAPHQL_PATH.slice(GRAPHQL_PATH.lastIndexOf('/') + 1);
  /** Relative URLs from each address the page has: `<base>/graphql` and `<base>/graphql/_playground`. */
  const addresses = {
    endpoint: { endpoint: endpointName, files: `${endpointName}/${fileDir}/` },
    playground: { endpoint: `../${endpointName}`, files: `${fileDir}/` },
  };

  function send(res: Response, at: keyof typeof addresses): void {
    const nonce = randomBytes(16).toString('base64');
    sendPage(res, render(addresses[at], nonce), playgroundCsp(nonce));
  }

  function render({ endpoint, files }: { endpoint: string; files: string }, styleNonce: string): string {
    const href = (name: string) => escapeHtml(assets.href(files, name));
    const projectId = escapeHtml(options.projectId);
    return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${projectId} GraphQL playground</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${href('graphiql.min.css')}">
<link rel="stylesheet" href="${href('playground.css')}">
</head><body>
<div id="graphiql" data-endpoint="${escapeHtml(endpoint)}" data-project-id="${projectId}" data-environment="${escapeHtml(options.environment)}" data-style-nonce="${styleNonce}">Loading the GraphQL playground…</div>
<noscript>The playground needs JavaScript. Without it, send GraphQL over HTTP to ${GRAPHQL_PATH} from any client.</noscript>
<script src="${href('react.production.min.js')}"></script>
<script src="${href('react-dom.production.min.js')}"></script>
<script src="${href('graphiql.min.js')}"></script>
<script src="${href('playground.js')}"></script>
</body></html>
`;
  }

  /** GRAPHQL_PLAYGROUND_PATH: the page; with a trailing slash, a redirect to it. */
  function page(req: Request, res: Response): void {
    if (redirectTrailingSlash(req, res, GRAPHQL_PLAYGROUND_PATH)) return;
    send(res, 'playground');
  }

  /** GET GRAPHQL_PATH: the page for a browser opening it; anything else goes on to the GraphQL handler. */
  function negotiate(req: Request, res: Response, next: NextFunction): void {
    // On both answers (writeHead keeps it): GraphQL's content type depends on Accept too.
    res.vary('accept');
    if (!prefersHtml(req.headers.accept)) {
      next();
      return;
    }
    if (redirectTrailingSlash(req, res, GRAPHQL_PATH)) return;
    send(res, 'endpoint');
  }

  return { page, negotiate, asset: assets.serve };
}
