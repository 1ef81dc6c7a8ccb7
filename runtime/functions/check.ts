/**
 * At start, the configured functions against the database (docs/own-code.md "Database
 * functions"): in every environment's schema, one function of each name with the signature
 * `svcgen generate` read from the migrations: its arguments (names, types, how many have a
 * DEFAULT), what it returns and its volatility. Anything else refuses the start, saying what differs.
 */
import type { Queryable } from '../db/index.ts';
import { environmentSchema } from '../db/index.ts';
import type { FunctionSpec, FunctionType } from '../model/index.ts';

export class FunctionSignatureDrift extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FunctionSignatureDrift';
  }
}

interface ProcRow {
  schema: string;
  name: string;
  arg_names: string[] | null;
  arg_modes: string[] | null;
  arg_types: string[];
  defaults: number;
  retset: boolean;
  return_type: string;
  volatility: string;
  kind: string;
}

/** A type as pg_type names it: `int4`, `OrderStatus`, `_int4` written `int4[]`. */
const TYPE_NAME = `CASE WHEN t.typcategory = 'A' AND e.oid IS NOT NULL THEN e.typname::text || '[]' ELSE t.typname::text END`;

const PROCS = `
SELECT n.nspname::text AS schema, p.proname::text AS name, p.proargnames AS arg_names, p.proargmodes::text[] AS arg_modes,
  ARRAY(SELECT ${TYPE_NAME} FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY AS a(oid, n)
        JOIN pg_type t ON t.oid = a.oid LEFT JOIN pg_type e ON e.oid = t.typelem ORDER BY a.n) AS arg_types,
  p.pronargdefaults::int AS defaults, p.proretset AS retset,
  (SELECT ${TYPE_NAME} FROM pg_type t LEFT JOIN pg_type e ON e.oid = t.typelem WHERE t.oid = p.prorettype) AS return_type,
  p.provolatile::text AS volatility, p.prokind::text AS kind
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = ANY($1::text[]) AND p.proname = ANY($2::text[])`;

function typeName(type: FunctionType): string {
  return `${type.base === 'enum' ? (type.enumName ?? '') : type.base}${type.array ? '[]' : ''}`;
}

const VOLATILITY: Record<string, string> = { v: 'volatile', s: 'stable', i: 'immutable' };

/** The signature as svcgen reads it, for messages: `sales_report(since date, status "OrderStatus" DEFAULT) RETURNS TABLE(...)`. */
function describeSpec(spec: FunctionSpec): string {
  const args = spec.arguments.map((a) => `${a.name} ${typeName(a.type)}${a.hasDefault ? ' DEFAULT' : ''}`).join(', ');
  return `${spec.name}(${args}) RETURNS ${describeReturns(spec)} ${spec.volatility.toUpperCase()}`;
}

function describeReturns(spec: FunctionSpec): string {
  const r = spec.returns;
  switch (r.kind) {
    case 'void':
      return 'void';
    case 'scalar':
      return `${r.set ? 'SETOF ' : ''}${typeName(r.type)}`;
    case 'table':
      return `TABLE(${r.columns.map((c) => `${c.name} ${c.type === 'other' ? '?' : typeName(c.type)}`).join(', ')})`;
    case 'rows':
      return `SETOF ${r.tableDbName}`;
  }
}

function describeRow(row: ProcRow): string {
  const modes = row.arg_modes ?? row.arg_types.map(() => 'i');
  const names = row.arg_names ?? [];
  const inArgs: string[] = [];
  const columns: string[] = [];
  row.arg_types.forEach((type, i) => {
    const text = `${names[i] || '?'} ${type}`;
    if (modes[i] === 't') columns.push(text);
    else inArgs.push(text);
  });
  const returns =
    columns.length > 0 ? `TABLE(${columns.join(', ')})` : `${row.retset ? 'SETOF ' : ''}${row.return_type}`;
  return `${row.name}(${inArgs.join(', ')}) RETURNS ${returns} ${(VOLATILITY[row.volatility] ?? row.volatility).toUpperCase()}, ${row.defaults} with DEFAULT`;
}

