/**
 * Execution of the GraphQL read API: each root field is one SQL statement compiled by the query
 * layer (compileRead / compileAggregate) under the caller's access, exactly as the REST route of the
 * same shape; graphql-js then shapes the answer from the finished records, whose members are keyed
 * by response key (so two aliases of one relation with different arguments both work).
 */
import {
  defaultFieldResolver,
  getNamedType,
  GraphQLError,
  isScalarType,
  Kind,
  responsePathAsArray,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
} from 'graphql';
import { parseKeepingNumbers, plainNumber } from './exact-numbers.ts';
import { databaseFaultProblem, Problem } from '../http/index.ts';
import { LIMITS } from '../model/index.ts';
import {
  compileAggregate,
  compileRead,
  keptPage,
  keptRecordRead,
  QueryError,
  type KeptStatement,
  type ReadQuery,
  type SelectItem,
} from '../query/index.ts';
import {
  AGGREGATE_COST,
  budgeted,
  listCost,
  queryProblem,
  readOneCost,
  readPage,
  readScope,
  tableContext,
  type CallerContext,
  type DataContext,
} from '../data/index.ts';
import { AnswerTooLarge, answerTooLargeError, type DocumentBudget } from './document-budget.ts';
import { resolveMutation } from './mutations.ts';
import {
  DecimalScalar,
  type CodeFieldMeta,
  type MutationFieldMeta,
  type ObjectFieldMeta,
  type RootFieldMeta,
} from './schema.ts';
import {
  aggregateQuery,
  bounded,
  collectFields,
  keyCondition,
  MAX_OFFSET,
  orderTerms,
  selectItems,
  unwrap,
  whereCondition,
  type Selection,
  type TranslateContext,
} from './translate.ts';

/** What every resolver of one request shares: the caller's data context (runtime/data), without a table. */
export type GraphQLContext = {
  readonly data: CallerContext;
  /** What this document may still take: answer bytes, expensive reads one at a time, time (document-budget.ts). */
  readonly document: DocumentBudget;
  /** Logs a fault that is answered as an internal error (its message is not the caller's). */
  readonly log: (error: unknown) => void;
  /** A field met a fault that passes by itself (database busy or away): the answer says when to retry. */
  readonly retryAfter: (seconds: string) => void;
  /**
   * Set for a mutation request with an Idempotency-Key, whose mutations share one transaction:
   * after one fails the transaction is lost (and would not be kept), so the rest are not run.
   */
  readonly keyed?: { failed: boolean };
  /**
   * Root fields' statements the fast path already ran (direct.ts), by response key: when it hands
   * the query to graphql-js, their outcomes (rows or failure) are taken, not run again.
   */
  ran?: ReadonlyMap<string, PromiseSettledResult<unknown[][]>>;
  /**
   * Runs an endpoint or a database function for this request's caller, as its REST route does
   * after admission (docs/graphql.md "Your own code"); absent when the server has no code.
   */
  readonly code?: (meta: CodeFieldMeta, args: Record<string, unknown>) => Promise<unknown>;
};

/** A GraphQL error carrying the REST Problem's kind as `code`, its `type` and `status` (docs/graphql.md "Errors"). */
export function problemError(problem: Problem, info?: GraphQLResolveInfo): GraphQLError {
  return new GraphQLError(problem.detail, {
    nodes: info?.fieldNodes,
    path: info ? responsePathAsArray(info.path) : undefined,
    extensions: problemExtensions(problem),
  });
}

export function problemExtensions(problem: Problem): Record<string, unknown> {
  return {
    code: problem.kind.toUpperCase().replace(/-/g, '_'),
    type: `/errors/${problem.kind}`,
    status: problem.status,
    ...(problem.errors.length ? { errors: problem.errors } : {}),
    ...(problem.headers['retry-after'] ? { retryAfter: Number(problem.headers['retry-after']) } : {}),
  };
}

