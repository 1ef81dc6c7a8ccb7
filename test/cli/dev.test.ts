/**
 * `svcgen dev` as a real process (docs/dev.md): edits of schema.prisma and svcgen.config.json
 * regenerate, migrate and restart; broken edits keep the last good server answering; a server
 * that dies is started again by the next save; SIGTERM leaves nothing running.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupCli,
  copyExample,
  freshDatabase,
  portIsOpen,
  processesMentioning,
  runCli,
  show,
  startCli,
  tempDir,
  type ProjectCopy,
  type RunningCli,
} from '../support/cli.ts';
import {
  IMPLICIT_M2M,
  JOIN_MODEL,
  M2M_REPORT,
  OPENED_REPORT,
  openAttachments,
  reportIn,
} from '../support/change-reports.ts';
import type { TestDatabase } from '../support/database.ts';
import { readResponse, type TestResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

afterAll(cleanupCli);

/** A regex matching once `line` (a pattern for a whole line) has appeared `n` times; group 1 is the last one's first group. */
function nth(line: string, n: number): RegExp {
  return new RegExp(`(?:[\\s\\S]*?^${line}$){${n}}`, 'm');
}

function count(text: string, line: string): number {
  return text.match(new RegExp(`^${line}$`, 'gm'))?.length ?? 0;
}

const LISTENING = 'listening on (http://127\\.0\\.0\\.1:\\d+)';
const KEEPING = 'keeping the last good server running \\(\\S+\\)';

async function edit(file: string, change: (text: string) => string): Promise<void> {
  const before = await fs.readFile(file, 'utf8');
  const after = change(before);
  expect(after).not.toBe(before);
  await fs.writeFile(file, after);
}

const addField = (model: string, line: string) => (schema: string) =>
  schema.replace(`model ${model} {\n`, `model ${model} {\n  ${line}\n`);

