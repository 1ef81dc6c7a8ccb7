/**
 * The contract between generated code and the runtime: a small, plain description of each table.
 * The generator writes these objects `as const` into `generated/tables/*.ts`; the runtime reads
 * them to compile SQL, and nothing else about the data model reaches the runtime.
 */
import type { ZodType } from 'zod';
import type { FunctionSpec } from './functions.ts';

export { LIMITS } from './limits.ts';
export { KEY_PREFIX, KEY_PREFIX_PATTERN, KEY_PREFIX_RULE } from './api-keys.ts';
export { CONTEXT_KEY, contextKeyProblem, isObjectPrototypeName } from './names.ts';
export {
  DATA_BASE_PATH,
  GRAPHQL_PATH,
  GRAPHQL_PLAYGROUND_PATH,
  RESERVED_PATH_NAMES,
  SERVICE_PATHS,
  TABLE_SUB_PATHS,
} from './paths.ts';
export { AUTH_ERRORS, type AuthErrorCode } from './auth-errors.ts';
export {
  functionTypeDescription,
  type FunctionArgument,
  type FunctionBaseType,
  type FunctionColumn,
  type FunctionReturns,
  type FunctionSpec,
  type FunctionType,
  type FunctionVolatility,
} from './functions.ts';
export {
  BUCKET_NAME_PATTERN,
  FILE_FIELDS,
  FILE_FILTER_FIELDS,
  fileReferenceDescription,
  FILES_SPEC,
  FILES_TABLE,
} from './files.ts';
export {
  CLOCK_OPERATORS,
  fieldKind,
  fieldOperators,
  isOperator,
  listed,
  OPERATOR_DEFINITIONS,
  OPERATORS,
  operatorMismatch,
  takesList,
  type FieldApplicability,
  type FieldKind,
  type OperandShape,
  type Operator,
  type OperatorDefinition,
} from './operators.ts';
export {
  aggregateMismatch,
  FILTER_GROUPS,
  MAX_AGGREGATE_ROWS,
  RESERVED_PARAMETERS,
  type AggregateFunction,
  type FilteringOperation,
} from './query-language.ts';

export type ScalarType =
  | 'String'
  | 'Int'
  | 'BigInt'
  | 'Float'
  | 'Decimal'
  | 'Boolean'
  | 'DateTime'
  | 'Json'
  | 'Bytes'
  | 'Enum';

/** How a value the client left out is filled in when no database default covers it. */
export type ClientDefault = 'uuid4' | 'uuid7' | 'cuid' | 'nanoid' | 'ulid' | 'now';

export interface FieldSpec {
  readonly name: string;
  readonly column: string;
  readonly type: ScalarType;
  /** Values of an enum field, in declaration order. */
  readonly enumValues?: readonly string[];
  /** Database type name of the enum (Prisma `@@map` or the enum name). */
  readonly enumDbName?: string;
  /** Prisma native type such as `Uuid` or `VarChar`, with its arguments. */
  readonly nativeType?: readonly [string, readonly string[]];
  readonly list: boolean;
  readonly nullable: boolean;
  readonly id: boolean;
  readonly unique: boolean;
  /** The database fills the value in when the insert leaves it out. */
  readonly dbDefault: boolean;
  /** The runtime fills the value in (Prisma computes these client-side, so the SQL has no default). */
  readonly clientDefault?: ClientDefault;
  /** Set by the server on every write (`@updatedAt`, and `createdAt`): never taken from a body. */
  readonly managed: boolean;
  /**
   * The field holds the id of a file of this bucket (`/// @svcgen.file(<bucket>)` on the field,
   * docs/storage.md "Records that reference files"): a write must name a file the caller may read.
   */
  readonly file?: FileReference;
}

export interface FileReference {
  readonly bucket: string;
  /** What deleting the record does to the file: `keep` it (the default) or `delete` it in the same transaction. */
  readonly onDelete: 'keep' | 'delete';
}

export interface RelationSpec {
  readonly name: string;
  readonly target: string;
  /** `one`: at most one related record (foreign key on either side); `many`: a list. */
  readonly kind: 'one' | 'many';
  /** Columns of this table joined to `targetFields` of the target table. */
  readonly fields: readonly string[];
  readonly targetFields: readonly string[];
  readonly nullable: boolean;
}

/**
 * A B-tree index the schema declares (`@id`, `@unique`, `@@id`, `@@unique`, `@@index`): its fields
 * in index order, a field the index keeps in descending order written `-field` as in the API's
 * `sort`. Other index kinds (Hash, GIN, GiST, ...) are left out. Only runtime/data/cost.ts reads these.
 */
export interface IndexSpec {
  readonly fields: readonly string[];
  /** Declared by `@id`, `@@id`, `@unique` or `@@unique`: equality on every field finds at most one row. */
  readonly unique: boolean;
}

export interface TableSpec {
  readonly name: string;
  readonly dbName: string;
  readonly primaryKey: readonly string[];
  readonly fields: readonly FieldSpec[];
  readonly relations: readonly RelationSpec[];
  /** The primary key first, then the other indexes as the schema declares them. */
  readonly indexes: readonly IndexSpec[];
}

export interface TableValidators {
  /** Body of POST: writable fields, required ones required, unknown keys rejected. */
  readonly create: ZodType;
  /** Body of PATCH (JSON Merge Patch): every writable field optional, unknown keys rejected. */
  readonly update: ZodType;
}

export interface TableModule {
  readonly spec: TableSpec;
  readonly validators: TableValidators;
}

export type Operation =
  | 'list'
  | 'create'
  | 'updateMany'
  | 'read'
  | 'update'
  | 'delete'
  | 'bulkCreate'
  | 'bulkDelete'
  | 'aggregate'
  | 'query';

export interface RouteSpec {
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** Path below `/gw/api/rest`, e.g. `/Order/:id`. */
  readonly path: string;
  readonly table: string;
  readonly operation: Operation;
}

export interface ServiceModule {
  readonly tables: Readonly<Record<string, TableModule>>;
  readonly routes: readonly RouteSpec[];
  readonly openapi: unknown;
  /**
   * The project's generated `createClient` (generated/client.ts): the server runs it in process as
   * the data API of user code (docs/own-code.md "The context and the data API"), so that its errors
   * are the project's own `ServiceError`. Absent in generated/ of an svcgen before it.
   */
  readonly client?: (options: { baseUrl: string; projectId: string; fetch: typeof fetch }) => object;
  /** The configured PostgreSQL functions (generated/functions.ts); absent when there are none. */
  readonly functions?: readonly FunctionSpec[];
}

/** Text columns (plain or with a character native type): the ones LIKE and '' apply to. */
export function isTextField(field: FieldSpec): boolean {
  if (field.type !== 'String') return false;
  const native = field.nativeType?.[0];
  return native === undefined || native === 'Text' || native === 'VarChar' || native === 'Char' || native === 'Citext';
}

/** Identity helpers: they keep generated modules declarative while giving them checked types. */
export function defineTable<const T extends TableModule>(table: T): T {
  return table;
}

export function defineService<const T extends ServiceModule>(service: T): T {
  return service;
}
