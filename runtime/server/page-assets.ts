/**
 * What the browser pages the server serves itself share (the API reference, docs/api.md §9, and the
 * GraphQL playground, docs/graphql.md "Playground"): a fixed set of files read from npm packages,
 * linked by relative, content-versioned URLs, cached for a year at the linked version and sent
 * gzipped; anything not in the set is left to the 404. The pages carry no inline script, so each
 * can carry a strict Content-Security-Policy.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import type { NextFunction, Request, Response } from 'express';

const gzip = promisify(gzipCallback);

export const JS = 'text/javascript; charset=utf-8';
export const CSS = 'text/css; charset=utf-8';
export const PNG = 'image/png';

export interface AssetSource {
  readonly body: Buffer;
  readonly type: string;
}

interface Asset extends AssetSource {
  /** Short content hash in the page's asset URLs: a changed file gets a new URL, so a long cache is safe. */
  readonly version: string;
  gzipped?: Promise<Buffer>;
}

const require = createRequire(import.meta.url);

/** A file of an installed package, e.g. `packageFile('react', 'umd/react.production.min.js', JS)`. */
export function packageFile(pkg: string, file: string, type: string): AssetSource {
  const dir = path.dirname(require.resolve(`${pkg}/package.json`));
  return { body: readFileSync(path.join(dir, file)), type };
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The `v` query parameter (the app turns Express's query parser off). */
function versionOf(req: Request): string | null {
  const q = req.originalUrl.indexOf('?');
  return q === -1 ? null : new URLSearchParams(req.originalUrl.slice(q + 1)).get('v');
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
 * The files of one page, by name. `load` runs on the first request that needs them: a server whose
 * page nobody opens never reads the megabytes of its bundles.
 */
export class PageAssets {
  private assets: Map<string, Asset> | undefined;

  constructor(private readonly load: () => Record<string, AssetSource>) {}

  private all(): Map<string, Asset> {
    if (this.assets === undefined) {
      this.assets = new Map();
      for (const [name, source] of Object.entries(this.load())) {
        const version = createHash('sha256').update(source.body).digest('hex').slice(0, 12);
        this.assets.set(name, { ...source, version });
      }
    }
    return this.assets;
  }

  /** The versioned URL of a file, relative to the page: `<dir><name>?v=<hash>`. */
  href(dir: string, name: string): string {
    const asset = this.all().get(name);
    if (asset === undefined) throw new Error(`no page asset named ${name}`);
    return `${dir}${name}?v=${asset.version}`;
  }

  /** Express handler for `<dir>/:file`: a file of the set, or next() (the 404) for any other name. */
  readonly serve = (req: Request, res: Response, next: NextFunction): void => {
    const file = this.all().get(req.params.file as string);
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
  };
}

/** Answers a page: never cached without revalidation, under its CSP, read by nothing but a browser. */
export function sendPage(res: Response, html: string, csp: string): void {
  res
    .writeHead(200, {
      'content-type': 'text/html; charset=utf-8',
      'cache-control': 'no-cache',
      'content-security-policy': csp,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
    })
    .end(html);
}

/**
 * Express matches `<page>/` for `<page>` too (non-strict routing), and relative URLs in a page need
 * one form: redirects the trailing-slash form to the canonical one, keeping the query. Returns
 * whether it answered.
 */
export function redirectTrailingSlash(req: Request, res: Response, pagePath: string): boolean {
  if (req.path === pagePath) return false;
  const q = req.originalUrl.indexOf('?');
  const last = pagePath.slice(pagePath.lastIndexOf('/') + 1);
  res.writeHead(308, { location: `../${last}${q === -1 ? '' : req.originalUrl.slice(q)}` }).end();
  return true;
}
