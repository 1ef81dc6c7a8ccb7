/** Query parameters of GET /<table> (interface "List query parameters"). */
import { Problem } from '../http/index.ts';
import type { Condition, OrderTerm } from '../query/index.ts';

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

export interface ListParams {
  where: Condition;
  orderBy: OrderTerm[];
  limit: number;
  offset: number;
}

function invalid(name: string, message: string): Problem {
  return new Problem('invalid-parameter', `${name}: ${message}`, [{ field: name, rule: 'invalid', message }]);
}

function integerParam(query: URLSearchParams, names: readonly string[], fallback: number, max: number): number {
  const present = names.filter((n) => query.has(n));
  if (present.length === 0) return fallback;
  if (present.length > 1) throw invalid(present[1]!, `${present.join(' and ')} are the same parameter; send one`);
  const name = present[0]!;
  const raw = query.get(name)!;
  if (!/^\d{1,9}$/.test(raw)) throw invalid(name, `must be a whole number from 0 to ${max}`);
  const value = Number(raw);
  if (value > max) throw invalid(name, `must be at most ${max}`);
  return value;
}

export function parseListParams(query: URLSearchParams): ListParams {
  const limit = integerParam(query, ['limit', 'first'], DEFAULT_LIMIT, MAX_LIMIT);
  const offset = integerParam(query, ['offset', 'skip'], 0, 1_000_000_000);
  for (const name of query.keys()) {
    if (!['limit', 'first', 'offset', 'skip', 'project_id'].includes(name)) {
      throw invalid(name, 'unknown query parameter');
    }
  }
  return { where: { kind: 'true' }, orderBy: [], limit, offset };
}
