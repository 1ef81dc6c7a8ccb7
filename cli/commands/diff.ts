/**
 * diff: API changes between two data models (REST and the GraphQL schema), and permission and
 * configuration changes between their svcgen.config.json; exit 1 when any is breaking (docs/diff.md).
 */
import { execFile } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import type { Config } from '../../runtime/config/index.ts';
import type { TableSpec } from '../../runtime/model/index.ts';
import { projectDir, withProject } from '../options.ts';
import { UsageError } from '../usage-error.ts';

const run = promisify(execFile);
const CONFIG = 'svcgen.config.json';
/** Where the endpoints of a version's own code are compared from (docs/diff.md). */
const OPENAPI = 'generated/openapi.json';
const SCHEMA_GRAPHQL = 'generated/schema.graphql';

interface Text {
  text: string;
  label: string;
}

const exists = (file: string) =>
  access(file).then(
    () => true,
    () => false,
  );

async function gitShow(dir: string, spec: string): Promise<Text | undefined> {
  try {
    const { stdout } = await run('git', ['show', spec], { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
    return { text: stdout, label: spec };
  } catch {
    return undefined;
  }
}

/** `<ref>:<path>` split at its first colon, or undefined for a bare ref. */
function splitSpec(source: string): [string, string | undefined] {
  const colon = source.indexOf(':');
  return colon < 0 ? [source, undefined] : [source.slice(0, colon), source.slice(colon + 1)];
}

/**
 * The earlier schema and the config that goes with it. A file: the config is `--from-config`, or
 * svcgen.config.json beside the file. A git ref: the project's schema.prisma and svcgen.config.json
 * at that ref (`<ref>:<path>`: that schema, and the config in its folder at that ref).
 */
async function readFrom(
  dir: string,
  source: string,
  configSource: string | undefined,
): Promise<{
  schema: Text;
  config: Text | undefined;
  configWhere: string;
  openapi: Text | undefined;
  graphql: Text | undefined;
}> {
  const file = path.resolve(dir, source);
  let schema: Text | undefined;
  let configSpec: string | undefined;
  let configFile: string | undefined;
  let openapi: Text | undefined;
  let graphql: Text | undefined;
  if (await exists(file)) {
    schema = { text: await readFile(file, 'utf8'), label: source };
    configFile = path.join(path.dirname(file), CONFIG);
    openapi = await readText(path.join(path.dirname(file), OPENAPI));
    graphql = await readText(path.join(path.dirname(file), SCHEMA_GRAPHQL));
  } else {
    const [ref, explicit] = splitSpec(source);
    let prefix = '';
    if (explicit === undefined)
      prefix = (
        await run('git', ['rev-parse', '--show-prefix'], { cwd: dir }).catch(() => ({ stdout: '' }))
      ).stdout.trim();
    const schemaPath = explicit ?? `${prefix}schema.prisma`;
    schema = await gitShow(dir, `${ref}:${schemaPath}`);
    const folder = path.posix.dirname(schemaPath);
    configSpec = `${ref}:${folder === '.' ? '' : `${folder}/`}${CONFIG}`;
    openapi = await gitShow(dir, `${ref}:${folder === '.' ? '' : `${folder}/`}${OPENAPI}`);
    graphql = await gitShow(dir, `${ref}:${folder === '.' ? '' : `${folder}/`}${SCHEMA_GRAPHQL}`);
  }
  if (!schema)
    throw new UsageError(`--from "${source}" is neither a file nor a git ref with a schema.prisma in this project`);
  if (configSource !== undefined) {
    const config = await readConfigSource(dir, configSource);
    if (!config)
      throw new UsageError(`--from-config "${configSource}" is neither a file nor <git ref>:<path> of a file`);
    return { schema, config, configWhere: configSource, openapi, graphql };
  }
  if (configFile !== undefined) {
    const config = (await exists(configFile))
      ? { text: await readFile(configFile, 'utf8'), label: configFile }
      : undefined;
    return { schema, config, configWhere: configFile, openapi, graphql };
  }
  return { schema, config: await gitShow(dir, configSpec!), configWhere: configSpec!, openapi, graphql };
}

async function readText(file: string): Promise<Text | undefined> {
  return (await exists(file)) ? { text: await readFile(file, 'utf8'), label: file } : undefined;
}

/** A document's JSON, or undefined when it is missing or not JSON (its endpoints are then not compared). */
function parsedJson(text: Text | undefined): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text.text);
  } catch {
    return undefined;
  }
}

/** A config from a file or from `<ref>:<path>`. */
async function readConfigSource(dir: string, source: string): Promise<Text | undefined> {
  const file = path.resolve(dir, source);
  if (await exists(file)) return { text: await readFile(file, 'utf8'), label: source };
  const [ref, explicit] = splitSpec(source);
  return explicit === undefined ? undefined : gitShow(dir, `${ref}:${explicit}`);
}

