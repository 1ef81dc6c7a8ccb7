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

/**
 * `log` hears the embedded server's progress (initialising, starting, reusing a running one);
 * `serverLog` PostgreSQL's own startup lines.
 */
export async function openProjectDatabase(
  projectDir: string,
  databaseUrl?: string,
  log?: (line: string) => void,
  directDatabaseUrl?: string,
  serverLog?: (line: string) => void,
): Promise<ProjectDatabase> {
  const direct = directDatabaseUrl || process.env.DIRECT_DATABASE_URL || undefined;
  // Only a direct URL: a session connection serves requests as well as anything else.
  const url = databaseUrl ?? (process.env.DATABASE_URL || undefined) ?? direct;
  if (url) return { url, directUrl: direct ?? url, embedded: false, release: async () => {} };
  log?.(`starting the embedded PostgreSQL in ${path.join(projectDir, '.svcgen')}`);
  const embedded = await startEmbeddedPostgres(path.join(projectDir, '.svcgen'), { log, serverLog });
  return { url: embedded.url, directUrl: embedded.url, embedded: true, release: () => embedded.stop() };
}

/**
 * Creates the database `url` names when it does not exist, as `prisma migrate dev` does: through
 * the `postgres` maintenance database of the same server (template1 when that one is missing too).
 * Returns the name it created, or undefined when the database was there.
 */
export async function createDatabaseIfMissing(url: string): Promise<string | undefined> {
  const [{ newClient }, { connectionConfig }] = await Promise.all([
    import('../runtime/db/client.ts'),
    import('../runtime/db/connection.ts'),
  ]);
  type Client = ReturnType<typeof newClient>;
  const tryConnect = async (target: string): Promise<Client | 'missing'> => {
    const client = newClient(connectionConfig(target));
    try {
      await client.connect();
      return client;
    } catch (error) {
      await client.end().catch(() => {});
      // 3D000 invalid_catalog_name: "database … does not exist"
      if ((error as { code?: string }).code === '3D000') return 'missing';
      throw error;
    }
  };
  const first = await tryConnect(url);
  if (first !== 'missing') {
    await first.end();
    return undefined;
  }
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!name)
    throw new Error(
      'the database URL names no database, and the default one (the user name) does not exist: add /<database> to it',
    );
  let admin: Client | 'missing' = 'missing';
  for (const maintenance of ['postgres', 'template1']) {
    if (maintenance === name) continue;
    const other = new URL(url);
    other.pathname = `/${maintenance}`;
    admin = await tryConnect(other.href);
    if (admin !== 'missing') break;
  }
  if (admin === 'missing')
    throw new Error(
      `database "${name}" does not exist, and neither does "postgres" or "template1" on that server to create it from`,
    );
  try {
    await admin.query(`CREATE DATABASE ${quoteIdentifier(name)}`).catch((error: { code?: string }) => {
      // 42P04 duplicate_database: someone else created it meanwhile.
      if (error.code !== '42P04') throw error;
    });
  } finally {
    await admin.end();
  }
  return name;
}

function quoteIdentifier(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
