/**
 * Pages of a table's records, by offset or by cursor (docs/api.md §5.8), for REST's lists and
 * GraphQL's page fields alike: a cursor from either front end continues the same query in the other.
 */
import {
  compileRead,
  CursorError,
  keptPage,
  queryFingerprint,
  type Condition,
  type OrderTerm,
  type SelectItem,
} from '../query/index.ts';
import { cursorOwnerOf, readScope, type DataContext } from './context.ts';

export interface PageQuery {
  readonly select: readonly SelectItem[] | null;
  readonly where: Condition;
  readonly orderBy: readonly OrderTerm[];
  readonly limit: number;
  readonly offset: number;
  /** The cursor text of the page to continue after. */
  readonly after: string | undefined;
}

export interface PageOptions {
  /** Whether to count every matching record (totalCount). */
  readonly count: boolean;
  /** The front end's refusal of a cursor that is not one of this query's (its message says why). */
  readonly badCursor: (message: string) => Error;
  /** Runs the page's statement (within the front end's budget); the database's own by default. */
  readonly run?: (sql: string, values: unknown[]) => Promise<unknown[][]>;
}

export interface Page {
  /** The page's rows: each one's first column is its record's JSON text. */
  readonly rows: unknown[][];
  /** The records may hold jsonb text to compact (compactJson). */
  readonly jsonb: boolean;
  readonly hasNextPage: boolean;
  readonly totalCount: number | undefined;
  /** The cursor continuing after `row` (a row of this page). */
  readonly cursorAfter: (row: unknown[]) => string;
}

/** What a list's cursors are bound to besides their caller (cursorOwnerOf): table, environment, order and filter. */
function fingerprintOf(ctx: DataContext, query: PageQuery): string {
  return queryFingerprint([ctx.table.spec.name, ctx.tenant.environment, query.orderBy, query.where]);
}

/** One page: `limit` records (one more is read to know whether a next page exists). */
export async function readPage(ctx: DataContext, query: PageQuery, options: PageOptions): Promise<Page> {
  const { count } = options;
  // Only a cursor read or written needs the fingerprint (a first page without one is the common case).
  let kept: string | undefined;
  const fingerprint = () => (kept ??= fingerprintOf(ctx, query));
  const read = { ...query, table: ctx.table.spec.name, limit: query.limit + 1, after: undefined };
  let compiled = query.after === undefined ? keptPage(readScope(ctx), read, count) : undefined;
  if (!compiled) {
    let after: (string | null)[] | undefined;
    if (query.after !== undefined) {
      try {
        after = ctx.cursors.decode(cursorOwnerOf(ctx), fingerprint(), query.after);
      } catch (error) {
        if (!(error instanceof CursorError)) throw error;
        throw options.badCursor(error.message);
      }
    }
    const scope = readScope(ctx);
    const fresh = compileRead(scope, { ...read, after }, { count });
    if (after && after.length !== fresh.keyColumns) throw options.badCursor('not a cursor of this query');
    compiled = { sql: fresh.sql, values: scope.params.values, keyColumns: fresh.keyColumns, jsonb: fresh.jsonb };
  }
  let rows = await (options.run ?? ((sql, values) => ctx.db.queryArrays(sql, values)))(compiled.sql, compiled.values);
  let totalCount: number | undefined;
  if (count) {
    // The count rides on every row; with no row on the page, one row holds it alone.
    totalCount = Number(rows[0]?.[compiled.keyColumns + 1] ?? 0);
    if (rows.length === 1 && rows[0]![0] === null) rows = [];
  }
  const hasNextPage = rows.length > query.limit;
  const { keyColumns } = compiled;
  return {
    rows: hasNextPage ? rows.slice(0, query.limit) : rows,
    jsonb: compiled.jsonb,
    hasNextPage,
    totalCount,
    cursorAfter: (row) =>
      ctx.cursors.encode(cursorOwnerOf(ctx), fingerprint(), row.slice(1, 1 + keyColumns) as (string | null)[]),
  };
}