/** Parsed and checked against its own model as the server would (runtime/config): a bad one cannot be compared. */
async function parseConfigText(config: Text, tables: readonly TableSpec[]): Promise<Config> {
  const { parseConfig, jsonErrorLocation } = await import('../../runtime/config/index.ts');
  let raw: unknown;
  try {
    raw = JSON.parse(config.text);
  } catch (error) {
    const { line, column } = jsonErrorLocation(config.text);
    throw new UsageError(
      `${config.label}: line ${line}, column ${column}: not valid JSON (${(error as Error).message.split('\n')[0]})`,
    );
  }
  try {
    return parseConfig(raw, config.label, Object.fromEntries(tables.map((t) => [t.name, t.fields.map((f) => f.name)])));
  } catch (error) {
    throw new UsageError(`cannot compare permissions: ${(error as Error).message}`);
  }
}

interface DiffOptions {
  project: string;
  from: string;
  to?: string;
  fromConfig?: string;
  toConfig?: string;
  allowBreaking?: boolean;
  failOnWiden?: boolean;
  json?: boolean;
}

export function registerDiffCommand(program: Command): void {
  withProject(
    program
      .command('diff')
      .description(
        'list API, permission and configuration changes between two versions of a project; exit 1 when any is breaking',
      ),
  )
    .requiredOption(
      '--from <schema>',
      'the earlier version: a schema file or a git ref (e.g. main, HEAD~1, main:path/schema.prisma); its svcgen.config.json is read beside it',
    )
    .option('--to <file>', "the later model (default: the project's schema.prisma)")
    .option(
      '--from-config <file>',
      'the earlier svcgen.config.json, a file or <git ref>:<path> (default: beside --from)',
    )
    .option('--to-config <file>', "the later svcgen.config.json (default: beside --to, i.e. the project's)")
    .option('--allow-breaking', 'exit 0 even when a change is breaking')
    .option('--fail-on-widen', 'exit 1 also when a change widens access')
    .option('--json', 'print the changes as JSON')
    .action(async (options: DiffOptions) => {
      const dir = projectDir(options);
      const from = await readFrom(dir, options.from, options.fromConfig);
      const toFile = path.resolve(dir, options.to ?? 'schema.prisma');
      const toText = await readFile(toFile, 'utf8').catch(() => {
        throw new UsageError(`--to ${toFile} not found`);
      });
      const toConfigWhere = options.toConfig ?? path.join(path.dirname(toFile), CONFIG);
      const toConfig =
        options.toConfig !== undefined
          ? await readConfigSource(dir, options.toConfig)
          : (await exists(toConfigWhere))
            ? { text: await readFile(toConfigWhere, 'utf8'), label: toConfigWhere }
            : undefined;
      if (options.toConfig !== undefined && !toConfig)
        throw new UsageError(`--to-config "${options.toConfig}" is neither a file nor <git ref>:<path> of a file`);

      const [{ changeReport }, { reportLines }, { describeModel }, { readDmmf }] = await Promise.all([
        import('../../generator/diff/change-report.ts'),
        import('../../generator/diff/report.ts'),
        import('../../generator/model/describe-model.ts'),
        import('../../generator/prisma/index.ts'),
      ]);
      const before = describeModel(await readDmmf(from.schema.text, from.schema.label));
      const after = describeModel(await readDmmf(toText, toFile));
      const configs =
        from.config && toConfig
          ? { before: await parseConfigText(from.config, before), after: await parseConfigText(toConfig, after) }
          : undefined;
      if (!configs) {
        const missing = from.config
          ? `${toConfigWhere} not found`
          : `no ${from.configWhere}${options.fromConfig === undefined ? ' (name the earlier config with --from-config)' : ''}`;
        process.stderr.write(`svcgen: permissions and settings not compared: ${missing}\n`);
      }
      const toOpenapi = await readText(path.join(path.dirname(toFile), OPENAPI));
      const toGraphql = await readText(path.join(path.dirname(toFile), SCHEMA_GRAPHQL));
      const report = changeReport(
        {
          tables: before,
          config: configs?.before,
          openapi: parsedJson(from.openapi),
          schemaGraphql: from.graphql?.text,
        },
        { tables: after, config: configs?.after, openapi: parsedJson(toOpenapi), schemaGraphql: toGraphql?.text },
      );
      const { changes, graphql, breaking, widens } = report;
      const compared = from.config && toConfig ? { from: from.config.label, to: toConfig.label } : null;
      if (options.json) console.log(JSON.stringify({ changes, graphql, breaking, widens, config: compared }, null, 2));
      else for (const line of reportLines(changes, graphql)) console.log(line);
      if ((breaking > 0 && !options.allowBreaking) || (widens > 0 && options.failOnWiden)) process.exitCode = 1;
    });
}
