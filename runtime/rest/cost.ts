/**
 * Which reads are expensive (docs/config.md `database.expensiveRead*`; docs/api.md §6.2
 * `/errors/database-busy`). An expensive read takes a slot of the process's
 * expensive-read budget (runtime/db/admission.ts) before it touches the database, so a burst of
 * them can hold at most that many pool connections and cheap reads (a GET by id, a default page in
 * key order) and writes never queue behind them. The rule, kept small and in this one place:
 *
 * - every aggregate (it reads every matching row);
 * - a list asking `Prefer: count=exact` (it counts every matching row);
 * - a page larger than the default (limit > 100) or an offset above 1000 (skipped rows are read too);
 * - a list whose filter, with the caller's row permission ANDed in, has no index to go by: unless it
 *   ANDs an equality (`equals`, `in`) on an indexed field, which leaves few rows, every compared field
 *   must be indexed and compared by equality or range;
 * - a list sorted first by a field no index covers (all matching rows are sorted to cut one page),
 *   unless the filter leaves few rows as above;
 * - a list or a GET by id embedding a relation whose rows the target cannot find by an index (each
 *   record's embed scans the target table).
 *
 * "Indexed" means what the model description knows: an @id or @unique field, or the first field of
 * a composite primary key. It carries no @@index (runtime/model), so a field indexed only by
 * @@index or by hand counts as unindexed, and a read on it is budgeted like any other scan.
 */
import { LIMITS, type FieldSpec } from '../model/index.ts';
import type { Catalog, CatalogTable, Condition, OrderTerm, SelectItem } from '../query/index.ts';

/** The largest page that is not expensive: the default one. */
export const LARGE_PAGE = LIMITS.defaultPageSize;
/** The largest offset that is not expensive: PostgreSQL reads and drops every skipped row. */
export const LARGE_OFFSET = 1000;

/** Operators a B-tree index serves. */
const INDEX_OPERATORS = new Set(['equals', 'in', 'gt', 'gte', 'lt', 'lte', 'between']);
/** Operators that leave at most a few rows on an indexed field. */
const SELECTIVE_OPERATORS = new Set(['equals', 'in']);

export interface ListShape {
  readonly where: Condition;
  readonly orderBy: readonly OrderTerm[];
  readonly select: readonly SelectItem[] | null;
  readonly limit: number;
  readonly offset: number;
  readonly count: boolean;
}

function indexed(table: CatalogTable, field: FieldSpec | undefined): boolean {
  return field !== undefined && (field.id || field.unique || table.spec.primaryKey[0] === field.name);
}

/** The fields of `table` an index covers, for telling a refused caller what to filter or sort on. */
export function indexedFields(table: CatalogTable): string[] {
  return table.spec.fields.filter((f) => indexed(table, f)).map((f) => f.name);
}

function compares(condition: Condition): Array<Condition & { kind: 'compare' }> {
  switch (condition.kind) {
    case 'compare':
      return [condition];
    case 'and':
    case 'or':
      return condition.items.flatMap(compares);
    case 'not':
      return compares(condition.item);
    default:
      return [];
  }
}

/** Whether a compare is on a field of this table an index serves with this operator. */
function indexable(table: CatalogTable, c: Condition & { kind: 'compare' }, operators: ReadonlySet<string>): boolean {
  return c.path.length === 1 && operators.has(c.op) && indexed(table, table.fields.get(c.path[0]!));
}

/** An AND-ed equality on an indexed field: the rows are found by the index and are few. */
function selective(table: CatalogTable, where: Condition): boolean {
  const terms = where.kind === 'and' ? where.items : [where];
  return terms.some((t) => t.kind === 'compare' && indexable(table, t, SELECTIVE_OPERATORS));
}

/** Why an embed in `select` scans its target table, or undefined when each embed is found by an index. */
function embedCost(catalog: Catalog, table: CatalogTable, select: readonly SelectItem[] | null): string | undefined {
  for (const item of select ?? []) {
    if (item.kind !== 'embed') continue;
    const relation = table.relations.get(item.relation)!;
    const target = catalog.require(relation.target);
    if (!indexed(target, target.fields.get(relation.targetFields[0]!))) return `an embed of ${item.relation}, whose ${target.spec.name}.${relation.targetFields[0]} no index covers`;
    const nested = embedCost(catalog, target, item.items);
    if (nested) return nested;
  }
  return undefined;
}

/** Why a list (GET /<table>, POST /_query) is expensive, or undefined when it is cheap. `where` includes the row permission. */
export function listCost(catalog: Catalog, table: CatalogTable, list: ListShape): string | undefined {
  if (list.count) return 'Prefer: count=exact';
  if (list.limit > LARGE_PAGE) return `a page of ${list.limit} (more than ${LARGE_PAGE})`;
  if (list.offset > LARGE_OFFSET) return `an offset of ${list.offset} (more than ${LARGE_OFFSET})`;
  if (!selective(table, list.where)) {
    const unindexed = compares(list.where).find((c) => !indexable(table, c, INDEX_OPERATORS));
    if (unindexed) return `a filter on ${unindexed.path.join('.')} (${unindexed.op}) that no index serves`;
    const first = list.orderBy[0];
    if (first && !indexed(table, table.fields.get(first.field))) return `a sort on ${first.field}, which no index covers`;
  }
  return embedCost(catalog, table, list.select);
}

/** Why a GET by id is expensive (only an embed can make it so), or undefined. */
export function readOneCost(catalog: Catalog, table: CatalogTable, select: readonly SelectItem[] | null): string | undefined {
  return embedCost(catalog, table, select);
}

/** Aggregates read every matching row: always expensive. */
export const AGGREGATE_COST = 'an aggregate';
