/**
 * PostgreSQL functions served as endpoints (docs/own-code.md "Database functions"): their
 * signatures as `svcgen generate` reads them from the migrations, written into
 * generated/functions.ts. The server validates arguments from them, and checks them against the
 * database (pg_proc) at start.
 */

/**
 * A PostgreSQL type a function may take or return, by its internal name (pg_type.typname):
 * `int4` for `integer`, `float8` for `double precision`, `timestamptz` for `timestamp with time zone`.
 */
export type FunctionBaseType =
  | 'int2'
  | 'int4'
  | 'int8'
  | 'numeric'
  | 'float4'
  | 'float8'
  | 'text'
  | 'varchar'
  | 'bool'
  | 'date'
  | 'timestamp'
  | 'timestamptz'
  | 'uuid'
  | 'json'
  | 'jsonb';

export interface FunctionType {
  /** A built-in type, or `enum` for an enum of the Prisma schema. */
  readonly base: FunctionBaseType | 'enum';
  /** The enum's database name (pg_type.typname) and values, when base is `enum`. */
  readonly enumName?: string;
  readonly enumValues?: readonly string[];
  /** An array of the type (`integer[]`): one dimension. */
  readonly array: boolean;
}

export interface FunctionArgument {
  readonly name: string;
  readonly type: FunctionType;
  /** Declared with DEFAULT: the caller may leave it out. */
  readonly hasDefault: boolean;
}

/** A column of what a function returns, for `RETURNS TABLE(...)` and `RETURNS SETOF <table>`. */
export interface FunctionColumn {
  /** The name in the answer (a model's field name for `SETOF <table>`). */
  readonly name: string;
  /** The database column (differs from name for a field mapped with @map). */
  readonly column: string;
  readonly type: FunctionType | 'other';
}

export type FunctionReturns =
  | { readonly kind: 'void' }
  | { readonly kind: 'scalar'; readonly type: FunctionType; readonly set: boolean }
  | { readonly kind: 'table'; readonly columns: readonly FunctionColumn[] }
  /** `SETOF <model's table>`: rows of that table, by field name. */
  | {
      readonly kind: 'rows';
      readonly table: string;
      readonly tableDbName: string;
      readonly columns: readonly FunctionColumn[];
    };

export type FunctionVolatility = 'volatile' | 'stable' | 'immutable';

export interface FunctionSpec {
  /** The SQL name (a lower-case identifier) and the name in the URL, GraphQL and the client. */
  readonly name: string;
  readonly arguments: readonly FunctionArgument[];
  readonly returns: FunctionReturns;
  readonly volatility: FunctionVolatility;
  /** The migration whose definition this is (the last one that defines the name). */
  readonly migration: string;
}

/** The type in words, for messages: `a whole number (int4)`, `one of PENDING, PAID`. */
export function functionTypeDescription(type: FunctionType): string {
  const one = (() => {
    switch (type.base) {
      case 'int2':
      case 'int4':
        return `a whole number (${type.base})`;
      case 'int8':
        return 'a whole number (int8), as a number or a string of digits';
      case 'numeric':
        return 'a decimal number, as a number or a string';
      case 'float4':
      case 'float8':
        return `a number (${type.base})`;
      case 'text':
      case 'varchar':
        return 'a string';
      case 'bool':
        return 'true or false';
      case 'date':
        return 'a date (YYYY-MM-DD)';
      case 'timestamp':
        return 'a date and time (ISO 8601)';
      case 'timestamptz':
        return 'a date and time with an offset or Z (ISO 8601)';
      case 'uuid':
        return 'a UUID';
      case 'json':
      case 'jsonb':
        return 'any JSON value';
      case 'enum':
        return `one of ${(type.enumValues ?? []).join(', ')}`;
    }
  })();
  return type.array ? `an array of ${one.replace(/^an? /, '')}s` : one;
}
