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

export async function openProjectDatabase(projectDir: string, databaseUrl?: string): Promise<ProjectDatabase> {
  const url = databaseUrl ?? process.env.DATABASE_URL;
  if (url) return { url, embedded: false, release: async () => {} };
  const embedded = await startEmbeddedPostgres(path.join(projectDir, '.svcgen'));
  return { url: embedded.url, embedded: true, release: () => embedded.stop() };
}