/** A field's failure as the Problem REST would answer; a fault of the server's own is logged, not shown. */
export function toProblem(error: unknown, context: Pick<GraphQLContext, 'log'>): Problem {
  if (error instanceof QueryError) return queryProblem(error);
  if (error instanceof Problem) return error;
  const fault = databaseFaultProblem(error);
  if (fault) return fault;
  context.log(error);
  return new Problem('internal', 'the server could not complete this field; the fault is logged on the server');
}

/** A root field's context: the schema shows only readable tables; a grant gone missing is refused as REST refuses it. */
function dataContext(context: GraphQLContext, tableName: string): DataContext {
  return tableContext(context.data, context.data.catalog.require(tableName), 'read');
}

function rootSelection(info: Pick<GraphQLResolveInfo, 'fieldNodes'>) {
  return {
    kind: Kind.SELECTION_SET,
    selections: info.fieldNodes.flatMap((n) => n.selectionSet?.selections ?? []),
  } as const;
}

/** Whether a selection holds a Decimal field (whose digits JSON.parse would not keep), at any depth. */
function selectsDecimal(catalog: DataContext['catalog'], table: string, items: readonly SelectItem[]): boolean {
  const t = catalog.require(table);
  return items.some((item) =>
    item.kind === 'field'
      ? t.fields.get(item.field)?.type === 'Decimal'
      : selectsDecimal(catalog, t.relations.get(item.relation)?.target ?? table, item.items),
  );
}

/** JSON.parse where it loses nothing (about 5 times faster); the number-keeping parser where a Decimal is selected. */
function recordParser(exact: boolean): (text: string) => unknown {
  return exact ? parseKeepingNumbers : (text) => JSON.parse(text);
}

/**
 * A root field's rows, read within the document's budget (document-budget.ts): an expensive read
 * after the document's earlier ones, none once its time is up, and its records' text counted
 * against the answer bound before anything parses them.
 */
async function rows(
  document: DocumentBudget,
  ctx: DataContext,
  cost: string | undefined,
  sql: string,
  values: unknown[],
): Promise<unknown[][]> {
  document.checkTime();
  const read = () => budgeted(ctx, cost, () => ctx.db.queryArrays(sql, values));
  const found = await (cost === undefined ? read() : document.oneAtATime(read));
  let bytes = 0;
  for (const row of found) bytes += typeof row[0] === 'string' ? row[0].length : 0;
  document.take(bytes);
  return found;
}

/** What a root field's translation reads of graphql-js's resolve info (the fast path builds it too, direct.ts). */
export type RootInfo = Pick<
  GraphQLResolveInfo,
  'fragments' | 'variableValues' | 'parentType' | 'fieldName' | 'fieldNodes'
>;

/** A list or by-key root field's statement, as compiled under the caller's access, with its cost for the budget. */
export interface RecordsStatement {
  readonly ctx: DataContext;
  readonly document: DocumentBudget;
  readonly select: readonly SelectItem[];
  readonly sql: string;
  readonly values: unknown[];
  readonly cost: string | undefined;
  /** Whether a Json field's spaced jsonb text may be in the records. */
  readonly jsonb: boolean;
}

