/** Loading a project folder: its config (validated against the model) and its generated service. */
import { createHash } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig, type Config } from '../runtime/config/index.ts';
import type { ServiceModule } from '../runtime/model/index.ts';
import { command } from './hints.ts';
import { ensureTypeScriptLoader } from './typescript-loader.ts';

export { UsageError } from './usage-error.ts';
import { UsageError } from './usage-error.ts';

export async function loadService(projectDir: string): Promise<{ service: ServiceModule; config: Config }> {
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
  return { service, config };
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
