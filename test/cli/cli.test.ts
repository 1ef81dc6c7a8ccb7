/**
 * The svcgen command line end to end (README "A project", "Command line"; docs/config.md): usage errors, generate/check/openapi on copies
 * of examples/shop, init, and migrate dev/deploy against a fresh PostgreSQL database.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import {
  cleanupCli,
  copyExample,
  freshDatabase,
  readTree,
  runCli,
  show,
  startCli,
  tempDir,
  type CliResult,
} from '../support/cli.ts';
import { SHOP } from '../support/server.ts';

afterAll(cleanupCli);

async function query<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** A usage error (README "Command line"): exit 2 and exactly one line on stderr, starting with `svcgen:`. */
function expectUsageError(result: CliResult): void {
  expect(result.code, show(result)).toBe(2);
  const lines = result.stderr.replace(/\n$/, '').split('\n');
  expect(lines, show(result)).toHaveLength(1);
  expect(lines[0], show(result)).toMatch(/^svcgen: \S/);
  expect(result.stdout, show(result)).toBe('');
}

/** Adds `line` to the body of `model`, just after its opening brace. */
async function addToModel(projectDir: string, model: string, line: string): Promise<void> {
  const file = path.join(projectDir, 'schema.prisma');
  const schema = await fs.readFile(file, 'utf8');
  const opening = `model ${model} {\n`;
  expect(schema).toContain(opening);
  await fs.writeFile(file, schema.replace(opening, `${opening}  ${line}\n`));
}

const DOCUMENTED_COMMANDS: string[][] = [
  ['init'],
  ['generate'],
  ['check'],
  ['diff'],
  ['migrate', 'dev'],
  ['migrate', 'deploy'],
  ['serve'],
  ['dev'],
  ['keys', 'create'],
  ['keys', 'list'],
  ['keys', 'revoke'],
  ['files', 'ls'],
  ['files', 'rm'],
  ['jobs', 'failed'],
  ['jobs', 'retry'],
  ['token', 'create'],
  ['openapi'],
];

describe('usage', () => {
  it('svcgen --help exits 0 and lists every command of README "Command line"', async () => {
    const r = await runCli(['--help']);
    expect(r.code, show(r)).toBe(0);
    const listed = [...r.stdout.matchAll(/^ {2}(\w[\w-]*)/gm)].map((m) => m[1]);
    for (const command of new Set(DOCUMENTED_COMMANDS.map((c) => c[0]))) expect(listed, r.stdout).toContain(command);
  });

  it.each(DOCUMENTED_COMMANDS.map((c) => [c.join(' '), c]))(
    'svcgen %s --help exits 0 and shows its usage',
    async (_, command) => {
      const r = await runCli([...command, '--help']);
      expect(r.code, show(r)).toBe(0);
      expect(r.stdout, show(r)).toContain(`Usage: svcgen ${command.join(' ')}`);
    },
  );

  it.each([
    ['an unknown command', ['frobnicate']],
    ['an unknown option', ['generate', '--bogus']],
    [
      'a missing required option (keys create without --env)',
      ['keys', 'create', '--name', 'ci', '--prefix', 'ApiKey', '--role', 'admin'],
    ],
    ['a port that is not a number', ['serve', '--port', 'abc']],
  ])('%s prints one svcgen: line on stderr and exits 2', async (_, args) => {
    expectUsageError(await runCli(args));
  });
});

