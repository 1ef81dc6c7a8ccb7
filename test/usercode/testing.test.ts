// svcgen/testing (docs/own-code.md "Testing your code"): a project's own tests start its server on a
// throwaway database with its code and migrations, call it with the typed client, and close() drops it.
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from 'svcgen/testing';
import { createClient, ServiceError } from '../../examples/shop/generated/client.ts';
import { databaseServerUrl } from '../support/database.ts';
import { SHOP } from '../support/server.ts';

let server: TestServer | undefined;
afterAll(() => server?.close());

async function databaseExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseServerUrl() });
  await client.connect();
  try {
    return (await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  } finally {
    await client.end();
  }
}

describe('startTestServer of svcgen/testing', () => {
  it('serves the project on a fresh database with its migrations applied, keys by role, and drops it on close', async () => {
    server = await startTestServer({ project: SHOP, databaseUrl: databaseServerUrl() });
    expect(server.projectId).toBe('shop');
    const name = new URL(server.databaseUrl).pathname.slice(1);
    expect(name).toMatch(/^svcgen_test_[a-z0-9]+_[0-9a-f]{8}$/);

    const admin = createClient({
      baseUrl: server.url,
      projectId: server.projectId,
      apiKey: await server.createKey(['admin']),
    });
    const { data: customer } = await admin.Customer.create({ name: 'Ada', email: 'ada@example.com' });
    expect((await admin.Customer.list()).data.map((c) => c.id)).toEqual([customer.id]);

    const catalog = createClient({
      baseUrl: server.url,
      projectId: server.projectId,
      apiKey: await server.createKey(['catalog']),
    });
    const refused = await catalog.Customer.list().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ServiceError);
    expect((refused as ServiceError).problem).toMatchObject({
      status: 403,
      detail: 'your role may not read Customer records',
    });

    expect(await databaseExists(name)).toBe(true);
    await server.close();
    expect(await databaseExists(name)).toBe(false);
    await expect(fetch(`${server.url}/healthz`)).rejects.toThrow();
  }, 120_000);
});