/** What differs between the migrations' signature and the database's function, or undefined. */
function difference(spec: FunctionSpec, row: ProcRow): string | undefined {
  if (row.kind !== 'f')
    return `${row.name} is a ${row.kind === 'p' ? 'procedure' : 'aggregate or window function'}, not a function`;
  const modes = row.arg_modes ?? row.arg_types.map(() => 'i');
  const names = row.arg_names ?? [];
  const inArgs = row.arg_types
    .map((type, i) => ({ type, name: names[i] ?? '', mode: modes[i] }))
    .filter((a) => a.mode !== 't');
  const columns = row.arg_types
    .map((type, i) => ({ type, name: names[i] ?? '', mode: modes[i] }))
    .filter((a) => a.mode === 't');
  if (inArgs.some((a) => a.mode !== 'i')) return 'it has OUT, INOUT or VARIADIC parameters';
  const wanted = spec.arguments.map((a) => `${a.name} ${typeName(a.type)}`).join(', ');
  const has = inArgs.map((a) => `${a.name} ${a.type}`).join(', ');
  if (wanted !== has) return `its arguments are (${has}), not (${wanted})`;
  const defaults = spec.arguments.filter((a) => a.hasDefault).length;
  if (defaults !== row.defaults) return `${row.defaults} of its arguments have a DEFAULT, not ${defaults}`;
  const r = spec.returns;
  const returnsWanted = describeReturns(spec);
  const returnsOk = (() => {
    switch (r.kind) {
      case 'void':
        return !row.retset && row.return_type === 'void' && columns.length === 0;
      case 'scalar':
        return row.retset === r.set && row.return_type === typeName(r.type) && columns.length === 0;
      case 'rows':
        return row.retset && row.return_type === r.tableDbName && columns.length === 0;
      case 'table':
        return (
          row.retset &&
          columns.length === r.columns.length &&
          r.columns.every(
            (c, i) => c.name === columns[i]!.name && (c.type === 'other' || typeName(c.type) === columns[i]!.type),
          )
        );
    }
  })();
  if (!returnsOk) return `it does not return ${returnsWanted}`;
  if (VOLATILITY[row.volatility] !== spec.volatility)
    return `it is ${VOLATILITY[row.volatility]?.toUpperCase()}, not ${spec.volatility.toUpperCase()}`;
  return undefined;
}

/**
 * Refuses (FunctionSignatureDrift) unless each function exists once in each environment's schema
 * with the signature of generated/functions.ts. One query for all of them.
 */
export async function checkFunctions(
  db: Queryable,
  environments: readonly string[],
  specs: readonly FunctionSpec[],
): Promise<void> {
  if (specs.length === 0) return;
  const rows = await db.query<ProcRow>(PROCS, [environments.map(environmentSchema), specs.map((s) => s.name)]);
  const problems: string[] = [];
  for (const environment of environments) {
    const schema = environmentSchema(environment);
    for (const spec of specs) {
      const found = rows.filter((r) => r.schema === schema && r.name === spec.name);
      const where = `function ${spec.name} in environment ${environment} (schema ${schema})`;
      if (found.length === 0) {
        problems.push(
          `${where} does not exist: migration ${spec.migration} creates it; apply the migrations (svcgen migrate deploy)`,
        );
      } else if (found.length > 1) {
        problems.push(
          `${where} is overloaded (${found.map(describeRow).join('; ')}): svcgen serves one function per name; DROP FUNCTION the others in a migration`,
        );
      } else {
        const differs = difference(spec, found[0]!);
        if (differs)
          problems.push(
            `${where} does not match the signature svcgen generated from the migrations: ${differs}.\n  migrations (${spec.migration}): ${describeSpec(spec)}\n  database: ${describeRow(found[0]!)}\n  Apply the migrations (svcgen migrate deploy), or run svcgen generate after changing one`,
          );
      }
    }
  }
  if (problems.length > 0)
    throw new FunctionSignatureDrift(
      `the database functions of svcgen.config.json do not match the database:\n${problems.join('\n')}`,
    );
}
