/**
 * Prisma's data-loss check of `migrate dev`, per environment. Prisma's engine does this in its
 * evaluateDataLoss command, which the WebAssembly engine cannot run on PostgreSQL (it has no way to
 * be given a shadow database there), so the same checks are made here from the migration SQL the
 * engine wrote, with Prisma's messages (sql_destructive_change_checker/{warning,unexecutable_step}_check.rs)
 * and the row counts of each environment's schema.
 */
import type { Queryable } from '../runtime/db/index.ts';

export type MigrationCheck =
  | { kind: 'dropTable'; table: string }
  | { kind: 'dropColumn'; table: string; column: string }
  | { kind: 'dropAndRecreateColumn'; table: string; column: string }
  | { kind: 'dropAndRecreateRequiredColumn'; table: string; column: string }
  | { kind: 'addRequiredColumn'; table: string; column: string }
  | { kind: 'madeRequired'; table: string; column: string }
  | { kind: 'cast'; table: string; column: string; nextType: string; castable: boolean }
  | { kind: 'primaryKeyChange'; table: string }
  | { kind: 'uniqueAddition'; table: string; columns: string[] }
  | { kind: 'enumValueRemoval'; enumName: string; nextValues: string[] };

const NAME = '"((?:[^"]|"")+)"';
const unquote = (name: string) => name.replace(/""/g, '"');

