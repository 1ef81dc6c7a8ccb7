/**
 * Assertions shared by the data API test files: exact Problem Details bodies, ISO 8601 timestamps,
 * list envelopes and whole-database snapshots (to prove that a failed request changed nothing).
 */
import { expect } from 'vitest';
import type { Database } from '../../runtime/db/index.ts';
import { expectProblem, type TestResponse } from './server.ts';

/** ISO 8601 date-time with a zone (Z or ±hh:mm). */
export const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const TABLES = ['City', 'Customer', 'Product', 'Order', 'OrderItem'] as const;

/**
 * A Problem Details response, exactly: status, `application/problem+json`, the members
 * type/title/status/detail/instance/errors and nothing else, `instance` = the request path, every
 * entry of `errors` exactly `{ field, rule, message }`; optionally the kind, a named field and its rule.
 */
export function expectProblemAt(
  res: TestResponse,
  status: number,
  path: string,
  kind?: string,
  field?: string,
  rule?: string,
): void {
  expectProblem(res, status, kind, field);
  expect(Object.keys(res.body).sort(), res.text).toEqual(['detail', 'errors', 'instance', 'status', 'title', 'type']);
  expect(res.body.type).toMatch(/^\/errors\/[a-z-]+$/);
  expect(res.body.instance).toBe(path.split('?')[0]);
  for (const e of res.body.errors) {
    expect(Object.keys(e).sort(), res.text).toEqual(['field', 'message', 'rule']);
    expect(e).toEqual({ field: expect.any(String), rule: expect.any(String), message: expect.any(String) });
  }
  if (field && rule) {
    expect(
      res.body.errors.filter((e: { field: string }) => e.field === field).map((e: { rule: string }) => e.rule),
      res.text,
    ).toContain(rule);
  }
}

/** Field names of a Problem's `errors`. */
export function problemFields(res: TestResponse): string[] {
  return (res.body?.errors ?? []).map((e: { field: string }) => e.field);
}

/**
 * A list envelope: exactly `{ data, meta: { pagination } }`, pagination exactly
 * `{ limit, offset, hasNextPage, hasPreviousPage }` plus the cursor of docs/api.md §5.8 (`nextCursor`),
 * which is checked separately so that its absence fails one test, not every list test.
 */
export function expectListEnvelope(
  res: TestResponse,
  pagination: { limit: number; offset: number; hasNextPage: boolean; hasPreviousPage: boolean },
): any[] {
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(Object.keys(res.body).sort()).toEqual(['data', 'meta']);
  expect(Array.isArray(res.body.data)).toBe(true);
  expect(Object.keys(res.body.meta)).toEqual(['pagination']);
  const { nextCursor: _cursor, ...rest } = res.body.meta.pagination;
  expect(rest).toEqual(pagination);
  return res.body.data;
}

/** Every row of every example table in one environment, as JSON text, in a stable order. */
export async function snapshot(db: Database, environment = 'master'): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of TABLES) {
    const rows = await db.query<{ r: string }>(
      `select row_to_json(t)::text as r from env_${environment}."${table}" t order by 1`,
    );
    out[table] = rows.map((row) => row.r);
  }
  return out;
}

export async function countRows(
  db: Database,
  table: string,
  environment = 'master',
  where = 'true',
  values: unknown[] = [],
): Promise<number> {
  const rows = await db.query<{ n: string }>(
    `select count(*) as n from env_${environment}."${table}" where ${where}`,
    values,
  );
  return Number(rows[0]!.n);
}