describe('generate', () => {
  it('writes exactly the committed examples/shop/generated, and a second run changes nothing', {
    timeout: 120_000,
  }, async () => {
    const copy = await copyExample('generate');
    const generated = path.join(copy.dir, 'generated');
    await fs.rm(generated, { recursive: true });

    const first = await runCli(['generate', '--project', copy.dir]);
    expect(first.code, show(first)).toBe(0);
    const committed = await readTree(path.join(SHOP, 'generated'));
    const written = await readTree(generated);
    expect([...written.keys()]).toEqual([...committed.keys()]);
    for (const [file, bytes] of committed) {
      expect(written.get(file)!.equals(bytes), `generated/${file} differs from the committed one`).toBe(true);
    }

    const second = await runCli(['generate', '--project', copy.dir]);
    expect(second.code, show(second)).toBe(0);
    const again = await readTree(generated);
    expect([...again.keys()]).toEqual([...written.keys()]);
    for (const [file, bytes] of written)
      expect(again.get(file)!.equals(bytes), `generated/${file} changed on the second run`).toBe(true);
  });

  it('refuses a model without createdAt/updatedAt, naming the model and the missing fields', {
    timeout: 60_000,
  }, async () => {
    const copy = await copyExample('model-error');
    const file = path.join(copy.dir, 'schema.prisma');
    let schema = await fs.readFile(file, 'utf8');
    // City loses both timestamps, Product only updatedAt
    const city = schema.slice(schema.indexOf('model City {'), schema.indexOf('}', schema.indexOf('model City {')));
    schema = schema.replace(city, city.replace(/^ {2}(createdAt|updatedAt) .*\n/gm, ''));
    const product = schema.slice(
      schema.indexOf('model Product {'),
      schema.indexOf('}', schema.indexOf('model Product {')),
    );
    schema = schema.replace(product, product.replace(/^ {2}updatedAt .*\n/m, ''));
    await fs.writeFile(file, schema);

    const r = await runCli(['generate', '--project', copy.dir]);
    expect(r.code, show(r)).toBe(1);
    const cityLine = r.stderr.split('\n').find((l) => /\bCity\b/.test(l));
    expect(cityLine, show(r)).toBeDefined();
    expect(cityLine).toMatch(/createdAt/);
    expect(cityLine).toMatch(/updatedAt/);
    const productLine = r.stderr.split('\n').find((l) => /\bProduct\b/.test(l));
    expect(productLine, show(r)).toMatch(/updatedAt/);
    expect(productLine).not.toMatch(/createdAt/);
    expect(r.stderr).not.toMatch(/\bCustomer\b|\bOrderItem\b/);
    // nothing was written
    expect(await readTree(path.join(copy.dir, 'generated'))).toEqual(await readTree(path.join(SHOP, 'generated')));
  });

  it("reports a syntactically broken schema with Prisma's message and the line number", {
    timeout: 60_000,
  }, async () => {
    const copy = await copyExample('syntax-error');
    const file = path.join(copy.dir, 'schema.prisma');
    const lines = (await fs.readFile(file, 'utf8')).split('\n');
    const at = lines.indexOf('model Product {') + 1; // 0-based index of the new line
    lines.splice(at, 0, '  this is not prisma !!');
    await fs.writeFile(file, lines.join('\n'));

    const r = await runCli(['generate', '--project', copy.dir]);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toMatch(/^svcgen: /);
    expect(r.stderr, show(r)).toContain('Error validating');
    expect(r.stderr, show(r)).toMatch(new RegExp(`schema\\.prisma:${at + 1}\\b`));
    expect(r.stderr, show(r)).toContain('this is not prisma !!');
  });

  it('lists every problem of an invalid svcgen.config.json by JSON path', async () => {
    const copy = await copyExample('config-error');
    await fs.writeFile(
      path.join(copy.dir, 'svcgen.config.json'),
      JSON.stringify({ project: {}, roles: { x: { tables: { Nope: { read: true } } } }, bogus: 1 }),
    );
    const r = await runCli(['generate', '--project', copy.dir]);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toContain('svcgen.config.json');
    expect(r.stderr, show(r)).toContain('$.project.id');
    expect(r.stderr, show(r)).toMatch(/\$\.bogus|unknown key.*bogus/);
    expect(r.stderr, show(r)).toContain('$.roles.x.tables.Nope');
  });
});

