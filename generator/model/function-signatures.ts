/**
 * The signatures of the configured PostgreSQL functions, read from the migrations' SQL without a
 * database (docs/own-code.md "Database functions"): `CREATE [OR REPLACE] FUNCTION name(args)
 * RETURNS ...` in migrations/<name>/migration.sql, in the migrations' order, the last definition of
 * a name winning (`DROP FUNCTION` forgets it). A small tokenizer skips comments, strings and
 * dollar-quoted bodies, so a function's body never counts as a statement.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type {
  FunctionArgument,
  FunctionBaseType,
  FunctionColumn,
  FunctionReturns,
  FunctionSpec,
  FunctionType,
  FunctionVolatility,
  TableSpec,
} from '../../runtime/model/index.ts';

export class FunctionSignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FunctionSignatureError';
  }
}

interface Token {
  /** `word` (lower-cased unless quoted), `quoted` ("Name"), `string`, `number`, `punct` (one character). */
  readonly kind: 'word' | 'quoted' | 'string' | 'number' | 'punct';
  readonly text: string;
}

/** SQL text → tokens, without comments, whitespace or the content of strings and dollar quotes. */
export function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      i = end === -1 ? sql.length : end + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      // Block comments nest in PostgreSQL.
      let depth = 1;
      i += 2;
      while (i < sql.length && depth > 0) {
        if (sql.startsWith('/*', i)) {
          depth++;
          i += 2;
        } else if (sql.startsWith('*/', i)) {
          depth--;
          i += 2;
        } else i++;
      }
    } else if (c === "'" || ((c === 'E' || c === 'e') && sql[i + 1] === "'")) {
      const escapes = c !== "'";
      i += escapes ? 2 : 1;
      let text = '';
      while (i < sql.length) {
        if (escapes && sql[i] === '\\') {
          text += sql[i + 1] ?? '';
          i += 2;
        } else if (sql[i] === "'" && sql[i + 1] === "'") {
          text += "'";
          i += 2;
        } else if (sql[i] === "'") {
          i++;
          break;
        } else text += sql[i++];
      }
      tokens.push({ kind: 'string', text });
    } else if (c === '$' && /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.test(sql.slice(i, i + 64))) {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64))![0];
      const end = sql.indexOf(tag, i + tag.length);
      const stop = end === -1 ? sql.length : end;
      tokens.push({ kind: 'string', text: sql.slice(i + tag.length, stop) });
      i = end === -1 ? sql.length : end + tag.length;
    } else if (c === '"') {
      let text = '';
      i++;
      while (i < sql.length) {
        if (sql[i] === '"' && sql[i + 1] === '"') {
          text += '"';
          i += 2;
        } else if (sql[i] === '"') {
          i++;
          break;
        } else text += sql[i++];
      }
      tokens.push({ kind: 'quoted', text });
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_$]*/.exec(sql.slice(i))![0];
      tokens.push({ kind: 'word', text: m.toLowerCase() });
      i += m.length;
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9][0-9.eE]*/.exec(sql.slice(i))![0];
      tokens.push({ kind: 'number', text: m });
      i += m.length;
    } else {
      tokens.push({ kind: 'punct', text: c });
      i++;
    }
  }
  return tokens;
}

/** Tokens split at top-level semicolons. */
function statements(tokens: readonly Token[]): Token[][] {
  const out: Token[][] = [];
  let current: Token[] = [];
  let depth = 0;
  for (const t of tokens) {
    if (t.kind === 'punct' && t.text === '(') depth++;
    if (t.kind === 'punct' && t.text === ')') depth--;
    if (t.kind === 'punct' && t.text === ';' && depth <= 0) {
      if (current.length > 0) out.push(current);
      current = [];
      depth = 0;
    } else current.push(t);
  }
  if (current.length > 0) out.push(current);
  return out;
}

const is = (t: Token | undefined, word: string): boolean => t?.kind === 'word' && t.text === word;
const punct = (t: Token | undefined, text: string): boolean => t?.kind === 'punct' && t.text === text;
const isName = (t: Token | undefined): t is Token => t?.kind === 'word' || t?.kind === 'quoted';

/** Splits tokens at top-level commas. */
function splitCommas(tokens: readonly Token[]): Token[][] {
  const parts: Token[][] = [];
  let current: Token[] = [];
  let depth = 0;
  for (const t of tokens) {
    if (punct(t, '(') || punct(t, '[')) depth++;
    if (punct(t, ')') || punct(t, ']')) depth--;
    if (punct(t, ',') && depth === 0) {
      parts.push(current);
      current = [];
    } else current.push(t);
  }
  if (current.length > 0 || parts.length > 0) parts.push(current);
  return parts;
}

