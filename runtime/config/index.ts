import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { FILE_FILTER_FIELDS } from '../model/index.ts';
import { configSchema, type Config } from './schema.ts';

export type {
  ActionRule,
  BucketConfig,
  Config,
  RoleConfig,
  StorageBackendConfig,
  TablePermissionsConfig,
} from './schema.ts';
export { callerDataLimit, configSchema } from './schema.ts';

export const CONFIG_FILE = 'svcgen.config.json';

/** Every problem of an invalid config, each as `<json path>: <message>`. */
export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`${file} is invalid:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

function jsonPath(segments: readonly PropertyKey[]): string {
  let out = '$';
  for (const s of segments) {
    out +=
      typeof s === 'number'
        ? `[${s}]`
        : /^[A-Za-z_$][\w$]*$/.test(String(s))
          ? `.${String(s)}`
          : `[${JSON.stringify(String(s))}]`;
  }
  return out;
}

/** The model as config checks need it: table names, or each table's field names. */
export type ModelNames = readonly string[] | Readonly<Record<string, readonly string[]>>;

const ACTIONS = ['read', 'create', 'update', 'delete'];

/**
 * Role rules naming tables, or (when field names are given) `fields` entries, that the model does
 * not have. Checked on the raw JSON, so it runs even when other parts are invalid.
 */
function unknownTables(raw: unknown, model: ModelNames): string[] {
  const fieldsOf: Readonly<Record<string, readonly string[]>> | undefined = Array.isArray(model)
    ? undefined
    : (model as Record<string, readonly string[]>);
  const known = new Set(Array.isArray(model) ? model : Object.keys(model));
  const problems: string[] = [];
  const roles = (raw as { roles?: unknown })?.roles;
  if (typeof roles !== 'object' || roles === null) return problems;
  for (const [roleName, role] of Object.entries(roles)) {
    const roleTables = (role as { tables?: unknown })?.tables;
    if (typeof roleTables !== 'object' || roleTables === null) continue;
    for (const table of Object.keys(roleTables)) {
      if (table !== '*' && !known.has(table)) {
        problems.push(`${jsonPath(['roles', roleName, 'tables', table])}: no model named "${table}" in schema.prisma`);
        continue;
      }
      const fields = table === '*' ? undefined : fieldsOf?.[table];
      if (!fields) continue;
      const rules = (roleTables as Record<string, unknown>)[table];
      for (const action of ACTIONS) {
        const named = (rules as Record<string, { fields?: unknown } | undefined> | null)?.[action]?.fields;
        if (!Array.isArray(named)) continue;
        named.forEach((field, i) => {
          if (typeof field === 'string' && !fields.includes(field)) {
            problems.push(
              `${jsonPath(['roles', roleName, 'tables', table, action, 'fields', i])}: ${table} has no field "${field}" (fields: ${fields.join(', ')})`,
            );
          }
        });
      }
    }
  }
  return problems;
}

/**
 * Every `__proto__` key of the raw JSON. JSON.parse makes it an own property, but zod's records
 * skip it and copying it into an object sets the prototype: so a role named `__proto__` (or a
 * filter field) would vanish without a word. It is refused wherever it appears.
 */
function protoKeys(raw: unknown): string[] {
  const problems: string[] = [];
  const pending: Array<{ value: unknown; path: PropertyKey[] }> = [{ value: raw, path: [] }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const { value, path } = next;
    if (typeof value !== 'object' || value === null) continue;
    if (Array.isArray(value)) {
      value.forEach((item, i) => pending.push({ value: item, path: [...path, i] }));
      continue;
    }
    for (const [key, child] of Object.entries(value)) {
      if (key === '__proto__')
        problems.push(
          `${jsonPath([...path, key])}: "__proto__" cannot be used as a name (it is a property every JavaScript object has)`,
        );
      else pending.push({ value: child, path: [...path, key] });
    }
  }
  return problems.sort();
}

/** Bucket rules naming a role that is not defined, or filtering on something files do not have. */
function bucketProblems(config: Config): string[] {
  const problems: string[] = [];
  for (const [bucket, { roles }] of Object.entries(config.storage.buckets)) {
    for (const [role, rules] of Object.entries(roles)) {
      const at = ['storage', 'buckets', bucket, 'roles', role];
      if (!Object.hasOwn(config.roles, role)) {
        problems.push(`${jsonPath(at)}: role "${role}" is not defined under roles`);
        continue;
      }
      for (const [action, rule] of Object.entries(rules)) {
        for (const field of typeof rule === 'object' ? Object.keys(rule.filter ?? {}) : []) {
          if (!FILE_FILTER_FIELDS.includes(field))
            problems.push(
              `${jsonPath([...at, action, 'filter', field])}: files have no field "${field}" to filter on (fields: ${FILE_FILTER_FIELDS.join(', ')})`,
            );
        }
      }
    }
  }
  return problems;
}

/** Validates a parsed config; `tables` (model names, or each table's fields) lets role rules be checked against the model. */
export function parseConfig(raw: unknown, file: string, tables?: ModelNames): Config {
  const parsed = configSchema.safeParse(raw);
  const problems = protoKeys(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        const keys = issue.keys.filter((k) => k !== '__proto__'); // reported by protoKeys
        if (keys.length)
          problems.push(
            `${jsonPath(issue.path)}: unknown key${keys.length > 1 ? 's' : ''} ${keys.map((k) => `"${k}"`).join(', ')}`,
          );
      } else if (issue.code === 'invalid_key') {
        // A record key (a role name) that breaks the key rule: say which rule, not "Invalid key in record".
        const name = String(issue.path[issue.path.length - 1]);
        problems.push(
          `${jsonPath(issue.path)}: the name "${name}" is not allowed: ${issue.issues.map((i) => i.message).join('; ')}`,
        );
      } else {
        problems.push(`${jsonPath(issue.path)}: ${issue.message}`);
      }
    }
  }
  if (tables) problems.push(...unknownTables(raw, tables));
  if (parsed.success) {
    const config = parsed.data;
    const envs = new Set(config.environments);
    for (const [i, env] of (config.auth.environments ?? []).entries()) {
      if (!envs.has(env))
        problems.push(`$.auth.environments[${i}]: "${env}" is not one of environments (${[...envs].join(', ')})`);
    }
    if (Array.isArray(config.graphql.introspection)) {
      for (const [i, env] of config.graphql.introspection.entries()) {
        if (!envs.has(env))
          problems.push(`$.graphql.introspection[${i}]: "${env}" is not one of environments (${[...envs].join(', ')})`);
      }
    }
    // Own roles only: `toString` or `__proto__` are "in" every object.
    if (config.auth.defaultRole !== undefined && !Object.hasOwn(config.roles, config.auth.defaultRole)) {
      problems.push(`$.auth.defaultRole: role "${config.auth.defaultRole}" is not defined under roles`);
    }
    problems.push(...bucketProblems(config));
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(file, problems);
  return parsed.data;
}

export async function loadConfig(projectDir: string, tables?: ModelNames): Promise<Config> {
  const file = path.join(projectDir, CONFIG_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new ConfigError(file, [
      `$: file not found (create ${CONFIG_FILE} with at least {"project": {"id": "<id>"}})`,
    ]);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    const { line, column } = jsonErrorLocation(text);
    throw new ConfigError(file, [
      `line ${line}, column ${column}: not valid JSON (${(error as Error).message.split('\n')[0]})`,
    ]);
  }
  return parseConfig(raw, file, tables);
}

/**
 * Where JSON text first goes wrong, as 1-based line and column. Node 20's parser does not always
 * say, so the shortest prefix that fails for a reason other than being cut short is the place.
 */
export function jsonErrorLocation(text: string): { line: number; column: number } {
  const at = (index: number) => {
    const before = text.slice(0, index);
    return { line: before.split('\n').length, column: index - before.lastIndexOf('\n') };
  };
  for (let length = 1; length <= text.length; length++) {
    try {
      JSON.parse(text.slice(0, length));
    } catch (error) {
      const message = (error as Error).message;
      if (/end of JSON input/.test(message)) continue;
      const position = /at position (\d+)/.exec(message);
      if (position && Number(position[1]) >= length) continue; // the prefix was only cut short
      return at(position ? Number(position[1]) : length - 1);
    }
  }
  return at(text.length);
}
