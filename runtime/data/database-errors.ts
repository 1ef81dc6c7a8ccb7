/**
 * PostgreSQL constraint errors → Problems naming the field, never the SQL text. Anything not
 * listed here is rethrown: database faults (unreachable, statement or pool-wait timeout) become a
 * 503 in errorReply (runtime/http/reply.ts, the one mapping for every route), the rest a 500.
 */
import { Problem } from '../http/index.ts';
import type { FieldSpec } from '../model/index.ts';
import { FILE_REFERENCE_SQLSTATE, ROW_FILTER_SQLSTATE, toParameter, type CatalogTable } from '../query/index.ts';
import { fieldDescription } from './field-rules.ts';

interface PgError {
  code?: string;
  message?: string;
  detail?: string;
  column?: string;
  table?: string;
}

/** "a Customer", "an Invoice": the record named in a conflict's detail. */
function aRecord(table: CatalogTable): string {
  return `${/^[aeiou]/i.test(table.spec.name) ? 'an' : 'a'} ${table.spec.name}`;
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
 * `filterFields` are the fields of the role filters the written rows had to match (row_filter);
 * `written` the field values the statement wrote, to name the field a value error is about.
 */
export function databaseProblem(
  error: unknown,
  table: CatalogTable,
  filterFields: readonly string[] = [],
  written: Readonly<Record<string, unknown>> = {},
): Problem | undefined {
  const e = error as PgError;
  if (typeof e?.code !== 'string') return undefined;
  switch (e.code) {
    case FILE_REFERENCE_SQLSTATE: {
      // The same answer whether the file does not exist or the caller may not read it (docs/storage.md).
      const field = e.detail ?? '';
      const bucket = table.fields.get(field)?.file?.bucket ?? '';
      const message = `must be the id of a file in bucket ${bucket} that you may read`;
      return new Problem('validation', `${field} ${message}; nothing was changed`, [
        { field, rule: 'file_reference', message },
      ]);
    }
    case ROW_FILTER_SQLSTATE:
      return new Problem(
        'forbidden',
        `the ${table.spec.name} record would not match your role's filter on ${filterFields.join(', ') || 'its rows'}; nothing was changed`,
        filterFields.map((field) => ({ field, rule: 'row_filter', message: `${field} must match your role's filter` })),
      );
    case '23505': {
      const fields = keyColumns(e.detail).map((c) => fieldName(table, c));
      if (fields.length > 1) {
        // A composite unique key (@@unique or @@id) is one conflict: no field alone is taken.
        const combination = `${fields.slice(0, -1).join(', ')} and ${fields.at(-1)}`;
        return new Problem('conflict', `${aRecord(table)} record with the same ${combination} already exists`, [
          { field: fields.join(','), rule: 'unique', message: `the combination of ${combination} is already used` },
        ]);
      }
      const list = fields.join(', ') || 'a unique field';
      return new Problem(
        'conflict',
        `${aRecord(table)} record with the same ${list} already exists`,
        fields.map((field) => ({ field, rule: 'unique', message: `${field} must be unique` })),
      );
    }
    case '23001': // restrict_violation (PostgreSQL 18 reports ON DELETE RESTRICT with it)
    case '23503': {
      const referenced = /is (?:still )?referenced from table "(.+?)"/.exec(e.detail ?? '');
      if (referenced) {
        return new Problem(
          'conflict',
          `the ${table.spec.name} record is still referenced by ${referenced[1]} records; delete or change those first`,
        );
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
      return new Problem('validation', `${field} must not be null`, [
        { field, rule: 'required', message: `${field} must not be null` },
      ]);
    }
    case '23514':
      return new Problem('validation', 'the record violates a check constraint of the table');
    case '22001':
    case '22003':
    case '22007':
    case '22008':
    case '22P02':
    case '22P05':
    case '22023':
    case '2200N':
    case '22021':
      return dataProblem(e, table, written);
    default:
      return undefined;
  }
}

/** Scalar types whose values can raise each data exception (SQLSTATE class 22). */
const RAISED_BY: Record<string, readonly string[]> = {
  '22001': ['String'],
  '22003': ['Int', 'BigInt', 'Float', 'Decimal'],
  '22007': ['DateTime'],
  '22008': ['DateTime'],
  '22P05': ['Json'],
  '22021': ['String', 'Json'],
};

/**
 * A value the database refused (too long, out of range, malformed) though validation let it
 * through, e.g. a `@db.Real` beyond a 4-byte float or a `@db.Money` amount: PostgreSQL does not
 * name the column, so the field is found among the written ones by type, then by the value or
 * the precision its message quotes. Each candidate is named with what it takes; when it cannot
 * be narrowed to one, every written field of a type that can raise the error is named.
 */
function dataProblem(e: PgError, table: CatalogTable, written: Readonly<Record<string, unknown>>): Problem {
  const types = RAISED_BY[e.code!];
  let candidates = Object.keys(written)
    .map((name) => table.fields.get(name))
    .filter((f): f is FieldSpec => f !== undefined && (!types || types.includes(f.type)));
  const message = `${e.message ?? ''} ${e.detail ?? ''}`;
  const quoted = /"((?:[^"]|"")*)"/.exec(e.message ?? '')?.[1];
  const precision = /precision (\d+), scale (\d+)/.exec(message);
  const narrowed = candidates.filter((f) => {
    if (quoted !== undefined) {
      const value = toParameter(f, written[f.name]);
      return (Array.isArray(value) ? value : [value]).some((v) => v !== null && String(v) === quoted);
    }
    if (precision)
      return (
        f.nativeType?.[0] === 'Decimal' &&
        f.nativeType[1][0] === precision[1] &&
        (f.nativeType[1][1] ?? '0') === precision[2]
      );
    return false;
  });
  if (narrowed.length > 0) candidates = narrowed;
  const rule = e.code === '22001' || e.code === '22003' ? 'max' : 'format';
  const errors = candidates.map((f) => ({
    field: f.name,
    rule,
    message: `${f.name}: expected ${fieldDescription(f)}`,
  }));
  const detail = errors.length
    ? errors.map((x) => x.message).join('; ')
    : 'a value does not fit its field (too long, out of range or malformed)';
  return new Problem('validation', detail, errors);
}
