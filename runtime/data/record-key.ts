/** A record named by its key, as a path id (REST's /<table>/<id>) or a mutation's argument names it. */
import { Problem } from '../http/index.ts';
import { parseKey, type Condition } from '../query/index.ts';
import type { DataContext } from './context.ts';

/** The row condition `<pk> = <id>`, or a 404 when the id cannot name a record. */
export function keyCondition(ctx: DataContext, id: string): Condition & { kind: 'compare' } {
  const field = ctx.table.idField!;
  const value = parseKey(field, id);
  if (value === undefined) throw notFound(ctx, id);
  return { kind: 'compare', path: [field.name], op: 'equals', value };
}

export function notFound(ctx: DataContext, id: string): Problem {
  return new Problem(
    'not-found',
    `no ${ctx.table.spec.name} record with ${ctx.table.idField?.name ?? 'id'} ${JSON.stringify(id)}`,
  );
}