/** The index of the `)` that closes the `(` at `open`. */
function closing(tokens: readonly Token[], open: number): number {
  let depth = 0;
  for (let i = open; i < tokens.length; i++) {
    if (punct(tokens[i], '(')) depth++;
    if (punct(tokens[i], ')') && --depth === 0) return i;
  }
  return -1;
}

/** A type as written: its name (`double precision`, a quoted enum), whether an array; modifiers dropped. */
interface WrittenType {
  readonly name: string;
  readonly quoted: boolean;
  readonly array: boolean;
}

function writtenType(tokens: readonly Token[]): WrittenType | undefined {
  const words: string[] = [];
  let quoted = false;
  let array = false;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (punct(t, '(')) {
      // A modifier: varchar(20), numeric(10, 2), timestamp(3).
      const end = closing(tokens, i);
      if (end === -1) return undefined;
      i = end;
    } else if (punct(t, '[')) {
      array = true;
      while (i < tokens.length && !punct(tokens[i], ']')) i++;
    } else if (is(t, 'array')) array = true;
    else if (punct(t, '.')) {
      // A schema-qualified type: only the last name counts.
      words.length = 0;
      quoted = false;
    } else if (t.kind === 'quoted') {
      words.push(t.text);
      quoted = true;
    } else if (t.kind === 'word') words.push(t.text);
    else return undefined;
  }
  if (words.length === 0) return undefined;
  return { name: words.join(' '), quoted, array };
}

const BUILT_IN: Record<string, FunctionBaseType> = {
  smallint: 'int2',
  int2: 'int2',
  integer: 'int4',
  int: 'int4',
  int4: 'int4',
  bigint: 'int8',
  int8: 'int8',
  numeric: 'numeric',
  decimal: 'numeric',
  real: 'float4',
  float4: 'float4',
  'double precision': 'float8',
  float8: 'float8',
  float: 'float8',
  text: 'text',
  varchar: 'varchar',
  'character varying': 'varchar',
  boolean: 'bool',
  bool: 'bool',
  date: 'date',
  timestamp: 'timestamp',
  'timestamp without time zone': 'timestamp',
  timestamptz: 'timestamptz',
  'timestamp with time zone': 'timestamptz',
  uuid: 'uuid',
  json: 'json',
  jsonb: 'jsonb',
};

/** The types svcgen validates and describes, for messages. */
const SUPPORTED =
  'smallint, integer, bigint, numeric, real, double precision, text, varchar, boolean, date, timestamp, timestamptz, uuid, json, jsonb, an enum of schema.prisma, or an array of one of them';

export interface SignatureModel {
  /** Enums of schema.prisma: database name → values. */
  readonly enums: ReadonlyMap<string, readonly string[]>;
  readonly tables: readonly TableSpec[];
}

function functionType(written: WrittenType, model: SignatureModel): FunctionType | undefined {
  const enumValues = model.enums.get(written.name);
  if (written.quoted || enumValues) {
    if (!enumValues) return undefined;
    return { base: 'enum', enumName: written.name, enumValues, array: written.array };
  }
  const base = BUILT_IN[written.name];
  return base ? { base, array: written.array } : undefined;
}

/** A type's name for matching a DROP to its CREATE: `int` and `integer` alike. */
function typeKey(written: WrittenType): string {
  const name = written.quoted ? written.name : (BUILT_IN[written.name] ?? written.name);
  return `${name}${written.array ? '[]' : ''}`;
}

interface Definition {
  readonly spec: FunctionSpec;
  /** The argument types as written, to match a DROP FUNCTION name(types). */
  readonly key: string;
}

