/**
 * What a dev cycle looks at (docs/dev.md "Not watched"): the two files, a fingerprint of
 * migrations/, and the project's own code (./code-files.ts; docs/own-code.md "Where the code lives").
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { codeFingerprint, readCodeFiles } from './code-files.ts';

export const WATCHED = ['schema.prisma', 'svcgen.config.json'] as const;
export const MIGRATIONS = 'migrations/';

/** The two files' text (undefined when missing), and a fingerprint of the migrations (names and SQL). */
export interface Inputs {
  'schema.prisma': string | undefined;
  'svcgen.config.json': string | undefined;
  migrations: string;
  /** Each code file, relative to the project, with a hash of its text (undefined: missing). */
  code: ReadonlyMap<string, string | undefined>;
}

export async function migrationsFingerprint(dir: string): Promise<string> {
  const folder = path.join(dir, 'migrations');
  const entries = await readdir(folder, { withFileTypes: true }).catch(() => []);
  const hash = createHash('sha256');
  for (const name of entries
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort()) {
    const sql = await readFile(path.join(folder, name, 'migration.sql'), 'utf8').catch(() => '\0missing');
    hash.update(`${name}\0${sql}\0`);
  }
  return hash.digest('hex');
}

export async function readInputs(dir: string): Promise<Inputs> {
  const [[schema, config], migrations, code] = await Promise.all([
    Promise.all(WATCHED.map((f) => readFile(path.join(dir, f), 'utf8').catch(() => undefined))),
    migrationsFingerprint(dir),
    readCodeFiles(dir),
  ]);
  const hashes = new Map<string, string | undefined>();
  for (const [file, text] of code)
    hashes.set(path.relative(dir, file), text === undefined ? undefined : codeFingerprint(new Map([[file, text]])));
  return { 'schema.prisma': schema, 'svcgen.config.json': config, migrations, code: hashes };
}

/** The code files (relative paths) that differ between `a` and `b`: changed, added to the imports or dropped from them. */
export function codeChangedIn(a: Inputs, b: Inputs | undefined): string[] {
  const names = new Set([...a.code.keys(), ...(b?.code.keys() ?? [])]);
  return [...names].filter((name) => a.code.get(name) !== b?.code.get(name) || !b?.code.has(name)).sort();
}

/** What differs from `b` (every input when there is none), as the `change detected:` line names it. */
export function changedIn(a: Inputs, b: Inputs | undefined): string[] {
  return [
    ...WATCHED.filter((f) => a[f] !== b?.[f]),
    ...(a.migrations !== b?.migrations ? [MIGRATIONS] : []),
    ...codeChangedIn(a, b),
  ];
}
