/**
 * The data layer every front end stands on (REST, GraphQL, subscriptions, files): the admission of
 * a request, its DataContext, pages, writes with their validation and database-error mapping, and
 * the query layer's refusals as Problems. Front ends parse their requests into these calls and
 * format what they return (docs/architecture.md "Request phases").
 */
export {
  admit,
  countRequest,
  identify,
  MANAGEMENT_NO_DATA,
  refuseManagement,
  requireGrant,
  type Admitted,
  type Identified,
} from './admission.ts';
export {
  dataLimits,
  limitReached,
  rateLimitHeaders,
  type AdmissionServices,
  type DataLimits,
} from './rate-limits.ts';
export { createMany, deleteMany, MAX_BULK_ITEMS, type BulkAnswer, type TransactionMode } from './bulk.ts';
export {
  budgeted,
  budgetKey,
  callerContext,
  capturesEvents,
  cursorOwnerOf,
  filterContext,
  onDatabase,
  readScope,
  tableContext,
  type CallerContext,
  type DataContext,
  type DataServices,
} from './context.ts';
export { hooksOf, type WriteHooks } from './hooks.ts';
export { AGGREGATE_COST, listCost, readOneCost } from './cost.ts';
export { readPage, type Page, type PageOptions, type PageQuery } from './pages.ts';
export { answeringQueryErrors, asProblem, queryProblem } from './query-problems.ts';
export { keyCondition, notFound } from './record-key.ts';
export { requireObject } from './validate-body.ts';
export {
  createRecord,
  deleteMatching,
  deleteRecord,
  runWrite,
  updateMatching,
  updateRecord,
  type Created,
} from './write.ts';
