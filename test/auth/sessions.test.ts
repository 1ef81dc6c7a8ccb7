/**
 * Sessions through real HTTP: refresh-token rotation and reuse detection, logout, the end of every
 * session on a password reset, and user tokens next to API keys and management routes.
 * Token format and refused tokens are in test/auth/tokens.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAuthError, PASSWORD, startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { expectProblemAt } from '../support/expect.ts';
import { MANAGEMENT_TOKEN } from '../support/server.ts';

const DATA = '/gw/api/rest/City';
const KEYS = '/gw/api/rest/_apikeys';
const REFRESH_TOKEN = /^[A-Za-z0-9+/]+={0,2}$/;

let t: AuthTestServer;
beforeAll(async () => {
  t = await startAuthServer({ passwordCost: 4 });
});
afterAll(() => t?.close());

let counter = 0;
const newEmail = (tag: string) => `sessions-${tag}-${++counter}@example.com`;

const refresh = (refreshToken: string) => t.auth('POST', '/auth/refresh-token', { body: { refreshToken } });
const logout = (token: string) => t.auth('POST', '/auth/logout', { token });

async function login(email: string, password = PASSWORD): Promise<Session> {
  const res = await t.auth('POST', '/auth/login', { body: { email, password } });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

async function expectWorks(token: string): Promise<void> {
  const res = await t.asUser(token, 'GET', DATA);
  expect(res.status, res.text).toBe(200);
}

async function expectDataRefused(token: string): Promise<void> {
  expectProblemAt(await t.asUser(token, 'GET', DATA), 401, DATA, 'unauthorized');
}

async function expectRefreshRefused(refreshToken: string): Promise<void> {
  expectAuthError(await refresh(refreshToken), 401, 'AUTH_TOKEN_INVALID');
}

/** A successful refresh: exactly {accessToken, refreshToken}, both new. */
async function refreshed(previous: {
  accessToken: string;
  refreshToken: string;
}): Promise<{ accessToken: string; refreshToken: string }> {
  const res = await refresh(previous.refreshToken);
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(Object.keys(res.body).sort()).toEqual(['accessToken', 'refreshToken']);
  expect(res.body.accessToken).not.toBe(previous.accessToken);
  expect(res.body.refreshToken).not.toBe(previous.refreshToken);
  expect(res.body.refreshToken).toMatch(REFRESH_TOKEN);
  return res.body;
}

describe('POST /auth/refresh-token', () => {
  it('returns a new pair; the new access token works, in the same session', async () => {
    const session = await t.signupConfirmed(newEmail('refresh'));
    expect(session.refreshToken).toMatch(REFRESH_TOKEN);
    const next = await refreshed(session);
    await expectWorks(next.accessToken);
    const before = decodeJwt(session.accessToken);
    const after = decodeJwt(next.accessToken);
    expect(after.sid).toBe(before.sid);
    expect(after.sub).toBe(before.sub);
    expect(after.jti).not.toBe(before.jti);
    expect(after.roles).toEqual(['customer']);
    // The rotation goes on: the new refresh token is good for one more.
    const third = await refreshed(next);
    await expectWorks(third.accessToken);
  });

  it('reusing a spent refresh token → 401 AUTH_TOKEN_INVALID and the whole session is revoked at once', async () => {
    const email = newEmail('reuse');
    const session = await t.signupConfirmed(email);
    const other = await login(email); // another session of the same user
    const next = await refreshed(session);
    const newest = await refreshed(next);
    await expectWorks(newest.accessToken);

    await expectRefreshRefused(session.refreshToken);
    // The very next requests: the newest refresh token and every access token of the session fail.
    await expectRefreshRefused(newest.refreshToken);
    await expectDataRefused(newest.accessToken);
    await expectDataRefused(next.accessToken);
    await expectDataRefused(session.accessToken);
    expectAuthError(await logout(newest.accessToken), 401, 'AUTH_TOKEN_INVALID');

    // The other session of the same user is untouched.
    await expectWorks(other.accessToken);
    const otherNext = await refreshed(other);
    await expectWorks(otherNext.accessToken);
  });

  it('an unknown refresh token → 401 AUTH_TOKEN_INVALID', async () => {
    await expectRefreshRefused(randomBytes(32).toString('base64'));
    await expectRefreshRefused('not a refresh token');
  });

  it('20 concurrent refreshes with one token: exactly one 200, nineteen 401 AUTH_TOKEN_INVALID', async () => {
    const session = await t.signupConfirmed(newEmail('concurrent'));
    const answers = await Promise.all(Array.from({ length: 20 }, () => refresh(session.refreshToken)));
    const ok = answers.filter((r) => r.status === 200);
    expect(answers.map((r) => r.status).sort(), answers.map((r) => r.text).join('\n')).toEqual([
      200,
      ...Array(19).fill(401),
    ]);
    expect(Object.keys(ok[0]!.body).sort()).toEqual(['accessToken', 'refreshToken']);
    for (const res of answers.filter((r) => r.status !== 200)) expectAuthError(res, 401, 'AUTH_TOKEN_INVALID');
  });
});

