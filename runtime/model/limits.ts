/**
 * The limits of docs/api.md §7, in one place: the runtime enforces
 * them and the generator writes them into the OpenAPI document.
 */
export const LIMITS = {
  /** Page size: default and maximum (`limit` / `first`). */
  defaultPageSize: 100,
  maxPageSize: 1000,
  /** Items of a bulk create, ids or filters of a bulk delete. */
  maxBulkItems: 100,
  /** Embedded relations: nesting depth and count in one select. */
  maxEmbedDepth: 3,
  maxEmbeds: 10,
  /** Nesting of and/or/not filter groups. */
  maxGroupDepth: 8,
  /**
   * Nesting of arrays and objects in a JSON request body. Checked by a linear scan of the raw text
   * before anything recursive (JSON.parse, zod, our walkers) touches it, so depth costs nothing.
   */
  maxJsonDepth: 32,
} as const;
