/**
 * Observability (README "Observability"; docs/deployment.md "Observability"): JSON request logs
 * carrying the X-Request-Id the response carries, an incoming id echoed or a bad one replaced, no
 * secret anywhere in a real `svcgen serve`'s output, and /metrics: 404 when off, 401 without its
 * token, Prometheus text with counters that move; request lines written in batches, yet none lost
 * on SIGTERM and none held longer than the flush interval.
 */
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOG_FLUSH_INTERVAL_MS } from '../../runtime/observability/index.ts';
import { PASSWORD, startMailServer, type MailServer, type Session } from '../support/auth.ts';
import { cleanupCli, copyExample, freshDatabase, show, startCli, type RunningCli } from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { expectProblem, readResponse, SHOP, type TestResponse } from '../support/server.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m;
const MANAGEMENT_TOKEN = 'observability-management-token-8c1f0a77';
const METRICS_TOKEN = 'observability-metrics-token-3e9d51b2';
const WEBHOOK_SECRET = 'observability-webhook-secret-a4c8e6';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

afterAll(cleanupCli);

interface Call {
  authorization?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

async function call(base: string, method: string, p: string, o: Call = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { 'x-project-id': 'shop', ...o.headers };
  if (o.authorization) headers.authorization = o.authorization;
  let body: string | undefined;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] = 'application/json';
  }
  return readResponse(await fetch(`${base}${p}`, { method, headers, body }));
}

