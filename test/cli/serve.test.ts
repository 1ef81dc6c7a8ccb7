/**
 * `svcgen serve` as a real process (README "Command line"; docs/api.md §4, §9): readiness, API keys and management tokens made
 * by the CLI against the running server, the data API over HTTP, clean shutdown on SIGTERM/SIGINT,
 * --no-migrate, and the embedded PostgreSQL in <project>/.svcgen/.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
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
  type ProjectCopy,
  type RunningCli,
} from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { expectProblem, readResponse, SHOP, type TestResponse } from '../support/server.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:(\d+))$/m;
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
/** What an error on stderr looks like: the word, or a stack frame. */
const LOOKS_LIKE_AN_ERROR = /\b(error|exception|unhandled|fatal|EPIPE|ECONNRESET)\b|^\s+at /im;
const MANAGEMENT_TOKEN = 'serve-test-management-token-5f2b9c';

afterAll(cleanupCli);

interface Call {
  /** full Authorization header value, or none */
  authorization?: string;
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
}

async function call(base: string, method: string, p: string, o: Call = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { 'x-project-id': 'shop', ...o.headers };
  if (o.authorization) headers.authorization = o.authorization;
  let body: string | undefined;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] = o.contentType ?? 'application/json';
  }
  return readResponse(await fetch(`${base}${p}`, { method, headers, body }));
}