/** The statement of a `list` or `byKey` root field (resolveRoot runs it; so does the fast path). */
export function recordsStatement(
  meta: RootFieldMeta & { kind: 'list' | 'byKey' },
  args: Record<string, unknown>,
  context: GraphQLContext,
  info: RootInfo,
): RecordsStatement {
  const ctx = dataContext(context, meta.table);
  const t: TranslateContext = { catalog: ctx.catalog, access: ctx.access };
  const sel: Selection = { fragments: info.fragments, variables: info.variableValues };
  const rootType = unwrap(info.parentType.getFields()[info.fieldName]!);
  const scope = readScope(ctx);
  const select = selectItems(t, sel, ctx.table, rootType, rootSelection(info), info.fieldName);
  // Kept statements (runtime/query kept-statements.ts): a caller's repeated shapes compile once.
  const statement = (compiled: KeptStatement, cost: string | undefined): RecordsStatement => ({
    ctx,
    document: context.document,
    select,
    sql: compiled.sql,
    values: compiled.values,
    cost,
    jsonb: compiled.jsonb,
  });
  const fresh = (query: ReadQuery, options: { single?: boolean }): KeptStatement => {
    const compiled = compileRead(scope, query, options);
    return { sql: compiled.sql, values: scope.params.values, jsonb: compiled.jsonb };
  };
  if (meta.kind === 'byKey') {
    const key = keyCondition(ctx.table, args);
    const compiled =
      keptRecordRead(scope, ctx.table, key, select) ??
      fresh(
        { table: ctx.table.spec.name, select, where: { kind: 'true' }, key, orderBy: [], limit: 1, offset: 0 },
        { single: true },
      );
    return statement(compiled, readOneCost(ctx.catalog, ctx.table, select));
  }
  const where = whereCondition(t, ctx.table, args.where);
  const orderBy = orderTerms(t, ctx.table, args.orderBy);
  const limit = bounded(args.limit, 'limit', LIMITS.defaultPageSize, 1, LIMITS.maxPageSize);
  const offset = bounded(args.offset, 'offset', 0, 0, MAX_OFFSET);
  const query: ReadQuery = { table: ctx.table.spec.name, select, where, orderBy, limit, offset };
  const compiled = keptPage(scope, query, false) ?? fresh(query, {});
  return statement(
    compiled,
    listCost(ctx.catalog, ctx.table, {
      where: { kind: 'and', items: [where, ctx.grant.rows] },
      orderBy,
      select,
      limit,
      offset,
      count: false,
    }),
  );
}

/** The rows of a records statement: each one's first column is its record's JSON text. */
export function runStatement(statement: RecordsStatement): Promise<unknown[][]> {
  return rows(statement.document, statement.ctx, statement.cost, statement.sql, statement.values);
}

function settledRows(outcome: PromiseSettledResult<unknown[][]>): unknown[][] {
  if (outcome.status === 'rejected') throw outcome.reason;
  return outcome.value;
}

async function resolveRoot(
  meta: RootFieldMeta,
  args: Record<string, unknown>,
  context: GraphQLContext,
  info: GraphQLResolveInfo,
): Promise<unknown> {
  if (meta.kind === 'list' || meta.kind === 'byKey') {
    const statement = recordsStatement(meta as RootFieldMeta & { kind: 'list' | 'byKey' }, args, context, info);
    const { ctx, select } = statement;
    const parse = recordParser(selectsDecimal(ctx.catalog, ctx.table.spec.name, select));
    const ran = context.ran?.get(info.path.key as string);
    const found = ran === undefined ? await runStatement(statement) : settledRows(ran);
    if (meta.kind === 'list') return found.map((r) => parse(r[0] as string));
    return found.length ? parse(found[0]![0] as string) : null;
  }
  const ctx = dataContext(context, meta.table);
  const t: TranslateContext = { catalog: ctx.catalog, access: ctx.access };
  const sel: Selection = { fragments: info.fragments, variables: info.variableValues };
  const rootType = unwrap(info.parentType.getFields()[info.fieldName]!);
  const scope = readScope(ctx);
  switch (meta.kind) {
    case 'page': {
      const members = [...collectFields(sel, rootType, rootSelection(info))];
      const nodes = members.filter(([, n]) => n[0]!.name.value === 'nodes');
      const count = members.some(([, n]) => n[0]!.name.value === 'totalCount');
      if (nodes.length > 1)
        throw new QueryError(`${info.fieldName}.nodes`, 'select nodes once per page (one statement answers it)');
      const nodesField = rootType.getFields().nodes!;
      const nodeSet = nodes.length
        ? { kind: Kind.SELECTION_SET, selections: nodes[0]![1].flatMap((n) => n.selectionSet?.selections ?? []) }
        : undefined;
      const select = selectItems(t, sel, ctx.table, unwrap(nodesField), nodeSet as never, `${info.fieldName}.nodes`);
      const where = whereCondition(t, ctx.table, args.where);
      const orderBy = orderTerms(t, ctx.table, args.orderBy);
      const limit = bounded(args.first, 'first', LIMITS.defaultPageSize, 1, LIMITS.maxPageSize);
      const after = args.after === undefined || args.after === null ? undefined : (args.after as string);
      const cost = listCost(ctx.catalog, ctx.table, {
        where: { kind: 'and', items: [where, ctx.grant.rows] },
        orderBy,
        select,
        limit,
        offset: 0,
        count,
      });
      // runtime/data's pages, as REST's lists: a cursor from either front end continues the same query in the other.
      const page = await readPage(
        ctx,
        { select, where, orderBy, limit, offset: 0, after },
        {
          count,
          badCursor: (message) => new QueryError('after', message),
          run: (sql, values) => rows(context.document, ctx, cost, sql, values),
        },
      );
      const last = page.rows[page.rows.length - 1];
      const parse = recordParser(selectsDecimal(ctx.catalog, ctx.table.spec.name, select));
      return {
        nodes: page.rows.map((r) => parse(r[0] as string)),
        pageInfo: { hasNextPage: page.hasNextPage, endCursor: last ? page.cursorAfter(last) : null },
        totalCount: page.totalCount,
      };
    }
    case 'aggregate': {
      const query = aggregateQuery(t, sel, ctx.table, rootType, rootSelection(info), args);
      const sql = compileAggregate(scope, query);
      const decimal = [...query.groupBy, ...query.terms.map((term) => term.field)].some(
        (f) => f !== undefined && ctx.table.fields.get(f)?.type === 'Decimal',
      );
      const parse = recordParser(decimal);
      return (await rows(context.document, ctx, AGGREGATE_COST, sql, scope.params.values)).map((r) =>
        parse(r[0] as string),
      );
    }
  }
}