/** The JSON entries on a process's stdout (the `listening on` line is not one), whole lines only. */
function entries(stdout: string): Record<string, unknown>[] {
  return stdout
    .slice(0, stdout.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function entryFor(serve: RunningCli, reqId: string | null): Promise<Record<string, unknown>> {
  expect(reqId).toBeTruthy();
  await expect.poll(() => entries(serve.stdout).find((e) => e.reqId === reqId), { timeout: 5_000 }).toBeDefined();
  return entries(serve.stdout).find((e) => e.reqId === reqId)!;
}

/** A sample's value in Prometheus text, by metric name and exact labels; 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)\{([^}]*)\} (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = match[2]!.split(',');
    if (have.length === wanted.length && wanted.every((w) => have.includes(w))) return Number(match[3]);
  }
  return 0;
}

describe('svcgen serve with metrics on, logging JSON', { timeout: 90_000 }, () => {
  let mail: MailServer;
  let database: TestDatabase;
  let serve: RunningCli;
  let url: string;
  /** Every secret value the server saw, for the final grep of its output. */
  const secrets: Record<string, string> = {
    password: PASSWORD,
    managementToken: MANAGEMENT_TOKEN,
    metricsToken: METRICS_TOKEN,
    webhookSecret: WEBHOOK_SECRET,
  };

  beforeAll(async () => {
    mail = await startMailServer();
    database = await freshDatabase();
    const copy = await copyExample('observability');
    const configFile = path.join(copy.dir, 'svcgen.config.json');
    const raw = JSON.parse(await fs.readFile(configFile, 'utf8'));
    raw.metrics = { enabled: true };
    raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0, 60_000] };
    await fs.writeFile(configFile, JSON.stringify(raw));
    serve = startCli(['serve', '--project', copy.dir, '--database-url', database.url, '--port', '0'], {
      env: {
        SVCGEN_MANAGEMENT_TOKEN: MANAGEMENT_TOKEN,
        SVCGEN_METRICS_TOKEN: METRICS_TOKEN,
        SVCGEN_SMTP_URL: mail.url,
      },
    });
    url = (await serve.waitFor(LISTENING, { stream: 'stdout' }))[1]!;
  });

  afterAll(async () => {
    await mail?.close();
  });

  it('logs a JSON entry per request with the reqId the X-Request-Id response header carries', async () => {
    const res = await call(url, 'GET', '/healthz?token=query-value-never-logged');
    expect(res.status).toBe(200);
    const reqId = res.headers.get('x-request-id');
    expect(reqId).toMatch(UUID);
    expect(await entryFor(serve, reqId)).toEqual({
      level: 'info',
      time: expect.stringMatching(ISO_8601),
      pid: expect.any(Number),
      msg: 'request',
      reqId,
      method: 'GET',
      path: '/healthz',
      status: 200,
      durationMs: expect.any(Number),
    });
    expect(serve.stdout).not.toContain('query-value-never-logged');
  });

  it('echoes a sane incoming X-Request-Id, also on a 404 Problem, and logs under it', async () => {
    const res = await call(url, 'GET', '/no/such/path', { headers: { 'x-request-id': 'lb-7f3a.91_c-2' } });
    expectProblem(res, 404);
    expect(res.headers.get('x-request-id')).toBe('lb-7f3a.91_c-2');
    expect(await entryFor(serve, 'lb-7f3a.91_c-2')).toMatchObject({
      method: 'GET',
      path: '/no/such/path',
      status: 404,
    });
  });

  it.each([
    ['too long', 'a'.repeat(129)],
    ['a space', 'two words'],
    ['a quote and braces', '"}{"level":"fatal'],
  ])('replaces an incoming X-Request-Id with %s by a new UUID', async (_, bad) => {
    const res = await call(url, 'POST', '/auth/login', { headers: { 'x-request-id': bad }, body: {} });
    expect(res.status).toBe(400);
    const reqId = res.headers.get('x-request-id');
    expect(reqId).toMatch(UUID);
    expect(await entryFor(serve, reqId)).toMatchObject({ method: 'POST', path: '/auth/login', status: 400 });
    expect(serve.stdout).not.toContain(bad);
  });

  it('serves /metrics: 401 Problem without the token or with a wrong one', async () => {
    const none = await call(url, 'GET', '/metrics');
    expectProblem(none, 401, 'unauthorized');
    expect(none.body.detail).toBe('send the metrics token (SVCGEN_METRICS_TOKEN) as "Authorization: Bearer <token>"');
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expectProblem(
      await call(url, 'GET', '/metrics', { authorization: `Bearer ${METRICS_TOKEN}x` }),
      401,
      'unauthorized',
    );
  });

  it('serves /metrics with the token: request counters and the latency histogram move, pool gauges are there', async () => {
    const scrape = async () => {
      const res = await call(url, 'GET', '/metrics', { authorization: `Bearer ${METRICS_TOKEN}` });
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
      return res.text;
    };
    const key = await call(url, 'POST', '/gw/api/rest/_apikeys', {
      authorization: `Bearer ${MANAGEMENT_TOKEN}`,
      headers: { environment: 'master' },
      body: { name: 'metrics', prefix: 'ApiKey', roles: ['admin'], environment: 'master' },
    });
    expect(key.status, key.text).toBe(201);
    secrets.apiKey = key.body.data.key;
    const byId = '/gw/api/rest/City/:id';
    const before = await scrape();
    const countBefore = sample(before, 'http_requests_total', { route: byId, method: 'GET', status: '404' });
    const histogramBefore = sample(before, 'http_request_duration_seconds_count', { route: byId, method: 'GET' });
    for (let i = 0; i < 3; i++)
      expectProblem(
        await call(url, 'GET', '/gw/api/rest/City/999999', { authorization: `ApiKey ${secrets.apiKey}` }),
        404,
      );
    const after = await scrape();
    expect(sample(after, 'http_requests_total', { route: byId, method: 'GET', status: '404' })).toBe(countBefore + 3);
    expect(sample(after, 'http_request_duration_seconds_count', { route: byId, method: 'GET' })).toBe(
      histogramBefore + 3,
    );
    expect(sample(after, 'http_request_duration_seconds_bucket', { route: byId, method: 'GET', le: '+Inf' })).toBe(
      histogramBefore + 3,
    );
    // Express routes are labelled by their pattern, a raw path never appears as a label.
    expect(
      sample(after, 'http_requests_total', { route: '/healthz', method: 'GET', status: '200' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sample(after, 'http_requests_total', { route: 'unmatched', method: 'GET', status: '404' }),
    ).toBeGreaterThanOrEqual(1);
    expect(after).not.toMatch(/route="[^"]*\/City\/\d/);
    expect(after).not.toContain('route="/no/such/path"');
    expect(sample(after, 'db_pool_connections', { pool: 'api' })).toBeGreaterThanOrEqual(1);
    expect(after).toMatch(/^db_pool_waiting_requests\{pool="api"\} 0$/m);
    expect(after).toMatch(/^webhook_outbox_depth \d+$/m);
    expect(after).toMatch(/^process_resident_memory_bytes \d+$/m);
  });

  it('counts rate-limit refusals by limit', async () => {
    const scrape = async () => (await call(url, 'GET', '/metrics', { authorization: `Bearer ${METRICS_TOKEN}` })).text;
    const before = sample(await scrape(), 'rate_limit_refusals_total', { limit: 'auth-login' });
    // loginPerMinutePerIp is 20: the 21st attempt of a minute is refused (up to 41 attempts, in case
    // the minute turns while they run).
    let refused = 0;
    for (let i = 0; i < 42 && refused === 0; i++) {
      const res = await call(url, 'POST', '/auth/login', {
        body: { email: 'nobody@example.com', password: 'wrong-password-1' },
      });
      if (res.status === 429) refused++;
    }
    expect(refused).toBe(1);
    expect(sample(await scrape(), 'rate_limit_refusals_total', { limit: 'auth-login' })).toBe(before + 1);
  });

  it('never writes a password, token, API key or webhook secret to stdout or stderr', async () => {
    const email = `obs-${Date.now().toString(36)}@example.com`;
    const signup = await call(url, 'POST', '/auth/signup', {
      body: { email, password: PASSWORD, firstName: 'Obs', lastName: 'Test' },
    });
    expect(signup.status, signup.text).toBe(201);
    const { code } = await mail.nextMail(email);
    secrets.confirmationCode = code!;
    const confirmed = await call(url, 'POST', '/auth/confirm-signup', { body: { email, code } });
    expect(confirmed.status, confirmed.text).toBe(200);
    // Logins of the previous test used up this minute's budget on this IP: the session from the confirmation serves instead.
    const session = confirmed.body as Session;
    secrets.accessToken = session.accessToken;
    secrets.refreshToken = session.refreshToken;
    const refreshed = await call(url, 'POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } });
    expect(refreshed.status, refreshed.text).toBe(200);
    secrets.refreshedAccessToken = refreshed.body.accessToken;
    secrets.refreshedRefreshToken = refreshed.body.refreshToken;
    const asUser = await call(url, 'GET', '/gw/api/rest/City', {
      authorization: `Bearer ${refreshed.body.accessToken}`,
    });
    expect(asUser.status, asUser.text).toBe(200);
    const userEntry = await entryFor(serve, asUser.headers.get('x-request-id'));
    expect(userEntry.caller).toBe(`user:${session.user.id}`);

    const asKey = await call(url, 'GET', '/gw/api/rest/City', { authorization: `ApiKey ${secrets.apiKey}` });
    expect(asKey.status, asKey.text).toBe(200);
    expect((await entryFor(serve, asKey.headers.get('x-request-id'))).caller).toMatch(/^[^\s]+$/);

    const hook = await call(url, 'POST', '/gw/api/rest/_webhooks', {
      authorization: `Bearer ${MANAGEMENT_TOKEN}`,
      headers: { environment: 'master' },
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'City',
        events: ['INSERT'],
        url: 'http://127.0.0.1:9/hook',
        secret: WEBHOOK_SECRET,
      },
    });
    expect(hook.status, hook.text).toBe(201);
    expect((await entryFor(serve, hook.headers.get('x-request-id'))).caller).toMatch(/^management:/);
    const created = await call(url, 'POST', '/gw/api/rest/City', {
      authorization: `ApiKey ${secrets.apiKey}`,
      body: { name: 'Oslo', country: 'NO' },
    });
    expect(created.status, created.text).toBe(201);
    const createdEntry = await entryFor(serve, created.headers.get('x-request-id'));
    expect(createdEntry).toMatchObject({ method: 'POST', path: '/gw/api/rest/City', status: 201 });

    // The delivery to a closed port fails: its outcome is counted (and the secret signs it, unlogged).
    await expect
      .poll(
        async () =>
          sample(
            (await call(url, 'GET', '/metrics', { authorization: `Bearer ${METRICS_TOKEN}` })).text,
            'webhook_delivery_outcomes_total',
            { outcome: 'retrying' },
          ),
        { timeout: 10_000 },
      )
      .toBe(1);

    const output = `${serve.stdout}\n${serve.stderr}`;
    expect(Object.keys(secrets).sort()).toEqual([
      'accessToken',
      'apiKey',
      'confirmationCode',
      'managementToken',
      'metricsToken',
      'password',
      'refreshToken',
      'refreshedAccessToken',
      'refreshedRefreshToken',
      'webhookSecret',
    ]);
    for (const [name, value] of Object.entries(secrets)) {
      expect(value.length, name).toBeGreaterThanOrEqual(6);
      expect(
        output.includes(value),
        `${name} appears in the output:\n${show({ code: null, signal: null, stdout: serve.stdout, stderr: serve.stderr })}`,
      ).toBe(false);
    }
    const result = await serve.stop('SIGTERM');
    expect(result.code, show(result)).toBe(0);
    const all = `${result.stdout}\n${result.stderr}`;
    for (const [name, value] of Object.entries(secrets)) expect(all.includes(value), name).toBe(false);
    expect(entries(result.stdout).map((e) => e.msg)).toEqual(
      expect.arrayContaining(['server started', 'server stopped']),
    );
  });
});

