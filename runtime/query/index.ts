export { Catalog, type CatalogTable } from './catalog.ts';
export { compileCondition, columnRef, newAlias, type Scope } from './compile-condition.ts';
export { compileRead, fieldExpression, fullOrder, orderBySql, recordProjection, type CompiledRead, type ReadScope } from './compile-read.ts';
export { cursorCodec, queryFingerprint, CursorError, type CursorCodec } from './cursor.ts';
export { and, FULL_GRANT, type Condition, type Grant, type Operator, type OrderTerm, type ReadQuery, type SelectItem } from './description.ts';
export { Params } from './sql.ts';
export { compileAggregate, type AggregateFunction, type AggregateQuery, type AggregateTerm, type HavingTerm } from './compile-aggregate.ts';
