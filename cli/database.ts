/**
 * Where the CLI's database comes from (README "Command line"): --database-url, else DATABASE_URL, else an
 * embedded PostgreSQL with its files in `<project>/.svcgen/`. The session connection comes from
 * --direct-database-url, else DIRECT_DATABASE_URL, else it is the same: with a transaction-pooling
 * PgBouncer in front, requests go through the pooler and migrations, LISTEN and the webhook
 * runner go straight to PostgreSQL.
 */
import path from 'node:path';
import { startEmbeddedPostgres } from '../runtime/db/embedded-postgres/index.ts';

export interface ProjectDatabase {
  url: string;
  /** The session connection (the same as `url` unless a direct one was given). */
  directUrl: string;
  embedded: boolean;
  release(): Promise<void>;
}

/** `log` hears the embedded server's progress (initialising, starting, reusing a running one). */
export async function openProjectDatabase(projectDir: string, databaseUrl?: string, log?: (line: string) => void, directDatabaseUrl?: string): Promise<ProjectDatabase> {
  const direct = directDatabaseUrl || process.env.DIRECT_DATABASE_URL || undefined;
  // Only a direct URL: a session connection serves requests as well as anything else.
  const url = databaseUrl ?? (process.env.DATABASE_URL || undefined) ?? direct;
  if (url) return { url, directUrl: direct ?? url, embedded: false, release: async () => {} };
  log?.(`starting the embedded PostgreSQL in ${path.join(projectDir, '.svcgen')}`);
  const embedded = await startEmbeddedPostgres(path.join(projectDir, '.svcgen'), { log });
  return { url: embedded.url, directUrl: embedded.url, embedded: true, release: () => embedded.stop() };
}