describe('svcgen serve with metrics off (the default)', { timeout: 60_000 }, () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await freshDatabase();
  });

  it('answers 404 on /metrics, even with a token in the environment', async () => {
    const serve = startCli(['serve', '--project', SHOP, '--database-url', database.url, '--port', '0'], {
      env: { SVCGEN_METRICS_TOKEN: METRICS_TOKEN },
    });
    const url = (await serve.waitFor(LISTENING, { stream: 'stdout' }))[1]!;
    const res = await call(url, 'GET', '/metrics', { authorization: `Bearer ${METRICS_TOKEN}` });
    expectProblem(res, 404, 'not-found');
    expect(res.body.detail).toBe('nothing is served at GET /metrics');
    expect(res.headers.get('x-request-id')).toMatch(UUID);
    expect((await serve.stop('SIGTERM')).code).toBe(0);
  });

  it('refuses to start with metrics enabled and no token: exit 1 and what to set', async () => {
    const copy = await copyExample('observability-no-token');
    const configFile = path.join(copy.dir, 'svcgen.config.json');
    const raw = JSON.parse(await fs.readFile(configFile, 'utf8'));
    raw.metrics = { enabled: true };
    await fs.writeFile(configFile, JSON.stringify(raw));
    const serve = startCli(['serve', '--project', copy.dir, '--database-url', database.url, '--port', '0'], {
      env: { SVCGEN_METRICS_TOKEN: undefined },
    });
    const result = await serve.exited;
    expect(result.code, show(result)).toBe(1);
    expect(result.stderr).toContain(
      'svcgen: metrics.enabled is true but there is no metrics token: set SVCGEN_METRICS_TOKEN (or metrics.token in svcgen.config.json), which scrapers send as "Authorization: Bearer <token>"\n',
    );
  });
});

