/**
 * svcgen as a user gets it: `npm pack` (which compiles dist/), the tarball unpacked into a fresh
 * project's node_modules, and the whole path run with the installed bin — init, generate, check,
 * migrate dev, keys, serve, diff — on the embedded database and on DATABASE_URL.
 *
 * The tarball's dependencies are linked from this checkout's node_modules instead of downloaded
 * (nothing in tests may depend on the network); only the package's declared `dependencies` are
 * linked, so a module that is missing from them, or a file missing from the tarball, fails here.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../support/server.ts';
import { cleanupCli, freshDatabase, runCli, show, startCli, tempDir, type CliOptions } from '../support/cli.ts';

const run = promisify(execFile);
afterAll(cleanupCli);

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m;

let app: string;
let installed: string;

async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await listFiles(path.join(dir, entry.name), rel)));
    else out.push(rel);
  }
  return out;
}

beforeAll(async () => {
  const root = await tempDir('package');
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', root], {
    cwd: REPO,
    maxBuffer: 64 * 1024 * 1024,
  }).catch((error: { stdout?: string; stderr?: string }) => {
    throw new Error(`npm pack failed\n${error.stdout}\n${error.stderr}`);
  });
  const tarball = path.join(
    root,
    (JSON.parse(stdout.slice(stdout.indexOf('['))) as { filename: string }[])[0]!.filename,
  );
  app = path.join(root, 'my-app');
  installed = path.join(app, 'node_modules', 'svcgen');
  await fs.mkdir(path.join(app, 'node_modules'), { recursive: true });
  await run('tar', ['-xzf', tarball, '-C', root]);
  await fs.rename(path.join(root, 'package'), installed);
  const manifest = JSON.parse(await fs.readFile(path.join(installed, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  for (const name of Object.keys(manifest.dependencies)) {
    const link = path.join(app, 'node_modules', name);
    await fs.mkdir(path.dirname(link), { recursive: true });
    await fs.symlink(path.join(REPO, 'node_modules', name), link, 'dir');
  }
  await fs.writeFile(
    path.join(app, 'package.json'),
    `${JSON.stringify({ name: 'my-app', version: '1.0.0', type: 'commonjs' }, null, 2)}\n`,
  );
}, 300_000);

function cli(args: string[], options: CliOptions = {}) {
  return runCli(args, { cwd: app, bin: path.join(installed, 'bin', 'svcgen.js'), ...options });
}

describe('the packed tarball, installed into a fresh project', { timeout: 180_000 }, () => {
  it('ships compiled JavaScript, the templates and the example, and no sources or tests', async () => {
    const files = await listFiles(installed);
    expect(files).toContain('dist/cli/main.js');
    expect(files).toContain('dist/runtime/model/index.d.ts');
    expect(files).toContain('templates/header.txt');
    expect(files).toContain('examples/shop/schema.prisma');
    expect(files.filter((f) => /^(cli|generator|runtime|test|bench)\//.test(f))).toEqual([]);
    expect(files.filter((f) => f.includes('.svcgen/') || f.includes('node_modules/'))).toEqual([]);
    const help = await cli(['--help']);
    expect(help.code, show(help)).toBe(0);
    expect(help.stdout).toContain('Usage: svcgen');
  });

  it('init, generate, check, migrate dev, keys, serve and diff work there on the embedded database', async () => {
    const init = await cli(['init', '.']);
    expect(init.code, show(init)).toBe(0);
    for (const file of ['schema.prisma', 'svcgen.config.json', '.gitignore']) await fs.access(path.join(app, file));
    expect(JSON.parse(await fs.readFile(path.join(app, 'svcgen.config.json'), 'utf8')).project.id).toBe('my-app');
    expect(JSON.parse(await fs.readFile(path.join(app, 'package.json'), 'utf8')).scripts).toEqual({
      dev: 'svcgen dev',
      generate: 'svcgen generate',
      check: 'svcgen check',
      serve: 'svcgen serve',
      'migrate:dev': 'svcgen migrate dev',
    });

    const generated = await cli(['generate']);
    expect(generated.code, show(generated)).toBe(0);
    // The client's fixed part ships as a template and is copied next to client.ts, which imports it.
    const clientRuntime = await fs.readFile(path.join(app, 'generated', 'client-runtime.ts'), 'utf8');
    expect(
      clientRuntime.endsWith(await fs.readFile(path.join(installed, 'templates', 'client-runtime.ts'), 'utf8')),
    ).toBe(true);
    expect(await fs.readFile(path.join(app, 'generated', 'client.ts'), 'utf8')).toContain(
      "from './client-runtime.ts';",
    );
    const checked = await cli(['check']);
    expect(checked.code, show(checked)).toBe(0);
    const migrated = await cli(['migrate', 'dev', '--name', 'init']);
    expect(migrated.code, show(migrated)).toBe(0);
    expect(migrated.stdout).toMatch(/^applied \d+_init to master$/m);

    const key = await cli([
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
    ]);
    expect(key.code, show(key)).toBe(0);
    const server = startCli(['serve', '--port', '0'], { cwd: app, bin: path.join(installed, 'bin', 'svcgen.js') });
    const url = (await server.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 90_000 }))[1]!;
    const headers = {
      'x-project-id': 'my-app',
      authorization: `Bearer ${JSON.parse(key.stdout).key}`,
      'content-type': 'application/json',
    };
    const created = await fetch(`${url}/gw/api/rest/City`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'Lyon', country: 'FR' }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const docs = await fetch(`${url}/gw/api/rest/_docs`);
    expect(docs.status).toBe(200);
    // The GraphQL playground's files resolve from the installed packages (graphiql, react, react-dom).
    const playground = await fetch(`${url}/gw/api/graphql/_playground`);
    expect(playground.status).toBe(200);
    const files = [...(await playground.text()).matchAll(/(?:src|href)="(_playground\/[^"]+)"/g)].map((m) => m[1]!);
    expect(files).toHaveLength(6);
    for (const file of files) expect((await fetch(`${url}/gw/api/graphql/${file}`)).status, file).toBe(200);
    const stopped = await server.stop('SIGTERM');
    expect(stopped.code, show(stopped)).toBe(0);

    // svcgen dev runs its children from the installed package too
    const dev = startCli(['dev', '--port', '0'], { cwd: app, bin: path.join(installed, 'bin', 'svcgen.js') });
    const devUrl = (await dev.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 90_000 }))[1]!;
    expect((await fetch(`${devUrl}/gw/api/rest/City`, { headers })).status).toBe(200);
    const devStopped = await dev.stop('SIGTERM');
    expect(devStopped.code, show(devStopped)).toBe(0);

    const before = path.join(app, 'before.prisma');
    await fs.copyFile(path.join(app, 'schema.prisma'), before);
    const schema = await fs.readFile(path.join(app, 'schema.prisma'), 'utf8');
    await fs.writeFile(path.join(app, 'schema.prisma'), schema.replace(/^\s*country\s+String.*$/m, ''));
    const diff = await cli(['diff', '--from', 'before.prisma']);
    expect(diff.code, show(diff)).toBe(1);
    expect(diff.stdout).toMatch(/City\.country/);
    await fs.rename(before, path.join(app, 'schema.prisma'));
  });

  it('migrate deploy and serve work on DATABASE_URL', async () => {
    const database = await freshDatabase();
    const env = { DATABASE_URL: database.url };
    const deployed = await cli(['migrate', 'deploy'], { env });
    expect(deployed.code, show(deployed)).toBe(0);
    expect(deployed.stdout).toMatch(/^applied \d+_init to master$/m);
    const key = await cli(
      ['keys', 'create', '--env', 'master', '--name', 'k', '--prefix', 'ApiKey', '--role', 'admin', '--json'],
      { env },
    );
    expect(key.code, show(key)).toBe(0);
    const server = startCli(['serve', '--port', '0', '--no-migrate'], {
      cwd: app,
      bin: path.join(installed, 'bin', 'svcgen.js'),
      env,
    });
    const url = (await server.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 90_000 }))[1]!;
    expect(server.stderr).not.toContain('embedded');
    const listed = await fetch(`${url}/gw/api/rest/City`, {
      headers: { 'x-project-id': 'my-app', authorization: `Bearer ${JSON.parse(key.stdout).key}` },
    });
    expect(listed.status, await listed.clone().text()).toBe(200);
    expect((await listed.json()).data).toEqual([]);
    const stopped = await server.stop('SIGTERM');
    expect(stopped.code, show(stopped)).toBe(0);
  });

  it("a CommonJS package's own code (docs/own-code.md): generate, check and serve load it; refuse() answers 422", async () => {
    // package.json says "type": "commonjs": svcgen.code.ts runs as CommonJS, generated/ as ES modules.
    const codeFile = path.join(app, 'svcgen.code.ts');
    await fs.writeFile(
      codeFile,
      `import { z } from 'zod';
import { defineCode, defineEndpoint, refuse } from './generated/code.ts';

const cityCount = defineEndpoint({
  name: 'cityCount',
  method: 'GET',
  path: '/city-count',
  access: { roles: ['admin'] },
  input: z.object({}),
  output: z.object({ count: z.number().int() }),
  async handler(_input, ctx) {
    const { meta } = await ctx.data.City.list({ count: true, limit: 1 });
    return { count: meta.pagination.totalCount ?? 0 };
  },
});

export default defineCode({
  hooks: {
    City: {
      beforeCreate({ input, ctx }) {
        if (input.name === 'Nowhere') throw refuse({ name: 'no such place' });
        return ctx.caller.roles.includes('admin') ? { ...input, country: input.country.toUpperCase() } : input;
      },
    },
  },
  endpoints: [cityCount],
});
`,
    );
    try {
      const database = await freshDatabase();
      const env = { DATABASE_URL: database.url };
      const generated = await cli(['generate'], { env });
      expect(generated.code, show(generated)).toBe(0);
      const checked = await cli(['check'], { env });
      expect(checked.code, show(checked)).toBe(0);
      expect(checked.stdout).toContain('your code (svcgen.code.ts) type-checks against generated/');
      expect((await cli(['migrate', 'deploy'], { env })).code).toBe(0);
      const key = await cli(
        ['keys', 'create', '--env', 'master', '--name', 'k', '--prefix', 'ApiKey', '--role', 'admin', '--json'],
        { env },
      );
      expect(key.code, show(key)).toBe(0);
      const server = startCli(['serve', '--port', '0', '--no-migrate'], {
        cwd: app,
        bin: path.join(installed, 'bin', 'svcgen.js'),
        env,
      });
      const url = (await server.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 90_000 }))[1]!;
      const headers = {
        'x-project-id': 'my-app',
        authorization: `Bearer ${JSON.parse(key.stdout).key}`,
        'content-type': 'application/json',
      };
      const refused = await fetch(`${url}/gw/api/rest/City`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'Nowhere', country: 'fr' }),
      });
      expect(refused.status, await refused.clone().text()).toBe(422);
      expect((await refused.json()).errors).toEqual([{ field: 'name', rule: 'refused', message: 'no such place' }]);
      const created = await fetch(`${url}/gw/api/rest/City`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'Lyon', country: 'fr' }),
      });
      expect(created.status, await created.clone().text()).toBe(201);
      expect((await created.json()).data).toMatchObject({ name: 'Lyon', country: 'FR' });
      const counted = await fetch(`${url}/gw/api/rest/city-count`, { headers });
      expect(counted.status, await counted.clone().text()).toBe(200);
      expect(await counted.json()).toEqual({ count: 1 });
      const stopped = await server.stop('SIGTERM');
      expect(stopped.code, show(stopped)).toBe(0);
    } finally {
      await fs.rm(codeFile);
    }
  });
});
