/**
 * `select=a,b:alias,relation(c,d),relation:alias(*)` (docs/api.md §5.7; limits: embeds nest at
 * most 3 levels and at most 10 appear in one select).
 */
import { LIMITS } from '../model/index.ts';
import { canReadField, followable, QueryError } from './access.ts';
import type { Catalog, CatalogTable } from './catalog.ts';
import type { Access, SelectItem } from './description.ts';
import { parentheses, splitTopLevel } from './parse-filter.ts';

export const MAX_EMBED_DEPTH = LIMITS.maxEmbedDepth;
export const MAX_EMBEDS = LIMITS.maxEmbeds;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface SelectNode {
  field: string;
  alias?: string;
  children?: SelectNode[];
}

/**
 * Parses the text form into nodes (no model checks yet). Depth and count are checked on the raw
 * text first, so a select nested thousands deep is refused in one linear pass.
 */
export function parseSelectText(text: string, parameter = 'select'): SelectNode[] {
  const { depth, opened } = parentheses(text);
  if (depth > MAX_EMBED_DEPTH) throw new QueryError(parameter, `embedded relations nest at most ${MAX_EMBED_DEPTH} levels`);
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
    const [field, alias, extra] = head.split(':');
    if (extra !== undefined || field === undefined) throw new QueryError(parameter, `"${head}" must be <field> or <field>:<alias>`);
    const node: SelectNode = { field };
    if (alias !== undefined) node.alias = alias;
    if (open !== -1) node.children = parseLevel(item.slice(open + 1, -1), parameter);
    return node;
  });
}

/**
 * Checks nodes against the model: fields exist, embeds are relations the caller may follow, depth
 * and count limits. A field the caller may not read is left out silently; a relation it may not
 * follow does not exist for it (docs/permissions.md).
 */
export function resolveSelect(
  catalog: Catalog,
  table: CatalogTable,
  nodes: readonly SelectNode[],
  access: Access,
  parameter = 'select',
): SelectItem[] {
  let embeds = 0;
  const walk = (t: CatalogTable, list: readonly SelectNode[], depth: number): SelectItem[] => {
    const items: SelectItem[] = [];
    const aliases = new Set<string>();
    for (const node of list) {
      if (node.field === '*' && !node.children) {
        if (node.alias !== undefined) throw new QueryError(parameter, '* takes no alias');
        for (const f of t.spec.fields) {
          if (aliases.has(f.name) || !canReadField(access, t, f.name)) continue;
          aliases.add(f.name);
          items.push({ kind: 'field', field: f.name, alias: f.name });
        }
        continue;
      }
      if (!NAME.test(node.field)) throw new QueryError(parameter, `"${node.field}" is not a field name`);
      const alias = node.alias ?? node.field;
      if (!NAME.test(alias) || alias.length > 63) throw new QueryError(parameter, `"${alias}" is not a valid alias (letters, digits, _)`);
      if (aliases.has(alias)) throw new QueryError(parameter, `"${alias}" appears twice in one select`);
      aliases.add(alias);
      if (node.children) {
        const relation = followable(access, catalog, t, node.field);
        if (!relation) throw new QueryError(parameter, `${t.spec.name} has no relation "${node.field}"`);
        if (depth + 1 > MAX_EMBED_DEPTH) throw new QueryError(parameter, `embedded relations nest at most ${MAX_EMBED_DEPTH} levels`);
        if (++embeds > MAX_EMBEDS) throw new QueryError(parameter, `at most ${MAX_EMBEDS} embedded relations per select`);
        items.push({ kind: 'embed', relation: node.field, alias, items: walk(catalog.require(relation.target), node.children, depth + 1) });
      } else {
        if (!t.fields.has(node.field)) {
          const hint = followable(access, catalog, t, node.field) ? `; embed it as ${node.field}(...)` : '';
          throw new QueryError(parameter, `${t.spec.name} has no field "${node.field}"${hint}`);
        }
        if (canReadField(access, t, node.field)) items.push({ kind: 'field', field: node.field, alias });
      }
    }
    return items;
  };
  return walk(table, nodes, 0);
}
