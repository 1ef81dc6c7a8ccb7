/**
 * The query language and its policy layer, independent of URLs: the vocabulary (shared with the
 * generator through runtime/model), typed operands, the text syntax of filters and selects, role
 * permissions, and the compilers that turn a query description into one SQL statement under the
 * caller's access. Front ends (REST today) parse into the description and answer in their own form.
 */
export { canFollow, canReadField, followable, QueryError } from './access.ts';
export { Catalog, type CatalogTable } from './catalog.ts';
export { FILES_MODULE, filesCatalog } from './files-catalog.ts';
export {
  compileAggregate,
  type AggregateFunction,
  type AggregateQuery,
  type AggregateTerm,
  type HavingTerm,
} from './compile-aggregate.ts';
export { compileCondition, type FileAccess, type Scope } from './compile-condition.ts';
export { conditionShape, slotPositions, type ConditionShape } from './condition-shape.ts';
export { PerCallerCache } from './per-caller.ts';
export { keptKeyedRead, keptPage, keptSelect, type KeptStatement, type PageStatement } from './kept-statements.ts';
export { compileRead, fieldExpression, fullRecord, type CompiledRead } from './compile-read.ts';
export { compactJson } from './json-text.ts';
export {
  compileLockTargets,
  compileUnwritableFields,
  compileWrite,
  createPresets,
  FILE_REFERENCE_SQLSTATE,
  ROW_FILTER_SQLSTATE,
  sameRules,
  writeRules,
  WriteRefused,
  type CompiledWrite,
  type InsertRecord,
  type Write,
  type WriteResult,
} from './compile-write.ts';
export { cursorCodec, cursorOwner, queryFingerprint, CursorError, type CursorCodec } from './cursor.ts';
export {
  and,
  or,
  type Access,
  type Action,
  type Condition,
  type Grant,
  type Operator,
  type OrderTerm,
  type ReadQuery,
  type RoleRule,
  type SelectItem,
} from './description.ts';
export { FilterValueError, isOperator, MAX_IN_LIST, operandValue, roleOperand, scalarValue } from './operands.ts';
export { takesList } from '../model/index.ts';
export {
  MAX_CONDITIONS,
  MAX_GROUP_DEPTH,
  parentheses,
  parseFilterParam,
  resolvePath,
  type FilterContext,
} from './parse-filter.ts';
export {
  MAX_EMBED_DEPTH,
  MAX_EMBED_OFFSET,
  MAX_EMBEDS,
  parseSelectText,
  resolveSelect,
  type EmbedArguments,
  type EmbedArgumentsReader,
  type ResolveSelectOptions,
  type SelectNode,
} from './parse-select.ts';
export { MAX_SORT_TERMS, parseSort } from './parse-sort.ts';
export {
  type Containment,
  containmentKey,
  containmentsOf,
  HIDDEN,
  holds,
  MAX_CONTAINMENTS,
  type RecordValues,
  unsupportedIn,
} from './evaluate.ts';
export { Policy, writeDecision, type RoleOperand, type WriteDecision } from './policy.ts';
export { Params } from './sql.ts';
export { parseKey, toParameter } from './values.ts';
