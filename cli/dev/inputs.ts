/** What a dev cycle looks at (docs/dev.md "Not watched"): the two files, and a fingerprint of migrations/. */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

export const WATCHED = ['schema.prisma', 'svcgen.config.json'] as const;
export const MIGRATIONS = 'migrations/';

/** The two files' text (undefined when missing), and a fingerprint of the migrations (names and SQL). */
export interface Inputs {
  'schema.prisma': string | undefined;
  'svcgen.config.json': string | undefined;
  migrations: string;
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
  const [schema, config, migrations] = await Promise.all([
    ...WATCHED.map((f) => readFile(path.join(dir, f), 'utf8').catch(() => undefined)),
    migrationsFingerprint(dir),
  ]);
  return { 'schema.prisma': schema, 'svcgen.config.json': config, migrations: migrations! };
}

/** What differs from `b` (every input when there is none), as the `change detected:` line names it. */
export function changedIn(a: Inputs, b: Inputs | undefined): string[] {
  return [...WATCHED.filter((f) => a[f] !== b?.[f]), ...(a.migrations !== b?.migrations ? [MIGRATIONS] : [])];
}
