/**
 * Filters of the query string (docs/api.md §5.5):
 *   ?<field>=<op>.<value>   ?<relation>.<field>=<op>.<value>   ?col.<reserved>=<op>.<value>
 *   ?or=(a.equals.1,and(b.gt.2,c.is_empty.true))   ?and=(...)   ?not=(...)
 * Values may be double-quoted to hold commas, dots or parentheses ("a,b"); inside quotes \" and
 * \\ escape. Unquoted `null` is SQL NULL for equals / not_equals.
 */
import { LIMITS, OPERATOR_DEFINITIONS, takesList, type FieldSpec } from '../model/index.ts';
import { canReadField, followable, QueryError } from './access.ts';
import type { Catalog, CatalogTable } from './catalog.ts';
import type { Access, Condition, Operator } from './description.ts';
import { FilterValueError, isOperator, operandValue } from './operands.ts';

/** Deepest nesting of and/or/not groups (README "Limits"). */
export const MAX_GROUP_DEPTH = LIMITS.maxGroupDepth;
/** Most conditions in one request, counting every group member. */
export const MAX_CONDITIONS = 100;

interface Token {
  text: string;
  quoted: boolean;
}

/**
 * The deepest nesting of parentheses outside quotes, and how many open, in one linear pass: lets
 * the recursive parsers refuse a too-deep text before they split it level by level (which costs
 * depth × length and, thousands of levels deep, the stack).
 */
export function parentheses(input: string): { depth: number; opened: number } {
  let depth = 0;
  let deepest = 0;
  let opened = 0;
  let quoted = false;
  for (let i = 0; i < input.length; i++) {
    const c = input.charCodeAt(i);
    if (quoted) {
      if (c === 0x5c) i++;
      else if (c === 0x22) quoted = false;
    } else if (c === 0x22) quoted = true;
    else if (c === 0x28) {
      opened++;
      if (++depth > deepest) deepest = depth;
    } else if (c === 0x29) depth--;
  }
  return { depth: deepest, opened };
}

/** Splits `a,b,"c,d"` at top-level commas (or `separator`), outside quotes and parentheses. */
export function splitTopLevel(input: string, parameter: string, separator = ','): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '(') depth++;
    else if (c === ')') {
      depth--;
      if (depth < 0) throw new QueryError(parameter, 'unbalanced parentheses');
    } else if (c === separator && depth === 0) {
      parts.push(input.slice(start, i));
      start = i + 1;
    }
  }
  if (quoted) throw new QueryError(parameter, 'a quoted value is not closed');
  if (depth !== 0) throw new QueryError(parameter, 'unbalanced parentheses');
  parts.push(input.slice(start));
  return parts;
}

function unquote(raw: string, parameter: string): Token {
  if (raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"')) {
    return { text: raw.slice(1, -1).replace(/\\(.)/g, '$1'), quoted: true };
  }
  if (raw.includes('"')) throw new QueryError(parameter, `quote the whole value: "${raw.replace(/"/g, '')}"`);
  return { text: raw, quoted: false };
}

function tokenValue(token: Token): unknown {
  return !token.quoted && token.text === 'null' ? null : token.text;
}

/** `(a,b,c)` → items; `a,b` (between's short form) also accepted where `bare` is true. */
function listItems(raw: string, parameter: string, bare: boolean): unknown[] | undefined {
  if (raw.startsWith('(') && raw.endsWith(')'))
    return splitTopLevel(raw.slice(1, -1), parameter).map((p) => tokenValue(unquote(p, parameter)));
  if (bare) return splitTopLevel(raw, parameter).map((p) => tokenValue(unquote(p, parameter)));
  return undefined;
}

/** What a front end parses against: the table, the model and the caller's access, and a condition count. */
export interface FilterContext {
  readonly catalog: Catalog;
  readonly table: CatalogTable;
  /** Fields and relations the caller may not read do not exist for it (docs/permissions.md). */
  readonly access: Access;
  count: number;
}