describe('check', () => {
  it('exits 0 on the committed example', async () => {
    const r = await runCli(['check', '--project', SHOP]);
    expect(r.code, show(r)).toBe(0);
  });

  it('exits 1 with a unified diff after a model edit, and 0 again after generate', { timeout: 120_000 }, async () => {
    const copy = await copyExample('check');
    await addToModel(copy.dir, 'Customer', 'nickname String?');

    const stale = await runCli(['check', '--project', copy.dir]);
    expect(stale.code, show(stale)).toBe(1);
    expect(stale.stdout, show(stale)).toMatch(/^--- /m);
    expect(stale.stdout, show(stale)).toMatch(/^\+\+\+ /m);
    expect(stale.stdout, show(stale)).toMatch(/^@@ -\d+(,\d+)? \+\d+(,\d+)? @@/m);
    expect(stale.stdout, show(stale)).toMatch(/^\+.*nickname/m);

    const generate = await runCli(['generate', '--project', copy.dir]);
    expect(generate.code, show(generate)).toBe(0);
    const fresh = await runCli(['check', '--project', copy.dir]);
    expect(fresh.code, show(fresh)).toBe(0);
  });

  it('a hand edit of the generated Prisma client is reported (the committed client is reused only while it hashes as recorded)', {
    timeout: 120_000,
  }, async () => {
    const copy = await copyExample('check-prisma');
    await fs.appendFile(path.join(copy.dir, 'generated/prisma/enums.ts'), '// edited by hand\n');
    const stale = await runCli(['check', '--project', copy.dir]);
    expect(stale.code, show(stale)).toBe(1);
    expect(stale.stdout, show(stale)).toMatch(/^--- a\/generated\/prisma\/enums\.ts$/m);
    expect(stale.stdout, show(stale)).toMatch(/^-\/\/ edited by hand$/m);
    const generate = await runCli(['generate', '--project', copy.dir]);
    expect(generate.code, show(generate)).toBe(0);
    expect(await fs.readFile(path.join(copy.dir, 'generated/prisma/enums.ts'), 'utf8')).toBe(
      await fs.readFile(path.join(SHOP, 'generated/prisma/enums.ts'), 'utf8'),
    );
  });
});

describe('openapi', () => {
  it('prints the committed generated/openapi.json', async () => {
    const r = await runCli(['openapi', '--project', 'examples/shop']);
    expect(r.code, show(r)).toBe(0);
    const committed = JSON.parse(await fs.readFile(path.join(SHOP, 'generated/openapi.json'), 'utf8'));
    expect(JSON.parse(r.stdout)).toEqual(committed);
  });
});

