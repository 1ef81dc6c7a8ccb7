// generator/prisma: Prisma's own tooling, offline (DMMF, client generation, migration SQL).
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PrismaSchemaError,
  generatePrismaClient,
  migrationLockContent,
  migrationSqlBetween,
  migrationSqlFromMigrations,
  readDmmf,
  writeMigrationLock,
} from '../../generator/prisma/index.ts';
// Internals, only to exercise recovery paths the public API cannot trigger on purpose.
import { readMigrationList } from '../../generator/prisma/migrations-dir.ts';
import { openShadowDatabaseSession } from '../../generator/prisma/pg-shadow-database.ts';
import { probeOnlyAdapterFactory } from '../../generator/prisma/probe-adapter.ts';
import { withSchemaEngine, withSharedSchemaEngine } from '../../generator/prisma/schema-engine.ts';
import { databaseServerUrl } from '../support/database.ts';

/** Server for tests that need PostgreSQL (a shared test-database helper will replace this). */
function testDatabaseUrl(): string {
  return databaseServerUrl();
}

const SCHEMA = `generator client {
  provider = "prisma-client-js"
  output   = "../somewhere/else"
}

datasource db {
  provider = "postgresql"
}

enum Role {
  USER
  ADMIN
}

model User {
  id    Int    @id @default(autoincrement())
  email String @unique
  role  Role   @default(USER)
  posts Post[]
}

model Post {
  id       Int    @id @default(autoincrement())
  title    String
  authorId Int
  author   User   @relation(fields: [authorId], references: [id])
}

model Membership {
  userId Int
  teamId Int

  @@id([userId, teamId])
}
`;

const SCHEMA_PLUS_FIELD = SCHEMA.replace('  title    String\n', '  title    String\n  body     String?\n');

const BROKEN_SCHEMA = `datasource db {
  provider = "postgresql"
}

model User {
  id    Int    @id
  email Strng
}
`;

let tempRoot: string;
beforeAll(async () => {
  tempRoot = await mkdtemp(path.join(os.tmpdir(), 'svcgen-prisma-toolkit-'));
});
afterAll(async () => {
  await rm(tempRoot, { recursive: true, force: true });
});

async function readTree(dir: string): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = path.join(entry.parentPath, entry.name);
    files.set(path.relative(dir, full), await readFile(full, 'utf8'));
  }
  return files;
}

describe('readDmmf', () => {
  it('returns Prisma DMMF with models, relation, enum and composite id', async () => {
    const dmmf = await readDmmf(SCHEMA);
    expect(dmmf.datamodel.models.map((m) => m.name)).toEqual(['User', 'Post', 'Membership']);
    expect(dmmf.datamodel.enums.map((e) => [e.name, e.values.map((v) => v.name)])).toEqual([
      ['Role', ['USER', 'ADMIN']],
    ]);

    const post = dmmf.datamodel.models.find((m) => m.name === 'Post')!;
    const author = post.fields.find((f) => f.name === 'author')!;
    expect(author).toMatchObject({
      kind: 'object',
      type: 'User',
      relationFromFields: ['authorId'],
      relationToFields: ['id'],
    });
    const user = dmmf.datamodel.models.find((m) => m.name === 'User')!;
    expect(user.fields.find((f) => f.name === 'posts')).toMatchObject({ kind: 'object', isList: true, type: 'Post' });
    expect(user.fields.find((f) => f.name === 'role')).toMatchObject({ kind: 'enum', type: 'Role' });

    const membership = dmmf.datamodel.models.find((m) => m.name === 'Membership')!;
    expect(membership.primaryKey).toEqual({ name: null, fields: ['userId', 'teamId'] });
  });

  it('throws PrismaSchemaError carrying Prisma validation output', async () => {
    const error = await readDmmf(BROKEN_SCHEMA, 'prisma/schema.prisma').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PrismaSchemaError);
    const { message, code } = error as PrismaSchemaError;
    expect(code).toBe('P1012');
    expect(message).toContain('Type "Strng" is neither a built-in type');
    expect(message).toContain('prisma/schema.prisma:7');
    expect(message).toContain('email Strng');
    // No ANSI colours, no CLI footer.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the ANSI escape character is what is looked for
    expect(message).not.toMatch(/\u001b\[/);
    expect(message).not.toContain('Prisma CLI Version');
    expect(message).not.toContain('[Context:');
  });
});

