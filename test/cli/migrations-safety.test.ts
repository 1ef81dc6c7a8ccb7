/**
 * Safe migrations through the real CLI: data-loss warnings before `migrate dev` writes anything,
 * --accept-data-loss / --create-only, a failed migration rolled back and recorded until resolved,
 * `migrate reset`, and `serve` refusing a model that no migration holds.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { askYesNo, decideMigration, isYes } from '../../cli/migration-decision.ts';
import { describeCheck, planMigrationChecks, prismaTypeName, warningsHeader } from '../../cli/migration-checks.ts';
import { cleanupCli, copyExample, freshDatabase, runCli, show, startCli } from '../support/cli.ts';

afterAll(cleanupCli);

const pools: pg.Pool[] = [];
afterAll(async () => {
  await Promise.all(pools.map((p) => p.end()));
});

async function migrationFolders(dir: string): Promise<string[]> {
  return (await fs.readdir(path.join(dir, 'migrations'), { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
}

async function editSchema(dir: string, from: string, to: string): Promise<void> {
  const file = path.join(dir, 'schema.prisma');
  const text = await fs.readFile(file, 'utf8');
  if (!text.includes(from)) throw new Error(`schema.prisma has no ${JSON.stringify(from)}`);
  await fs.writeFile(file, text.replace(from, to));
}

async function columns(pool: pg.Pool, schema: string, table: string): Promise<string[]> {
  const { rows } = await pool.query<{ column_name: string }>(
    'SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY column_name',
    [schema, table],
  );
  return rows.map((r) => r.column_name);
}

describe('migrate dev, deploy, resolve and reset on a project with rows', { timeout: 180_000 }, () => {
  let dir: string;
  let url: string;
  let pool: pg.Pool;
  let at: string[];
  let projectFlag: string;

  beforeAll(async () => {
    dir = (await copyExample('migsafe')).dir;
    const database = await freshDatabase();
    url = database.url;
    at = ['--project', dir, '--database-url', url];
    projectFlag = ` --project ${dir}`;
    const deployed = await runCli(['migrate', 'deploy', ...at]);
    expect(deployed.code, show(deployed)).toBe(0);
    pool = new pg.Pool({ connectionString: url, max: 2 });
    pools.push(pool);
    // master: 3 orders, 2 with a note; staging: 1 order without one.
    await pool.query(`
      INSERT INTO env_master."Customer" (id, email, name, "updatedAt") VALUES ('00000000-0000-0000-0000-000000000001', 'a@example.com', 'A', now());
      INSERT INTO env_master."Order" (total, note, "customerId", "updatedAt") VALUES
        (10, 'gift', '00000000-0000-0000-0000-000000000001', now()),
        (20, 'fragile', '00000000-0000-0000-0000-000000000001', now()),
        (30, NULL, '00000000-0000-0000-0000-000000000001', now());
      INSERT INTO env_staging."Customer" (id, email, name, "updatedAt") VALUES ('00000000-0000-0000-0000-000000000002', 'b@example.com', 'B', now());
      INSERT INTO env_staging."Order" (total, "customerId", "updatedAt") VALUES (5, '00000000-0000-0000-0000-000000000002', now());
    `);
  });

  it('dropping a column with data is refused without a terminal: exit 1, the warning with its count, nothing written', async () => {
    await editSchema(dir, '  note       String?\n', '');
    expect((await runCli(['generate', '--project', dir])).code).toBe(0);
    const before = await migrationFolders(dir);
    const r = await runCli(['migrate', 'dev', '--name', 'drop_note', ...at]);
    expect(r.code, show(r)).toBe(1);
    const rerun = `npx svcgen migrate dev --name drop_note${projectFlag}`;
    expect(r.stderr).toBe(
      '⚠️  Warnings for environment master:\n\n' +
        '  • You are about to drop the column `note` on the `Order` table, which still contains 2 non-null values.\n\n' +
        `svcgen: migration drop_note not written: it would lose data (see the warnings above). Run \`${rerun} --accept-data-loss\` to write and apply it anyway, ` +
        `or \`${rerun} --create-only\` to write it without applying it, edit the SQL, then run \`npx svcgen migrate deploy${projectFlag}\`\n`,
    );
    expect(await migrationFolders(dir)).toEqual(before);
    const { rows } = await pool.query('SELECT note FROM env_master."Order" ORDER BY total');
    expect(rows.map((row) => row.note)).toEqual(['gift', 'fragile', null]);
  });

  it("--accept-data-loss writes the migration (with Prisma's warning comment) and applies it everywhere", async () => {
    const r = await runCli(['migrate', 'dev', '--name', 'drop_note', '--accept-data-loss', ...at]);
    expect(r.code, show(r)).toBe(0);
    const [folder] = (await migrationFolders(dir)).filter((name) => name.endsWith('_drop_note'));
    expect(folder).toBeDefined();
    expect(await fs.readFile(path.join(dir, 'migrations', folder!, 'migration.sql'), 'utf8')).toBe(
      '/*\n  Warnings:\n\n  - You are about to drop the column `note` on the `Order` table. All the data in the column will be lost.\n\n*/\n' +
        '-- AlterTable\nALTER TABLE "Order" DROP COLUMN "note";\n',
    );
    expect(r.stdout).toContain(`applied ${folder} to master\napplied ${folder} to staging\n`);
    for (const schema of ['env_master', 'env_staging'])
      expect(await columns(pool, schema, 'Order')).not.toContain('note');
  });

  it('a required column without default on tables with rows is refused even with --accept-data-loss, and explained', async () => {
    await editSchema(dir, '  placedAt   DateTime?\n', '  placedAt   DateTime?\n  priority   Int\n');
    expect((await runCli(['generate', '--project', dir])).code).toBe(0);
    const before = await migrationFolders(dir);
    const r = await runCli(['migrate', 'dev', '--name', 'add_priority', '--accept-data-loss', ...at]);
    expect(r.code, show(r)).toBe(1);
    const rerun = `npx svcgen migrate dev --name add_priority${projectFlag}`;
    expect(r.stderr).toBe(
      '⚠️  We found changes that cannot be executed in environment master:\n\n' +
        '  • Added the required column `priority` to the `Order` table without a default value. There are 3 rows in this table, it is not possible to execute this step.\n\n' +
        '⚠️  We found changes that cannot be executed in environment staging:\n\n' +
        '  • Added the required column `priority` to the `Order` table without a default value. There are 1 rows in this table, it is not possible to execute this step.\n\n' +
        'svcgen: migration add_priority not written: it has steps that cannot be executed on the rows above, and --accept-data-loss cannot change that. ' +
        `Give the field a default (@default(...)) or make it optional in schema.prisma, or run \`${rerun} --create-only\` and edit the SQL ` +
        `(e.g. add the column as nullable, fill it with an UPDATE, then SET NOT NULL) before \`npx svcgen migrate deploy${projectFlag}\`\n`,
    );
    expect(await migrationFolders(dir)).toEqual(before);
  });

  it('--create-only writes the file without applying it; after an edit, deploy applies it', async () => {
    const r = await runCli(['migrate', 'dev', '--name', 'add_priority', '--create-only', ...at]);
    expect(r.code, show(r)).toBe(0);
    const [folder] = (await migrationFolders(dir)).filter((name) => name.endsWith('_add_priority'));
    expect(r.stdout).toContain(
      `not applied (--create-only): edit it if needed, then run \`npx svcgen migrate deploy${projectFlag}\``,
    );
    expect(r.stdout).not.toContain('applied 2');
    const file = path.join(dir, 'migrations', folder!, 'migration.sql');
    const sql = await fs.readFile(file, 'utf8');
    expect(sql).toContain(
      'Added the required column `priority` to the `Order` table without a default value. This is not possible if the table is not empty.',
    );
    for (const schema of ['env_master', 'env_staging'])
      expect(await columns(pool, schema, 'Order')).not.toContain('priority');

    await fs.writeFile(
      file,
      sql.replace(
        'ADD COLUMN     "priority" INTEGER NOT NULL;',
        'ADD COLUMN     "priority" INTEGER NOT NULL DEFAULT 0;',
      ),
    );
    const deployed = await runCli(['migrate', 'deploy', ...at]);
    expect(deployed.code, show(deployed)).toBe(0);
    expect(deployed.stdout).toBe(`applied ${folder} to master\napplied ${folder} to staging\n`);
    const { rows } = await pool.query('SELECT priority FROM env_master."Order"');
    expect(rows.map((row) => row.priority)).toEqual([0, 0, 0]);
  });

  it('a migration whose SQL fails is rolled back, recorded as failed, blocks deploy and serve until resolved', async () => {
    const name = '29990101000000_bad';
    const file = path.join(dir, 'migrations', name, 'migration.sql');
    await fs.mkdir(path.dirname(file));
    await fs.writeFile(
      file,
      'ALTER TABLE "Order" ADD COLUMN "flag" BOOLEAN;\nUPDATE "Order" SET "total" = "total" + 1;\nSELECT * FROM "Nope";\n',
    );
    const way = `Fix migrations/${name}/migration.sql, run \`npx svcgen migrate resolve --rolled-back ${name}\`, then \`npx svcgen migrate deploy\` (docs/migrations.md)`;

    const failed = await runCli(['migrate', 'deploy', ...at]);
    expect(failed.code, show(failed)).toBe(1);
    expect(failed.stderr).toBe(
      `svcgen: migration ${name} failed in environment master: relation "Nope" does not exist (SQLSTATE 42P01)\n` +
        'It was rolled back there (a migration that commits its own transaction, e.g. an enum change, may have left part of it applied) and is recorded as failed. ' +
        `${way}\n`,
    );
    for (const schema of ['env_master', 'env_staging'])
      expect(await columns(pool, schema, 'Order')).not.toContain('flag');
    const totals = await pool.query('SELECT total FROM env_master."Order" ORDER BY total');
    expect(totals.rows.map((row) => row.total)).toEqual([10, 20, 30]);
    const recorded = await pool.query(
      `SELECT finished_at, rolled_back_at, logs FROM env_master."_prisma_migrations" WHERE migration_name = $1`,
      [name],
    );
    expect(recorded.rows).toEqual([
      { finished_at: null, rolled_back_at: null, logs: 'relation "Nope" does not exist (SQLSTATE 42P01)' },
    ]);

    const blocked =
      `svcgen: migration ${name} failed in environment master and is not resolved; nothing else is applied until it is. ` +
      `Its changes were rolled back: fix migrations/${name}/migration.sql, run \`npx svcgen migrate resolve --rolled-back ${name}\`, then \`npx svcgen migrate deploy\` (docs/migrations.md)\n`;
    const again = await runCli(['migrate', 'deploy', ...at]);
    expect(again.code, show(again)).toBe(1);
    expect(again.stderr).toBe(blocked);
    for (const flags of [[], ['--no-migrate']]) {
      const served = await runCli(['serve', '--port', '0', ...flags, ...at]);
      expect(served.code, show(served)).toBe(1);
      expect(served.stderr.endsWith(blocked), show(served)).toBe(true);
      expect(served.stdout).not.toContain('listening');
    }

    const notFailed = await runCli(['migrate', 'resolve', '--rolled-back', '20261121221921_init', ...at]);
    expect(notFailed.code, show(notFailed)).toBe(1);
    expect(notFailed.stderr).toBe(
      'svcgen: migration 20261121221921_init is not failed in any environment (master, staging): there is nothing to roll back\n',
    );

    const resolved = await runCli(['migrate', 'resolve', '--rolled-back', name, ...at]);
    expect(resolved.code, show(resolved)).toBe(0);
    expect(resolved.stdout).toBe(
      `marked ${name} rolled back in master: \`npx svcgen migrate deploy${projectFlag}\` applies it again\n`,
    );
    await fs.writeFile(file, 'UPDATE "Order" SET "total" = "total" + 1;\n');
    const deployed = await runCli(['migrate', 'deploy', ...at]);
    expect(deployed.code, show(deployed)).toBe(0);
    expect(deployed.stdout).toBe(`applied ${name} to master\napplied ${name} to staging\n`);
    const after = await pool.query('SELECT total FROM env_master."Order" ORDER BY total');
    expect(after.rows.map((row) => row.total)).toEqual([11, 21, 31]);
  });

  it('migrate resolve needs exactly one of --rolled-back / --applied (exit 2) and a migration that exists', async () => {
    const none = await runCli(['migrate', 'resolve', ...at]);
    expect(none.code, show(none)).toBe(2);
    expect(none.stderr).toBe('svcgen: migrate resolve needs one of --rolled-back <name> or --applied <name>\n');
    const missing = await runCli(['migrate', 'resolve', '--applied', '20000101000000_nope', ...at]);
    expect(missing.code, show(missing)).toBe(1);
    expect(missing.stderr).toBe(
      `svcgen: no migration 20000101000000_nope in ${path.join(dir, 'migrations')} (the name of its folder, e.g. 20260101120000_add_note)\n`,
    );
  });

  it('migrate reset: refused without --force off a terminal and under NODE_ENV=production; --force drops the data, keeps API keys, reapplies', async () => {
    const key = await runCli([
      'keys',
      'create',
      '--env',
      'master',
      '--name',
      'k',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
      '--json',
      ...at,
    ]);
    expect(key.code, show(key)).toBe(0);

    const unforced = await runCli(['migrate', 'reset', ...at]);
    expect(unforced.code, show(unforced)).toBe(1);
    expect(unforced.stderr).toBe(
      "svcgen: migrate reset drops every environment's data: pass --force to do it without a terminal to ask on\n",
    );
    const production = await runCli(['migrate', 'reset', '--force', ...at], { env: { NODE_ENV: 'production' } });
    expect(production.code, show(production)).toBe(1);
    expect(production.stderr).toBe(
      "svcgen: migrate reset drops every environment's data, and NODE_ENV=production: refusing (resolve a failed migration with `npx svcgen migrate resolve` instead)\n",
    );
    expect((await pool.query('SELECT count(*)::int AS n FROM env_master."Order"')).rows[0].n).toBe(3);

    const reset = await runCli(['migrate', 'reset', '--force', ...at]);
    expect(reset.code, show(reset)).toBe(0);
    const folders = await migrationFolders(dir);
    expect(reset.stdout).toBe(
      'dropped the data of master, staging\n' +
        ['master', 'staging'].flatMap((env) => folders.map((f) => `applied ${f} to ${env}\n`)).join(''),
    );
    for (const schema of ['env_master', 'env_staging']) {
      expect((await pool.query(`SELECT count(*)::int AS n FROM ${schema}."Order"`)).rows[0].n).toBe(0);
      expect(await columns(pool, schema, 'Order')).toContain('priority');
    }
    expect((await pool.query("SELECT count(*)::int AS n FROM svcgen.api_keys WHERE name = 'k'")).rows[0].n).toBe(1);
  });
});