/** Resolves `rel.rel.field` (or `col.<name>`) against the model; returns the path and the field. */
export function resolvePath(ctx: FilterContext, segments: string[], parameter: string) {
  let table = ctx.table;
  const path: string[] = [];
  let i = 0;
  for (; i < segments.length - 1; i++) {
    const seg = segments[i]!;
    if (seg === 'col') {
      i++;
      break;
    }
    const relation = followable(ctx.access, ctx.catalog, table, seg);
    if (!relation) break;
    path.push(seg);
    table = ctx.catalog.require(relation.target);
    if (path.length > 3) throw new QueryError(parameter, 'relation filters go at most 3 relations deep');
  }
  const name = segments[i];
  const field = name === undefined ? undefined : table.fields.get(name);
  if (!field || !canReadField(ctx.access, table, field.name)) {
    throw new QueryError(parameter, `${table.spec.name} has no field "${name ?? ''}"`);
  }
  path.push(field.name);
  return { path, field, rest: segments.slice(i + 1) };
}

/** The condition `<resolved field> <op> <value text>`; `bareList` accepts `a,b` without parentheses. */
function buildCompare(
  ctx: FilterContext,
  resolved: { path: string[]; field: FieldSpec },
  op: string | undefined,
  valueText: string,
  parameter: string,
  bareList: boolean,
): Condition {
  if (++ctx.count > MAX_CONDITIONS) throw new QueryError(parameter, `at most ${MAX_CONDITIONS} conditions per request`);
  if (op === undefined)
    throw new QueryError(parameter, `write <field>.<operator>.<value>, e.g. ${resolved.field.name}.equals.x`);
  if (!isOperator(op)) throw new QueryError(parameter, `unknown operator "${op}"`);
  const operator: Operator = op;
  try {
    // A pair (`between.<low>,<high>`) needs no parentheses anywhere; a list only at the top level.
    const list = takesList(operator)
      ? listItems(valueText, parameter, OPERATOR_DEFINITIONS[operator].operand.kind === 'pair' || bareList)
      : undefined;
    const single = list === undefined ? tokenValue(unquote(valueText, parameter)) : undefined;
    return {
      kind: 'compare',
      path: resolved.path,
      op: operator,
      value: operandValue(resolved.field, operator, single, list),
    };
  } catch (error) {
    if (error instanceof FilterValueError) throw new QueryError(parameter, error.message);
    throw error;
  }
}

/** `path.op.value` inside a group: what follows the field is the operator, then the value. */
function groupCondition(ctx: FilterContext, item: string, parameter: string): Condition {
  const { rest, ...resolved } = resolvePath(ctx, item.split('.'), parameter);
  return buildCompare(ctx, resolved, rest[0], rest.slice(1).join('.'), parameter, false);
}

export function parseGroup(
  ctx: FilterContext,
  kind: 'and' | 'or' | 'not',
  body: string,
  parameter: string,
  depth: number,
): Condition {
  if (depth > MAX_GROUP_DEPTH) throw new QueryError(parameter, `groups nest at most ${MAX_GROUP_DEPTH} levels`);
  if (!body.startsWith('(') || !body.endsWith(')'))
    throw new QueryError(parameter, `write ${kind}=(<condition>,<condition>...)`);
  const inner = body.slice(1, -1);
  if (inner.trim() === '') throw new QueryError(parameter, `${kind}(...) needs at least one condition`);
  const items = splitTopLevel(inner, parameter).map((item): Condition => {
    const m = /^(and|or|not)(\(.*\))$/s.exec(item);
    if (m) return parseGroup(ctx, m[1] as 'and' | 'or' | 'not', m[2]!, parameter, depth + 1);
    return groupCondition(ctx, item, parameter);
  });
  if (kind === 'not') return { kind: 'not', item: items.length === 1 ? items[0]! : { kind: 'and', items } };
  return { kind, items };
}

/** A top-level `name=value` filter parameter. */
export function parseFilterParam(ctx: FilterContext, name: string, value: string): Condition {
  if (name === 'or' || name === 'and' || name === 'not') {
    // Each group adds one level; the innermost may hold an in/between list, one more.
    if (parentheses(value).depth > MAX_GROUP_DEPTH + 1)
      throw new QueryError(name, `groups nest at most ${MAX_GROUP_DEPTH} levels`);
    return parseGroup(ctx, name, value, name, 1);
  }
  const { rest, ...resolved } = resolvePath(ctx, name.split('.'), name);
  if (rest.length > 0) throw new QueryError(name, `${resolved.field.name} is a field, not a relation`);
  const dot = value.indexOf('.');
  if (dot <= 0) throw new QueryError(name, `write ${name}=<operator>.<value>, e.g. ${name}=equals.${value || 'x'}`);
  return buildCompare(ctx, resolved, value.slice(0, dot), value.slice(dot + 1), name, true);
}