/** An endpoint's or a database function's field: the server's runner, with the arguments as plain JSON. */
function resolveCode(meta: CodeFieldMeta, args: Record<string, unknown>, context: GraphQLContext): Promise<unknown> {
  if (!context.code) return Promise.reject(new Problem('not-found', `${meta.name} is not served here`));
  // graphql-js hands input objects without a prototype; the input schemas read plain JSON.
  return context.code(meta, JSON.parse(JSON.stringify(args)) as Record<string, unknown>);
}

/**
 * The one field resolver: root fields run their statement; a table record's members are read by
 * response key (the records were built so); everything else (pages, aggregate rows) by name.
 */
export const fieldResolver: GraphQLFieldResolver<unknown, GraphQLContext> = (source, args, context, info) => {
  const def = info.parentType.getFields()[info.fieldName];
  const meta = def?.extensions.svcgen as
    | RootFieldMeta
    | MutationFieldMeta
    | ObjectFieldMeta
    | CodeFieldMeta
    | undefined;
  if (meta && ('kind' in meta || 'code' in meta)) {
    const resolved =
      'code' in meta
        ? resolveCode(meta, args, context)
        : !('returnsRecord' in meta)
          ? resolveRoot(meta, args, context, info)
          : context.keyed?.failed
            ? Promise.reject(
                new Problem(
                  'conflict',
                  'not run: an earlier mutation of this request failed, and a request with an Idempotency-Key writes all its mutations or none; nothing was written, and the key may be used again',
                ),
              )
            : resolveMutation(meta, args, context, info);
    return resolved.catch((error: unknown) => {
      if (context.keyed) context.keyed.failed = true;
      if (error instanceof AnswerTooLarge) throw answerTooLargeError(error, info);
      const problem = toProblem(error, context);
      const retry = problem.headers['retry-after'];
      if (retry !== undefined) context.retryAfter(retry);
      throw problemError(problem, info);
    });
  }
  const value = meta
    ? ((source as Record<string, unknown> | null)?.[info.path.key as string] ?? null)
    : defaultFieldResolver(source, args, context, info);
  // Exact number text is kept for Decimal only; every other scalar (Json members too) reads numbers as usual.
  const type = getNamedType(info.returnType);
  return isScalarType(type) && type !== DecimalScalar ? plainNumber(value) : value;
};