describe('serve and a model that no migration holds', { timeout: 180_000 }, () => {
  it('refuses with the command that fixes it (so no request can meet a missing column); after migrate dev it serves', async () => {
    const { dir } = await copyExample('migserve');
    const database = await freshDatabase();
    const at = ['--project', dir, '--database-url', database.url];
    await editSchema(
      dir,
      '  vip       Boolean  @default(false)\n',
      '  vip       Boolean  @default(false)\n  nickname  String?\n',
    );
    const generated = await runCli(['generate', '--project', dir]);
    expect(generated.code, show(generated)).toBe(0);

    const refused = await runCli(['serve', '--port', '0', ...at]);
    expect(refused.code, show(refused)).toBe(1);
    expect(refused.stderr).toBe(
      `svcgen: schema.prisma has changes no migration holds yet: run \`npx svcgen migrate dev --name <change> --project ${dir}\`, then serve again ` +
        '(serving now would answer errors for tables and columns the database lacks)\n',
    );
    expect(refused.stdout).not.toContain('listening');

    const noName = await runCli(['migrate', 'dev', ...at]);
    expect(noName.code, show(noName)).toBe(2);
    expect(noName.stderr).toBe(
      `svcgen: the model has changes since the last migration: name the new one with --name <name>, e.g. \`npx svcgen migrate dev --name add_order_note --project ${dir}\`\n`,
    );
    const migrated = await runCli(['migrate', 'dev', '--name', 'add_nickname', ...at]);
    expect(migrated.code, show(migrated)).toBe(0);
    const server = startCli(['serve', '--port', '0', ...at]);
    await server.waitFor(/^listening on /m, { stream: 'stdout' });
    await server.waitFor(/an API key: /, { stream: 'stderr' });
    // The record written by migrate dev answers without the schema engine.
    expect(server.stderr).not.toContain('schema.prisma differs');
    expect(server.stderr).not.toContain('could not check');
    // How serve stops is test/cli/serve.test.ts's subject (a SIGTERM right after start-up sometimes ends it by the signal).
    await server.stop('SIGTERM');
  });

  it('a schema edit that changes no table (a comment) is checked with the schema engine and served', async () => {
    const { dir } = await copyExample('migcomment');
    const database = await freshDatabase();
    await editSchema(dir, 'model City {\n', '// cities of the shop\nmodel City {\n');
    expect((await runCli(['generate', '--project', dir])).code).toBe(0);
    const server = startCli(['serve', '--port', '0', '--project', dir, '--database-url', database.url]);
    await server.waitFor(/^listening on /m, { stream: 'stdout' });
    await server.waitFor(/an API key: /, { stream: 'stderr' });
    expect(server.stderr).toContain(
      `schema.prisma differs from migrations/svcgen_schema.toml but has no unmigrated changes; \`npx svcgen migrate dev --project ${dir}\` records it (faster start-up)`,
    );
    await server.stop('SIGTERM');
  });
});