describe('init', () => {
  it('scaffolds schema.prisma, svcgen.config.json and .gitignore from the example, and refuses to overwrite', {
    timeout: 60_000,
  }, async () => {
    const root = await tempDir('init');
    const target = path.join(root, 'p');
    const r = await runCli(['init', target, '--example', 'shop']);
    expect(r.code, show(r)).toBe(0);
    expect(await fs.readFile(path.join(target, 'schema.prisma'), 'utf8')).toBe(
      await fs.readFile(path.join(SHOP, 'schema.prisma'), 'utf8'),
    );
    // The example's database functions live in its migrations, which init does not copy: left out.
    const { functions, ...example } = JSON.parse(await fs.readFile(path.join(SHOP, 'svcgen.config.json'), 'utf8'));
    expect(functions).toEqual({ sales_report: { roles: ['admin'] } });
    // the project id comes from the folder name
    expect(JSON.parse(await fs.readFile(path.join(target, 'svcgen.config.json'), 'utf8'))).toEqual({
      ...example,
      project: { id: 'p' },
    });
    expect((await fs.readFile(path.join(target, '.gitignore'), 'utf8')).split('\n')).toContain('.svcgen/');
    const manifest = JSON.parse(await fs.readFile(path.join(target, 'package.json'), 'utf8'));
    expect(manifest).toMatchObject({ name: 'p', private: true });
    expect(manifest.scripts).toEqual({
      dev: 'svcgen dev',
      generate: 'svcgen generate',
      check: 'svcgen check',
      serve: 'svcgen serve',
      'migrate:dev': 'svcgen migrate dev',
    });
    // svcgen is a dev dependency, not on PATH: the hint runs it through npx
    expect(r.stdout, show(r)).toContain(`next: npx svcgen dev --project ${target}\n`);
    expect(manifest.devDependencies.svcgen).toMatch(/^\^\d+\.\d+\.\d+$/);

    const before = await readTree(target);
    expectUsageError(await runCli(['init', target, '--example', 'shop']));
    expect(await readTree(target)).toEqual(before);
  });

  it('takes --id, keeps an existing .gitignore and package.json, adding only the lines and scripts svcgen needs', async () => {
    const root = await tempDir('init-existing');
    const target = path.join(root, 'My Shop');
    await fs.mkdir(target);
    await fs.writeFile(path.join(target, '.gitignore'), 'dist/\nnode_modules/');
    await fs.writeFile(
      path.join(target, 'package.json'),
      '{\n    "name": "mine",\n    "type": "commonjs",\n    "scripts": { "dev": "vite" },\n    "devDependencies": { "svcgen": "file:../svcgen-0.1.0.tgz" }\n}\n',
    );
    const r = await runCli(['init', target, '--id', 'acme']);
    expect(r.code, show(r)).toBe(0);
    expect(JSON.parse(await fs.readFile(path.join(target, 'svcgen.config.json'), 'utf8')).project.id).toBe('acme');
    expect(await fs.readFile(path.join(target, '.gitignore'), 'utf8')).toBe('dist/\nnode_modules/\n.svcgen/\n');
    // the user's own "dev" script stays; the others are added, in the file's own indentation
    expect(await fs.readFile(path.join(target, 'package.json'), 'utf8')).toBe(
      `${JSON.stringify(
        {
          name: 'mine',
          type: 'commonjs',
          scripts: {
            dev: 'vite',
            generate: 'svcgen generate',
            check: 'svcgen check',
            serve: 'svcgen serve',
            'migrate:dev': 'svcgen migrate dev',
          },
          devDependencies: { svcgen: 'file:../svcgen-0.1.0.tgz' },
        },
        null,
        4,
      )}\n`,
    );
    expect(r.stdout).toContain('package.json scripts added: generate, check, serve, migrate:dev\n');
    expectUsageError(await runCli(['init', path.join(root, 'other'), '--id', 'bad id!']));
  });

  it('derives the project id from the folder name when --id is not given', async () => {
    const root = await tempDir('init-name');
    const target = path.join(root, 'My Shop');
    expect((await runCli(['init', target])).code).toBe(0);
    expect(JSON.parse(await fs.readFile(path.join(target, 'svcgen.config.json'), 'utf8')).project.id).toBe('my-shop');
  });

  it('--empty: a schema.prisma without models and a config with only an admin role, which generate, migrate dev and serve accept', {
    timeout: 120_000,
  }, async () => {
    const root = await tempDir('init-empty');
    const r = await runCli(['init', 'blank', '--empty'], { cwd: root });
    expect(r.code, show(r)).toBe(0);
    const target = path.join(root, 'blank');
    expect(r.stdout, show(r)).toContain(`created ${target} without models (project id "blank")\n`);
    expect(r.stdout, show(r)).toContain('next: npx svcgen dev --project blank\n');
    const schema = await fs.readFile(path.join(target, 'schema.prisma'), 'utf8');
    expect(schema).toContain('datasource db {\n  provider = "postgresql"\n}\n');
    expect(schema).not.toMatch(/^model /m);
    expect(JSON.parse(await fs.readFile(path.join(target, 'svcgen.config.json'), 'utf8'))).toEqual({
      project: { id: 'blank' },
      roles: { admin: { tables: { '*': { read: true, create: true, update: true, delete: true } } } },
    });

    const generate = await runCli(['generate', '--project', target]);
    expect(generate.code, show(generate)).toBe(0);
    const database = await freshDatabase();
    const migrate = await runCli(['migrate', 'dev', '--project', target, '--database-url', database.url]);
    expect(migrate.code, show(migrate)).toBe(0);
    expect(migrate.stdout, show(migrate)).toContain('the model has no changes since the last migration');
    const serve = startCli(['serve', '--port', '0', '--project', target, '--database-url', database.url]);
    const [, url] = await serve.waitFor(/^listening on (\S+)$/m, { stream: 'stdout' });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    expect((await serve.stop('SIGTERM')).code).toBe(0);

    expectUsageError(await runCli(['init', path.join(root, 'both'), '--empty', '--example', 'shop']));
  });

  it('in the current folder, the hint names the npm script init wrote too', async () => {
    const root = await tempDir('init-here');
    const r = await runCli(['init', '.'], { cwd: root });
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout, show(r)).toMatch(/^next: npx svcgen dev \(or: npm run dev\)$/m);
  });

  it('refuses an unknown example', async () => {
    const root = await tempDir('init-nope');
    const target = path.join(root, 'p');
    expectUsageError(await runCli(['init', target, '--example', 'nope']));
    await expect(fs.access(path.join(target, 'schema.prisma'))).rejects.toThrow();
  });
});

