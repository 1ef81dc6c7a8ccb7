/**
 * POST /<table>/_query: the JSON form of a list query (docs/api.md §5.10). Read-only;
 * answers with the list envelope. Body problems are 400, like the query string it mirrors.
 */
import { z } from 'zod';
import { Problem, readJson, type Reply } from '../http/index.ts';
import {
  and,
  FilterValueError,
  isOperator,
  MAX_CONDITIONS,
  MAX_EMBED_DEPTH,
  MAX_EMBEDS,
  operandValue,
  QueryError,
  resolvePath,
  resolveSelect,
  type Condition,
  type OrderTerm,
  type SelectNode,
} from '../query/index.ts';
import { filterContext, type DataContext } from './context.ts';
import { DEFAULT_LIMIT, MAX_LIMIT, parseSort } from './list-params.ts';
import { queryProblem } from './query-problems.ts';
import { respondWithList } from './read.ts';

const selectNode: z.ZodType<SelectNode> = z.lazy(() =>
  z.strictObject({ field: z.string().min(1).max(100), alias: z.string().max(63).optional(), children: z.array(selectNode).max(50).optional() }),
);

const bodySchema = z.strictObject({
  filter: z.array(z.strictObject({ field: z.string().min(1).max(300), operator: z.string().max(40), value: z.unknown().optional() })).max(MAX_CONDITIONS).optional(),
  sort: z.array(z.strictObject({ field: z.string().max(100), direction: z.enum(['asc', 'desc', 'ASC', 'DESC']).optional() })).max(10).optional(),
  pagination: z
    .strictObject({ first: z.int().min(1).max(MAX_LIMIT).optional(), skip: z.int().min(0).max(100_000_000).optional(), after: z.string().max(4096).optional() })
    .optional(),
  select: z.array(selectNode).max(100).optional(),
});

/** What each member of the body takes, in words, for messages (never zod's default text or a pattern). */
const EXPECTED: Record<string, { member: string; item?: string }> = {
  filter: { member: `a JSON array of at most ${MAX_CONDITIONS} conditions`, item: 'an object { "field", "operator", "value" }' },
  sort: { member: 'a JSON array of at most 10 sort terms', item: 'an object { "field", "direction" }' },
  select: { member: 'a JSON array of at most 100 fields', item: 'an object { "field", "alias", "children" }' },
  children: { member: 'a JSON array of at most 50 fields', item: 'an object { "field", "alias", "children" }' },
  pagination: { member: 'an object { "first", "skip", "after" }' },
  field: { member: 'a field name (a string of 1 to 300 characters)' },
  operator: { member: 'an operator name such as equals' },
  direction: { member: 'asc or desc' },
  alias: { member: 'a string of at most 63 characters' },
  first: { member: `a whole number from 1 to ${MAX_LIMIT}` },
  skip: { member: 'a whole number from 0 to 100000000' },
  after: { member: 'the nextCursor of a previous page' },
};

/** `['sort', 0, 'direction']` → `sort[0].direction` and what that member takes. */
function issueProblem(issue: z.core.$ZodIssue): Problem {
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0]!] : issue.path;
  const field = path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('') || 'body';
  if (issue.code === 'unrecognized_keys') return bad(field, `unknown member "${issue.keys.join('", "')}"`);
  const last = path.at(-1);
  const named = typeof last === 'number' ? EXPECTED[String(path.at(-2))]?.item : EXPECTED[String(last)]?.member;
  return bad(field, `expected ${named ?? 'an object { "filter", "sort", "pagination", "select" }'}`);
}

function bad(field: string, message: string): Problem {
  return new Problem('invalid-parameter', `${field}: ${message}`, [{ field, rule: 'invalid', message }]);
}

/**
 * Embed depth and count of the raw `select`, without recursion, before zod walks its lazy schema
 * level by level; what is not an array of nodes is left to zod's messages.
 */
function checkSelectBounds(raw: unknown): void {
  const select = (raw as { select?: unknown } | null)?.select;
  if (!Array.isArray(select)) return;
  let embeds = 0;
  const pending: Array<{ nodes: unknown[]; depth: number }> = [{ nodes: select, depth: 0 }];
  for (let level = pending.pop(); level; level = pending.pop()) {
    for (const node of level.nodes) {
      const children = (node as { children?: unknown } | null)?.children;
      if (!Array.isArray(children)) continue;
      if (level.depth + 1 > MAX_EMBED_DEPTH) throw queryProblem(new QueryError('select', `embedded relations nest at most ${MAX_EMBED_DEPTH} levels`));
      if (++embeds > MAX_EMBEDS) throw queryProblem(new QueryError('select', `at most ${MAX_EMBEDS} embedded relations per select`));
      pending.push({ nodes: children, depth: level.depth + 1 });
    }
  }
}

export async function queryBody(ctx: DataContext): Promise<Reply> {
  const raw = await readJson(ctx.req);
  checkSelectBounds(raw);
  const parsed = bodySchema.safeParse(raw);
  if (!parsed.success) {
    throw issueProblem(parsed.error.issues[0]!);
  }
  const body = parsed.data;
  const fctx = filterContext(ctx);
  const conditions: Condition[] = (body.filter ?? []).map((f, i) => {
    const parameter = `filter[${i}]`;
    const { path, field, rest } = resolvePath(fctx, f.field.split('.'), parameter);
    if (rest.length) throw new QueryError(parameter, `${field.name} is a field, not a relation`);
    if (!isOperator(f.operator)) throw new QueryError(parameter, `unknown operator "${f.operator}"`);
    const isList = f.operator === 'in' || f.operator === 'not_in' || f.operator === 'between';
    if (isList && !Array.isArray(f.value)) throw new QueryError(parameter, `${f.operator} takes an array value`);
    try {
      const value = operandValue(field, f.operator, isList ? undefined : f.value, isList ? (f.value as unknown[]) : undefined);
      return { kind: 'compare', path, op: f.operator, value };
    } catch (error) {
      if (error instanceof FilterValueError) throw new QueryError(parameter, error.message);
      throw error;
    }
  });
  const sortText = body.sort?.length ? body.sort.map((s) => `${s.field}.${(s.direction ?? 'asc').toLowerCase()}`).join(',') : null;
  const orderBy: OrderTerm[] = parseSort(fctx, sortText, 'sort');
  const pagination = body.pagination ?? {};
  if (pagination.after !== undefined && (pagination.skip ?? 0) > 0) throw new QueryError('pagination.after', 'a cursor and skip cannot be combined');
  return respondWithList(ctx, {
    where: and(...conditions),
    orderBy,
    select: body.select ? resolveSelect(ctx.catalog, ctx.table, body.select, ctx.access, 'select') : null,
    limit: pagination.first ?? DEFAULT_LIMIT,
    offset: pagination.skip ?? 0,
    after: pagination.after,
  }, 'pagination.after');
}