/** `name(args) RETURNS ...` of one CREATE FUNCTION statement, from the token after FUNCTION. */
function parseDefinition(
  tokens: readonly Token[],
  at: number,
  migration: string,
  model: SignatureModel,
): { name: string; spec?: FunctionSpec; key: string; problem?: string } | undefined {
  let i = at;
  if (!isName(tokens[i])) return undefined;
  let name = tokens[i]!.text;
  let qualified = false;
  if (punct(tokens[i + 1], '.') && isName(tokens[i + 2])) {
    name = tokens[i + 2]!.text;
    qualified = true;
    i += 2;
  }
  i++;
  if (!punct(tokens[i], '(')) return undefined;
  const end = closing(tokens, i);
  if (end === -1) return undefined;
  const where = `function ${name} (migrations/${migration}/migration.sql)`;
  const fail = (problem: string, key = '') => ({ name, key, problem: `${where}: ${problem}` });
  const argTokens = tokens.slice(i + 1, end);
  const args: FunctionArgument[] = [];
  const keys: string[] = [];
  for (const part of argTokens.length === 0 ? [] : splitCommas(argTokens)) {
    let p = part;
    if (is(p[0], 'out') || is(p[0], 'inout') || is(p[0], 'variadic'))
      return fail(`${p[0]!.text.toUpperCase()} parameters are not supported: return rows with RETURNS TABLE(...)`);
    if (is(p[0], 'in')) p = p.slice(1);
    const defaultAt = p.findIndex((t) => is(t, 'default') || punct(t, '='));
    const head = defaultAt === -1 ? p : p.slice(0, defaultAt);
    if (head.length < 2 || !isName(head[0]))
      return fail('every argument needs a name (callers pass arguments by name): `since date`, not `date`');
    const written = writtenType(head.slice(1));
    const type = written && functionType(written, model);
    if (!written || !type)
      return fail(
        `argument ${head[0]!.text} has a type svcgen cannot validate (${written?.name ?? 'unreadable'}); use ${SUPPORTED}`,
      );
    keys.push(typeKey(written));
    args.push({ name: head[0]!.text, type, hasDefault: defaultAt !== -1 });
  }
  const key = keys.join(',');
  if (qualified)
    return fail(
      "create it without a schema name: migrations run with the environment's schema first on the search_path, and the function must live there",
      key,
    );
  i = end + 1;
  if (!is(tokens[i], 'returns')) return fail('it needs a RETURNS clause', key);
  i++;
  let returns: FunctionReturns;
  // The options after RETURNS: LANGUAGE, AS, volatility, STRICT, ...
  const OPTION = new Set([
    'language',
    'as',
    'immutable',
    'stable',
    'volatile',
    'strict',
    'called',
    'security',
    'leakproof',
    'not',
    'parallel',
    'cost',
    'rows',
    'set',
    'external',
    'window',
    'support',
    'transform',
    'begin',
    'return',
  ]);
  const optionsFrom = (from: number) => {
    let j = from;
    while (j < tokens.length && !(tokens[j]!.kind === 'word' && OPTION.has(tokens[j]!.text))) j++;
    return j;
  };
  let optionsAt: number;
  if (is(tokens[i], 'table') && punct(tokens[i + 1], '(')) {
    const close = closing(tokens, i + 1);
    if (close === -1) return fail('its RETURNS TABLE(...) does not close', key);
    const columns: FunctionColumn[] = [];
    for (const part of splitCommas(tokens.slice(i + 2, close))) {
      const written = isName(part[0]) ? writtenType(part.slice(1)) : undefined;
      if (!written) return fail('a column of its RETURNS TABLE(...) needs a name and a type', key);
      const type = functionType(written, model);
      columns.push({ name: part[0]!.text, column: part[0]!.text, type: type ?? 'other' });
    }
    returns = { kind: 'table', columns };
    optionsAt = close + 1;
  } else {
    const set = is(tokens[i], 'setof');
    if (set) i++;
    optionsAt = optionsFrom(i);
    const written = writtenType(tokens.slice(i, optionsAt));
    if (!written) return fail('its RETURNS type cannot be read', key);
    const table = model.tables.find((t) => t.dbName === written.name);
    if (!set && !written.array && written.name === 'void') returns = { kind: 'void' };
    else if (table && !written.array) {
      if (!set) return fail(`return SETOF ${table.dbName} (rows of ${table.name}), not one ${table.dbName}`, key);
      returns = {
        kind: 'rows',
        table: table.name,
        tableDbName: table.dbName,
        columns: table.fields.map((f) => ({ name: f.name, column: f.column, type: 'other' as const })),
      };
    } else {
      const type = functionType(written, model);
      if (!type)
        return fail(
          `it returns ${set ? 'SETOF ' : ''}${written.name}, which svcgen cannot describe; return ${SUPPORTED}, void, TABLE(...) or SETOF a table of schema.prisma`,
          key,
        );
      returns = { kind: 'scalar', type, set };
    }
  }
  let volatility: FunctionVolatility = 'volatile';
  for (let j = optionsAt; j < tokens.length; j++) {
    const t = tokens[j]!;
    if (is(t, 'immutable') || is(t, 'stable') || is(t, 'volatile')) volatility = t.text as FunctionVolatility;
  }
  return { name, key, spec: { name, arguments: args, returns, volatility, migration } };
}

