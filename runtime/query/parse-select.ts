/**
 * `select=a,b:alias,relation(c,d),relation:alias(*)`, and a to-many embed's own filter, order and
 * page after a `;`: `orders(id,total;status=equals.open;sort=-total;limit=5)` (docs/api.md §5.7;
 * limits: embeds nest at most 3 levels and at most 10 appear in one select).
 */
import { LIMITS, RESERVED_PARAMETERS } from '../model/index.ts';
import { canReadField, followable, QueryError } from './access.ts';
import type { Catalog, CatalogTable } from './catalog.ts';
import { and, type Access, type Condition, type OrderTerm, type SelectItem } from './description.ts';
import { parseFilterParam, splitTopLevel, type FilterContext } from './parse-filter.ts';
import { parseSort } from './parse-sort.ts';

export const MAX_EMBED_DEPTH = LIMITS.maxEmbedDepth;
export const MAX_EMBEDS = LIMITS.maxEmbeds;
/** An embed's offset goes as far as a page's (docs/api.md §7). */
export const MAX_EMBED_OFFSET = 100_000_000;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface SelectNode {
  field: string;
  alias?: string;
  children?: SelectNode[];
  /** The `name=value` terms after the embed's field list, in order (text form only). */
  arguments?: [string, string][];
}

/** What an embed's own filter, order and page resolve to (to-many embeds only). */
export interface EmbedArguments {
  where?: Condition;
  orderBy?: OrderTerm[];
  limit?: number;
  offset?: number;
}

/**
 * Reads a node's embed arguments against the related table (`ctx.table`); `at` names the node: the
 * answer's key path (`buyer.orders`) and its JSON path in a body (`select[1].children[0]`).
 */
export type EmbedArgumentsReader<N> = (
  node: N,
  ctx: FilterContext,
  at: { path: string; parameter: string },
) => EmbedArguments | undefined;

/**
 * Depth and count of embeds in one linear pass, outside quotes. Parentheses after an embed's `;`
 * (filter groups, `in` lists) are not embeds: an embed's arguments hold none.
 */
function embedParentheses(input: string): { depth: number; opened: number } {
  let depth = 0;
  let deepest = 0;
  let opened = 0;
  let quoted = false;
  let inArguments = false;
  let argumentDepth = 0;
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '(') {
      if (inArguments) argumentDepth++;
      else {
        opened++;
        if (++depth > deepest) deepest = depth;
      }
    } else if (c === ')') {
      if (argumentDepth > 0) argumentDepth--;
      else {
        depth--;
        inArguments = false;
      }
    } else if (c === ';' && depth > 0) inArguments = true;
  }
  return { depth: deepest, opened };
}

/**
 * Parses the text form into nodes (no model checks yet). Depth and count are checked on the raw
 * text first, so a select nested thousands deep is refused in one linear pass.
 */
export function parseSelectText(text: string, parameter = 'select'): SelectNode[] {
  const { depth, opened } = embedParentheses(text);
  if (depth > MAX_EMBED_DEPTH)
    throw new QueryError(parameter, `embedded relations nest at most ${MAX_EMBED_DEPTH} levels`);
  if (opened > MAX_EMBEDS) throw new QueryError(parameter, `at most ${MAX_EMBEDS} embedded relations per select`);
  return parseLevel(text, parameter);
}

function parseLevel(text: string, parameter: string): SelectNode[] {
  if (text.trim() === '') throw new QueryError(parameter, 'select needs at least one field');
  return splitTopLevel(text, parameter).map((raw) => {
    const item = raw.trim();
    const open = item.indexOf('(');
    const head = open === -1 ? item : item.slice(0, open);
    if (open !== -1 && !item.endsWith(')')) throw new QueryError(parameter, `"${item}" must end with ")"`);
    if (head.includes(';'))
      throw new QueryError(
        parameter,
        `"${head}": filters, sort and limit go inside an embed's parentheses, after its fields: relation(a,b;limit=5)`,
      );
    const [field, alias, extra] = head.split(':');
    if (extra !== undefined || field === undefined)
      throw new QueryError(parameter, `"${head}" must be <field> or <field>:<alias>`);
    const node: SelectNode = { field };
    if (alias !== undefined) node.alias = alias;
    if (open !== -1) {
      const [fields, ...terms] = splitTopLevel(item.slice(open + 1, -1), parameter, ';');
      node.children = parseLevel(fields!, parameter);
      if (terms.length) node.arguments = terms.map((term) => argumentTerm(term, head, parameter));
    }
    return node;
  });
}

function argumentTerm(term: string, head: string, parameter: string): [string, string] {
  const eq = term.indexOf('=');
  if (eq <= 0)
    throw new QueryError(
      parameter,
      `in ${head}(...), write <filter>=<operator>.<value>, sort=, limit= or offset= after ";", not "${term}"`,
    );
  return [term.slice(0, eq).trim(), term.slice(eq + 1)];
}

/** Names that mean what they mean in a query string; a field named so is filtered as col.<name> there too. */
const RESERVED: ReadonlySet<string> = new Set(RESERVED_PARAMETERS.list);

function wholeNumber(name: string, raw: string, min: number, max: number): number {
  if (!/^\d{1,10}$/.test(raw)) throw new QueryError(name, `must be a whole number from ${min} to ${max}`);
  const value = Number(raw);
  if (value > max) throw new QueryError(name, `must be at most ${max}`);
  if (value < min) throw new QueryError(name, `must be at least ${min}`);
  return value;
}

