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
 * - a list whose filter, with the caller's row permission ANDed in, no index serves, or whose sort
 *   no index covers (all matching rows are read and sorted to cut one page);
 * - a list or a GET by id embedding a relation whose rows the target cannot find by an index (each
 *   record's embed scans the target table).
 *
 * The indexes are the model's B-tree ones (`@id`, `@unique`, `@@id`, `@@unique`, `@@index`; each an
 * ordered list of fields, runtime/model `IndexSpec`); an index made by hand outside the schema is
 * unknown here. With E the fields the filter ANDs an equality on (`equals`, `in`):
 *
 * 1. E covering every field of a unique index leaves at most a few rows: filter and sort are cheap.
 * 2. Otherwise the filter is served when E covers a leading prefix of some index (other ANDed terms
 *    then only sift the rows that index finds, and a range on the next field is fine too), or, with
 *    no such equality, when every compared field leads an index and is compared by equality or range.
 * 3. And the sort is covered when, after leaving out fields fixed by `equals`, its fields continue a
 *    prefix of `equals` fields of some index in that index's order, with every direction the same as
 *    the index's or every one reversed (a B-tree reads both ways). So with `@@index([status, total])`,
 *    `status=equals.open&sort=-total` is cheap; `sort=total,status`, `sort=status,-total` and
 *    `status=in.(open,paid)&sort=total` are not. Sort terms after a whole unique index are free.
 * 4. An embed is found by an index when the target's foreign-key fields lead one of its indexes.
 */
import { LIMITS, type Operator } from '../model/index.ts';
import {
  indexUse,
  type Catalog,
  type CatalogTable,
  type Condition,
  type OrderTerm,
  type SelectItem,
} from '../query/index.ts';

/** The largest page that is not expensive: the default one. */
export const LARGE_PAGE = LIMITS.defaultPageSize;
/** The largest offset that is not expensive: PostgreSQL reads and drops every skipped row. */
export const LARGE_OFFSET = 1000;

// What an index does for each operator is a property of the operator table (runtime/query
// operator-implementations.ts `index`): 'one' and 'few' pin a field (E in the rules above), 'one'
// alone keeps the index's order on the next fields, and every use but 'none' is served.
const served = (op: Operator) => indexUse(op) !== 'none';
const selective = (op: Operator) => indexUse(op) === 'one' || indexUse(op) === 'few';
const pinsOne = (op: Operator) => indexUse(op) === 'one';

export interface ListShape {
  readonly where: Condition;
  readonly orderBy: readonly OrderTerm[];
  readonly select: readonly SelectItem[] | null;
  readonly limit: number;
  readonly offset: number;
  readonly count: boolean;
}

interface Index {
  readonly fields: readonly string[];
  /** Per field: kept in descending order. */
  readonly desc: readonly boolean[];
  readonly unique: boolean;
}

const indexCache = new WeakMap<CatalogTable, readonly Index[]>();

function indexesOf(table: CatalogTable): readonly Index[] {
  let indexes = indexCache.get(table);
  if (!indexes) {
    indexes = table.spec.indexes.map((i) => ({
      fields: i.fields.map((f) => f.replace(/^-/, '')),
      desc: i.fields.map((f) => f.startsWith('-')),
      unique: i.unique,
    }));
    indexCache.set(table, indexes);
  }
  return indexes;
}

/** How many leading fields of `index` are in `fields`. */
function prefixIn(index: Index, fields: ReadonlySet<string>): number {
  let n = 0;
  while (n < index.fields.length && fields.has(index.fields[n]!)) n++;
  return n;
}

function leadsAnIndex(table: CatalogTable, field: string): boolean {
  return indexesOf(table).some((i) => i.fields[0] === field);
}

/** The fields that lead an index of `table`, for telling a refused caller what to filter or sort on. */
export function indexedFields(table: CatalogTable): string[] {
  return table.spec.fields.filter((f) => leadsAnIndex(table, f.name)).map((f) => f.name);
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

/** The terms ANDed at the top of `where`, nested ANDs flattened. */
function andedTerms(where: Condition): Condition[] {
  return where.kind === 'and' ? where.items.flatMap(andedTerms) : [where];
}

/** Fields of this table the ANDed terms compare with an operator `which` accepts. */
function andedFields(terms: readonly Condition[], which: (op: Operator) => boolean): Set<string> {
  const out = new Set<string>();
  for (const t of terms) if (t.kind === 'compare' && t.path.length === 1 && which(t.op)) out.add(t.path[0]!);
  return out;
}

/** Whether some index gives the rows in `order` once the `fixed` fields are pinned by equality. */
function sortCovered(table: CatalogTable, order: readonly OrderTerm[], fixed: ReadonlySet<string>): boolean {
  const rest = order.filter((t) => !fixed.has(t.field));
  if (rest.length === 0) return true;
  return indexesOf(table).some((index) => {
    const start = prefixIn(index, fixed);
    let reversed: boolean | undefined;
    for (let j = 0; j < rest.length; j++) {
      const at = start + j;
      // Past a whole unique index the order is total: later terms change nothing.
      if (at === index.fields.length) return index.unique && j > 0;
      if (index.fields[at] !== rest[j]!.field) return false;
      const flip = (rest[j]!.direction === 'desc') !== index.desc[at];
      if (reversed === undefined) reversed = flip;
      else if (reversed !== flip) return false;
    }
    return true;
  });
}

/** Why an embed in `select` scans its target table, or undefined when each embed is found by an index. */
function embedCost(catalog: Catalog, table: CatalogTable, select: readonly SelectItem[] | null): string | undefined {
  for (const item of select ?? []) {
    if (item.kind !== 'embed') continue;
    const relation = table.relations.get(item.relation)!;
    const target = catalog.require(relation.target);
    const keys = new Set(relation.targetFields);
    if (!indexesOf(target).some((i) => prefixIn(i, keys) > 0)) {
      return `an embed of ${item.relation}, whose ${target.spec.name}.${relation.targetFields.join(', ')} no index covers`;
    }
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
  const terms = andedTerms(list.where);
  const equal = andedFields(terms, selective);
  if (!indexesOf(table).some((i) => i.unique && prefixIn(i, equal) === i.fields.length)) {
    if (!indexesOf(table).some((i) => prefixIn(i, equal) > 0)) {
      const unserved = compares(list.where).find(
        (c) => c.path.length !== 1 || !served(c.op) || !leadsAnIndex(table, c.path[0]!),
      );
      if (unserved) return `a filter on ${unserved.path.join('.')} (${unserved.op}) that no index serves`;
    }
    if (!sortCovered(table, list.orderBy, andedFields(terms, pinsOne))) {
      return `a sort on ${list.orderBy.map((t) => (t.direction === 'desc' ? `-${t.field}` : t.field)).join(',')}, which no index covers`;
    }
  }
  return embedCost(catalog, table, list.select);
}

/** Why a GET by id is expensive (only an embed can make it so), or undefined. */
export function readOneCost(
  catalog: Catalog,
  table: CatalogTable,
  select: readonly SelectItem[] | null,
): string | undefined {
  return embedCost(catalog, table, select);
}

/** Aggregates read every matching row: always expensive. */
export const AGGREGATE_COST = 'an aggregate';
