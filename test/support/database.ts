// A private database per test file on the server started by ./global-setup.ts:
//
//   const db = await createTestDatabase();   // in beforeAll
//   ... new pg.Pool({ connectionString: db.url }) ...
//   await db.drop();                         // in afterAll (after closing your pools)
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

export interface TestDatabase {
  /** connection URL of the new database */
  url: string;
  /** its name: svcgen_t_<base36 creation time>_<random> */
  name: string;
  /** Terminates every connection to it and drops it. Idempotent. */
  drop(): Promise<void>;
}

export function databaseServerUrl(): string {
  const url = (inject('databaseServerUrl') as string | undefined) ?? process.env.SVCGEN_TEST_DATABASE_URL;
  if (!url) {
    throw new Error(
      'No test database server: run the tests through vitest.config.ts (globalSetup test/support/global-setup.ts) ' +
        'or set SVCGEN_TEST_DATABASE_URL.',
    );
  }
  return url;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = databaseServerUrl();
  // the creation time in the name lets global-setup drop left-overs of crashed runs on a shared server
  const name = `svcgen_t_${Date.now().toString(36)}_${randomBytes(5).toString('hex')}`;
  await withClient(serverUrl, (c) => c.query(`create database ${c.escapeIdentifier(name)}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  let dropping: Promise<void> | undefined;
  return {
    url: url.toString(),
    name,
    drop: () =>
      (dropping ??= withClient(serverUrl, async (c) => {
        await c.query(`drop database if exists ${c.escapeIdentifier(name)} with (force)`);
      })),
  };
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}
