/**
 * A project folder as README "A project" describes it, outside this repository: only schema.prisma and
 * svcgen.config.json (no package.json at all), or inside a CommonJS package. The generated
 * TypeScript must load either way, so generate, check, migrate dev and serve all work there.
 */
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SHOP } from '../support/server.ts';
import { cleanupCli, freshDatabase, runCli, show, startCli, tempDir } from '../support/cli.ts';

afterAll(cleanupCli);

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m;

async function bareProject(label: string, packageJson?: object): Promise<string> {
  const dir = path.join(await tempDir(label), 'app');
  await fs.mkdir(dir);
  await fs.copyFile(path.join(SHOP, 'schema.prisma'), path.join(dir, 'schema.prisma'));
  // The example's database function lives in its migrations, which a bare project's first
  // `migrate dev` does not write: the config names none, as `svcgen init` leaves it.
  const { functions: _, ...config } = JSON.parse(await fs.readFile(path.join(SHOP, 'svcgen.config.json'), 'utf8'));
  await fs.writeFile(path.join(dir, 'svcgen.config.json'), JSON.stringify(config, null, 2));
  if (packageJson) await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify(packageJson));
  return dir;
}

describe('a project folder outside the repository', { timeout: 120_000 }, () => {
  for (const [label, packageJson] of [
    ['only schema.prisma and svcgen.config.json', undefined],
    ['a "type": "commonjs" package', { name: 'app', type: 'commonjs' }],
  ] as const) {
    it(`${label}: generate, check, migrate dev and serve work, and the data API answers`, async () => {
      const dir = await bareProject(label.startsWith('only') ? 'bare' : 'cjs', packageJson);
      const database = await freshDatabase();
      const at = ['--project', dir, '--database-url', database.url];
      const generated = await runCli(['generate', '--project', dir]);
      expect(generated.code, show(generated)).toBe(0);
      expect(JSON.parse(await fs.readFile(path.join(dir, 'generated', 'package.json'), 'utf8')).type).toBe('module');
      const checked = await runCli(['check', '--project', dir]);
      expect(checked.code, show(checked)).toBe(0);
      const migrated = await runCli(['migrate', 'dev', '--name', 'init', ...at]);
      expect(migrated.code, show(migrated)).toBe(0);
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
      const server = startCli(['serve', '--port', '0', ...at]);
      const url = (await server.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 60_000 }))[1]!;
      const headers = {
        'x-project-id': 'shop',
        authorization: `Bearer ${JSON.parse(key.stdout).key}`,
        'content-type': 'application/json',
      };
      const created = await fetch(`${url}/gw/api/rest/City`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'Lyon', country: 'FR' }),
      });
      expect(created.status, await created.clone().text()).toBe(201);
      const listed = await (await fetch(`${url}/gw/api/rest/City`, { headers })).json();
      expect(listed.data.map((c: { name: string }) => c.name)).toEqual(['Lyon']);
      const stopped = await server.stop('SIGTERM');
      expect(stopped.code, show(stopped)).toBe(0);
    });
  }
});

describe('CLI messages a person can act on', { timeout: 60_000 }, () => {
  it('a --project that does not exist says so and exits 2', async () => {
    const missing = path.join(await tempDir('missing'), 'nope');
    for (const command of [['generate'], ['check'], ['serve', '--no-migrate']]) {
      const r = await runCli([...command, '--project', missing]);
      expect(r.code, show(r)).toBe(2);
      expect(r.stderr, show(r)).toBe(
        `svcgen: no project folder ${missing}: --project names the folder that holds schema.prisma and svcgen.config.json (npx svcgen init <dir> makes one)\n`,
      );
    }
  });

  it('a JSON syntax error in svcgen.config.json gives its line and column', async () => {
    const dir = await bareProject('badjson');
    await fs.writeFile(
      path.join(dir, 'svcgen.config.json'),
      '{\n  "project": { "id": "shop" },\n  "environments": ["master",]\n}\n',
    );
    const r = await runCli(['generate', '--project', dir]);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toContain('- line 3, column 29: not valid JSON');
  });

  it('a role `fields` entry naming no field of its table is an error naming it', async () => {
    const dir = await bareProject('badfield');
    const file = path.join(dir, 'svcgen.config.json');
    const config = JSON.parse(await fs.readFile(file, 'utf8'));
    config.roles.customer.tables.Order.read.fields.push('colour');
    await fs.writeFile(file, JSON.stringify(config));
    const r = await runCli(['generate', '--project', dir]);
    expect(r.code, show(r)).toBe(1);
    const index = config.roles.customer.tables.Order.read.fields.length - 1;
    expect(r.stderr, show(r)).toContain(
      `- $.roles.customer.tables.Order.read.fields[${index}]: Order has no field "colour" (fields: id, status, total, note, placedAt, customerId, invoiceId, receiptId, createdAt, updatedAt)`,
    );
  });

  it('serve refuses a project with no migration yet (its tables would not exist) and names the command', async () => {
    const dir = await bareProject('nomigrations');
    expect((await runCli(['generate', '--project', dir])).code).toBe(0);
    const database = await freshDatabase();
    const r = await runCli(['serve', '--port', '0', '--project', dir, '--database-url', database.url], {
      timeoutMs: 60_000,
    });
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toContain(
      'svcgen: the project has no migrations yet, so its tables do not exist: run `npx svcgen migrate dev --name init`, then serve',
    );
  });

  it('serve refuses a generated/ made from another schema.prisma, and names the command', async () => {
    const dir = await bareProject('stale');
    expect((await runCli(['generate', '--project', dir])).code).toBe(0);
    const schema = path.join(dir, 'schema.prisma');
    await fs.writeFile(
      schema,
      (await fs.readFile(schema, 'utf8')).replace(
        '  note       String?\n',
        '  note       String?\n  gift       Boolean     @default(false)\n',
      ),
    );
    const database = await freshDatabase();
    const r = await runCli(['serve', '--port', '0', '--project', dir, '--database-url', database.url], {
      timeoutMs: 60_000,
    });
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toContain(
      'svcgen: generated/ is stale: schema.prisma changed since `svcgen generate`; run `npx svcgen generate`',
    );
  });

  it('a busy port says which flag to use', async () => {
    const dir = await bareProject('busyport');
    const generated = await runCli(['generate', '--project', dir]);
    expect(generated.code, show(generated)).toBe(0);
    const database = await freshDatabase();
    const migrated = await runCli([
      'migrate',
      'dev',
      '--name',
      'init',
      '--project',
      dir,
      '--database-url',
      database.url,
    ]);
    expect(migrated.code, show(migrated)).toBe(0);
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const r = await runCli(['serve', '--port', String(port), '--project', dir, '--database-url', database.url], {
        timeoutMs: 60_000,
      });
      expect(r.code, show(r)).toBe(1);
      expect(r.stderr, show(r)).toContain(
        `svcgen: port ${port} on 127.0.0.1 is already in use: pick another with --port <n> (or stop what listens there)`,
      );
    } finally {
      blocker.close();
    }
  });
});
