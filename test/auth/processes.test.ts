/**
 * Several server processes on one database behave as one service (docs/deployment.md "One machine:
 * --workers"; docs/api.md §3 "Tokens and sessions"): two real
 * `svcgen serve` processes share signing keys, and a logout or a refresh-token reuse on one is
 * refused by the other on its very next request, also while the shared LISTEN channel is down.
 * Then: the event loop stays free while passwords are hashed (data requests are answered during a
 * login burst; their latency is measured by `npm run bench:auth`).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  expectAuthError,
  PASSWORD,
  startAuthServer,
  startMailServer,
  type AuthTestServer,
  type MailServer,
  type Session,
} from '../support/auth.ts';
import { cleanupCli, freshDatabase, startCli, type RunningCli } from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { expectProblem, readResponse, SHOP, type TestResponse } from '../support/server.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m;
const CITY = '/gw/api/rest/City';

let counter = 0;
const uniqueEmail = (label: string) => `proc-${label}-${Date.now().toString(36)}-${++counter}@example.com`;

interface Call {
  body?: unknown;
  token?: string;
}

/** A request to one of the processes, as a browser-less client sends it. */
async function call(base: string, method: string, p: string, o: Call = {}): Promise<TestResponse> {
  const headers: Record<string, string> = { 'x-project-id': 'shop' };
  if (o.token) headers.authorization = `Bearer ${o.token}`;
  let body: string | undefined;
  if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers['content-type'] = 'application/json';
  }
  return readResponse(await fetch(`${base}${p}`, { method, headers, body }));
}

