/**
 * The data routes of the generated table (docs/api.md §1): `<prefix>/<table>`,
 * `<prefix>/<table>/<literal>` (`_bulk`, `_query`, …) and `<prefix>/<table>/:id`. They are matched
 * on every data request, so by index arithmetic and nested maps (method → table → shape), with no
 * split and no key string built per request. Segments are compared decoded (a table name spelled
 * with percent-escapes is that table), `<table>/` is `<table>`, and a literal that any table
 * serves is never taken for an id. Params carry the table as `table` (the data handlers read it).
 */
import { decodeSegment, PARAMETER, type RouteMatch, type Router } from './router.ts';

interface TableRoute<H> {
  readonly handler: H;
  readonly pattern: string;
  /** The parameter's name, for the `:id` shape. */
  readonly param?: string;
}

/** The shape of an id segment in the maps: literals never start with ':'. */
const PARAM_SHAPE = ':';

export class TableRouter<H> implements Router<H> {
  private readonly byMethod = new Map<string, Map<string, Map<string, TableRoute<H>>>>();
  private readonly literals = new Set<string>();

  /** `prefix`: the path every route is under, without a trailing slash (e.g. `/gw/api/rest`). */
  constructor(private readonly prefix: string) {}

  add(method: string, pattern: string, handler: H): void {
    const [table = '', sub = '', ...more] = pattern.startsWith(`${this.prefix}/`)
      ? pattern.slice(this.prefix.length + 1).split('/')
      : [];
    const param = PARAMETER.test(sub) ? sub.slice(1) : undefined;
    if (table === '' || table.startsWith(':') || more.length > 0 || (sub.startsWith(':') && !param))
      throw new Error(`${pattern} is not a data route (${this.prefix}/<table>[/<literal> or /:param])`);
    if (sub !== '' && !param) this.literals.add(sub);
    let byTable = this.byMethod.get(method);
    if (!byTable) this.byMethod.set(method, (byTable = new Map()));
    let byShape = byTable.get(table);
    if (!byShape) byTable.set(table, (byShape = new Map()));
    byShape.set(param ? PARAM_SHAPE : sub, { handler, pattern, param });
  }

  match(method: string, path: string): RouteMatch<H> | undefined {
    const { prefix } = this;
    if (!path.startsWith(prefix) || path.charCodeAt(prefix.length) !== 47 /* '/' */) return undefined;
    const rest = path.slice(prefix.length + 1);
    const slash = rest.indexOf('/');
    const table = decodeSegment(slash === -1 ? rest : rest.slice(0, slash));
    if (!table) return undefined;
    const second = slash === -1 ? '' : rest.slice(slash + 1);
    let shape = '';
    let value: string | undefined;
    if (second !== '') {
      // `<table>/<sub>/<more>` is no data route; nor is a sub that is not valid percent-encoding.
      const sub = second.includes('/') ? undefined : decodeSegment(second);
      if (sub === undefined) return undefined;
      if (this.literals.has(sub)) shape = sub;
      else [shape, value] = [PARAM_SHAPE, sub];
    }
    const route = this.byMethod.get(method)?.get(table)?.get(shape);
    if (route)
      return {
        handler: route.handler,
        params: value === undefined ? { table } : { table, [route.param!]: value },
        pattern: route.pattern,
      };
    const allowed = [...this.byMethod].filter(([, byTable]) => byTable.get(table)?.has(shape)).map(([m]) => m);
    return allowed.length > 0 ? { allowed: allowed.sort() } : undefined;
  }
}