describe('migrationSqlBetween', () => {
  it('creates every table and the enum from an empty database', async () => {
    const sql = await migrationSqlBetween(null, SCHEMA);
    for (const table of ['User', 'Post', 'Membership']) expect(sql).toContain(`CREATE TABLE "${table}" (`);
    expect(sql).toContain(`CREATE TYPE "Role" AS ENUM ('USER', 'ADMIN');`);
    expect(sql).toContain('CONSTRAINT "Membership_pkey" PRIMARY KEY ("userId","teamId")');
    expect(sql).toContain('ALTER TABLE "Post" ADD CONSTRAINT "Post_authorId_fkey" FOREIGN KEY ("authorId")');
    // Like migrate dev's first migration: a fresh database already has "public".
    expect(sql).not.toContain('CREATE SCHEMA');
  });

  it('is empty when nothing changes', async () => {
    expect(await migrationSqlBetween(SCHEMA, SCHEMA)).toBe('');
  });

  it('adds a column for a new field', async () => {
    expect(await migrationSqlBetween(SCHEMA, SCHEMA_PLUS_FIELD)).toBe(
      '-- AlterTable\nALTER TABLE "Post" ADD COLUMN     "body" TEXT;\n',
    );
  });

  it('reports an invalid target schema as PrismaSchemaError', async () => {
    const error = await migrationSqlBetween(SCHEMA, BROKEN_SCHEMA).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PrismaSchemaError);
    expect((error as Error).message).toContain('Strng');
  });

  it('keeps working after the engine panicked', async () => {
    const panic = await withSharedSchemaEngine(probeOnlyAdapterFactory, async (engine) => {
      engine.debugPanic();
    }).catch((e: unknown) => e);
    expect((panic as Error).message).toContain('This is the debugPanic artificial panic');
    expect(await migrationSqlBetween(SCHEMA, SCHEMA_PLUS_FIELD)).toContain('ADD COLUMN');
  });
});

describe('migrations folder', () => {
  it('writes migration_lock.toml in Prisma format', async () => {
    const dir = path.join(tempRoot, 'lock', 'migrations');
    expect(await writeMigrationLock(dir)).toBe(true);
    expect(await readFile(path.join(dir, 'migration_lock.toml'), 'utf8')).toBe(
      '# Please do not edit this file manually\n' +
        '# It should be added in your version-control system (e.g., Git)\n' +
        'provider = "postgresql"\n',
    );
    expect(await writeMigrationLock(dir)).toBe(false);
    await writeFile(path.join(dir, 'migration_lock.toml'), migrationLockContent('mysql'));
    await expect(writeMigrationLock(dir)).rejects.toThrow(/provider "mysql"/);
  });

  it('diffs the replayed migrations against the schema: only the new column', async () => {
    const dir = path.join(tempRoot, 'from-migrations', 'migrations');
    await writeMigrationLock(dir);
    await mkdir(path.join(dir, '20250101000000_init'));
    await writeFile(path.join(dir, '20250101000000_init', 'migration.sql'), await migrationSqlBetween(null, SCHEMA));

    const opts = { migrationsDir: dir, shadowDatabaseUrl: testDatabaseUrl() };
    expect(await migrationSqlFromMigrations({ ...opts, schemaText: SCHEMA_PLUS_FIELD })).toBe(
      '-- AlterTable\nALTER TABLE "Post" ADD COLUMN     "body" TEXT;\n',
    );
    expect(await migrationSqlFromMigrations({ ...opts, schemaText: SCHEMA })).toBe('');
  });

  it('gives for an empty folder exactly what migrationSqlBetween(null, …) gives', async () => {
    const sql = await migrationSqlFromMigrations({
      migrationsDir: path.join(tempRoot, 'never-created'),
      schemaText: SCHEMA,
      shadowDatabaseUrl: testDatabaseUrl(),
    });
    expect(sql).toBe(await migrationSqlBetween(null, SCHEMA));
  });

  // The engine reads pg_constraint.contype ("char") as a Char value: reported as
  // text it panicked on any CHECK constraint, and on PostgreSQL 18 (which lists
  // NOT NULL constraints in pg_constraint) on every table.
  it('replays CHECK and NOT NULL constraints (catalog "char" columns)', async () => {
    const dir = path.join(tempRoot, 'check-constraint', 'migrations');
    await writeMigrationLock(dir);
    await mkdir(path.join(dir, '20250101000000_init'));
    await writeFile(
      path.join(dir, '20250101000000_init', 'migration.sql'),
      (await migrationSqlBetween(null, SCHEMA)) +
        'ALTER TABLE "User" ADD CONSTRAINT "User_email_check" CHECK (email <> \'\');\n',
    );
    const opts = { migrationsDir: dir, shadowDatabaseUrl: testDatabaseUrl() };
    // Like `prisma migrate dev`: CHECK constraints are not part of the datamodel and are left alone.
    expect(await migrationSqlFromMigrations({ ...opts, schemaText: SCHEMA_PLUS_FIELD })).toBe(
      '-- AlterTable\nALTER TABLE "Post" ADD COLUMN     "body" TEXT;\n',
    );
  });

  it('reports an engine panic while replaying as an error, drops the shadow database and recovers', async () => {
    const dir = path.join(tempRoot, 'panic', 'migrations');
    await writeMigrationLock(dir);
    await mkdir(path.join(dir, '20250101000000_init'));
    await writeFile(
      path.join(dir, '20250101000000_init', 'migration.sql'),
      (await migrationSqlBetween(null, SCHEMA)) +
        'ALTER TABLE "User" ADD CONSTRAINT "User_email_check" CHECK (email <> \'\');\n',
    );
    const session = await openShadowDatabaseSession(testDatabaseUrl());
    // Sabotage: report "char" columns as text again, which makes the engine
    // panic inside an async callback (a wasm trap outside the engine call).
    const connect = session.factory.connectToShadowDb.bind(session.factory);
    session.factory.connectToShadowDb = async () => {
      const adapter = await connect();
      const queryRaw = adapter.queryRaw.bind(adapter);
      adapter.queryRaw = async (query) => {
        const result = await queryRaw(query);
        return {
          ...result,
          columnTypes: result.columnTypes.map((type) => (type === 6 /* Character */ ? 7 /* Text */ : type)),
        };
      };
      return adapter;
    };
    const list = await readMigrationList(dir);
    const error = await withSchemaEngine(session.factory, (engine) =>
      engine.diff({
        from: { tag: 'migrations', ...list },
        to: { tag: 'schemaDatamodel', files: [{ path: 'schema.prisma', content: SCHEMA }] },
        script: true,
        exitCode: true,
        filters: { externalTables: [], externalEnums: [] },
      }),
    ).catch((e: unknown) => e);
    await session.close();
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain('Prisma schema engine panicked');
    expect((error as Error).message).toContain('constraint_type');
    expect(session.createdDatabases).toHaveLength(1);

    const client = new pg.Client({ connectionString: testDatabaseUrl() });
    await client.connect();
    try {
      const { rows } = await client.query('SELECT datname FROM pg_database WHERE datname = ANY($1)', [
        [...session.createdDatabases],
      ]);
      expect(rows).toEqual([]);
    } finally {
      await client.end();
    }
    // A fresh engine instance takes over.
    expect(
      await migrationSqlFromMigrations({
        migrationsDir: dir,
        schemaText: SCHEMA_PLUS_FIELD,
        shadowDatabaseUrl: testDatabaseUrl(),
      }),
    ).toBe('-- AlterTable\nALTER TABLE "Post" ADD COLUMN     "body" TEXT;\n');
  });

  it('drops its temporary shadow databases', async () => {
    const session = await openShadowDatabaseSession(testDatabaseUrl());
    const adapter = await session.factory.connectToShadowDb();
    await adapter.executeScript("CREATE TABLE t (x text DEFAULT 'a;b'); INSERT INTO t DEFAULT VALUES;");
    await session.close();
    expect(session.createdDatabases).toHaveLength(1);

    const client = new pg.Client({ connectionString: testDatabaseUrl() });
    await client.connect();
    try {
      const { rows } = await client.query('SELECT datname FROM pg_database WHERE datname = ANY($1)', [
        [...session.createdDatabases],
      ]);
      expect(rows).toEqual([]);
    } finally {
      await client.end();
    }
  });
});

