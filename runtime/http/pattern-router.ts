/**
 * Routes matched as Express matches them, in registration order: literal segments compared as
 * they are written in the path, `:name` parameters decoded. A route at a literal path that no
 * route added before it could match is found by one map lookup. A pattern this matcher does not
 * read (`*`, `{…}`, a parameter inside a segment) is opaque: from there on match() answers
 * undefined, and so it does for a parameter that is not valid percent-encoding, leaving both to
 * Express (runtime/server/app.ts). No trailing slash and no HEAD-as-GET: those are Express's too.
 */
import { decodeSegment, PARAMETER, type RouteMatch, type Router } from './router.ts';

interface PatternRoute<H> {
  readonly pattern: string;
  /** The pattern split at '/': literal segments, and `:name` for a parameter. */
  readonly segments: readonly string[];
  readonly opaque: boolean;
  readonly handler: H;
}

export class PatternRouter<H> implements Router<H> {
  /** `<METHOD> <path>` of routes at a literal path that no route added before could match. */
  private readonly literal = new Map<string, PatternRoute<H>>();
  private readonly byMethod = new Map<string, PatternRoute<H>[]>();

  add(method: string, pattern: string, handler: H): void {
    const segments = pattern.split('/');
    const opaque = segments.some((s) => /[:*?(){}]/.test(s) && !PARAMETER.test(s));
    let list = this.byMethod.get(method);
    if (!list) this.byMethod.set(method, (list = []));
    const literalPath = !opaque && segments.every((s) => !s.startsWith(':'));
    const shadowed = list.some((earlier) => earlier.opaque || matchSegments(earlier.segments, segments) !== undefined);
    const route = { pattern, segments, opaque, handler };
    const key = `${method} ${pattern}`;
    if (literalPath && !shadowed && !this.literal.has(key)) this.literal.set(key, route);
    list.push(route);
  }

  match(method: string, path: string): RouteMatch<H> | undefined {
    const literal = this.literal.get(`${method} ${path}`);
    if (literal) return { handler: literal.handler, params: {}, pattern: literal.pattern };
    const segments = path.split('/');
    const found = this.first(this.byMethod.get(method), segments);
    if (found !== 'none') return found;
    const allowed = [...this.byMethod]
      .filter(([other, routes]) => other !== method && isFound(this.first(routes, segments)))
      .map(([other]) => other);
    return allowed.length > 0 ? { allowed: allowed.sort() } : undefined;
  }

  /** The first of `routes` matching `segments`; undefined when an opaque or undecodable route comes first. */
  private first(
    routes: readonly PatternRoute<H>[] | undefined,
    segments: readonly string[],
  ): RouteMatch<H> | undefined | 'none' {
    for (const route of routes ?? []) {
      if (route.opaque) return undefined;
      const params = matchSegments(route.segments, segments);
      if (params === undefined) continue;
      if (params === null) return undefined;
      return { handler: route.handler, params, pattern: route.pattern };
    }
    return 'none';
  }
}

function isFound<H>(found: RouteMatch<H> | undefined | 'none'): boolean {
  return found !== undefined && found !== 'none';
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