async function startServe(
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<{ serve: RunningCli; url: string; port: number }> {
  const serve = startCli(['serve', '--port', '0', ...args], { env });
  const match = await serve.waitFor(LISTENING, { stream: 'stdout' });
  return { serve, url: match[1], port: Number(match[2]) };
}

describe('serve --database-url', { timeout: 60_000 }, () => {
  let database: TestDatabase;
  let serve: RunningCli;
  let url: string;
  let port: number;
  let apiKey: { id: string; name: string; prefix: string; environment: string; roles: string[]; key: string };
  const db = () => ['--project', SHOP, '--database-url', database.url];

  beforeAll(async () => {
    database = await freshDatabase();
    ({ serve, url, port } = await startServe(['--project', SHOP, '--database-url', database.url], {
      SVCGEN_MANAGEMENT_TOKEN: MANAGEMENT_TOKEN,
    }));
  });

  it('prints "listening on http://127.0.0.1:<port>" and answers /healthz and /readyz', async () => {
    expect(port).toBeGreaterThan(0);
    expect((await call(url, 'GET', '/healthz')).status).toBe(200);
    expect((await call(url, 'GET', '/readyz')).status).toBe(200);
  });

  it('keys create --json prints exactly { id, name, prefix, environment, roles, key }', async () => {
    const r = await runCli([
      'keys',
      'create',
      '--env',
      'master',
      '--name',
      'ci',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
      '--json',
      ...db(),
    ]);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout.trim().split('\n'), show(r)).toHaveLength(1);
    apiKey = JSON.parse(r.stdout);
    expect(Object.keys(apiKey).sort()).toEqual(['environment', 'id', 'key', 'name', 'prefix', 'roles']);
    expect(apiKey).toEqual({
      id: expect.any(String),
      name: 'ci',
      prefix: 'ApiKey',
      environment: 'master',
      roles: ['admin'],
      key: expect.any(String),
    });
    expect(apiKey.id).not.toBe('');
    expect(apiKey.key.length).toBeGreaterThanOrEqual(20);
  });

  it('the key creates, lists, reads, patches and deletes a City over HTTP with the documented envelopes', async () => {
    const auth = { authorization: `ApiKey ${apiKey.key}` };
    const created = await call(url, 'POST', '/gw/api/rest/City', { ...auth, body: { name: 'Paris', country: 'FR' } });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toEqual({
      data: {
        id: expect.any(Number),
        name: 'Paris',
        country: 'FR',
        createdAt: expect.stringMatching(ISO_8601),
        updatedAt: expect.stringMatching(ISO_8601),
      },
    });
    const city = created.body.data;
    expect(created.headers.get('location')).toBe(`/gw/api/rest/City/${city.id}`);

    const list = await call(url, 'GET', '/gw/api/rest/City', auth);
    expect(list.status, list.text).toBe(200);
    expect(list.body).toEqual({
      data: [city],
      // docs/api.md §5.4, §5.8: limit, offset, hasNextPage, hasPreviousPage, and nextCursor, null on the last page
      meta: { pagination: { limit: 100, offset: 0, hasNextPage: false, hasPreviousPage: false, nextCursor: null } },
    });

    const read = await call(url, 'GET', `/gw/api/rest/City/${city.id}`, auth);
    expect(read.status, read.text).toBe(200);
    expect(read.body).toEqual({ data: city });

    const patched = await call(url, 'PATCH', `/gw/api/rest/City/${city.id}`, {
      ...auth,
      body: { name: 'Lyon' },
      contentType: 'application/merge-patch+json',
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toEqual({ data: { ...city, name: 'Lyon', updatedAt: expect.stringMatching(ISO_8601) } });
    expect(Date.parse(patched.body.data.updatedAt)).toBeGreaterThanOrEqual(Date.parse(city.updatedAt));

    const deleted = await call(url, 'DELETE', `/gw/api/rest/City/${city.id}`, auth);
    expect(deleted.status, deleted.text).toBe(204);
    expect(deleted.text).toBe('');
    expectProblem(await call(url, 'GET', `/gw/api/rest/City/${city.id}`, auth), 404);
  });

  it('logs a JSON entry per request on stdout: reqId, method, path without the query, status, durationMs and the caller', async () => {
    const res = await call(url, 'GET', '/gw/api/rest/City?limit=1&name=equals.secret-value', {
      authorization: `ApiKey ${apiKey.key}`,
    });
    expect(res.status).toBe(200);
    const reqId = res.headers.get('x-request-id');
    const entryOf = (id: string | null) =>
      serve.stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l))
        .find((e) => e.reqId === id);
    await expect.poll(() => entryOf(reqId), { timeout: 5_000 }).toBeDefined();
    expect(entryOf(reqId)).toEqual({
      level: 'info',
      time: expect.stringMatching(ISO_8601),
      pid: expect.any(Number),
      msg: 'request',
      reqId,
      method: 'GET',
      path: '/gw/api/rest/City',
      status: 200,
      durationMs: expect.any(Number),
      caller: apiKey.id,
    });
    expect(serve.stdout).not.toContain('secret-value');
    const health = await call(url, 'GET', '/healthz');
    await expect
      .poll(() => entryOf(health.headers.get('x-request-id')), { timeout: 5_000 })
      .toMatchObject({ method: 'GET', path: '/healthz', status: 200 });
    expect(entryOf(health.headers.get('x-request-id'))).not.toHaveProperty('caller');
  });

  it('keys list shows the key without its value', async () => {
    const r = await runCli(['keys', 'list', '--env', 'master', ...db()]);
    expect(r.code, show(r)).toBe(0);
    expect(r.stdout, show(r)).toContain(apiKey.id);
    expect(r.stdout, show(r)).toContain('ci');
    expect(r.stdout, show(r)).not.toContain(apiKey.key);

    const json = await runCli(['keys', 'list', '--env', 'master', '--json', ...db()]);
    expect(json.code, show(json)).toBe(0);
    expect(json.stdout).not.toContain(apiKey.key);
    const listed = JSON.parse(json.stdout) as Record<string, unknown>[];
    expect(listed.map((k) => k.id)).toContain(apiKey.id);
    for (const k of listed) expect(k).not.toHaveProperty('key');
  });

  it('keys revoke reaches the running server: the key gets 401 at once', async () => {
    const auth = { authorization: `ApiKey ${apiKey.key}` };
    expect((await call(url, 'GET', '/gw/api/rest/City', auth)).status).toBe(200);
    const r = await runCli(['keys', 'revoke', apiKey.id, ...db()]);
    expect(r.code, show(r)).toBe(0);

    const revokedAt = Date.now();
    let res = await call(url, 'GET', '/gw/api/rest/City', auth);
    while (res.status !== 401 && Date.now() - revokedAt < 2000) res = await call(url, 'GET', '/gw/api/rest/City', auth);
    expectProblem(res, 401);
  });

  it('token create prints a management token that works on /gw/api/rest/_apikeys', async () => {
    const r = await runCli(['token', 'create', '--name', 'ops', ...db()]);
    expect(r.code, show(r)).toBe(0);
    // the token is the longest word printed (ids and labels are shorter)
    const token = r.stdout.split(/\s+/).reduce((a, b) => (b.length > a.length ? b : a), '');
    expect(token.length, show(r)).toBeGreaterThanOrEqual(20);

    const headers = { environment: 'master' };
    const listed = await call(url, 'GET', '/gw/api/rest/_apikeys', { authorization: `Bearer ${token}`, headers });
    expect(listed.status, listed.text).toBe(200);
    expect(Array.isArray(listed.body.data), listed.text).toBe(true);
    for (const k of listed.body.data) expect(k).not.toHaveProperty('key');

    const viaEnv = await call(url, 'GET', '/gw/api/rest/_apikeys', {
      authorization: `Bearer ${MANAGEMENT_TOKEN}`,
      headers,
    });
    expect(viaEnv.status, viaEnv.text).toBe(200);
    expectProblem(await call(url, 'GET', '/gw/api/rest/_apikeys', { authorization: `Bearer ${token}x`, headers }), 401);
  });

  it('SIGTERM stops it with exit code 0, no error on stderr, and the port closed', async () => {
    const from = serve.stderr.length;
    const result = await serve.stop('SIGTERM');
    expect(result.signal, show(result)).toBeNull();
    expect(result.code, show(result)).toBe(0);
    expect(result.stderr.slice(from), show(result)).not.toMatch(LOOKS_LIKE_AN_ERROR);
    expect(await portIsOpen(port)).toBe(false);
  });
});