/** The text form's arguments: the terms of a query string (§5.5, §5.6, §5.8) with `;` for `&`. */
function textArguments(
  node: SelectNode,
  ctx: FilterContext,
  at: { path: string; parameter: string },
): EmbedArguments | undefined {
  if (!node.arguments) return undefined;
  const args: EmbedArguments = {};
  const conditions: Condition[] = [];
  for (const [name, value] of node.arguments) {
    try {
      const key = name === 'first' ? 'limit' : name === 'skip' ? 'offset' : name;
      if (key === 'sort' || key === 'limit' || key === 'offset') {
        const member = key === 'sort' ? 'orderBy' : key;
        if (args[member] !== undefined)
          throw new QueryError(
            name,
            key === 'sort' ? 'send sort once' : `send ${key} or ${key === 'limit' ? 'first' : 'skip'} once`,
          );
        if (key === 'sort') args.orderBy = parseSort(ctx, value, name);
        else if (key === 'limit') args.limit = wholeNumber(name, value, 1, LIMITS.maxPageSize);
        else args.offset = wholeNumber(name, value, 0, MAX_EMBED_OFFSET);
      } else if (RESERVED.has(name)) {
        throw new QueryError(name, `not available in an embed (a field named ${name} is filtered as col.${name})`);
      } else {
        conditions.push(parseFilterParam(ctx, name, value));
      }
    } catch (error) {
      if (error instanceof QueryError)
        throw new QueryError(at.parameter, `in ${at.path}(...), ${error.parameter}: ${error.message}`);
      throw error;
    }
  }
  if (conditions.length) args.where = and(...conditions);
  return args;
}

interface NodeShape<N> {
  readonly field: string;
  readonly alias?: string;
  readonly children?: readonly N[];
}

export interface ResolveSelectOptions<N> {
  /** How a node carries its embed arguments; default: the text form's `arguments` terms. */
  readonly arguments?: EmbedArgumentsReader<N>;
  /** The request's condition count (filters of embeds count with the top-level ones). */
  readonly conditions?: { count: number };
}

/**
 * Checks nodes against the model: fields exist, embeds are relations the caller may follow, depth
 * and count limits, embed arguments only on to-many relations. A field the caller may not read is
 * left out silently; a relation it may not follow does not exist for it (docs/permissions.md).
 */
export function resolveSelect<N extends NodeShape<N> = SelectNode>(
  catalog: Catalog,
  table: CatalogTable,
  nodes: readonly N[],
  access: Access,
  parameter = 'select',
  options: ResolveSelectOptions<N> = {},
): SelectItem[] {
  let embeds = 0;
  const read = options.arguments ?? (textArguments as unknown as EmbedArgumentsReader<N>);
  // Errors of the arguments name their node by JSON path where a reader says how nodes are held (a body).
  const located = options.arguments !== undefined;
  const counter = options.conditions ?? { count: 0 };
  const walk = (t: CatalogTable, list: readonly N[], depth: number, path: string, at: string): SelectItem[] => {
    const items: SelectItem[] = [];
    const aliases = new Set<string>();
    list.forEach((node, i) => {
      if (node.field === '*' && !node.children) {
        if (node.alias !== undefined) throw new QueryError(parameter, '* takes no alias');
        for (const f of t.spec.fields) {
          if (aliases.has(f.name) || !canReadField(access, t, f.name)) continue;
          aliases.add(f.name);
          items.push({ kind: 'field', field: f.name, alias: f.name });
        }
        return;
      }
      if (!NAME.test(node.field)) throw new QueryError(parameter, `"${node.field}" is not a field name`);
      const alias = node.alias ?? node.field;
      if (!NAME.test(alias) || alias.length > 63)
        throw new QueryError(parameter, `"${alias}" is not a valid alias (letters, digits, _)`);
      if (aliases.has(alias)) throw new QueryError(parameter, `"${alias}" appears twice in one select`);
      aliases.add(alias);
      if (node.children) {
        const relation = followable(access, catalog, t, node.field);
        if (!relation) throw new QueryError(parameter, `${t.spec.name} has no relation "${node.field}"`);
        if (depth + 1 > MAX_EMBED_DEPTH)
          throw new QueryError(parameter, `embedded relations nest at most ${MAX_EMBED_DEPTH} levels`);
        if (++embeds > MAX_EMBEDS)
          throw new QueryError(parameter, `at most ${MAX_EMBEDS} embedded relations per select`);
        const target = catalog.require(relation.target);
        const here = { path: path ? `${path}.${alias}` : alias, parameter: located ? `${at}[${i}]` : parameter };
        const ctx: FilterContext = { catalog, table: target, access, count: counter.count };
        const args = read(node, ctx, here);
        counter.count = ctx.count;
        const given = args && Object.entries(args).filter(([, v]) => v !== undefined);
        if (given?.length && relation.kind === 'one') {
          throw new QueryError(
            here.parameter,
            `${t.spec.name}.${node.field} is a to-one relation: filter, order and limit apply to to-many embeds`,
          );
        }
        const children = walk(target, node.children, depth + 1, here.path, `${at}[${i}].children`);
        items.push({ kind: 'embed', relation: node.field, alias, items: children, ...Object.fromEntries(given ?? []) });
      } else {
        if (!t.fields.has(node.field)) {
          const hint = followable(access, catalog, t, node.field) ? `; embed it as ${node.field}(...)` : '';
          throw new QueryError(parameter, `${t.spec.name} has no field "${node.field}"${hint}`);
        }
        if (canReadField(access, t, node.field)) items.push({ kind: 'field', field: node.field, alias });
      }
    });
    return items;
  };
  return walk(table, nodes, 0, '', parameter);
}
