import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';

let a: TestDatabase;
let b: TestDatabase;

beforeAll(async () => {
  [a, b] = await Promise.all([createTestDatabase(), createTestDatabase()]);
});

afterAll(async () => {
  await Promise.all([a?.drop(), b?.drop()]);
});

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

it('creates uniquely named, isolated databases', async () => {
  expect(a.name).toMatch(/^svcgen_t_[a-z0-9]+_[0-9a-f]+$/);
  expect(a.name).not.toBe(b.name);
  expect(await query(a.url, 'select current_database() as db')).toEqual([{ db: a.name }]);

  await query(a.url, 'create table only_in_a (id int)');
  expect(await query(a.url, "select to_regclass('only_in_a')::text as t")).toEqual([{ t: 'only_in_a' }]);
  expect(await query(b.url, "select to_regclass('only_in_a')::text as t")).toEqual([{ t: null }]);
});

it('drop() removes the database even with open connections, and is idempotent', async () => {
  const extra = await createTestDatabase();
  const open = new pg.Client(extra.url);
  await open.connect();
  const terminated = new Promise((resolve) => open.on('error', resolve)); // WITH (FORCE) kills this session
  await extra.drop();
  await extra.drop();
  await terminated;
  await open.end().catch(() => {});
  await expect(query(extra.url, 'select 1')).rejects.toMatchObject({ code: '3D000' }); // database does not exist
});