// Request lines go out in batches (runtime/observability/logger.ts; docs/deployment.md "Logs").
// A pipe is written asynchronously, a file at once (docs/deployment.md "Observability"); both batch.
describe.each(['pipe', 'file'] as const)(
  'svcgen serve with default flags and stdout to a %s: batched request lines',
  { timeout: 90_000 },
  (stdoutKind) => {
    let database: TestDatabase;
    let stdoutDir: string;
    let started = 0;

    beforeAll(async () => {
      database = await freshDatabase();
      stdoutDir = await fs.mkdtemp(path.join(os.tmpdir(), 'svcgen-stdout-'));
    });
    afterAll(async () => {
      await fs.rm(stdoutDir, { recursive: true, force: true });
    });

    function serveShop(): RunningCli {
      const stdoutFile = stdoutKind === 'file' ? path.join(stdoutDir, `serve-${++started}.log`) : undefined;
      return startCli(['serve', '--project', SHOP, '--database-url', database.url, '--port', '0'], { stdoutFile });
    }

    /** N requests, 10 at a time; their reqIds in order. */
    async function requests(url: string, n: number): Promise<string[]> {
      const ids: string[] = [];
      for (let i = 0; i < n; i += 10) {
        const batch = await Promise.all(
          Array.from({ length: Math.min(10, n - i) }, () => call(url, 'GET', '/healthz')),
        );
        for (const res of batch) {
          expect(res.status, res.text).toBe(200);
          ids.push(res.headers.get('x-request-id')!);
        }
      }
      return ids;
    }

    it('writes a lone request line within the flush interval, with no more traffic to fill a batch', async () => {
      const serve = serveShop();
      const url = (await serve.waitFor(LISTENING, { stream: 'stdout' }))[1]!;
      const [reqId] = await requests(url, 1);
      const sent = Date.now();
      // Far below the 8 KiB batch: only the periodic flush writes it. Its timer fires every
      // LOG_FLUSH_INTERVAL_MS; the margin is for a busy test machine.
      await expect
        .poll(() => entries(serve.stdout).some((e) => e.reqId === reqId), {
          timeout: LOG_FLUSH_INTERVAL_MS + 1500,
          interval: 20,
        })
        .toBe(true);
      expect(Date.now() - sent).toBeLessThan(LOG_FLUSH_INTERVAL_MS + 1500);
      expect((await serve.stop('SIGTERM')).code).toBe(0);
    });

    it('writes every request line before exiting on SIGTERM', async () => {
      const serve = serveShop();
      const url = (await serve.waitFor(LISTENING, { stream: 'stdout' }))[1]!;
      const ids = await requests(url, 300);
      const result = await serve.stop('SIGTERM');
      expect(result.code, show(result)).toBe(0);
      const logged = entries(result.stdout);
      const lines = logged.filter((e) => e.msg === 'request').map((e) => e.reqId);
      expect(lines.length, 'request lines on stdout').toBe(300);
      expect(new Set(lines)).toEqual(new Set(ids));
      expect(logged.at(-1)?.msg).toBe('server stopped');
      expect(result.stdout.endsWith('\n')).toBe(true);
    });

    it('writes every request line when a second signal exits at once', async () => {
      const serve = serveShop();
      const url = (await serve.waitFor(LISTENING, { stream: 'stdout' }))[1]!;
      const ids = await requests(url, 100);
      // A request still reading its body holds the graceful stop, so that the second signal is what
      // ends the process (without it the stop could finish before the second signal arrives).
      const { port } = new URL(url);
      const held = net.connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve) => held.once('connect', resolve));
      held.on('error', () => {});
      held.write(
        'POST /gw/api/rest/City HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Project-Id: shop\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na',
      );
      serve.child.kill('SIGTERM');
      await serve.waitFor(/SIGTERM: finishing in-flight requests/, { stream: 'stderr' });
      const result = await serve.stop('SIGTERM');
      expect(result.code, show(result)).toBe(1);
      expect(result.stderr).toContain('SIGTERM again: exiting without waiting');
      const logged = entries(result.stdout).filter((e) => e.msg === 'request');
      const lines = logged.filter((e) => e.path === '/healthz').map((e) => e.reqId);
      expect(new Set(lines)).toEqual(new Set(ids));
      expect(lines.length).toBe(100);
      held.destroy();
    });
  },
);