describe('svcgen dev', { timeout: 180_000 }, () => {
  let copy: ProjectCopy;
  let database: TestDatabase;
  let dev: RunningCli;
  let url: string;
  let key: string;
  let paris: { id: number; name: string };
  const schemaFile = () => path.join(copy.dir, 'schema.prisma');
  const configFile = () => path.join(copy.dir, 'svcgen.config.json');

  async function call(method: string, p: string, body?: unknown): Promise<TestResponse> {
    const headers: Record<string, string> = { 'x-project-id': 'shop', authorization: `ApiKey ${key}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return readResponse(
      await fetch(`${url}${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }),
    );
  }

  /** Waits for the n-th `listening on` line on stdout and returns how long it took. */
  async function listening(n: number): Promise<number> {
    const started = Date.now();
    const [, again] = await dev.waitFor(nth(LISTENING, n), { stream: 'stdout' });
    expect(again, 'restarts keep the URL').toBe(url);
    return Date.now() - started;
  }

  async function schemaSha256OfGenerated(): Promise<string> {
    return JSON.parse(await fs.readFile(path.join(copy.dir, 'generated', 'package.json'), 'utf8')).svcgen.schemaSha256;
  }

  beforeAll(async () => {
    copy = await copyExample('dev');
    database = await freshDatabase();
    // --port 0: a free port, kept across restarts
    dev = startCli(['dev', '--port', '0', '--project', copy.dir, '--database-url', database.url]);
    [, url] = await dev.waitFor(nth(LISTENING, 1), { stream: 'stdout' });
    expect(dev.stderr).toContain(`watching schema.prisma, svcgen.config.json and migrations/ in ${copy.dir}\n`);
    const r = await runCli([
      'keys',
      'create',
      '--env',
      'master',
      '--name',
      'dev',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
      '--json',
      '--project',
      copy.dir,
      '--database-url',
      database.url,
    ]);
    expect(r.code, show(r)).toBe(0);
    key = JSON.parse(r.stdout).key;
  });

  it('serves the project at start', async () => {
    const created = await call('POST', '/gw/api/rest/City', { name: 'Paris', country: 'FR' });
    expect(created.status, created.text).toBe(201);
    paris = created.body.data;
  });

  it('a new field: prints the change, writes and applies a migration, regenerates and restarts; the new field works and old rows stay', async () => {
    const migrationsBefore = await fs.readdir(path.join(copy.dir, 'migrations'));
    const from = dev.stderr.length;
    await edit(schemaFile(), addField('City', 'population Int?'));
    const ms = await listening(2);
    console.log(`svcgen dev: edit of schema.prisma → new "listening on" in ${ms} ms`);

    const stderr = dev.stderr.slice(from);
    expect(stderr).toMatch(/^change detected: schema\.prisma$/m);
    expect(stderr).toMatch(/^ {10}field added {2}City\.population {2}Int\?$/m);
    // As `svcgen diff` counts it: the GraphQL schema's new inputs and enum value are changes too.
    expect(stderr).toMatch(/^GraphQL:$/m);
    expect(stderr).toMatch(/^17 changes \(16 in the GraphQL schema\), 0 breaking, 0 widening access$/m);
    await dev.waitFor(nth(`restarted: serving ${url.replace(/\./g, '\\.')} \\d+\\.\\d s after the change`, 1), {
      stream: 'stderr',
    });

    const added = (await fs.readdir(path.join(copy.dir, 'migrations'))).filter((f) => !migrationsBefore.includes(f));
    expect(added).toHaveLength(1);
    expect(added[0]).toMatch(/^\d{14}_add_city_population$/);
    expect(await fs.readFile(path.join(copy.dir, 'migrations', added[0], 'migration.sql'), 'utf8')).toMatch(
      /ALTER TABLE "City" ADD COLUMN\s+"population" INTEGER/,
    );
    const schema = await fs.readFile(schemaFile(), 'utf8');
    expect(await schemaSha256OfGenerated()).toBe(createHash('sha256').update(schema).digest('hex'));

    const lyon = await call('POST', '/gw/api/rest/City', { name: 'Lyon', country: 'FR', population: 520_000 });
    expect(lyon.status, lyon.text).toBe(201);
    expect(lyon.body.data).toMatchObject({ name: 'Lyon', population: 520_000 });
    const old = await call('GET', `/gw/api/rest/City/${paris.id}`);
    expect(old.status, old.text).toBe(200);
    expect(old.body.data).toMatchObject({ id: paris.id, name: 'Paris', population: null });
  });

  it("a syntax error in schema.prisma: prints Prisma's error, keeps the server answering, writes nothing; a fix restarts", async () => {
    const generated = await schemaSha256OfGenerated();
    const migrations = await fs.readdir(path.join(copy.dir, 'migrations'));
    const from = dev.stderr.length;
    await edit(schemaFile(), addField('Product', 'this is not prisma !!'));
    await dev.waitFor(nth(KEEPING, 1), { stream: 'stderr' });
    const stderr = dev.stderr.slice(from);
    expect(stderr).toMatch(/^change detected: schema\.prisma$/m);
    expect(stderr).toContain('schema.prisma is invalid:');
    expect(stderr).toContain('Error validating');
    expect(stderr).toContain('this is not prisma !!');
    expect(stderr).toContain(`keeping the last good server running (${url})`);
    expect(count(dev.stdout, LISTENING)).toBe(2);
    expect((await call('GET', `/gw/api/rest/City/${paris.id}`)).status).toBe(200);
    expect(await schemaSha256OfGenerated()).toBe(generated);
    expect(await fs.readdir(path.join(copy.dir, 'migrations'))).toEqual(migrations);

    // The fix also adds a field: the diff is against the running server's model.
    await edit(schemaFile(), (s) => s.replace('this is not prisma !!', 'note String?'));
    await listening(3);
    expect(dev.stderr.slice(from)).toMatch(/^ {10}field added {2}Product\.note {2}String\?$/m);
    const product = await call('POST', '/gw/api/rest/Product', {
      sku: 'MUG-1',
      title: 'Mug',
      price: 9.5,
      tags: [],
      note: 'blue',
    });
    expect(product.status, product.text).toBe(201);
    expect(product.body.data.note).toBe('blue');
  });

  it('an invalid svcgen.config.json: prints every problem, keeps the server answering; putting it back restarts nothing', async () => {
    const original = await fs.readFile(configFile(), 'utf8');
    const from = dev.stderr.length;
    await fs.writeFile(configFile(), JSON.stringify({ project: {}, bogus: 1 }));
    await dev.waitFor(nth(KEEPING, 2), { stream: 'stderr' });
    const stderr = dev.stderr.slice(from);
    expect(stderr).toMatch(/^change detected: svcgen\.config\.json$/m);
    expect(stderr).toContain(`${configFile()} is invalid:`);
    expect(stderr).toContain('$.project.id');
    expect(stderr).toContain('unknown key "bogus"');
    expect((await call('GET', `/gw/api/rest/City/${paris.id}`)).status).toBe(200);

    await fs.writeFile(configFile(), original);
    await dev.waitFor(
      new RegExp(`^back to what the server runs \\(${url.replace(/\./g, '\\.')}\\): nothing to restart$`, 'm'),
      { stream: 'stderr' },
    );
    expect(count(dev.stdout, LISTENING)).toBe(3);
    expect((await call('GET', '/healthz')).status).toBe(200);
  });

  it('an edit that would lose data: migrate dev refuses, the server keeps answering, nothing is written', async () => {
    const migrations = await fs.readdir(path.join(copy.dir, 'migrations'));
    const generated = await schemaSha256OfGenerated();
    const original = await fs.readFile(schemaFile(), 'utf8');
    const from = dev.stderr.length;
    // Lyon has a population: dropping the column loses it.
    await edit(schemaFile(), (s) => s.replace('  population Int?\n', ''));
    await dev.waitFor(nth(KEEPING, 3), { stream: 'stderr' });
    const stderr = dev.stderr.slice(from);
    expect(stderr).toMatch(/^BREAKING {2}field removed {2}City\.population {2}Int\?$/m);
    expect(stderr).toContain('--accept-data-loss');
    expect(stderr).toMatch(
      /^migrate dev failed \(see above\): fix schema\.prisma, or run the command it names, then save schema\.prisma again$/m,
    );
    expect(await fs.readdir(path.join(copy.dir, 'migrations'))).toEqual(migrations);
    expect(await schemaSha256OfGenerated()).toBe(generated);
    const lyon = await call('GET', '/gw/api/rest/City?name=equals.Lyon');
    expect(lyon.status, lyon.text).toBe(200);
    expect(lyon.body.data).toEqual([expect.objectContaining({ name: 'Lyon', population: 520_000 })]);

    await fs.writeFile(schemaFile(), original);
    await dev.waitFor(nth('back to what the server runs \\(\\S+\\): nothing to restart', 2), { stream: 'stderr' });
    expect(count(dev.stdout, LISTENING)).toBe(3);
  });

  it("a config edit prints its permission and setting changes against the running server's config, then restarts", async () => {
    const from = dev.stderr.length;
    await edit(configFile(), (text) => {
      const config = JSON.parse(text);
      config.roles.customer.tables.Order.delete = { filter: { customerId: '$user.id' } };
      config.roles.customer.tables.Product = { read: { fields: ['id', 'title'] } };
      config.rateLimits = { loginPerMinutePerIp: 30 };
      return JSON.stringify(config, null, 2);
    });
    await listening(4);
    const stderr = dev.stderr.slice(from);
    expect(stderr).toMatch(/^change detected: svcgen\.config\.json$/m);
    expect(stderr).toContain(
      [
        'WIDENS ACCESS  grant added      customer: Order.delete  rows where {"customerId":"$user.id"}',
        // Product.note came with an earlier edit: a rule is read against the model the server runs.
        'BREAKING       fields narrowed  customer: Product.read  drops note, sku, price, stock, tags, createdAt, updatedAt',
        '               setting changed  rateLimits.loginPerMinutePerIp  20 → 30',
        '3 changes, 1 breaking, 1 widening access',
      ].join('\n'),
    );
    // The config alone changed: the model's changes are not listed, and no migration is written.
    expect(stderr).not.toMatch(/field (added|removed)/);
    expect(stderr).not.toContain('wrote migrations/');
  });

  it('a server that dies is reported, and the next save starts it again', async () => {
    // The running server (not the standby dev keeps for the next restart) logs its pid as it starts.
    // Restarts keep the URL, and the request log is written in batches, so its `server started`
    // line may come after `listening on`: until it has, the last one is the previous server's.
    const running = await until(
      async () => {
        const started = [...dev.stdout.matchAll(/^\{.*"pid":(\d+),"url":"([^"]+)".*"msg":"server started"\}$/gm)].pop();
        return { started: started?.slice(1), mine: await processesMentioning(copy.dir) };
      },
      ({ started, mine }) => started?.[1] === url && mine.some((p) => p.pid === Number(started[0])),
      10_000,
      `the running server's pid in ps for ${copy.dir}`,
    );
    const pid = Number(running.started![0]);
    // It is this project's server: never kill a stranger.
    expect(running.mine.filter((p) => p.pid === pid)).toHaveLength(1);
    process.kill(pid, 'SIGKILL');
    await dev.waitFor(
      /^the server exited on its own \(killed by SIGKILL\); save schema\.prisma or svcgen\.config\.json to start it again$/m,
      { stream: 'stderr' },
    );
    expect(await portIsOpen(Number(new URL(url).port))).toBe(false);

    // saving without a change is enough
    await fs.writeFile(configFile(), await fs.readFile(configFile(), 'utf8'));
    await listening(5);
    expect((await call('GET', `/gw/api/rest/City/${paris.id}`)).status).toBe(200);
  });

  it('a migration applied from another terminal (the command a refusal names): dev follows migrations/ and restarts on the new tables', async () => {
    const from = dev.stderr.length;
    const restartsBefore = count(dev.stderr, 'restarted: serving \\S+ \\d+\\.\\d s after the change');
    // Lyon's population would be lost: dev refuses and names the command that goes ahead, runnable as printed.
    await edit(schemaFile(), (s) => s.replace('  population Int?\n', ''));
    await dev.waitFor(nth(KEEPING, 4), { stream: 'stderr' });
    const [named] =
      dev.stderr
        .slice(from)
        .match(/`npx svcgen (migrate dev --name remove_city_population --project \S+) --accept-data-loss`/) ?? [];
    expect(named, dev.stderr.slice(from)).toBeDefined();
    const r = await runCli([
      'migrate',
      'dev',
      '--name',
      'remove_city_population',
      '--project',
      copy.dir,
      '--database-url',
      database.url,
      '--accept-data-loss',
    ]);
    expect(r.code, show(r)).toBe(0);
    // No save of schema.prisma: the new migration alone restarts the server on the new tables.
    await dev.waitFor(nth('restarted: serving \\S+ \\d+\\.\\d s after the change', restartsBefore + 1), {
      stream: 'stderr',
    });
    expect(dev.stderr.slice(from)).toMatch(/^change detected: migrations\/$/m);
    const lyon = await call('GET', '/gw/api/rest/City?name=equals.Lyon');
    expect(lyon.status, lyon.text).toBe(200);
    expect(lyon.body.data).toHaveLength(1);
    expect(lyon.body.data[0]).not.toHaveProperty('population');
  });

  it('SIGTERM stops the server and the watcher and exits 0 with nothing left listening', async () => {
    const result = await dev.stop('SIGTERM');
    expect(result.signal, show(result)).toBeNull();
    expect(result.code, show(result)).toBe(0);
    expect(result.stderr, show(result)).toMatch(
      /^SIGTERM: stopping the server and the watcher\n[\s\S]*^dev stopped\n$/m,
    );
    expect(await portIsOpen(Number(new URL(url).port))).toBe(false);
    expect(await processesMentioning(copy.dir)).toEqual([]);
  });
});

