/**
 * `svcgen generate` and `svcgen check`: model + config → the files of `generated/`, byte-identical
 * for identical input. Stages: read (Prisma's DMMF) → describe (table specs) → render (files).
 */
import { createHash } from 'node:crypto';
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTwoFilesPatch } from 'diff';
import { loadConfig, type Config } from '../runtime/config/index.ts';
import type { CodeRegistry } from '../runtime/usercode/index.ts';
import type { TableSpec } from '../runtime/model/index.ts';
import { describeModel, ModelError, unknownFileBuckets } from './model/describe-model.ts';
import { functionSignatures, readMigrationSql } from './model/function-signatures.ts';
import { PACKAGE_MANIFEST, SVCGEN_VERSION } from './package-root.ts';
import { generatePrismaClient, readDmmf } from './prisma/index.ts';
import { renderFiles } from './render/index.ts';

export const GENERATED_DIR = 'generated';
export const SCHEMA_FILE = 'schema.prisma';

async function listFiles(dir: string, base = dir): Promise<string[]> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await listFiles(full, base)));
    else out.push(path.relative(base, full).split(path.sep).join('/'));
  }
  return out.sort();
}

export async function readModel(
  projectDir: string,
): Promise<{ schemaText: string; tables: TableSpec[]; enums: Map<string, string[]> }> {
  const schemaPath = path.join(projectDir, SCHEMA_FILE);
  const schemaText = await readFile(schemaPath, 'utf8').catch(() => {
    throw new Error(`${schemaPath} not found: a project needs a schema.prisma (svcgen init <dir> makes one)`);
  });
  const dmmf = await readDmmf(schemaText, SCHEMA_FILE);
  // Enums by their database name, for the signatures of database functions (./model/function-signatures.ts).
  const enums = new Map(dmmf.datamodel.enums.map((e) => [e.dbName ?? e.name, e.values.map((v) => v.name)]));
  return { schemaText, tables: describeModel(dmmf), enums };
}

/** Every file `generate` would write, relative to `generated/`, in sorted order. */
/** The project's own code could not be loaded: `generate` still writes the model (docs/own-code.md "Endpoints"). */
export class CodeNotLoaded extends Error {
  constructor(readonly reason: unknown) {
    super(reason instanceof Error ? reason.message : String(reason));
    this.name = 'CodeNotLoaded';
  }
}

export interface RenderProjectOptions {
  reusePrismaClient?: boolean;
  /**
   * Loads the project's own code (cli/project.ts loadCodeOf), whose endpoints go into openapi.json
   * and the client; without it the files hold no endpoints. A failure rejects with CodeNotLoaded.
   */
  code?: (config: Config, tables: readonly string[]) => Promise<CodeRegistry>;
  /** Hears each endpoint left out of the GraphQL schema and why (docs/graphql.md "Your own code"). */
  graphqlOmitted?: (name: string, reason: string) => void;
}

