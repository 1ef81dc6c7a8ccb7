/**
 * One call of a database function (docs/own-code.md "Database functions"): one transaction that
 * first sets the environment's schema as search_path and the caller's settings (`svcgen.user_id`,
 * `svcgen.roles`, ...), both local to the transaction, and then runs one parameterised statement calling the function, in the caller's
 * environment schema, with its arguments by name, so that those left out take their DEFAULT. The
 * answer is the JSON PostgreSQL writes (`to_json`, `json_agg`), passed on as it is.
 */
import { environmentSchema, ident, type Database } from '../db/index.ts';
import { Problem } from '../http/index.ts';
import type { FunctionColumn, FunctionSpec, FunctionType } from '../model/index.ts';
import type { RolePrincipal } from '../principal/index.ts';

/** The SQLSTATE of a plain `RAISE EXCEPTION '...'`: its message is the function's word to callers. */
export const RAISE_SQLSTATE = 'P0001';

/** The settings a function reads with current_setting('svcgen.<name>', true); '' when they do not apply. */
export function callerSettings(principal: RolePrincipal): Record<string, string> {
  return {
    'svcgen.caller': principal.kind === 'user' ? 'user' : 'apiKey',
    'svcgen.user_id': principal.kind === 'user' ? principal.userId : '',
    'svcgen.user_email': principal.kind === 'user' ? principal.email : '',
    'svcgen.api_key_id': principal.kind === 'apiKey' ? principal.keyId : '',
    'svcgen.roles': principal.roles.join(','),
    'svcgen.environment': principal.environment,
    'svcgen.context': principal.kind === 'apiKey' ? JSON.stringify(principal.context) : '{}',
  };
}

function castOf(type: FunctionType, schema: string): string {
  const base = type.base === 'enum' ? `${schema}.${ident(type.enumName ?? '')}` : type.base;
  return type.array ? `${base}[]` : base;
}

/** A validated value as the driver sends it: JSON as its text, 64-bit and decimal numbers as strings. */
function parameter(type: FunctionType, value: unknown): unknown {
  if (value === null) return null;
  const one = (v: unknown): unknown => {
    if (v === null) return null;
    if (type.base === 'json' || type.base === 'jsonb') return JSON.stringify(v);
    if (type.base === 'int8' || type.base === 'numeric') return String(v);
    return v;
  };
  return type.array ? (value as unknown[]).map(one) : one(value);
}

/** A model table's row with its fields' names: jsonb_build_object takes at most 50 pairs, so in chunks. */
function rowObject(columns: readonly FunctionColumn[], alias: string): string {
  const parts: string[] = [];
  for (let i = 0; i < columns.length; i += 50)
    parts.push(
      `jsonb_build_object(${columns
        .slice(i, i + 50)
        .map((c) => `'${c.name.replace(/'/g, "''")}', ${alias}.${ident(c.column)}`)
        .join(', ')})`,
    );
  return parts.join(' || ');
}

/** The statement and parameters of a call; `arguments` holds only the arguments given. */
export function callStatement(
  spec: FunctionSpec,
  environment: string,
  args: ReadonlyMap<string, unknown>,
): { text: string; values: unknown[] } {
  const schema = ident(environmentSchema(environment));
  const values: unknown[] = [];
  const named: string[] = [];
  for (const argument of spec.arguments) {
    if (!args.has(argument.name)) continue;
    values.push(parameter(argument.type, args.get(argument.name)));
    named.push(`${ident(argument.name)} => $${values.length}::${castOf(argument.type, schema)}`);
  }
  const call = `${schema}.${ident(spec.name)}(${named.join(', ')})`;
  const { returns } = spec;
  switch (returns.kind) {
    case 'void':
      return { text: `SELECT 'null' AS data FROM (SELECT ${call}) AS called`, values };
    case 'scalar':
      return returns.set
        ? { text: `SELECT coalesce(json_agg(v), '[]'::json)::text AS data FROM ${call} AS v`, values }
        : { text: `SELECT coalesce(to_json(${call})::text, 'null') AS data`, values };
    case 'table':
      return { text: `SELECT coalesce(json_agg(r), '[]'::json)::text AS data FROM ${call} AS r`, values };
    case 'rows':
      return {
        text: `SELECT coalesce(jsonb_agg(${rowObject(returns.columns, 'r')}), '[]'::jsonb)::text AS data FROM ${call} AS r`,
        values,
      };
  }
}

/**
 * Calls `spec` for `principal` and answers the JSON text of its result. A `RAISE EXCEPTION` with
 * SQLSTATE P0001 is a 400 `bad-request` carrying the function's message; any other error goes on
 * as it is (a database fault is a 503, the rest a 500 with the request id: runtime/http/reply.ts).
 */
export async function callFunction(
  db: Database,
  spec: FunctionSpec,
  principal: RolePrincipal,
  environment: string,
  args: ReadonlyMap<string, unknown>,
): Promise<string> {
  // The environment's schema is the function's search_path, as it was its migration's: its body
  // names its tables and types without a schema (docs/own-code.md "Database functions").
  const settings = [
    ['search_path', ident(environmentSchema(environment))],
    ...Object.entries(callerSettings(principal)),
  ];
  const statement = callStatement(spec, environment, args);
  try {
    return await db.transaction(async (tx) => {
      await tx.query(
        `SELECT ${settings.map((_, i) => `set_config($${2 * i + 1}, $${2 * i + 2}, true)`).join(', ')}`,
        settings.flat(),
      );
      const rows = await tx.query<{ data: string }>(statement.text, statement.values);
      return rows[0]?.data ?? 'null';
    });
  } catch (error) {
    const e = error as { code?: unknown; message?: unknown };
    if (e?.code === RAISE_SQLSTATE && typeof e.message === 'string') throw new Problem('bad-request', e.message);
    throw error;
  }
}
