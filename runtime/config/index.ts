import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { configSchema, type Config } from './schema.ts';

export type { Config, RoleConfig, ActionRule, TablePermissionsConfig } from './schema.ts';
export { configSchema } from './schema.ts';

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
    out += typeof s === 'number' ? `[${s}]` : /^[A-Za-z_$][\w$]*$/.test(String(s)) ? `.${String(s)}` : `[${JSON.stringify(String(s))}]`;
  }
  return out;
}

/** Role rules naming tables the model does not have (checked on the raw JSON, so it runs even when other parts are invalid). */
function unknownTables(raw: unknown, tables: readonly string[]): string[] {
  const known = new Set(tables);
  const problems: string[] = [];
  const roles = (raw as { roles?: unknown })?.roles;
  if (typeof roles !== 'object' || roles === null) return problems;
  for (const [roleName, role] of Object.entries(roles)) {
    const roleTables = (role as { tables?: unknown })?.tables;
    if (typeof roleTables !== 'object' || roleTables === null) continue;
    for (const table of Object.keys(roleTables)) {
      if (table !== '*' && !known.has(table)) problems.push(`${jsonPath(['roles', roleName, 'tables', table])}: no model named "${table}" in schema.prisma`);
    }
  }
  return problems;
}

/** Validates a parsed config; `tables` (model names) lets role rules be checked against the model. */
export function parseConfig(raw: unknown, file: string, tables?: readonly string[]): Config {
  const parsed = configSchema.safeParse(raw);
  const problems: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      problems.push(
        issue.code === 'unrecognized_keys'
          ? `${jsonPath(issue.path)}: unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`
          : `${jsonPath(issue.path)}: ${issue.message}`,
      );
    }
  }
  if (tables) problems.push(...unknownTables(raw, tables));
  if (parsed.success) {
    const config = parsed.data;
    const envs = new Set(config.environments);
    for (const [i, env] of (config.auth.environments ?? []).entries()) {
      if (!envs.has(env)) problems.push(`$.auth.environments[${i}]: "${env}" is not one of environments (${[...envs].join(', ')})`);
    }
    if (config.auth.defaultRole !== undefined && !(config.auth.defaultRole in config.roles)) {
      problems.push(`$.auth.defaultRole: role "${config.auth.defaultRole}" is not defined under roles`);
    }
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(file, problems);
  return parsed.data;
}

export async function loadConfig(projectDir: string, tables?: readonly string[]): Promise<Config> {
  const file = path.join(projectDir, CONFIG_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new ConfigError(file, [`$: file not found (create ${CONFIG_FILE} with at least {"project": {"id": "<id>"}})`]);
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ConfigError(file, [`$: not valid JSON (${(error as Error).message})`]);
  }
  return parseConfig(raw, file, tables);
}