describe('POST /auth/logout', () => {
  it('200 {message}; the token, the session and its refresh token are dead; the jti is recorded until exp', async () => {
    const email = newEmail('logout');
    const session = await t.signupConfirmed(email);
    const other = await login(email);
    await expectWorks(session.accessToken);

    const res = await logout(session.accessToken);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.body)).toEqual(['message']);
    expect(res.body.message).toEqual(expect.any(String));

    await expectDataRefused(session.accessToken);
    expectAuthError(await logout(session.accessToken), 401, 'AUTH_TOKEN_INVALID');
    await expectRefreshRefused(session.refreshToken);

    const { jti, exp } = decodeJwt(session.accessToken);
    const rows = await t.db.query<{ jti: string; exp: string }>(
      'select jti, extract(epoch from expires_at)::bigint::text as exp from svcgen.revoked_tokens where jti = $1',
      [jti],
    );
    expect(rows).toEqual([{ jti, exp: String(exp) }]);

    // Another session of the same user is unaffected.
    await expectWorks(other.accessToken);
    const otherNext = await refreshed(other);
    await expectWorks(otherNext.accessToken);
    const otherOut = await logout(otherNext.accessToken);
    expect(otherOut.status, otherOut.text).toBe(200);
  });

  it('logging out with a refreshed access token ends the session: the earlier access token fails too', async () => {
    const session = await t.signupConfirmed(newEmail('logout-refreshed'));
    const next = await refreshed(session);
    await expectWorks(session.accessToken);
    const res = await logout(next.accessToken);
    expect(res.status, res.text).toBe(200);
    await expectDataRefused(next.accessToken);
    await expectDataRefused(session.accessToken);
    await expectRefreshRefused(next.refreshToken);
  });
});

describe('POST /auth/reset-password', () => {
  it('ends every session of the user: earlier access and refresh tokens are refused', async () => {
    const email = newEmail('reset');
    const first = await t.signupConfirmed(email);
    const second = await login(email);
    const secondNext = await refreshed(second);
    await expectWorks(first.accessToken);
    await expectWorks(secondNext.accessToken);

    const recover = await t.auth('POST', '/auth/recover-password', { body: { email } });
    expect(recover.status, recover.text).toBe(200);
    const { code } = await t.mail.nextMail(email);
    const newPassword = 'brand-new-secret-7';
    const reset = await t.auth('POST', '/auth/reset-password', { body: { email, newPassword, code } });
    expect(reset.status, reset.text).toBe(200);
    expect(Object.keys(reset.body)).toEqual(['message']);

    for (const token of [first.accessToken, second.accessToken, secondNext.accessToken]) await expectDataRefused(token);
    for (const token of [first.refreshToken, secondNext.refreshToken]) await expectRefreshRefused(token);
    expectAuthError(await logout(first.accessToken), 401, 'AUTH_TOKEN_INVALID');

    // The new password opens a new session that works.
    const fresh = await login(email, newPassword);
    await expectWorks(fresh.accessToken);
    await refreshed(fresh);
  });
});

