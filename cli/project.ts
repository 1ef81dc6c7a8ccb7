/** Loading a project folder: its config (validated against the model) and its generated service. */
import { createHash } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig, type Config } from '../runtime/config/index.ts';
import type { ServiceModule } from '../runtime/model/index.ts';
import { CodeRegistry, type CodeDefinition } from '../runtime/usercode/index.ts';
import { command } from './hints.ts';
import { ensureTypeScriptLoader } from './typescript-loader.ts';

export { UsageError } from './usage-error.ts';
import { UsageError } from './usage-error.ts';

/** The entry of a project's own code when the config names none (docs/own-code.md "Where the code lives"). */
export const DEFAULT_CODE_ENTRY = 'svcgen.code.ts';

/** Where a project's own code starts: the config's code.entry, else svcgen.code.ts when it exists. */
export async function codeEntry(projectDir: string, config: Config): Promise<string | undefined> {
  if (config.code.entry !== undefined) {
    const entry = path.resolve(projectDir, config.code.entry);
    try {
      await access(entry);
    } catch {
      throw new UsageError(`code.entry of svcgen.config.json names ${entry}, which does not exist`);
    }
    return entry;
  }
  const conventional = path.join(projectDir, DEFAULT_CODE_ENTRY);
  return access(conventional).then(
    () => conventional,
    () => undefined,
  );
}

/**
 * A project's own code, checked against its service (hook tables, names, schedules): the empty
 * registry when it has none. Its default export (or export `code`) is what defineCode returned.
 */
export async function loadCode(projectDir: string, config: Config, service: ServiceModule): Promise<CodeRegistry> {
  return loadCodeOf(projectDir, config, Object.keys(service.tables));
}

/** loadCode for the tables named (`svcgen generate` has the model, not yet the service). */
export async function loadCodeOf(projectDir: string, config: Config, tables: readonly string[]): Promise<CodeRegistry> {
  const entry = await codeEntry(projectDir, config);
  if (entry === undefined) return CodeRegistry.EMPTY;
  await ensureTypeScriptLoader();
  let module: { default?: unknown; code?: unknown };
  try {
    module = (await import(pathToFileURL(entry).href)) as typeof module;
  } catch (error) {
    throw new UsageError(`loading your code from ${entry} failed: ${thrownAt(error, projectDir)}`);
  }
  const definition = definitionOf(entry, commonJsInterop(module));
  try {
    return new CodeRegistry(definition as CodeDefinition, tables, config.code.schedules);
  } catch (error) {
    throw new UsageError(`${entry}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * A code entry of a CommonJS package (package.json without "type": "module") runs as CommonJS: its
 * `export default` is `module.exports.default`, beside `__esModule` (docs/own-code.md "Where the
 * code lives"); import() sees module.exports as the default export.
 */
function commonJsInterop(module: { default?: unknown; code?: unknown }): { default?: unknown; code?: unknown } {
  const exports = module.default as { __esModule?: unknown; default?: unknown; code?: unknown } | undefined;
  if (exports !== null && typeof exports === 'object' && exports.__esModule === true)
    return { default: exports.default, code: exports.code };
  return module;
}

/** The parts a definition may have (runtime/usercode/definitions.ts CodeDefinition). */
const DEFINITION_PARTS = ['hooks', 'endpoints', 'jobs', 'schedules', 'auth'];

/** The module's default export (or export `code`) when it is what defineCode returns; else a UsageError saying what to export. */
function definitionOf(entry: string, module: { default?: unknown; code?: unknown }): CodeDefinition {
  const definition = module.default ?? module.code;
  const shape = 'export default defineCode({ hooks, endpoints, jobs, schedules, auth })';
  if (definition === undefined)
    throw new UsageError(`${entry} has no default export: end it with \`${shape}\` (defineCode of generated/code.ts)`);
  if (definition === null || typeof definition !== 'object' || Array.isArray(definition))
    throw new UsageError(
      `${entry}: its default export is ${definition === null ? 'null' : Array.isArray(definition) ? 'an array' : `a ${typeof definition}`}, not a definition: export \`${shape}\``,
    );
  const unknown = Object.keys(definition).filter((key) => !DEFINITION_PARTS.includes(key));
  if (unknown.length > 0)
    throw new UsageError(
      `${entry}: its default export has ${unknown.map((k) => JSON.stringify(k)).join(', ')}, which ${unknown.length === 1 ? 'is' : 'are'} no part of a definition (${DEFINITION_PARTS.join(', ')}); e.g. hooks of a table go under hooks: \`defineCode({ hooks: { Order: { ... } } })\``,
    );
  return definition as CodeDefinition;
}

/** A load failure's message, with the place in the project's own files it was thrown from when the stack names one. */
function thrownAt(error: unknown, projectDir: string): string {
  if (!(error instanceof Error)) return String(error);
  const root = pathToFileURL(projectDir).href;
  for (const line of (error.stack ?? '').split('\n').slice(1)) {
    const at = /\(?((?:file:\/\/)?\/[^()]+?):(\d+):\d+\)?$/.exec(line.trim());
    if (!at) continue;
    const file = at[1]!.startsWith('file://') ? at[1]! : pathToFileURL(at[1]!).href;
    if (file.startsWith(`${root}/`) && !file.includes('/node_modules/'))
      return `${error.message} (at ${decodeURIComponent(file.slice(root.length + 1))}:${at[2]})`;
  }
  return error.message;
}

/** A project's generated service, its config checked against it, and its own code (empty without). */
export async function loadService(
  projectDir: string,
): Promise<{ service: ServiceModule; config: Config; code: CodeRegistry }> {
  const entry = path.join(projectDir, 'generated', 'index.ts');
  try {
    await access(entry);
  } catch {
    throw new UsageError(`${entry} not found: run \`${command(`generate --project ${projectDir}`)}\` first`);
  }
  await refuseStaleGenerated(projectDir);
  await ensureTypeScriptLoader();
  const { service } = (await import(pathToFileURL(entry).href)) as { service: ServiceModule };
  const config = await loadConfig(
    projectDir,
    Object.fromEntries(Object.values(service.tables).map((t) => [t.spec.name, t.spec.fields.map((f) => f.name)])),
  );
  return { service, config, code: await loadCode(projectDir, config, service) };
}

/** generated/ made from another schema.prisma would serve tables and fields the database lacks. */
async function refuseStaleGenerated(projectDir: string): Promise<void> {
  const made = await readFile(path.join(projectDir, 'generated', 'package.json'), 'utf8')
    .then((text) => (JSON.parse(text) as { svcgen?: { schemaSha256?: string } }).svcgen?.schemaSha256)
    .catch(() => undefined);
  if (!made) return;
  const schema = await readFile(path.join(projectDir, 'schema.prisma'), 'utf8').catch(() => undefined);
  if (schema !== undefined && createHash('sha256').update(schema).digest('hex') !== made) {
    throw new Error(
      `generated/ is stale: schema.prisma changed since \`svcgen generate\`; run \`${command('generate')}\` (and \`${command('migrate dev --name <change>')}\` for the tables)`,
    );
  }
}