describe('svcgen dev prints the report svcgen diff prints (issue 33)', { timeout: 300_000 }, () => {
  it('an implicit many-to-many replaced by a join model, a bucket opened, then narrowed: the same lines as diff, line for line', async () => {
    const project = await copyExample('dev-report');
    const schemaFile = path.join(project.dir, 'schema.prisma');
    const configFile = path.join(project.dir, 'svcgen.config.json');
    const shop = await fs.readFile(schemaFile, 'utf8');
    await fs.writeFile(schemaFile, shop + IMPLICIT_M2M);
    /** The project's files as they are now, for `svcgen diff --from` after the next edit. */
    const snapshot = async (name: string): Promise<string> => {
      const dir = path.join(project.root, name);
      await fs.mkdir(dir);
      for (const file of ['schema.prisma', 'svcgen.config.json'])
        await fs.copyFile(path.join(project.dir, file), path.join(dir, file));
      return path.join(dir, 'schema.prisma');
    };
    /** dev's report of the edit made after `from` (once it has restarted on it), and diff's of the same edit. */
    const reports = async (from: number, restarts: number, before: string, flags: string[] = []) => {
      await dev.waitFor(nth(LISTENING, restarts + 1), { stream: 'stdout' });
      const diff = await runCli(['diff', '--project', project.dir, '--from', before, ...flags]);
      return { dev: reportIn(dev.stderr.slice(from)), diff };
    };
    const database = await freshDatabase();
    const dev = startCli(['dev', '--port', '0', '--project', project.dir, '--database-url', database.url]);
    await dev.waitFor(nth(LISTENING, 1), { stream: 'stdout' });

    const m2m = await snapshot('m2m');
    const joined = dev.stderr.length;
    await fs.writeFile(schemaFile, shop + JOIN_MODEL);
    const join = await reports(joined, 1, m2m);
    expect(join.dev).toEqual(M2M_REPORT);
    expect(join.diff.code, show(join.diff)).toBe(1);
    expect(join.diff.stdout).toBe(`${join.dev.join('\n')}\n`);

    const closed = await snapshot('closed');
    const opened = dev.stderr.length;
    await edit(configFile, (text) => {
      const config = JSON.parse(text);
      openAttachments(config);
      return JSON.stringify(config, null, 2);
    });
    const open = await reports(opened, 2, closed, ['--fail-on-widen']);
    expect(open.dev).toEqual(OPENED_REPORT);
    expect(open.diff.code, show(open.diff)).toBe(1);
    expect(open.diff.stdout).toBe(`${open.dev.join('\n')}\n`);

    // Narrowing is breaking, as for a table, and dev restarts on it as on any edit that renders and migrates.
    const wide = await snapshot('wide');
    const narrowed = dev.stderr.length;
    await edit(configFile, (text) => {
      const config = JSON.parse(text);
      config.storage.buckets.attachments.roles.customer.read = { filter: { ownerId: '$user.id' } };
      return JSON.stringify(config, null, 2);
    });
    const narrow = await reports(narrowed, 3, wide, ['--fail-on-widen', '--allow-breaking']);
    expect(narrow.dev).toEqual([
      'BREAKING  row filter added  customer: bucket attachments.read  rows where {"ownerId":"$user.id"}',
      '1 change, 1 breaking, 0 widening access',
    ]);
    expect(narrow.diff.code, show(narrow.diff)).toBe(0);
    expect(narrow.diff.stdout).toBe(`${narrow.dev.join('\n')}\n`);

    const result = await dev.stop('SIGTERM');
    expect(result.code, show(result)).toBe(0);
  });
});