describe('user tokens, management routes and API keys', () => {
  it('a user access token is refused on the management routes (403 Problem)', async () => {
    const session = await t.signupConfirmed(newEmail('management'));
    expectProblemAt(await t.asUser(session.accessToken, 'GET', KEYS), 403, KEYS, 'forbidden');
    expectProblemAt(
      await t.asUser(session.accessToken, 'POST', KEYS, {
        body: { name: 'mine', prefix: 'Mine', roles: ['admin'], environment: 'master' },
      }),
      403,
      KEYS,
      'forbidden',
    );
    await expectWorks(session.accessToken);
  });

  it('API keys still work on data routes alongside user tokens', async () => {
    const session = await t.signupConfirmed(newEmail('keys'));
    const customerKey = await t.createKey(['customer']);
    const prefixed = await t.createKey(['catalog'], { prefix: 'Catalog' });
    const byAdmin = await t.request('GET', DATA);
    const byCustomerKey = await t.request('GET', DATA, { key: customerKey.key });
    const byPrefix = await t.request('GET', DATA, {
      key: false,
      headers: { authorization: `Catalog ${prefixed.key}` },
    });
    const byUser = await t.asUser(session.accessToken, 'GET', DATA);
    for (const res of [byAdmin, byCustomerKey, byPrefix, byUser]) expect(res.status, res.text).toBe(200);
    // An admin key reads what the customer's token may not.
    expect((await t.request('GET', '/gw/api/rest/Customer')).status).toBe(200);
    expectProblemAt(
      await t.asUser(session.accessToken, 'GET', '/gw/api/rest/Customer'),
      403,
      '/gw/api/rest/Customer',
      'forbidden',
    );
    // A management token still manages keys.
    const list = await t.request('GET', KEYS, { key: MANAGEMENT_TOKEN });
    expect(list.status, list.text).toBe(200);
  });
});

/**
 * The interface: "the service checks a distributed blacklist on every request, so logged-out tokens
 * are rejected". A second process that has already seen (and cached) a token must refuse it on
 * its very next request once another process answered the revoking request. A race would not
 * show every time, so each case runs several rounds and lists the rounds that went wrong.
 */
describe('revocation across processes (two servers on one database)', () => {
  let b: AuthTestServer;
  beforeAll(async () => {
    b = await startAuthServer({ passwordCost: 4, databaseUrl: t.database.url, mail: t.mail });
  });
  afterAll(() => b?.close());
  const ROUNDS = 15;

  async function seenByB(token: string): Promise<void> {
    const res = await b.asUser(token, 'GET', DATA);
    expect(res.status, res.text).toBe(200);
  }
  const acceptedByB = async (token: string) => (await b.asUser(token, 'GET', DATA)).status !== 401;

  it('a logout on one process: the other refuses the token on its next request', async () => {
    const email = newEmail('xproc-logout');
    await t.signupConfirmed(email);
    const leaked: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const session = await login(email);
      await seenByB(session.accessToken);
      const out = await logout(session.accessToken);
      expect(out.status, out.text).toBe(200);
      if (await acceptedByB(session.accessToken)) leaked.push(round);
    }
    expect(leaked, 'rounds in which the other process still accepted the logged-out token').toEqual([]);
  });

  it('a refresh-token reuse on one process: the other refuses the session’s access token on its next request', async () => {
    const email = newEmail('xproc-reuse');
    await t.signupConfirmed(email);
    const leaked: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const session = await login(email);
      const next = await refreshed(session);
      await seenByB(next.accessToken);
      await expectRefreshRefused(session.refreshToken);
      if (await acceptedByB(next.accessToken)) leaked.push(round);
    }
    expect(leaked, 'rounds in which the other process still accepted an access token of the revoked session').toEqual(
      [],
    );
  });

  it('a password reset on one process: the other refuses the earlier access tokens on its next request', async () => {
    const email = newEmail('xproc-reset');
    await t.signupConfirmed(email);
    const leaked: number[] = [];
    let password = PASSWORD;
    for (let round = 0; round < 10; round++) {
      const session = await login(email, password);
      await seenByB(session.accessToken);
      expect((await t.auth('POST', '/auth/recover-password', { body: { email } })).status).toBe(200);
      const { code } = await t.mail.nextMail(email);
      password = `new-password-${round}`;
      const reset = await t.auth('POST', '/auth/reset-password', { body: { email, newPassword: password, code } });
      expect(reset.status, reset.text).toBe(200);
      if (await acceptedByB(session.accessToken)) leaked.push(round);
    }
    expect(leaked, 'rounds in which the other process still accepted a token issued before the reset').toEqual([]);
  });
});