export async function renderProject(
  projectDir: string,
  options: RenderProjectOptions = {},
): Promise<Map<string, string>> {
  const { schemaText, tables, enums } = await readModel(projectDir);
  const config = await loadConfig(
    projectDir,
    Object.fromEntries(tables.map((t) => [t.name, t.fields.map((f) => f.name)])),
  );
  const badReferences = unknownFileBuckets(tables, Object.keys(config.storage.buckets), schemaText);
  if (badReferences.length > 0) throw new ModelError(badReferences);
  // The configured database functions, read from the migrations (docs/own-code.md "Database functions").
  const functions = functionSignatures(Object.keys(config.functions), await readMigrationSql(projectDir), {
    enums,
    tables,
  });
  const schemaSha256 = sha256(schemaText);
  const prismaInput = sha256(`${PRISMA_CLIENT_INPUT_VERSION}\0${schemaText}`);
  const prisma =
    (options.reusePrismaClient !== false && (await committedPrismaClient(projectDir, prismaInput))) ||
    (await renderPrismaClient(schemaText));
  let endpoints: CodeRegistry['endpoints'] = [];
  if (options.code) {
    try {
      endpoints = (
        await options.code(
          config,
          tables.map((t) => t.name),
        )
      ).endpoints;
    } catch (error) {
      throw new CodeNotLoaded(error);
    }
  }
  const files = renderFiles(tables, {
    endpoints,
    title: `${config.project.id} API`,
    version: '1.0.0',
    schemaSha256,
    functions,
    ...(options.graphqlOmitted ? { graphqlOmitted: options.graphqlOmitted } : {}),
    prismaClient: { input: prismaInput, files: filesSha256(prisma) },
    buckets: Object.entries(config.storage.buckets).map(([name, b]) => ({
      name,
      maxBytes: b.maxBytes,
      contentTypes: b.contentTypes,
      public: b.public,
    })),
  });
  for (const [file, content] of prisma) files.set(`prisma/${file}`, content);
  return new Map([...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

// The Prisma client is a function of the schema text and the Prisma generator's version (and of
// the generator block svcgen forces, which changes with svcgen's version).
const PRISMA_CLIENT_INPUT_VERSION = `prisma-client ${PACKAGE_MANIFEST.dependencies['@prisma/client-generator-registry']}; svcgen ${SVCGEN_VERSION}`;

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function filesSha256(files: ReadonlyMap<string, string>): string {
  const hash = createHash('sha256');
  for (const [file, content] of [...files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    hash.update(`${file}\0${content}\0`);
  return hash.digest('hex');
}

async function renderPrismaClient(schemaText: string): Promise<Map<string, string>> {
  const scratch = await mkdtemp(path.join(tmpdir(), 'svcgen-prisma-'));
  try {
    await generatePrismaClient({ schemaText, outputDir: scratch });
    const files = new Map<string, string>();
    for (const file of await listFiles(scratch)) files.set(file, await readFile(path.join(scratch, file), 'utf8'));
    return files;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * Generating the Prisma client is the slowest part of `generate` and `check` (~0.5 s of Prisma's
 * generator). The committed generated/prisma/ is reused when generated/package.json says it was
 * made from the same input and its files still hash as recorded (an edited file is regenerated,
 * so check still reports it).
 */
async function committedPrismaClient(projectDir: string, input: string): Promise<Map<string, string> | undefined> {
  const dir = path.join(projectDir, GENERATED_DIR);
  const recorded = await readFile(path.join(dir, 'package.json'), 'utf8')
    .then(
      (text) =>
        (JSON.parse(text) as { svcgen?: { prismaClient?: { input?: string; files?: string } } }).svcgen?.prismaClient,
    )
    .catch(() => undefined);
  if (!recorded || recorded.input !== input) return undefined;
  const files = new Map<string, string>();
  for (const file of await listFiles(path.join(dir, 'prisma')))
    files.set(file, await readFile(path.join(dir, 'prisma', file), 'utf8'));
  return files.size > 0 && filesSha256(files) === recorded.files ? files : undefined;
}

/** Writes `generated/`, removing files a previous model produced and this one does not. */
export async function writeProject(
  projectDir: string,
  files: Map<string, string>,
): Promise<{ written: number; removed: string[] }> {
  const dir = path.join(projectDir, GENERATED_DIR);
  const removed: string[] = [];
  for (const existing of await listFiles(dir)) {
    if (!files.has(existing)) {
      await rm(path.join(dir, existing));
      removed.push(existing);
    }
  }
  let written = 0;
  for (const [file, content] of files) {
    const target = path.join(dir, file);
    const current = await readFile(target, 'utf8').catch(() => undefined);
    if (current === content) continue;
    await mkdir(path.dirname(target), { recursive: true });
    await writeFile(target, content);
    written++;
  }
  return { written, removed };
}

/** A unified diff from what is in `generated/` to what `generate` would write; '' when fresh. */
export async function diffProject(projectDir: string, files: Map<string, string>): Promise<string> {
  const dir = path.join(projectDir, GENERATED_DIR);
  const existing = await listFiles(dir);
  const names = [...new Set([...existing, ...files.keys()])].sort();
  let out = '';
  for (const name of names) {
    const current = await readFile(path.join(dir, name), 'utf8').catch(() => undefined);
    const wanted = files.get(name);
    if (current === wanted) continue;
    const label = `${GENERATED_DIR}/${name}`;
    out += createTwoFilesPatch(
      current === undefined ? '/dev/null' : `a/${label}`,
      wanted === undefined ? '/dev/null' : `b/${label}`,
      current ?? '',
      wanted ?? '',
      undefined,
      undefined,
      { context: 3 },
    );
  }
  return out;
}
