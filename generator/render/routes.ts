/** The route table: which operations each table has, in a fixed order. */
import { TABLE_SUB_PATHS, type Operation, type RouteSpec, type TableSpec } from '../../runtime/model/index.ts';

interface RouteShape {
  method: RouteSpec['method'];
  suffix: string;
  operation: Operation;
  /** Only for tables with a single-field primary key. */
  byId?: boolean;
}

/** Literal suffixes come before `/:id` so that `_bulk` and friends are never taken for an id. */
export const ROUTE_SHAPES: readonly RouteShape[] = [
  { method: 'GET', suffix: '', operation: 'list' },
  { method: 'POST', suffix: '', operation: 'create' },
  { method: 'PATCH', suffix: '', operation: 'updateMany' },
  { method: 'POST', suffix: `/${TABLE_SUB_PATHS.bulk}`, operation: 'bulkCreate' },
  { method: 'DELETE', suffix: `/${TABLE_SUB_PATHS.bulk}`, operation: 'bulkDelete' },
  { method: 'GET', suffix: `/${TABLE_SUB_PATHS.aggregate}`, operation: 'aggregate' },
  { method: 'POST', suffix: `/${TABLE_SUB_PATHS.query}`, operation: 'query' },
  { method: 'GET', suffix: '/:id', operation: 'read', byId: true },
  { method: 'PATCH', suffix: '/:id', operation: 'update', byId: true },
  { method: 'DELETE', suffix: '/:id', operation: 'delete', byId: true },
];

export function routesFor(tables: readonly TableSpec[]): RouteSpec[] {
  const routes: RouteSpec[] = [];
  for (const table of tables) {
    for (const shape of ROUTE_SHAPES) {
      if (shape.byId && table.primaryKey.length !== 1) continue;
      routes.push({
        method: shape.method,
        path: `/${table.name}${shape.suffix}`,
        table: table.name,
        operation: shape.operation,
      });
    }
  }
  return routes;
}