describe('serve stopped while it starts', { timeout: 60_000 }, () => {
  it('a SIGTERM before "listening" is not a kill: it starts, stops cleanly and exits 0', async () => {
    const database = await freshDatabase();
    const serve = startCli(['serve', '--port', '0', '--project', SHOP, '--database-url', database.url]);
    await serve.waitFor(/^applying migration /m, { stream: 'stderr' });
    const result = await serve.stop('SIGTERM');
    expect(result.signal, show(result)).toBeNull();
    expect(result.code, show(result)).toBe(0);
    expect(result.stderr, show(result)).toMatch(/SIGTERM: finishing in-flight requests and stopping\nstopped\n$/);
  });
});

describe('serve --no-migrate', { timeout: 60_000 }, () => {
  it('--no-migrate on a database that lacks migrations refuses to start, names them and the command that fixes it, and creates no table', async () => {
    const database = await freshDatabase();
    const r = await runCli(
      ['serve', '--port', '0', '--project', SHOP, '--database-url', database.url, '--no-migrate'],
      { timeoutMs: 60_000 },
    );
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toMatch(
      /^svcgen: 8 migration\(s\) not applied \((?:\S+ in master, ){4}\S+ in staging(?:, \S+ in staging){3}\): run `npx svcgen migrate deploy`, or serve without --no-migrate$/m,
    );

    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query(
        `select 1 from information_schema.tables where table_schema like 'env\\_%' and table_name = 'City'`,
      );
      expect(rows).toHaveLength(0);
    } finally {
      await client.end();
    }
  });

  it('--no-migrate once the migrations are applied starts; /healthz is 200', async () => {
    const database = await freshDatabase();
    const deployed = await runCli(['migrate', 'deploy', '--project', SHOP, '--database-url', database.url]);
    expect(deployed.code, show(deployed)).toBe(0);
    const { serve, url } = await startServe(['--project', SHOP, '--database-url', database.url, '--no-migrate']);
    expect((await call(url, 'GET', '/healthz')).status).toBe(200);
    const result = await serve.stop('SIGTERM');
    expect(result.code, show(result)).toBe(0);
  });
});

describe('serve with the embedded database', () => {
  let copy: ProjectCopy;

  afterAll(async () => {
    await cleanupCli(); // a serve still running stops its PostgreSQL on SIGTERM
    // a PostgreSQL orphaned by a crashed serve: stop it (fast shutdown) by its pid
    if (copy) for (const p of await processesMentioning(path.join(copy.dir, '.svcgen'))) process.kill(p.pid, 'SIGINT');
  });

  it('runs PostgreSQL in <project>/.svcgen/, shares it with keys create, and stops it on SIGINT', {
    timeout: 180_000,
  }, async () => {
    copy = await copyExample('embedded');
    const { serve, url } = await startServe(['--project', copy.dir], { DATABASE_URL: undefined });
    expect((await call(url, 'GET', '/readyz')).status).toBe(200);
    await expect(fs.stat(path.join(copy.dir, '.svcgen'))).resolves.toBeTruthy();
    // what a person sees, in order: the database starting, each migration, then the addresses
    const lines = serve.stderr.split('\n');
    const at = (pattern: RegExp) => lines.findIndex((l) => pattern.test(l));
    const order = [
      at(new RegExp(`^database: starting the embedded PostgreSQL in ${copy.dir}/\\.svcgen$`)),
      at(/^database: Started PostgreSQL on 127\.0\.0\.1:\d+ \(pid \d+\) in \d+ ms$/),
      at(/^applying migration \d+_init to master$/),
      at(/^applying migration \d+_init to staging$/),
      at(/^migrations: 8 applied, all up to date$/),
      at(/^ {2}docs {7}http:\/\/127\.0\.0\.1:\d+\/gw\/api\/rest\/_docs$/),
      at(/^ {2}an API key: npx svcgen keys create --env master /),
    ];
    expect(
      order.every((i, n) => i >= 0 && (n === 0 || i > order[n - 1]!)),
      `${JSON.stringify(order)}\n${serve.stderr}`,
    ).toBe(true);
    const running = await processesMentioning(copy.dir);
    expect(
      running.some((p) => /postgres/.test(p.args)),
      JSON.stringify(running),
    ).toBe(true);

    const r = await runCli(
      [
        'keys',
        'create',
        '--env',
        'master',
        '--name',
        'ci',
        '--prefix',
        'ApiKey',
        '--role',
        'admin',
        '--json',
        '--project',
        copy.dir,
      ],
      {
        env: { DATABASE_URL: undefined },
      },
    );
    expect(r.code, show(r)).toBe(0);
    const { key } = JSON.parse(r.stdout) as { key: string };
    const list = await call(url, 'GET', '/gw/api/rest/City', { authorization: `ApiKey ${key}` });
    expect(list.status, list.text).toBe(200);
    expect(list.body.data).toEqual([]);
    // keys create reused the server's PostgreSQL rather than stopping it
    expect((await call(url, 'GET', '/readyz')).status).toBe(200);

    const result = await serve.stop('SIGINT');
    expect(result.signal, show(result)).toBeNull();
    expect(result.code, show(result)).toBe(0);
    const left = (await processesMentioning(copy.dir)).filter((p) => /postgres/.test(p.args));
    expect(left, JSON.stringify(left)).toEqual([]);
  });
});
