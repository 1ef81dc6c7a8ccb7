export { Catalog, type CatalogTable } from './catalog.ts';
export { compileCondition, columnRef, newAlias, type Scope } from './compile-condition.ts';
export { compileRead, fieldExpression, orderBySql, recordProjection, type ReadScope } from './compile-read.ts';
export { and, FULL_GRANT, type Condition, type Grant, type Operator, type OrderTerm, type ReadQuery, type SelectItem } from './description.ts';
export { Params } from './sql.ts';