describe('the pieces of migrate dev', () => {
  it('decides: create-only writes, unexecutable refuses whatever the flags, warnings ask on a terminal and refuse elsewhere', () => {
    const base = {
      hasWarnings: false,
      hasUnexecutable: false,
      interactive: false,
      acceptDataLoss: false,
      createOnly: false,
    };
    expect(decideMigration(base)).toEqual({ action: 'apply' });
    expect(decideMigration({ ...base, hasWarnings: true })).toEqual({ action: 'refuse', reason: 'data-loss' });
    expect(decideMigration({ ...base, hasWarnings: true, interactive: true })).toEqual({ action: 'ask' });
    expect(decideMigration({ ...base, hasWarnings: true, acceptDataLoss: true })).toEqual({ action: 'apply' });
    expect(decideMigration({ ...base, hasUnexecutable: true, acceptDataLoss: true, interactive: true })).toEqual({
      action: 'refuse',
      reason: 'unexecutable',
    });
    expect(decideMigration({ ...base, hasUnexecutable: true, createOnly: true })).toEqual({ action: 'write-only' });
  });

  it('reads y/yes as yes and anything else, or no answer, as no', async () => {
    for (const yes of ['y', 'Y', 'yes', ' YES ']) expect(isYes(yes)).toBe(true);
    for (const no of ['', 'n', 'no', 'yep', 'sure']) expect(isYes(no)).toBe(false);
    const ask = async (typed: string | null) => {
      const input = new PassThrough();
      const output = new PassThrough();
      const answer = askYesNo('Drop?', { input, output });
      if (typed === null) input.end();
      else input.write(`${typed}\n`);
      return answer;
    };
    expect(await ask('y')).toBe(true);
    expect(await ask('')).toBe(false);
    expect(await ask(null)).toBe(false);
  });

  it("finds the checks in the SQL of Prisma's engine and words them as Prisma does", () => {
    const sql = [
      '-- DropForeignKey',
      'ALTER TABLE "OrderItem" DROP CONSTRAINT "OrderItem_orderId_fkey";',
      '-- AlterTable',
      'ALTER TABLE "Customer" DROP COLUMN "name",',
      'ALTER COLUMN "cityId" SET NOT NULL;',
      '-- AlterTable',
      'ALTER TABLE "Order" ADD COLUMN     "extra" INTEGER NOT NULL,',
      'ADD COLUMN     "label" TEXT NOT NULL DEFAULT \'x\',',
      'ALTER COLUMN "total" SET DATA TYPE INTEGER;',
      '-- CreateTable',
      'CREATE TABLE "Tag" (\n    "id" SERIAL NOT NULL,\n    "name" TEXT NOT NULL\n);',
      'CREATE UNIQUE INDEX "Tag_name_key" ON "Tag"("name");',
      'CREATE UNIQUE INDEX "Product_title_sku_key" ON "Product"("title", "sku");',
      '-- DropTable',
      'DROP TABLE "OrderItem";',
      "CREATE TYPE \"OrderStatus_new\" AS ENUM ('open', 'paid');",
    ].join('\n');
    const checks = planMigrationChecks(sql);
    expect(checks).toEqual([
      { kind: 'dropColumn', table: 'Customer', column: 'name' },
      { kind: 'madeRequired', table: 'Customer', column: 'cityId' },
      { kind: 'addRequiredColumn', table: 'Order', column: 'extra' },
      { kind: 'cast', table: 'Order', column: 'total', nextType: 'INTEGER', castable: true },
      { kind: 'uniqueAddition', table: 'Product', columns: ['title', 'sku'] },
      { kind: 'dropTable', table: 'OrderItem' },
      { kind: 'enumValueRemoval', enumName: 'OrderStatus', nextValues: ['open', 'paid'] },
    ]);
    expect(
      describeCheck(checks[3]!, { rows: 4, nonNull: 4, previousType: prismaTypeName('double precision') }),
    ).toEqual({
      warning:
        'You are about to alter the column `total` on the `Order` table, which contains 4 non-null values. The data in that column will be cast from `DoublePrecision` to `Integer`.',
    });
    expect(describeCheck(checks[1]!, { rows: 5, nonNull: 3 })).toEqual({
      unexecutable: 'Made the column `cityId` on table `Customer` required, but there are 2 existing NULL values.',
    });
    expect(describeCheck(checks[5]!, { rows: 7 })).toEqual({
      warning: 'You are about to drop the `OrderItem` table, which is not empty (7 rows).',
    });
    expect(describeCheck(checks[5]!, { rows: 0 })).toEqual({});
    expect(describeCheck(checks[6]!, { removedValues: ['shipped', 'cancelled'] })).toEqual({
      warning:
        'The values [shipped,cancelled] on the enum `OrderStatus` will be removed. If these variants are still used in the database, this will fail.',
    });
    expect(
      describeCheck(
        { kind: 'cast', table: 'T', column: 'c', nextType: 'BIGINT', castable: true },
        { rows: 1, nonNull: 1, previousType: 'Integer' },
      ),
    ).toEqual({});
    expect(warningsHeader([checks[0]!])).toBe(
      '/*\n  Warnings:\n\n  - You are about to drop the column `name` on the `Customer` table. All the data in the column will be lost.\n\n*/\n',
    );
  });
});
