/**
 * One interface for the HTTP front's route matchers (runtime/server/app.ts): the generated data
 * routes (./table-router.ts) and the features' routes answered outside Express
 * (./pattern-router.ts). test/http/router.unit.test.ts holds both, and Express's own matching, to
 * one table of cases.
 */

/** What a router finds for a request's method and path. */
export type RouteMatch<H> =
  | {
      readonly handler: H;
      /** The path's parameters, decoded as Express decodes them. */
      readonly params: Record<string, string>;
      /** The route's pattern as added: a metrics label that never holds a raw path. */
      readonly pattern: string;
    }
  /** A route's path, but no route of this method: the methods that are (a 405's Allow). */
  | { readonly allowed: readonly string[] };

export interface Router<H> {
  /** `method` upper-case; `pattern` split at '/' into literal segments and `:name` parameters. */
  add(method: string, pattern: string, handler: H): void;
  /** Undefined: this router has no route at `path` (the caller answers 404, or asks another matcher). */
  match(method: string, path: string): RouteMatch<H> | undefined;
}

/** A parameter segment: `:name`, the whole segment (nothing else in it, as Express 5 would read more). */
export const PARAMETER = /^:[A-Za-z_$][\w$]*$/;

/** A path segment's value (decodeURIComponent), undefined when it is not valid percent-encoding. */
export function decodeSegment(segment: string): string | undefined {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
