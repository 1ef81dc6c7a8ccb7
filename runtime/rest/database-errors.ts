/**
 * PostgreSQL constraint errors → Problems naming the field, never the SQL text. Anything not
 * listed here is rethrown: database faults (unreachable, statement or pool-wait timeout) become a
 * 503 in errorReply (runtime/http/reply.ts, the one mapping for every route), the rest a 500.
 */
import { Problem } from '../http/index.ts';
import { ROW_FILTER_SQLSTATE, type CatalogTable } from '../query/index.ts';

interface PgError {
  code?: string;
  detail?: string;
  column?: string;
  table?: string;
}

function fieldName(table: CatalogTable, column: string): string {
  for (const f of table.spec.fields) if (f.column === column) return f.name;
  return column;
}

/** `Key (a, b)=(1, 2) ...` → ['a', 'b'] */
function keyColumns(detail: string | undefined): string[] {
  const m = /^Key \((.+?)\)=/.exec(detail ?? '');
  if (!m) return [];
  return m[1]!.split(', ').map((c) => c.replace(/^"|"$/g, '').replace(/""/g, '"'));
}

/**
 * The Problem for a database refusal of a write on `table`, or undefined for anything else.
 * `filterFields` are the fields of the role filters the written rows had to match (row_filter).
 */
export function databaseProblem(error: unknown, table: CatalogTable, filterFields: readonly string[] = []): Problem | undefined {
  const e = error as PgError;
  if (typeof e?.code !== 'string') return undefined;
  switch (e.code) {
    case ROW_FILTER_SQLSTATE:
      return new Problem(
        'forbidden',
        `the ${table.spec.name} record would not match your role's filter on ${filterFields.join(', ') || 'its rows'}; nothing was changed`,
        filterFields.map((field) => ({ field, rule: 'row_filter', message: `${field} must match your role's filter` })),
      );
    case '23505': {
      const fields = keyColumns(e.detail).map((c) => fieldName(table, c));
      const list = fields.join(', ') || 'a unique field';
      return new Problem(
        'conflict',
        `a ${table.spec.name} record with the same ${list} already exists`,
        fields.map((field) => ({ field, rule: 'unique', message: `${field} must be unique` })),
      );
    }
    case '23001': // restrict_violation (PostgreSQL 18 reports ON DELETE RESTRICT with it)
    case '23503': {
      const referenced = /is (?:still )?referenced from table "(.+?)"/.exec(e.detail ?? '');
      if (referenced) {
        return new Problem('conflict', `the ${table.spec.name} record is still referenced by ${referenced[1]} records; delete or change those first`);
      }
      const fields = keyColumns(e.detail).map((c) => fieldName(table, c));
      const target = /not present in table "(.+?)"/.exec(e.detail ?? '')?.[1] ?? 'the related table';
      return new Problem(
        'validation',
        `${fields.join(', ') || 'a foreign key'} must name an existing ${target} record`,
        fields.map((field) => ({ field, rule: 'foreign_key', message: `no ${target} record matches this ${field}` })),
      );
    }
    case '23502': {
      const field = e.column ? fieldName(table, e.column) : 'a field';
      return new Problem('validation', `${field} must not be null`, [{ field, rule: 'required', message: `${field} must not be null` }]);
    }
    case '23514':
      return new Problem('validation', 'the record violates a check constraint of the table');
    case '22001':
    case '22003':
    case '22007':
    case '22008':
    case '22P02':
    case '22023':
    case '2200N':
    case '22021':
      return new Problem('validation', 'a value does not fit its field (too long, out of range or malformed)');
    default:
      return undefined;
  }
}
