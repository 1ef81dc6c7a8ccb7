/**
 * The query description: what front ends (the REST parsers today) produce and the SQL compilers
 * consume, independent of URLs. Role permissions enter as grants (runtime/query/policy.ts), which
 * the compilers fetch themselves for every table a statement touches (docs/permissions.md).
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
  | {
      readonly kind: 'embed';
      readonly relation: string;
      readonly alias: string;
      readonly items: readonly SelectItem[];
      /** To-many embeds only: the caller's filter on the related rows (held to the read list like a top-level filter). */
      readonly where?: Condition;
      readonly orderBy?: readonly OrderTerm[];
      readonly limit?: number;
      readonly offset?: number;
    };

export type Action = 'read' | 'create' | 'update' | 'delete';

/** What one role allows for one action on one table, resolved for one caller. */
export interface RoleRule {
  /** The rows it allows (the role's filter; variables resolved). A role's own condition: never checked against the caller's access. */
  readonly rows: Condition;
  /** The fields it allows; null means all. */
  readonly fields: ReadonlySet<string> | null;
  /** Values its filter gives fields through `$user.*` / `$context.*` equalities (filled in on create). */
  readonly presets: Readonly<Record<string, unknown>>;
  /** The fields its filter names (for a `row_filter` refusal). */
  readonly filterFields: readonly string[];
}

/** What the caller's roles together allow for one action on one table. */
export interface Grant {
  /** Rows the caller may touch: some role allows them. */
  readonly rows: Condition;
  /** Fields some role allows (null: all). */
  readonly fields: ReadonlySet<string> | null;
  /**
   * Read only: fields that some allowing role does not list, with the rows on which they are visible
   * (those of the roles that list them). Empty with one role, or when the roles list the same fields.
   */
  readonly fieldRows: ReadonlyMap<string, Condition>;
  readonly rules: readonly RoleRule[];
}

/** The caller's permissions as the compilers ask for them: a grant per table and action, or null when denied. */
export interface Access {
  grant(table: string, action: Action): Grant | null;
}

export interface ReadQuery {
  readonly table: string;
  /** Null selects every field the caller may read. */
  readonly select: readonly SelectItem[] | null;
  /** The caller's filter: every field and relation in it must be readable to the caller. */
  readonly where: Condition;
  /** A record's address (its key from the path): not a filter, so not held to the read list. */
  readonly key?: Condition;
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

export function or(...items: Condition[]): Condition {
  const kept = items.filter((c) => c.kind !== 'false');
  if (kept.some((c) => c.kind === 'true')) return { kind: 'true' };
  if (kept.length === 0) return { kind: 'false' };
  if (kept.length === 1) return kept[0]!;
  return { kind: 'or', items: kept };
}
