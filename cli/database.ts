/**
 * Where the CLI's database comes from (CONTRACT §3): --database-url, else DATABASE_URL, else an
 * embedded PostgreSQL with its files in `<project>/.svcgen/`.
 */
import path from 'node:path';
import { startEmbeddedPostgres } from '../runtime/db/embedded-postgres/index.ts';

export interface ProjectDatabase {
  url: string;
  embedded: boolean;
  release(): Promise<void>;
}

/** `log` hears the embedded server's progress (initialising, starting, reusing a running one). */
export async function openProjectDatabase(projectDir: string, databaseUrl?: string, log?: (line: string) => void): Promise<ProjectDatabase> {
  const url = databaseUrl ?? process.env.DATABASE_URL;
  if (url) return { url, embedded: false, release: async () => {} };
  log?.(`starting the embedded PostgreSQL in ${path.join(projectDir, '.svcgen')}`);
  const embedded = await startEmbeddedPostgres(path.join(projectDir, '.svcgen'), { log });
  return { url: embedded.url, embedded: true, release: () => embedded.stop() };
}