describe('migrate', () => {
  const ENV_SCHEMAS = ['env_master', 'env_staging'];

  it('migrate dev writes one migration for a new field, applies it to every environment, and then has nothing to do', {
    timeout: 120_000,
  }, async () => {
    const database = await freshDatabase();
    const copy = await copyExample('migrate-dev');
    const migrations = path.join(copy.dir, 'migrations');
    await addToModel(copy.dir, 'Customer', 'nickname String?');
    const before = (await fs.readdir(migrations)).sort();

    const r = await runCli([
      'migrate',
      'dev',
      '--name',
      'add_nickname',
      '--project',
      copy.dir,
      '--database-url',
      database.url,
    ]);
    expect(r.code, show(r)).toBe(0);
    const after = (await fs.readdir(migrations)).sort();
    const added = after.filter((f) => !before.includes(f));
    expect(added, show(r)).toHaveLength(1);
    expect(added[0]).toMatch(/^\d{14}_add_nickname$/);
    expect(await fs.readdir(path.join(migrations, added[0]))).toEqual(['migration.sql']);
    const sql = await fs.readFile(path.join(migrations, added[0], 'migration.sql'), 'utf8');
    expect(sql.replace(/\s+/g, ' ')).toContain('ALTER TABLE "Customer" ADD COLUMN "nickname" TEXT');

    const columns = await query<{ table_schema: string }>(
      database.url,
      `select table_schema from information_schema.columns where table_name = 'Customer' and column_name = 'nickname' order by table_schema`,
    );
    expect(columns.map((c) => c.table_schema)).toEqual(ENV_SCHEMAS);

    const tree = await readTree(migrations);
    const again = await runCli([
      'migrate',
      'dev',
      '--name',
      'add_nickname',
      '--project',
      copy.dir,
      '--database-url',
      database.url,
    ]);
    expect(again.code, show(again)).toBe(0);
    expect(again.stdout, show(again)).toMatch(/no changes/i);
    expect(await readTree(migrations)).toEqual(tree);
  });

  it('migrate dev creates the database the URL names when it does not exist (a name that needs quoting), and says so on stderr', {
    timeout: 120_000,
  }, async () => {
    const server = new URL((await freshDatabase()).url);
    const name = `svcgen_t_new "db" ${Date.now().toString(36)}`;
    const url = new URL(server.href);
    url.pathname = `/${encodeURIComponent(name)}`;
    const copy = await copyExample('migrate-create-db');
    try {
      const r = await runCli(['migrate', 'dev', '--project', copy.dir, '--database-url', url.href]);
      expect(r.code, show(r)).toBe(0);
      expect(r.stderr, show(r)).toContain(`created the database "${name}" (it did not exist)\n`);
      const tables = await query<{ table_name: string }>(
        url.href,
        `select table_name from information_schema.tables where table_schema = 'env_master' order by table_name`,
      );
      expect(tables.map((t) => t.table_name)).toEqual(
        expect.arrayContaining(['City', 'Customer', 'Order', 'OrderItem', 'Product']),
      );
      // The second run finds it and says nothing about it.
      const again = await runCli(['migrate', 'dev', '--project', copy.dir, '--database-url', url.href]);
      expect(again.code, show(again)).toBe(0);
      expect(again.stderr, show(again)).not.toContain('created the database');
    } finally {
      const admin = new URL(server.href);
      await query(admin.href, `drop database if exists "${name.replace(/"/g, '""')}" with (force)`);
    }
  });

  it("migrate deploy applies every migration to every environment with Prisma's bookkeeping, once", {
    timeout: 90_000,
  }, async () => {
    const database = await freshDatabase();
    const migrationsDir = path.join(SHOP, 'migrations');
    const expected = [];
    for (const entry of (await fs.readdir(migrationsDir, { withFileTypes: true })).filter((e) => e.isDirectory())) {
      const sql = await fs.readFile(path.join(migrationsDir, entry.name, 'migration.sql'));
      expected.push({ migration_name: entry.name, checksum: createHash('sha256').update(sql).digest('hex') });
    }
    expected.sort((a, b) => (a.migration_name < b.migration_name ? -1 : 1));
    expect(expected.length).toBeGreaterThan(0);

    const r = await runCli(['migrate', 'deploy', '--project', SHOP, '--database-url', database.url]);
    expect(r.code, show(r)).toBe(0);

    type Row = {
      id: string;
      migration_name: string;
      checksum: string;
      finished_at: Date | null;
      rolled_back_at: Date | null;
      applied_steps_count: number;
    };
    const rowsOf = (schema: string) =>
      query<Row>(
        database.url,
        `select id, migration_name, checksum, finished_at, rolled_back_at, applied_steps_count from ${schema}."_prisma_migrations" order by migration_name`,
      );
    const applied: Record<string, Row[]> = {};
    for (const schema of ENV_SCHEMAS) {
      const rows = await rowsOf(schema);
      applied[schema] = rows;
      expect(
        rows.map(({ migration_name, checksum }) => ({ migration_name, checksum })),
        schema,
      ).toEqual(expected);
      for (const row of rows) {
        expect(row.finished_at, `${schema} ${row.migration_name}`).toBeInstanceOf(Date);
        expect(row.rolled_back_at).toBeNull();
        expect(row.applied_steps_count).toBe(1);
      }
      const tables = await query<{ table_name: string }>(
        database.url,
        `select table_name from information_schema.tables where table_schema = $1 and table_name <> '_prisma_migrations' order by table_name`,
        [schema],
      );
      expect(
        tables.map((t) => t.table_name),
        schema,
      ).toEqual(expect.arrayContaining(['City', 'Customer', 'Order', 'OrderItem', 'Product']));
    }

    const again = await runCli(['migrate', 'deploy', '--project', SHOP, '--database-url', database.url]);
    expect(again.code, show(again)).toBe(0);
    for (const schema of ENV_SCHEMAS) expect(await rowsOf(schema), schema).toEqual(applied[schema]);
  });
});

