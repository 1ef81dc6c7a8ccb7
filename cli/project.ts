/** Loading a project folder: its config (validated against the model) and its generated service. */
import { access } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { loadConfig, type Config } from '../runtime/config/index.ts';
import type { ServiceModule } from '../runtime/model/index.ts';

export { UsageError } from './usage-error.ts';
import { UsageError } from './usage-error.ts';

export async function loadService(projectDir: string): Promise<{ service: ServiceModule; config: Config }> {
  const entry = path.join(projectDir, 'generated', 'index.ts');
  try {
    await access(entry);
  } catch {
    throw new UsageError(`${entry} not found: run \`svcgen generate --project ${projectDir}\` first`);
  }
  const { service } = (await import(pathToFileURL(entry).href)) as { service: ServiceModule };
  const config = await loadConfig(projectDir, Object.fromEntries(Object.values(service.tables).map((t) => [t.spec.name, t.spec.fields.map((f) => f.name)])));
  return { service, config };
}