describe('svcgen dev on a broken project', { timeout: 180_000 }, () => {
  it('prints the error, starts no server, and starts one once the file is fixed', async () => {
    const project = await copyExample('dev-broken');
    const database = await freshDatabase();
    const config = path.join(project.dir, 'svcgen.config.json');
    const original = await fs.readFile(config, 'utf8');
    await fs.writeFile(config, '{ "project": ');
    const dev = startCli(['dev', '--port', '0', '--project', project.dir, '--database-url', database.url]);
    await dev.waitFor(/^no server running: waiting for the next edit of schema\.prisma or svcgen\.config\.json$/m, {
      stream: 'stderr',
    });
    expect(dev.stderr).toContain(
      `${config} is invalid:\n  - line 1, column 14: not valid JSON (Unexpected end of JSON input)\n`,
    );
    expect(dev.stdout).toBe('');

    await fs.writeFile(config, original);
    const [, url] = await dev.waitFor(nth(LISTENING, 1), { stream: 'stdout' });
    expect((await readResponse(await fetch(`${url}/healthz`))).status).toBe(200);
    const result = await dev.stop('SIGINT');
    expect(result.code, show(result)).toBe(0);
    expect(await portIsOpen(Number(new URL(url).port))).toBe(false);
  });
});

describe('svcgen dev and Ctrl-C', { timeout: 180_000 }, () => {
  it("SIGINT to the whole process group (a terminal's Ctrl-C): the server drains once, dev exits 0; a second SIGINT exits at once", async () => {
    const project = await copyExample('dev-ctrl-c');
    const database = await freshDatabase();
    const first = startCli(['dev', '--port', '0', '--project', project.dir, '--database-url', database.url], {
      detached: true,
    });
    const [, url] = await first.waitFor(/^started: serving (\S+) /m, { stream: 'stderr' });
    process.kill(-first.child.pid!, 'SIGINT');
    const result = await first.exited;
    expect(result.code, show(result)).toBe(0);
    expect(result.stderr, show(result)).toMatch(/^SIGINT: stopping the server and the watcher$/m);
    expect(count(result.stderr, 'SIGTERM: finishing in-flight requests and stopping'), show(result)).toBe(1);
    expect(result.stderr, show(result)).not.toContain('again');
    expect(result.stderr, show(result)).toMatch(/^dev stopped$/m);
    expect(await portIsOpen(Number(new URL(url).port))).toBe(false);
    expect(await processesMentioning(project.dir)).toEqual([]);

    // While the first cycle still renders and migrates (seconds), which a first Ctrl-C waits for.
    const fresh = await copyExample('dev-ctrl-c-twice');
    const second = startCli(
      ['dev', '--port', '0', '--project', fresh.dir, '--database-url', (await freshDatabase()).url],
      { detached: true },
    );
    await second.waitFor(/^watching /m, { stream: 'stderr' });
    process.kill(-second.child.pid!, 'SIGINT');
    await second.waitFor(/^SIGINT: stopping the server and the watcher$/m, { stream: 'stderr' });
    process.kill(-second.child.pid!, 'SIGINT');
    const impatient = await second.exited;
    expect(impatient.code, show(impatient)).toBe(1);
    expect(impatient.stderr, show(impatient)).toMatch(/^SIGINT again: exiting without waiting$/m);
    expect(impatient.stderr, show(impatient)).not.toMatch(/^dev stopped$/m);
    await until(
      () => processesMentioning(fresh.dir),
      (left) => left.length === 0,
      10_000,
      'the children of the killed dev gone',
    );
  });
});

describe('svcgen dev refusals', () => {
  it('a project folder that does not exist is a usage error (exit 2)', async () => {
    const missing = path.join(await tempDir('dev-missing'), 'nope');
    const r = await runCli(['dev', '--project', missing]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr, show(r)).toBe(
      `svcgen: no project folder ${missing}: --project names the folder that holds schema.prisma and svcgen.config.json (npx svcgen init <dir> makes one)\n`,
    );
  });
});
