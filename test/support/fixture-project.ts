/**
 * A project generated from a fixture schema under test/fixtures, through the same stages as the
 * CLI (render, write, first migration), for behaviour the example shop's model has no case for.
 */
import { cp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { renderProject, writeProject } from '../../generator/generate.ts';
import { migrationSqlBetween } from '../../generator/prisma/index.ts';
import { REPO } from './server.ts';

/**
 * Generates test/fixtures/<name> into test/.generated/<name> (inside the repo, so that the
 * generated code resolves zod and svcgen/model like the example does) and returns its directory.
 */
export async function generateFixtureProject(name: string): Promise<{ dir: string; remove(): Promise<void> }> {
  const dir = path.join(REPO, 'test/.generated', name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  for (const file of ['schema.prisma', 'svcgen.config.json'])
    await cp(path.join(REPO, 'test/fixtures', name, file), path.join(dir, file));
  await writeFile(path.join(dir, 'package.json'), '{ "private": true, "type": "module" }\n');
  // A fixture's own migrations (database functions) apply after the first one, which is made here.
  const migrations = path.join(REPO, 'test/fixtures', name, 'migrations');
  if (await stat(migrations).catch(() => undefined))
    await cp(migrations, path.join(dir, 'migrations'), { recursive: true });
  const sql = await migrationSqlBetween(null, await readFile(path.join(dir, 'schema.prisma'), 'utf8'));
  await mkdir(path.join(dir, 'migrations/20260101000000_init'), { recursive: true });
  await writeFile(path.join(dir, 'migrations/20260101000000_init/migration.sql'), sql);
  await writeProject(dir, await renderProject(dir));
  return { dir, remove: () => rm(dir, { recursive: true, force: true }) };
}