/** The statements of a script as Prisma's engine writes them (one per `;` at a line end). */
function statements(sql: string): string[] {
  return sql
    .replace(/^--.*$/gm, '')
    .split(/;[ \t]*(?:\r?\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The checks a migration script needs, read from the SQL of Prisma's schema engine. */
export function planMigrationChecks(sql: string): MigrationCheck[] {
  const checks: MigrationCheck[] = [];
  const created = new Set<string>();
  for (const statement of statements(sql)) {
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^CREATE TABLE ${NAME}`).exec(statement))) {
      created.add(unquote(m[1]));
    } else if ((m = new RegExp(`^DROP TABLE ${NAME}$`).exec(statement))) {
      checks.push({ kind: 'dropTable', table: unquote(m[1]) });
    } else if ((m = new RegExp(`^CREATE UNIQUE INDEX ${NAME} ON ${NAME}\\s*\\((.*)\\)$`, 's').exec(statement))) {
      const table = unquote(m[2]);
      if (!created.has(table)) {
        const columns = [...m[3].matchAll(new RegExp(NAME, 'g'))].map((c) => unquote(c[1]));
        checks.push({ kind: 'uniqueAddition', table, columns });
      }
    } else if (
      (m = new RegExp(`^CREATE TYPE ${NAME} AS ENUM \\((.*)\\)$`, 's').exec(statement)) &&
      m[1].endsWith('_new')
    ) {
      const nextValues = [...m[2].matchAll(/'((?:[^']|'')*)'/g)].map((v) => v[1].replace(/''/g, "'"));
      checks.push({ kind: 'enumValueRemoval', enumName: unquote(m[1]).slice(0, -'_new'.length), nextValues });
    } else if ((m = new RegExp(`^ALTER TABLE ${NAME} (.*)$`, 's').exec(statement))) {
      const table = unquote(m[1]);
      if (created.has(table)) continue;
      checks.push(...alterTableChecks(table, m[2].split(/,\s*\n\s*/)));
    }
  }
  return checks;
}

function alterTableChecks(table: string, clauses: string[]): MigrationCheck[] {
  const dropped = new Set<string>();
  const checks: MigrationCheck[] = [];
  let droppedPrimaryKey = false;
  for (const clause of clauses.map((c) => c.trim())) {
    let m: RegExpExecArray | null;
    if ((m = new RegExp(`^DROP COLUMN ${NAME}$`).exec(clause))) {
      dropped.add(unquote(m[1]));
    } else if ((m = new RegExp(`^ADD COLUMN\\s+${NAME}\\s+(.*)$`, 's').exec(clause))) {
      const column = unquote(m[1]);
      const definition = m[2];
      const required =
        /\bNOT NULL\b/i.test(definition) &&
        !/\bDEFAULT\b/i.test(definition) &&
        !/^(SMALL|BIG)?SERIAL\b/i.test(definition) &&
        !/\bGENERATED\b/i.test(definition);
      if (dropped.has(column)) {
        dropped.delete(column);
        checks.push({ kind: required ? 'dropAndRecreateRequiredColumn' : 'dropAndRecreateColumn', table, column });
      } else if (required) {
        checks.push({ kind: 'addRequiredColumn', table, column });
      }
    } else if ((m = new RegExp(`^ALTER COLUMN ${NAME} SET NOT NULL$`).exec(clause))) {
      checks.push({ kind: 'madeRequired', table, column: unquote(m[1]) });
    } else if ((m = new RegExp(`^ALTER COLUMN ${NAME} SET DATA TYPE (.*?)(\\s+USING\\s.*)?$`, 's').exec(clause))) {
      // An enum being replaced (`TYPE "E_new" USING ...`) is checked as enumValueRemoval.
      if (/_new"$/.test(m[2])) continue;
      checks.push({ kind: 'cast', table, column: unquote(m[1]), nextType: m[2].trim(), castable: m[3] === undefined });
    } else if (/^DROP CONSTRAINT "(?:[^"]|"")+_pkey"$/.test(clause)) {
      droppedPrimaryKey = true;
    } else if (droppedPrimaryKey && /^ADD CONSTRAINT .* PRIMARY KEY/.test(clause)) {
      checks.push({ kind: 'primaryKeyChange', table });
    }
  }
  for (const column of dropped) checks.unshift({ kind: 'dropColumn', table, column });
  return checks;
}

/** What the database holds for a check; undefined = not known (Prisma's offline wording). */
export interface CheckCounts {
  rows?: number;
  nonNull?: number;
  /** dropped enum values still declared (enumValueRemoval) */
  removedValues?: string[];
  /** the column's current type (cast), Prisma's name for it */
  previousType?: string;
}

export interface CheckResult {
  warning?: string;
  unexecutable?: string;
}

/** Prisma's words for a check given what the database holds (none when the data makes it harmless). */
export function describeCheck(check: MigrationCheck, counts: CheckCounts = {}): CheckResult {
  const { rows, nonNull } = counts;
  const safe = rows === 0 || nonNull === 0;
  switch (check.kind) {
    case 'dropTable':
      if (rows === 0) return {};
      return {
        warning:
          rows === undefined
            ? `You are about to drop the \`${check.table}\` table. If the table is not empty, all the data it contains will be lost.`
            : `You are about to drop the \`${check.table}\` table, which is not empty (${rows} rows).`,
      };
    case 'dropColumn':
      if (safe) return {};
      return {
        warning:
          nonNull === undefined
            ? `You are about to drop the column \`${check.column}\` on the \`${check.table}\` table. All the data in the column will be lost.`
            : `You are about to drop the column \`${check.column}\` on the \`${check.table}\` table, which still contains ${nonNull} non-null values.`,
      };
    case 'dropAndRecreateColumn':
      if (safe) return {};
      return {
        warning: `The \`${check.column}\` column on the \`${check.table}\` table would be dropped and recreated. This will lead to data loss${nonNull === undefined ? ' if there is data in the column' : ''}.`,
      };
    case 'dropAndRecreateRequiredColumn':
      if (rows === 0) return {};
      return {
        unexecutable:
          rows === undefined
            ? `Changed the type of \`${check.column}\` on the \`${check.table}\` table. No cast exists, the column would be dropped and recreated, which cannot be done if there is data, since the column is required.`
            : `Changed the type of \`${check.column}\` on the \`${check.table}\` table. No cast exists, the column would be dropped and recreated, which cannot be done since the column is required and there is data in the table.`,
      };
    case 'addRequiredColumn':
      if (rows === 0) return {};
      return {
        unexecutable: `Added the required column \`${check.column}\` to the \`${check.table}\` table without a default value. ${
          rows === undefined
            ? 'This is not possible if the table is not empty.'
            : `There are ${rows} rows in this table, it is not possible to execute this step.`
        }`,
      };
    case 'madeRequired': {
      if (rows === 0) return {};
      if (rows === undefined || nonNull === undefined) {
        return {
          unexecutable: `Made the column \`${check.column}\` on table \`${check.table}\` required. This step will fail if there are existing NULL values in that column.`,
        };
      }
      const nulls = rows - nonNull;
      if (nulls === 0) return {};
      return {
        unexecutable: `Made the column \`${check.column}\` on table \`${check.table}\` required, but there are ${nulls} existing NULL values.`,
      };
    }
    case 'cast': {
      if (safe) return {};
      const previous = counts.previousType ?? 'unknown';
      const next = prismaTypeName(check.nextType);
      if (isSafeCast(previous, next)) return {};
      const types = `The data in that column will be cast from \`${previous}\` to \`${next}\`.`;
      if (check.castable) {
        return {
          warning:
            nonNull === undefined
              ? `You are about to alter the column \`${check.column}\` on the \`${check.table}\` table. The data in that column could be lost. ${types}`
              : `You are about to alter the column \`${check.column}\` on the \`${check.table}\` table, which contains ${nonNull} non-null values. ${types}`,
        };
      }
      const mayFail = 'This cast may fail. Please make sure the data in the column can be cast.';
      return {
        warning:
          nonNull === undefined
            ? `You are about to alter the column \`${check.column}\` on the \`${check.table}\` table. ${types} ${mayFail}`
            : `You are about to alter the column \`${check.column}\` on the \`${check.table}\` table, which contains ${nonNull} non-null values. ${types} ${mayFail}`,
      };
    }
    case 'primaryKeyChange':
      if (rows === 0) return {};
      return {
        warning: `The primary key for the \`${check.table}\` table will be changed. If it partially fails, the table could be left without primary key constraint.`,
      };
    case 'uniqueAddition':
      return {
        warning: `A unique constraint covering the columns \`[${check.columns.join(',')}]\` on the table \`${check.table}\` will be added. If there are existing duplicate values, this will fail.`,
      };
    case 'enumValueRemoval': {
      const removed = counts.removedValues;
      if (removed !== undefined && removed.length === 0) return {};
      return {
        warning: `The values [${(removed ?? ['?']).join(',')}] on the enum \`${check.enumName}\` will be removed. If these variants are still used in the database, this will fail.`,
      };
    }
  }
}

/** Prisma's name of a PostgreSQL type (its PostgresType), from SQL or from format_type(). */
export function prismaTypeName(sqlType: string): string {
  const t = sqlType.trim().replace(/\s+/g, ' ');
  const array = /\[\]$/.test(t) ? '[]' : '';
  const base = t.replace(/\[\]$/, '').toLowerCase();
  const args = /\(([^)]*)\)/.exec(base)?.[1]?.replace(/\s/g, '');
  const name = base.replace(/\(.*?\)/, '').trim();
  const withArgs = (n: string) => (args === undefined ? n : `${n}(${args})`);
  const names: Record<string, string> = {
    integer: 'Integer',
    int: 'Integer',
    int4: 'Integer',
    bigint: 'BigInt',
    int8: 'BigInt',
    smallint: 'SmallInt',
    int2: 'SmallInt',
    'double precision': 'DoublePrecision',
    real: 'Real',
    text: 'Text',
    boolean: 'Boolean',
    uuid: 'Uuid',
    json: 'Json',
    jsonb: 'JsonB',
    date: 'Date',
    bytea: 'ByteA',
    xml: 'Xml',
    inet: 'Inet',
    money: 'Money',
    oid: 'Oid',
  };
  if (names[name]) return names[name] + array;
  if (name === 'character varying' || name === 'varchar') return withArgs('VarChar') + array;
  if (name === 'character' || name === 'char') return withArgs('Char') + array;
  if (name === 'numeric' || name === 'decimal') return withArgs('Decimal') + array;
  if (name === 'timestamp' || name === 'timestamp without time zone') return withArgs('Timestamp') + array;
  if (name === 'timestamptz' || name === 'timestamp with time zone') return withArgs('Timestamptz') + array;
  if (name === 'time' || name === 'time without time zone') return withArgs('Time') + array;
  if (name === 'timetz' || name === 'time with time zone') return withArgs('Timetz') + array;
  return t.replace(/"/g, '');
}

/** Conversions PostgreSQL makes without losing data, for which Prisma warns nothing. */
function isSafeCast(previous: string, next: string): boolean {
  if (previous === next) return true;
  const base = (t: string) => t.replace(/\(.*\)/, '');
  const size = (t: string) => Number(/\((\d+)\)/.exec(t)?.[1] ?? Infinity);
  const widening: Record<string, string[]> = {
    SmallInt: ['Integer', 'BigInt', 'Decimal', 'DoublePrecision', 'Text'],
    Integer: ['BigInt', 'Decimal', 'Text'],
    BigInt: ['Decimal', 'Text'],
    Real: ['DoublePrecision', 'Text'],
    VarChar: ['Text'],
    Char: ['Text', 'VarChar'],
    Uuid: ['Text', 'VarChar'],
    Boolean: ['Text'],
  };
  if (base(previous) === 'VarChar' && base(next) === 'VarChar') return size(next) >= size(previous);
  if (base(next) === 'VarChar' && previous === 'Uuid') return size(next) >= 36;
  return widening[base(previous)]?.includes(base(next)) ?? false;
}

/** What each environment's data says about the checks: its warnings and unexecutable steps, in Prisma's words. */
export interface EnvironmentFindings {
  environment: string;
  warnings: string[];
  unexecutable: string[];
}

/** Counts what each check needs in `schema` (an environment's PostgreSQL schema, migrated up to date). */
export async function countForCheck(db: Queryable, schema: string, check: MigrationCheck): Promise<CheckCounts> {
  const q = (name: string) => `"${name.replace(/"/g, '""')}"`;
  if (check.kind === 'uniqueAddition') return {};
  if (check.kind === 'enumValueRemoval') {
    const rows = await db.query<{ label: string }>(
      `SELECT e.enumlabel AS label FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid JOIN pg_namespace n ON n.oid = t.typnamespace
       WHERE n.nspname = $1 AND t.typname = $2 ORDER BY e.enumsortorder`,
      [schema, check.enumName],
    );
    return { removedValues: rows.map((r) => r.label).filter((label) => !check.nextValues.includes(label)) };
  }
  const table = `${q(schema)}.${q(check.table)}`;
  const [exists] = await db.query<{ t: string | null }>('SELECT to_regclass($1) AS t', [table]);
  if (!exists?.t) return {};
  if (!('column' in check)) {
    const [r] = await db.query<{ rows: string }>(`SELECT count(*) AS rows FROM ${table}`);
    return { rows: Number(r.rows) };
  }
  const [r] = await db
    .query<{ rows: string; non_null: string; type: string | null }>(
      `SELECT count(*) AS rows, count(${q(check.column)}) AS non_null,
            (SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attname = $2 AND NOT a.attisdropped) AS type
       FROM ${table}`,
      [table, check.column],
    )
    .catch(async () => {
      // The column does not exist in this environment: only the row count means something.
      const [c] = await db.query<{ rows: string }>(`SELECT count(*) AS rows FROM ${table}`);
      return [{ rows: c.rows, non_null: '0', type: null }];
    });
  return {
    rows: Number(r.rows),
    nonNull: Number(r.non_null),
    previousType: r.type === null ? undefined : prismaTypeName(r.type),
  };
}

/** Prisma's warnings for each environment (PostgreSQL schema `env_<name>`), with its row counts. */
export async function evaluateMigrationChecks(
  db: Queryable,
  environments: readonly { name: string; schema: string }[],
  checks: readonly MigrationCheck[],
): Promise<EnvironmentFindings[]> {
  const findings: EnvironmentFindings[] = [];
  for (const environment of environments) {
    const found: EnvironmentFindings = { environment: environment.name, warnings: [], unexecutable: [] };
    for (const check of checks) {
      const result = describeCheck(check, await countForCheck(db, environment.schema, check));
      if (result.warning) found.warnings.push(result.warning);
      if (result.unexecutable) found.unexecutable.push(result.unexecutable);
    }
    findings.push(found);
  }
  return findings;
}

/**
 * The comment `prisma migrate dev` puts at the top of a migration.sql with warnings: the messages
 * without row counts. Empty when there is nothing to say.
 */
export function warningsHeader(
  checks: readonly MigrationCheck[],
  typeOf: (check: MigrationCheck) => CheckCounts = () => ({}),
): string {
  const lines: string[] = [];
  for (const check of checks) {
    const { warning, unexecutable } = describeCheck(check, typeOf(check));
    for (const message of [unexecutable, warning]) if (message) lines.push(`  - ${message}`);
  }
  return lines.length === 0 ? '' : `/*\n  Warnings:\n\n${lines.join('\n')}\n\n*/\n`;
}

/** The findings as printed before the question or the refusal (one block per environment with something to say). */
export function formatFindings(findings: readonly EnvironmentFindings[]): string {
  const blocks: string[] = [];
  for (const f of findings) {
    if (f.warnings.length > 0) {
      blocks.push(`⚠️  Warnings for environment ${f.environment}:\n\n${f.warnings.map((w) => `  • ${w}`).join('\n')}\n`);
    }
    if (f.unexecutable.length > 0) {
      blocks.push(
        `⚠️  We found changes that cannot be executed in environment ${f.environment}:\n\n${f.unexecutable.map((w) => `  • ${w}`).join('\n')}\n`,
      );
    }
  }
  return blocks.join('\n');
}
