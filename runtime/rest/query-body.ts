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
  MAX_EMBED_OFFSET,
  MAX_EMBEDS,
  operandValue,
  QueryError,
  resolvePath,
  resolveSelect,
  takesList,
  type Condition,
  type EmbedArgumentsReader,
  type FilterContext,
  type OrderTerm,
} from '../query/index.ts';
import { filterContext, queryProblem, type DataContext } from '../data/index.ts';
import { DEFAULT_LIMIT, MAX_LIMIT, parseSort } from './list-params.ts';
import { respondWithList } from './read.ts';

const filterSchema = z
  .array(
    z.strictObject({ field: z.string().min(1).max(300), operator: z.string().max(40), value: z.unknown().optional() }),
  )
  .max(MAX_CONDITIONS);
const sortSchema = z
  .array(z.strictObject({ field: z.string().max(100), direction: z.enum(['asc', 'desc', 'ASC', 'DESC']).optional() }))
  .max(10);

type BodyFilter = z.infer<typeof filterSchema>;
type BodySort = z.infer<typeof sortSchema>;

/** A select item; an embed (`children`) of a to-many relation may carry its own filter, sort and page. */
interface BodySelectNode {
  field: string;
  alias?: string;
  children?: BodySelectNode[];
  filter?: BodyFilter;
  sort?: BodySort;
  pagination?: { first?: number; skip?: number };
}

const selectNode: z.ZodType<BodySelectNode> = z.lazy(() =>
  z.strictObject({
    field: z.string().min(1).max(100),
    alias: z.string().max(63).optional(),
    children: z.array(selectNode).max(50).optional(),
    filter: filterSchema.optional(),
    sort: sortSchema.optional(),
    pagination: z
      .strictObject({
        first: z.int().min(1).max(MAX_LIMIT).optional(),
        skip: z.int().min(0).max(MAX_EMBED_OFFSET).optional(),
      })
      .optional(),
  }),
);

const bodySchema = z.strictObject({
  filter: filterSchema.optional(),
  sort: sortSchema.optional(),
  pagination: z
    .strictObject({
      first: z.int().min(1).max(MAX_LIMIT).optional(),
      skip: z.int().min(0).max(100_000_000).optional(),
      after: z.string().max(4096).optional(),
    })
    .optional(),
  select: z.array(selectNode).max(100).optional(),
});

/** What each member of the body takes, in words, for messages (never zod's default text or a pattern). */
const EXPECTED: Record<string, { member: string; item?: string }> = {
  filter: {
    member: `a JSON array of at most ${MAX_CONDITIONS} conditions`,
    item: 'an object { "field", "operator", "value" }',
  },
  sort: { member: 'a JSON array of at most 10 sort terms', item: 'an object { "field", "direction" }' },
  select: {
    member: 'a JSON array of at most 100 fields',
    item: 'an object { "field", "alias", "children", "filter", "sort", "pagination" }',
  },
  children: {
    member: 'a JSON array of at most 50 fields',
    item: 'an object { "field", "alias", "children", "filter", "sort", "pagination" }',
  },
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
  const field =
    path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('') || 'body';
  if (issue.code === 'unrecognized_keys') return bad(field, `unknown member "${issue.keys.join('", "')}"`);
  const last = path.at(-1);
  // An embed's pagination (select[0].pagination) has no cursor.
  const embedPage = last === 'pagination' && path.length > 1;
  const named =
    typeof last === 'number'
      ? EXPECTED[String(path.at(-2))]?.item
      : embedPage
        ? 'an object { "first", "skip" }'
        : EXPECTED[String(last)]?.member;
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
      if (level.depth + 1 > MAX_EMBED_DEPTH)
        throw queryProblem(new QueryError('select', `embedded relations nest at most ${MAX_EMBED_DEPTH} levels`));
      if (++embeds > MAX_EMBEDS)
        throw queryProblem(new QueryError('select', `at most ${MAX_EMBEDS} embedded relations per select`));
      pending.push({ nodes: children, depth: level.depth + 1 });
    }
  }
}

/** The body's filter terms on `ctx.table`, each named `<prefix>[i]` in errors. */
function conditionsOf(ctx: FilterContext, filters: BodyFilter, prefix: string): Condition[] {
  return filters.map((f, i) => {
    const parameter = `${prefix}[${i}]`;
    const { path, field, rest } = resolvePath(ctx, f.field.split('.'), parameter);
    if (rest.length) throw new QueryError(parameter, `${field.name} is a field, not a relation`);
    if (!isOperator(f.operator)) throw new QueryError(parameter, `unknown operator "${f.operator}"`);
    const isList = takesList(f.operator);
    if (isList && !Array.isArray(f.value)) throw new QueryError(parameter, `${f.operator} takes an array value`);
    try {
      const value = operandValue(
        field,
        f.operator,
        isList ? undefined : f.value,
        isList ? (f.value as unknown[]) : undefined,
      );
      return { kind: 'compare', path, op: f.operator, value };
    } catch (error) {
      if (error instanceof FilterValueError) throw new QueryError(parameter, error.message);
      throw error;
    }
  });
}

function sortOf(ctx: FilterContext, sort: BodySort | undefined, parameter: string): OrderTerm[] {
  const text = sort?.length ? sort.map((s) => `${s.field}.${(s.direction ?? 'asc').toLowerCase()}`).join(',') : null;
  return parseSort(ctx, text, parameter);
}

/** An embed's members as the body writes them; its filters count toward the request's conditions. */
const embedArguments: EmbedArgumentsReader<BodySelectNode> = (node, ctx, at) => {
  if (node.filter === undefined && node.sort === undefined && node.pagination === undefined) return undefined;
  const filters = node.filter ?? [];
  ctx.count += filters.length;
  if (ctx.count > MAX_CONDITIONS)
    throw new QueryError(`${at.parameter}.filter`, `at most ${MAX_CONDITIONS} conditions per request`);
  const orderBy = sortOf(ctx, node.sort, `${at.parameter}.sort`);
  return {
    where: filters.length ? and(...conditionsOf(ctx, filters, `${at.parameter}.filter`)) : undefined,
    orderBy: orderBy.length ? orderBy : undefined,
    limit: node.pagination?.first,
    offset: node.pagination?.skip,
  };
};

export async function queryBody(ctx: DataContext): Promise<Reply> {
  const raw = await readJson(ctx.req);
  checkSelectBounds(raw);
  const parsed = bodySchema.safeParse(raw);
  if (!parsed.success) {
    throw issueProblem(parsed.error.issues[0]!);
  }
  const body = parsed.data;
  const fctx = filterContext(ctx);
  const conditions = conditionsOf(fctx, body.filter ?? [], 'filter');
  const orderBy = sortOf(fctx, body.sort, 'sort');
  const counter = { count: conditions.length };
  const pagination = body.pagination ?? {};
  if (pagination.after !== undefined && (pagination.skip ?? 0) > 0)
    throw new QueryError('pagination.after', 'a cursor and skip cannot be combined');
  return respondWithList(
    ctx,
    {
      where: and(...conditions),
      orderBy,
      select: body.select
        ? resolveSelect(ctx.catalog, ctx.table, body.select, ctx.access, 'select', {
            arguments: embedArguments,
            conditions: counter,
          })
        : null,
      limit: pagination.first ?? DEFAULT_LIMIT,
      offset: pagination.skip ?? 0,
      after: pagination.after,
    },
    'pagination.after',
  );
}