describe('serve on the embedded PostgreSQL', () => {
  it('prints one "listening on" line (its own URL, on stdout); PostgreSQL\'s own log only with --log-level debug', {
    timeout: 180_000,
  }, async () => {
    const copy = await copyExample('serve-quiet');
    const serve = startCli(['serve', '--port', '0', '--project', copy.dir]);
    const [, url] = await serve.waitFor(/^listening on (http:\/\/127\.0\.0\.1:\d+)$/m, { stream: 'stdout' });
    const quiet = await serve.stop('SIGTERM');
    expect(quiet.code, show(quiet)).toBe(0);
    expect(`${quiet.stdout}${quiet.stderr}`.match(/listening on/g), show(quiet)).toEqual(['listening on']);
    expect(quiet.stdout, show(quiet)).toContain(`listening on ${url}\n`);
    expect(quiet.stderr, show(quiet)).not.toContain('LOG:');

    const debug = startCli(['serve', '--port', '0', '--project', copy.dir, '--log-level', 'debug']);
    await debug.waitFor(/^listening on http:\/\/127\.0\.0\.1:\d+$/m, { stream: 'stdout' });
    const loud = await debug.stop('SIGTERM');
    expect(loud.code, show(loud)).toBe(0);
    expect(loud.stderr, show(loud)).toMatch(/^database: .*LOG: {2}listening on IPv4 address "127\.0\.0\.1"/m);
  });
});