describe('two svcgen serve processes on one database', { timeout: 60_000 }, () => {
  let mail: MailServer;
  let database: TestDatabase;
  let admin: pg.Pool;
  let a: { serve: RunningCli; url: string };
  let b: { serve: RunningCli; url: string };

  async function startServe(): Promise<{ serve: RunningCli; url: string }> {
    const serve = startCli(['serve', '--project', SHOP, '--database-url', database.url, '--port', '0'], {
      env: { SVCGEN_SMTP_URL: mail.url },
    });
    const match = await serve.waitFor(LISTENING, { stream: 'stdout' });
    return { serve, url: match[1]! };
  }

  beforeAll(async () => {
    mail = await startMailServer();
    database = await freshDatabase();
    admin = new pg.Pool({ connectionString: database.url, max: 2 });
    admin.on('error', () => {});
    // one after the other: the first applies the migrations and creates the keys
    a = await startServe();
    b = await startServe();
  });

  afterAll(async () => {
    await admin?.end();
    await cleanupCli();
    await mail?.close();
  });

  /** Signs up on `base` (signup + mailed code + confirm): the confirm-signup answer. */
  async function signupConfirmed(base: string, email: string): Promise<Session> {
    const signup = await call(base, 'POST', '/auth/signup', {
      body: { email, password: PASSWORD, firstName: 'Proc', lastName: 'Test' },
    });
    expect(signup.status, signup.text).toBe(201);
    const { code } = await mail.nextMail(email);
    const confirmed = await call(base, 'POST', '/auth/confirm-signup', { body: { email, code } });
    expect(confirmed.status, confirmed.text).toBe(200);
    return confirmed.body as Session;
  }

  async function login(base: string, email: string): Promise<Session> {
    const res = await call(base, 'POST', '/auth/login', { body: { email, password: PASSWORD } });
    expect(res.status, res.text).toBe(200);
    return res.body as Session;
  }

  async function expectDataOk(base: string, token: string): Promise<void> {
    const res = await call(base, 'GET', CITY, { token });
    expect(res.status, `${base}: ${res.text}`).toBe(200);
  }

  /** A data request refused as a 401 Problem Details (type /errors/unauthorized). */
  function expectUnauthorized(res: TestResponse): void {
    expectProblem(res, 401, 'unauthorized');
  }

  // Budget (default limits, shared by both processes): 4 signups of 10, 8 logins of 20 per minute.

  it('a token issued by A works on B and one issued by B works on A; the JWKS is identical on both', async () => {
    const email = uniqueEmail('keys');
    const fromA = await signupConfirmed(a.url, email);
    await expectDataOk(b.url, fromA.accessToken);
    await expectDataOk(a.url, fromA.accessToken);
    const fromB = await login(b.url, email);
    await expectDataOk(a.url, fromB.accessToken);

    for (const environment of ['master', 'staging']) {
      const p = `/auth/.well-known/jwks.json?project_id=shop&environment=${environment}`;
      const [jwksA, jwksB] = await Promise.all([call(a.url, 'GET', p), call(b.url, 'GET', p)]);
      expect(jwksA.status, jwksA.text).toBe(200);
      expect(jwksB.status, jwksB.text).toBe(200);
      expect(jwksA.body.keys.length).toBeGreaterThanOrEqual(1);
      expect(jwksB.body).toEqual(jwksA.body);
    }
    // the token's kid is one of the published keys
    const kid = JSON.parse(Buffer.from(fromA.accessToken.split('.')[0]!, 'base64url').toString()).kid;
    const jwks = await call(b.url, 'GET', '/auth/.well-known/jwks.json?project_id=shop&environment=master');
    expect(jwks.body.keys.map((k: { kid: string }) => k.kid)).toContain(kid);
  });

  it('logout on one process → the very next data request with that token on the other → 401', async () => {
    const email = uniqueEmail('logout');
    const sessions = [await signupConfirmed(a.url, email)];
    for (let i = 0; i < 3; i++) sessions.push(await login(i % 2 === 0 ? b.url : a.url, email));

    // alternate directions: logout on A checked on B, logout on B checked on A
    for (const [i, session] of sessions.entries()) {
      const [here, there] = i % 2 === 0 ? [a.url, b.url] : [b.url, a.url];
      // the other process has seen and checked the token already (the cached case)
      await expectDataOk(there, session.accessToken);
      await expectDataOk(there, session.accessToken);
      const out = await call(here, 'POST', '/auth/logout', { token: session.accessToken });
      expect(out.status, out.text).toBe(200);
      expectUnauthorized(await call(there, 'GET', CITY, { token: session.accessToken }));
      expectUnauthorized(await call(here, 'GET', CITY, { token: session.accessToken }));
      // the session's refresh token is dead on both
      expectAuthError(
        await call(there, 'POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } }),
        401,
        'AUTH_TOKEN_INVALID',
      );
      // and logout again is refused by the other process
      expectAuthError(
        await call(there, 'POST', '/auth/logout', { token: session.accessToken }),
        401,
        'AUTH_TOKEN_INVALID',
      );
    }
  });

  it('refresh-token reuse on A → the session’s newest access token on B → 401 on the very next request', async () => {
    const email = uniqueEmail('reuse');
    const first = await signupConfirmed(a.url, email);
    const rounds = [first, await login(a.url, email)];
    for (const session of rounds) {
      await expectDataOk(b.url, session.accessToken);
      const refreshed = await call(a.url, 'POST', '/auth/refresh-token', {
        body: { refreshToken: session.refreshToken },
      });
      expect(refreshed.status, refreshed.text).toBe(200);
      const newest = refreshed.body as { accessToken: string; refreshToken: string };
      expect(newest.refreshToken).not.toBe(session.refreshToken);
      // B has verified and checked the newest token (the cached case)
      await expectDataOk(b.url, newest.accessToken);
      await expectDataOk(b.url, newest.accessToken);

      // the used refresh token presented again on A: reuse → the whole session is revoked
      expectAuthError(
        await call(a.url, 'POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } }),
        401,
        'AUTH_TOKEN_INVALID',
      );
      expectUnauthorized(await call(b.url, 'GET', CITY, { token: newest.accessToken }));
      expectUnauthorized(await call(b.url, 'GET', CITY, { token: session.accessToken }));
      expectUnauthorized(await call(a.url, 'GET', CITY, { token: newest.accessToken }));
      expectAuthError(
        await call(b.url, 'POST', '/auth/refresh-token', { body: { refreshToken: newest.refreshToken } }),
        401,
        'AUTH_TOKEN_INVALID',
      );
    }
  });

  it('while the LISTEN channel is down, a logout on A is still refused by B, and B serves valid tokens', async () => {
    const email = uniqueEmail('fallback');
    const loggedOut = await signupConfirmed(a.url, email);
    const valid = await login(a.url, email);
    const later = await login(a.url, email);
    for (const s of [loggedOut, valid, later]) {
      await expectDataOk(b.url, s.accessToken);
      await expectDataOk(b.url, s.accessToken);
    }

    // Each process's LISTEN connection names itself in application_name.
    const LISTEN_CONNECTIONS = `from pg_stat_activity
      where application_name = 'svcgen-listen' and datname = current_database() and pid <> pg_backend_pid()`;
    const listeners = async () => (await admin.query<{ pid: number }>(`select pid ${LISTEN_CONNECTIONS}`)).rows;
    expect((await listeners()).length, 'each process keeps a LISTEN connection').toBeGreaterThanOrEqual(2);

    const killed = await admin.query<{ terminated: boolean }>(
      `select pg_terminate_backend(pid) as terminated ${LISTEN_CONNECTIONS}`,
    );
    expect(killed.rows.length).toBeGreaterThanOrEqual(2);
    expect(killed.rows.every((r) => r.terminated)).toBe(true);

    const out = await call(a.url, 'POST', '/auth/logout', { token: loggedOut.accessToken });
    expect(out.status, out.text).toBe(200);
    expectUnauthorized(await call(b.url, 'GET', CITY, { token: loggedOut.accessToken }));
    await expectDataOk(b.url, valid.accessToken);
    expectUnauthorized(await call(b.url, 'GET', CITY, { token: loggedOut.accessToken }));
    await expectDataOk(b.url, valid.accessToken);

    // the channel comes back by itself; revocations travel over it again
    const deadline = Date.now() + 20_000;
    while (
      (
        await admin.query(
          `select pid from pg_stat_activity where query ilike 'LISTEN%' and datname = current_database()`,
        )
      ).rows.length < 2
    ) {
      if (Date.now() > deadline) throw new Error('the processes did not LISTEN again within 20 s');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await expectDataOk(b.url, later.accessToken);
    const out2 = await call(a.url, 'POST', '/auth/logout', { token: later.accessToken });
    expect(out2.status, out2.text).toBe(200);
    expectUnauthorized(await call(b.url, 'GET', CITY, { token: later.accessToken }));
    expectUnauthorized(await call(b.url, 'GET', CITY, { token: loggedOut.accessToken }));
    await expectDataOk(b.url, valid.accessToken);
  });
});

describe('data requests during a login burst', { timeout: 60_000 }, () => {
  let t: AuthTestServer;
  beforeAll(async () => {
    t = await startAuthServer(); // default bcrypt cost (10)
  });
  afterAll(() => t?.close());

  // Asserted is what holds on any machine, however busy: data requests are answered while the
  // logins hash (bcrypt does not hold the event loop) and every login succeeds. How fast they are
  // answered meanwhile depends on the machine's other load, so it is not asserted here: it is the
  // trickle latency (p50/p99/max) "during the login load" in `npm run bench:auth`.
  it('data requests are answered while 20 logins hash passwords concurrently', async () => {
    const email = uniqueEmail('burst');
    await t.signupConfirmed(email);
    const created = await t.request('POST', CITY, { body: { name: 'Burst', country: 'FR' } });
    expect(created.status, created.text).toBe(201);
    const path = `${CITY}/${created.body.data.id}`;
    const catalog = await t.createKey(['catalog']);
    expect((await t.request('GET', path, { key: catalog.key })).status).toBe(200);

    let loginsAnswered = 0;
    const logins = Promise.all(
      Array.from({ length: 20 }, async () => {
        const res = await t.auth('POST', '/auth/login', { body: { email, password: PASSWORD } });
        loginsAnswered++;
        return res;
      }),
    );

    // One data request at a time until every login is answered, noting how many logins were
    // answered when each data request was. A login is a data request's work plus a cost-10 bcrypt
    // comparison (on at most one worker per core), so with the event loop free the first data
    // request is answered before any login, and more keep being answered while logins hash.
    let burstDone = false;
    const done = () => {
      burstDone = true;
    };
    logins.then(done, done);
    const loginsAnsweredAt: number[] = [];
    while (!burstDone) {
      const res = await t.request('GET', path, { key: catalog.key });
      expect(res.status, res.text).toBe(200);
      loginsAnsweredAt.push(loginsAnswered);
    }
    const results = await logins;
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(200));
    const shown = `${loginsAnsweredAt.length} data requests; logins answered when each was: ${loginsAnsweredAt.slice(0, 50).join(', ')}${loginsAnsweredAt.length > 50 ? ', …' : ''}`;
    expect(loginsAnsweredAt[0], shown).toBe(0);
    expect(loginsAnsweredAt.filter((n) => n < 20).length, shown).toBeGreaterThanOrEqual(3);
  });
});