describe('generatePrismaClient', () => {
  it('is deterministic and free of machine paths', async () => {
    const first = path.join(tempRoot, 'client-a');
    const second = path.join(tempRoot, 'nested', 'client-b');
    await generatePrismaClient({ schemaText: SCHEMA, outputDir: first });
    await generatePrismaClient({ schemaText: SCHEMA, outputDir: second });

    const a = await readTree(first);
    const b = await readTree(second);
    expect([...a.keys()].sort()).toEqual(
      [
        'browser.ts',
        'client.ts',
        'commonInputTypes.ts',
        'enums.ts',
        'internal/class.ts',
        'internal/prismaNamespace.ts',
        'internal/prismaNamespaceBrowser.ts',
        'models.ts',
        'models/Membership.ts',
        'models/Post.ts',
        'models/User.ts',
      ].map((p) => p.split('/').join(path.sep)),
    );
    expect(b).toEqual(a);
    for (const content of a.values()) {
      expect(content).not.toContain(tempRoot);
      expect(content).not.toContain(process.cwd());
    }
    // The caller's generator block was replaced by svcgen's prisma-client one.
    expect(a.get(path.join('internal', 'class.ts'))).toContain('provider               = \\"prisma-client\\"');
    expect(a.get(path.join('internal', 'class.ts'))).not.toContain('prisma-client-js');
  });

  it('rejects an invalid schema before generating anything', async () => {
    const outputDir = path.join(tempRoot, 'client-broken');
    await expect(generatePrismaClient({ schemaText: BROKEN_SCHEMA, outputDir })).rejects.toBeInstanceOf(
      PrismaSchemaError,
    );
    await expect(readdir(outputDir)).rejects.toThrow(/ENOENT/);
  });
});
