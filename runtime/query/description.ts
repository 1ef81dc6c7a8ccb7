/**
 * The query description: what the REST parsers produce and the SQL compiler consumes. Role
 * permissions enter here too (`Grant`), as conditions and field masks, never as post-filtering.
 */

export type { Operator } from '../model/index.ts';
import type { Operator } from '../model/index.ts';

export type Condition =
  | { readonly kind: 'and' | 'or'; readonly items: readonly Condition[] }
  | { readonly kind: 'not'; readonly item: Condition }
  /** `path` is zero or more relation names followed by a field name. Values are already typed. */
  | { readonly kind: 'compare'; readonly path: readonly string[]; readonly op: Operator; readonly value: unknown }
  | { readonly kind: 'true' }
  | { readonly kind: 'false' };

export interface OrderTerm {
  readonly field: string;
  readonly direction: 'asc' | 'desc';
}

export type SelectItem =
  | { readonly kind: 'field'; readonly field: string; readonly alias: string }
  | { readonly kind: 'embed'; readonly relation: string; readonly alias: string; readonly items: readonly SelectItem[] };

/** What a role lets a caller do with a table for one action (permissions → query). */
export interface Grant {
  /** Rows the caller may touch; `true` means all rows. */
  readonly rows: Condition;
  /** Fields the caller may see or write; null means all. */
  readonly fields: ReadonlySet<string> | null;
}

export const FULL_GRANT: Grant = { rows: { kind: 'true' }, fields: null };

export interface ReadQuery {
  readonly table: string;
  /** Null selects every field the grant allows. */
  readonly select: readonly SelectItem[] | null;
  readonly where: Condition;
  readonly orderBy: readonly OrderTerm[];
  readonly limit: number;
  readonly offset: number;
  /** Keyset position: the values (as text) of the order terms plus primary key of the last row seen. */
  readonly after?: readonly (string | null)[];
}

export function and(...items: Condition[]): Condition {
  const kept = items.filter((c) => c.kind !== 'true');
  if (kept.some((c) => c.kind === 'false')) return { kind: 'false' };
  if (kept.length === 0) return { kind: 'true' };
  if (kept.length === 1) return kept[0]!;
  return { kind: 'and', items: kept };
}