/** The argument types of `DROP FUNCTION name(types)`, or undefined for `DROP FUNCTION name` (every overload). */
function dropKey(tokens: readonly Token[], open: number): string | undefined {
  if (!punct(tokens[open], '(')) return undefined;
  const end = closing(tokens, open);
  const parts = splitCommas(tokens.slice(open + 1, end));
  return parts
    .map((p) => {
      const q = is(p[0], 'in') ? p.slice(1) : p;
      // `name type` or just `type`: try the whole as a type, then without its first token.
      const whole = writtenType(q);
      const typeOnly = whole && (BUILT_IN[whole.name] || whole.quoted) ? whole : writtenType(q.slice(1));
      return typeOnly ? typeKey(typeOnly) : '';
    })
    .join(',');
}

/** Every function the migrations define (name → its definitions that still exist), and problems met. */
export function readFunctionDefinitions(
  migrations: readonly { name: string; sql: string }[],
  model: SignatureModel,
): { defined: Map<string, Definition[]>; problems: Map<string, string> } {
  const defined = new Map<string, Definition[]>();
  const problems = new Map<string, string>();
  for (const migration of migrations) {
    for (const statement of statements(tokenize(migration.sql))) {
      let i = 0;
      if (is(statement[0], 'create')) {
        i = 1;
        if (is(statement[1], 'or') && is(statement[2], 'replace')) i = 3;
        if (!is(statement[i], 'function')) continue;
        const parsed = parseDefinition(statement, i + 1, migration.name, model);
        if (!parsed) continue;
        const list = (defined.get(parsed.name) ?? []).filter((d) => d.key !== parsed.key);
        if (parsed.spec) {
          list.push({ spec: parsed.spec, key: parsed.key });
          problems.delete(parsed.name);
        } else problems.set(parsed.name, parsed.problem!);
        defined.set(parsed.name, list);
      } else if (is(statement[0], 'drop') && is(statement[1], 'function')) {
        i = 2;
        if (is(statement[2], 'if') && is(statement[3], 'exists')) i = 4;
        for (const target of splitCommas(statement.slice(i))) {
          if (!isName(target[0])) continue;
          let n = 0;
          if (punct(target[1], '.') && isName(target[2])) n = 2;
          const name = target[n]!.text;
          const key = dropKey(target, n + 1);
          const left = key === undefined ? [] : (defined.get(name) ?? []).filter((d) => d.key !== key);
          defined.set(name, left);
          if (left.length === 0) problems.delete(name);
        }
      }
    }
  }
  return { defined, problems };
}

/** migrations/<name>/migration.sql in the order they apply (their folder names sort by time). */
export async function readMigrationSql(projectDir: string): Promise<{ name: string; sql: string }[]> {
  const dir = path.join(projectDir, 'migrations');
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const out: { name: string; sql: string }[] = [];
  for (const entry of entries.filter((e) => e.isDirectory()).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const sql = await readFile(path.join(dir, entry.name, 'migration.sql'), 'utf8').catch(() => undefined);
    if (sql !== undefined) out.push({ name: entry.name, sql });
  }
  return out;
}

/**
 * The signatures of the config's `functions`, in name order; a configured function that no
 * migration creates, that is overloaded, or that takes or returns what svcgen cannot describe
 * fails `generate`, naming it.
 */
export function functionSignatures(
  configured: readonly string[],
  migrations: readonly { name: string; sql: string }[],
  model: SignatureModel,
): FunctionSpec[] {
  const { defined, problems } = readFunctionDefinitions(migrations, model);
  const errors: string[] = [];
  const specs: FunctionSpec[] = [];
  for (const name of [...configured].sort()) {
    const definitions = defined.get(name) ?? [];
    const problem = problems.get(name);
    if (problem) errors.push(problem);
    else if (definitions.length === 0)
      errors.push(
        `functions.${name} of svcgen.config.json: no migration creates a function named ${name}; add \`CREATE FUNCTION ${name}(...) RETURNS ...\` to a migration (migrations/<name>/migration.sql) or remove it from functions`,
      );
    else if (definitions.length > 1)
      errors.push(
        `function ${name} is overloaded (${definitions.map((d) => `${name}(${d.key})`).join(', ')}): svcgen serves one function per name; DROP FUNCTION the others in a migration`,
      );
    else specs.push(definitions[0]!.spec);
  }
  if (errors.length > 0) throw new FunctionSignatureError(errors.join('\n'));
  return specs;
}
