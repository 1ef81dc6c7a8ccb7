// A signed-in user's own account over real HTTP, with the mail read from a loopback SMTP server
// (docs/api.md §3 "Your account"): GET /auth/me, changing the password and the e-mail address,
// listing and ending sessions, deleting the account. Each with its exact answers and errors, and
// what an attacker would try: another user's sessions, a stolen access token without the password,
// guessing codes, racing a change, a revocation heard by another server process.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  expectAuthError,
  expectViolations,
  PASSWORD,
  startAuthServer,
  type AuthTestServer,
  type Session,
} from '../support/auth.ts';
import { freshWindows } from '../support/clock.ts';
import { ISO_8601, UUID } from '../support/expect.ts';
import { expectProblem, type TestResponse } from '../support/server.ts';

const NAMES = { firstName: 'Test', lastName: 'User' }; // as t.signupConfirmed names its users
const NEW_PASSWORD = 'brand-new-pass-7';
const DATA = '/gw/api/rest/City';

let counter = 0;
const newEmail = (tag: string) => `self-${tag}-${++counter}@example.com`;
const wrongCode = (code: string, n = 1) => String((Number(code) + n) % 1_000_000).padStart(6, '0');

let t: AuthTestServer; // relaxed limits
let short: AuthTestServer; // access tokens live 1 s
let limited: AuthTestServer; // the default account limits
let peer: AuthTestServer; // a second server process on t's database
beforeAll(async () => {
  t = await startAuthServer({ passwordCost: 4 });
  [short, limited, peer] = await Promise.all([
    startAuthServer({ passwordCost: 4, configPatch: (raw) => (raw.auth = { ...raw.auth, accessTokenTtl: 1 }) }),
    startAuthServer({
      passwordCost: 4,
      configPatch: (raw) => {
        delete raw.rateLimits.accountPerMinutePerUser;
        delete raw.rateLimits.accountChangesPerMinutePerUser;
      },
    }),
    startAuthServer({ passwordCost: 4, databaseUrl: t.database.url, mail: t.mail }),
  ]);
});
afterAll(async () => {
  vi.useRealTimers();
  await Promise.all([short?.close(), limited?.close(), peer?.close()]);
  await t?.close();
});

const me = (token: string, server = t) => server.auth('GET', '/auth/me', { token });
const login = (email: string, password = PASSWORD, server = t) =>
  server.auth('POST', '/auth/login', { body: { email, password } });
const refresh = (refreshToken: string, server = t) =>
  server.auth('POST', '/auth/refresh-token', { body: { refreshToken } });
const changePassword = (token: string, body: unknown, server = t) =>
  server.auth('POST', '/auth/change-password', { token, body });
const changeEmail = (token: string, body: unknown, server = t) =>
  server.auth('POST', '/auth/change-email', { token, body });
const confirmEmail = (token: string, code: unknown, server = t) =>
  server.auth('POST', '/auth/confirm-email-change', { token, body: { code } });
const listSessions = (token: string, server = t) => server.auth('GET', '/auth/sessions', { token });
const endSession = (token: string, id: string, server = t) => server.auth('DELETE', `/auth/sessions/${id}`, { token });
const endOthers = (token: string, server = t) => server.auth('DELETE', '/auth/sessions', { token });
const deleteAccount = (token: string, body: unknown, server = t) =>
  server.auth('POST', '/auth/delete-account', { token, body });

async function loggedIn(email: string, password = PASSWORD, server = t): Promise<Session> {
  const res = await login(email, password, server);
  expect(res.status, res.text).toBe(200);
  return res.body as Session;
}

/** The token works: GET /auth/me answers its user. */
async function expectLive(token: string, userId: string, server = t) {
  const res = await me(token, server);
  expect(res.status, res.text).toBe(200);
  expect(res.body.id).toBe(userId);
}
/** The token is refused on /auth and on the data API; its refresh token (if given) too. */
async function expectDead(session: { accessToken: string; refreshToken?: string }, server = t) {
  expectAuthError(await me(session.accessToken, server), 401, 'AUTH_TOKEN_INVALID');
  expectProblem(await server.asUser(session.accessToken, 'GET', DATA), 401, 'unauthorized');
  if (session.refreshToken) expectAuthError(await refresh(session.refreshToken, server), 401, 'AUTH_TOKEN_INVALID');
}

const userRow = async (id: string) =>
  (
    await t.db.query<{ email: string; password_hash: string; failed_logins: number; locked_until: Date | null }>(
      'select email, password_hash, failed_logins, locked_until from svcgen.users where id = $1',
      [id],
    )
  )[0];

describe('GET /auth/me', () => {
  it('→ 200 the user, exactly as login answers it', async () => {
    const email = newEmail('me');
    const session = await t.signupConfirmed(email);
    const res = await me(session.accessToken);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({ id: session.user.id, email, ...NAMES, roles: ['customer'] });
    expect(res.body).toEqual(session.user);
    expect(res.body).toEqual((await login(email)).body.user);
  });

  it('without a token, with a malformed or tampered one, an API key, or a logged-out token → 401 AUTH_TOKEN_INVALID', async () => {
    const session = await t.signupConfirmed(newEmail('me-bad'));
    expectAuthError(await t.auth('GET', '/auth/me'), 401, 'AUTH_TOKEN_INVALID');
    expectAuthError(await me('not-a-jwt'), 401, 'AUTH_TOKEN_INVALID');
    const [h, p, sig] = session.accessToken.split('.');
    expectAuthError(await me(`${h}.${p}.${sig!.slice(0, -4)}AAAA`), 401, 'AUTH_TOKEN_INVALID');
    expectAuthError(await me(t.adminKey), 401, 'AUTH_TOKEN_INVALID');
    expectAuthError(
      await t.auth('GET', '/auth/me', { headers: { authorization: `Basic ${session.accessToken}` } }),
      401,
      'AUTH_TOKEN_INVALID',
    );
    expect((await t.auth('POST', '/auth/logout', { token: session.accessToken })).status).toBe(200);
    expectAuthError(await me(session.accessToken), 401, 'AUTH_TOKEN_INVALID');
  });

  it('a token of another environment → 401 AUTH_TOKEN_INVALID; no X-Project-Id → 400 naming it', async () => {
    const session = await t.signupConfirmed(newEmail('me-env'));
    expectAuthError(
      await t.auth('GET', '/auth/me', { token: session.accessToken, environment: 'staging' }),
      401,
      'AUTH_TOKEN_INVALID',
    );
    expectViolations(await t.auth('GET', '/auth/me', { token: session.accessToken, project: false }), ['X-Project-Id']);
    expectAuthError(
      await t.auth('GET', '/auth/me', { token: session.accessToken, project: 'other' }),
      404,
      'AUTH_NOT_CONFIGURED',
    );
  });

  it('an expired access token → 401 AUTH_TOKEN_EXPIRED on every account route', async () => {
    const session = await short.signupConfirmed(newEmail('expired'));
    const exp = JSON.parse(Buffer.from(session.accessToken.split('.')[1]!, 'base64url').toString()).exp as number;
    while (Date.now() < exp * 1000) await new Promise((resolve) => setTimeout(resolve, 25));
    const token = session.accessToken;
    for (const res of [
      await me(token, short),
      await changePassword(token, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD }, short),
      await changeEmail(token, { newEmail: newEmail('expired-new'), currentPassword: PASSWORD }, short),
      await confirmEmail(token, '123456', short),
      await listSessions(token, short),
      await endOthers(token, short),
      await endSession(token, session.user.id, short),
      await deleteAccount(token, { currentPassword: PASSWORD }, short),
    ]) {
      expectAuthError(res, 401, 'AUTH_TOKEN_EXPIRED');
    }
    // Nothing changed: the password still logs in.
    expect((await login(session.user.email, PASSWORD, short)).status).toBe(200);
  });
});

describe('POST /auth/change-password', () => {
  it('→ 200; every other session ends (refresh and access tokens), this one stays; the old password stops; the owner is told', async () => {
    const email = newEmail('pw');
    const first = await t.signupConfirmed(email);
    const second = await loggedIn(email);
    const third = await loggedIn(email);
    const res = await changePassword(second.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ message: 'password changed; your other sessions have ended' });

    await expectDead(first);
    await expectDead(third);
    await expectLive(second.accessToken, second.user.id);
    const refreshed = await refresh(second.refreshToken);
    expect(refreshed.status, refreshed.text).toBe(200);
    await expectLive(refreshed.body.accessToken, second.user.id);

    expectAuthError(await login(email, PASSWORD), 401, 'AUTH_INVALID_CREDENTIALS');
    expect((await login(email, NEW_PASSWORD)).status).toBe(200);
    const notice = await t.mail.nextMail(email);
    expect(notice.subject).toBe('Your password was changed');
    expect(notice.code).toBeUndefined();
  });

  it('a wrong current password → 401 AUTH_INVALID_CREDENTIALS, counted by the login lockout; nothing changes', async () => {
    const email = newEmail('pw-wrong');
    const session = await t.signupConfirmed(email);
    const other = await loggedIn(email);
    const before = await userRow(session.user.id);
    const res = await changePassword(session.accessToken, { currentPassword: 'not-it-123', newPassword: NEW_PASSWORD });
    expectAuthError(res, 401, 'AUTH_INVALID_CREDENTIALS');
    const after = await userRow(session.user.id);
    expect(after).toEqual({ ...before, failed_logins: 1 });
    await expectLive(other.accessToken, session.user.id);
    // The right current password clears the count, as a login does.
    expect(
      (await changePassword(session.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD })).status,
    ).toBe(200);
    expect((await userRow(session.user.id))!.failed_logins).toBe(0);
  });

  it('a stolen access token gives no more guesses than the login form: the 5th wrong password locks (423), then even the right one gets 423', async () => {
    const email = newEmail('pw-lock');
    const session = await t.signupConfirmed(email);
    for (let i = 1; i < 5; i++) {
      expectAuthError(
        await changePassword(session.accessToken, { currentPassword: `guess-${i}-x`, newPassword: NEW_PASSWORD }),
        401,
        'AUTH_INVALID_CREDENTIALS',
      );
    }
    const locked = await changePassword(session.accessToken, {
      currentPassword: 'guess-5-x',
      newPassword: NEW_PASSWORD,
    });
    expect(locked.status, locked.text).toBe(423);
    expect(locked.body).toEqual({ error: 'AUTH_ACCOUNT_LOCKED', lockedUntil: expect.stringMatching(ISO_8601) });
    expectAuthError(
      await changePassword(session.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD }),
      423,
      'AUTH_ACCOUNT_LOCKED',
      {
        lockedUntil: locked.body.lockedUntil,
      },
    );
    expectAuthError(
      await deleteAccount(session.accessToken, { currentPassword: PASSWORD }),
      423,
      'AUTH_ACCOUNT_LOCKED',
      { lockedUntil: locked.body.lockedUntil },
    );
    expectAuthError(await login(email), 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil: locked.body.lockedUntil });
    expect((await t.mail.nextMail(email)).subject).toBe('Your account is locked');
    // Reading is not locked: the session itself is fine.
    await expectLive(session.accessToken, session.user.id);
  });

  it('malformed bodies → 400 VALIDATION_ERROR naming the fields; nothing changes', async () => {
    const email = newEmail('pw-body');
    const session = await t.signupConfirmed(email);
    const token = session.accessToken;
    expectViolations(await changePassword(token, {}), ['currentPassword', 'newPassword']);
    expectViolations(await changePassword(token, { currentPassword: 42, newPassword: NEW_PASSWORD }), [
      'currentPassword',
    ]);
    const weak = await changePassword(token, { currentPassword: PASSWORD, newPassword: 'short' });
    expectViolations(weak, ['newPassword']);
    expect(weak.body.violations.map((v: { rule: string }) => v.rule).sort()).toEqual(['digit', 'min_length']);
    const truncated = await t.request('POST', '/auth/change-password', {
      key: false,
      raw: '{"currentPassword":',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    });
    expectViolations(truncated, ['body']);
    expectViolations(
      await t.auth('POST', '/auth/change-password', { token, headers: { 'content-type': 'text/plain' } }),
      ['Content-Type'],
    );
    // The same password again, after the current one is proved.
    expectAuthError(
      await changePassword(token, { currentPassword: PASSWORD, newPassword: PASSWORD }),
      400,
      'VALIDATION_ERROR',
      {
        violations: [
          { field: 'newPassword', rule: 'same_password', message: 'newPassword must differ from currentPassword' },
        ],
      },
    );
    expect((await login(email)).status).toBe(200);
  });

  it('the token is checked before the body: no token → 401 AUTH_TOKEN_INVALID, whatever the body', async () => {
    expectAuthError(
      await t.auth('POST', '/auth/change-password', { body: { currentPassword: PASSWORD, newPassword: NEW_PASSWORD } }),
      401,
      'AUTH_TOKEN_INVALID',
    );
    expectAuthError(await t.auth('POST', '/auth/change-password', { body: 'nonsense' }), 401, 'AUTH_TOKEN_INVALID');
  });

  it('another server process refuses the ended sessions on its next request', async () => {
    const email = newEmail('pw-peer');
    const kept = await t.signupConfirmed(email);
    const ended = await loggedIn(email);
    await expectLive(ended.accessToken, ended.user.id, peer); // the peer has seen (and cached) it
    expect(
      (await changePassword(kept.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD })).status,
    ).toBe(200);
    await expectDead(ended, peer);
    await expectLive(kept.accessToken, kept.user.id, peer);
  });

  it("logins racing with a change: every session they got, other than the changer's, is ended afterwards", async () => {
    const email = newEmail('pw-race');
    const changer = await t.signupConfirmed(email);
    const [change, ...logins] = await Promise.all([
      changePassword(changer.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD }),
      // Four: a fifth failed login would lock the account.
      ...Array.from({ length: 4 }, () => login(email)),
    ]);
    expect(change!.status, change!.text).toBe(200);
    for (const res of logins) {
      if (res.status === 200) await expectDead(res.body as Session);
      else expectAuthError(res, 401, 'AUTH_INVALID_CREDENTIALS');
    }
    const live = await t.db.query('select id from svcgen.sessions where user_id = $1 and revoked_at is null', [
      changer.user.id,
    ]);
    expect(live.map((r) => r.id)).toEqual([
      JSON.parse(Buffer.from(changer.accessToken.split('.')[1]!, 'base64url').toString()).sid,
    ]);
  });
});

describe('POST /auth/change-email and /auth/confirm-email-change', () => {
  /** Asks for `address` (sent as `typed`, e.g. in other letter case) and reads the code from the mail to it. */
  async function requestChange(session: Session, address: string, typed = address): Promise<string> {
    const res = await changeEmail(session.accessToken, { newEmail: typed, currentPassword: PASSWORD });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      message: `check ${address} for the 6-digit code and confirm it with POST /auth/confirm-email-change`,
    });
    const mail = await t.mail.nextMail(address);
    expect(mail.subject).toBe('Confirm your new e-mail address');
    expect(mail.code).toMatch(/^\d{6}$/);
    return mail.code!;
  }

  it('code to the new address → confirm → 200 a new session with the new address; every old session ends; the old address is told', async () => {
    const oldEmail = newEmail('mail-old');
    const session = await t.signupConfirmed(oldEmail);
    const other = await loggedIn(oldEmail);
    const address = newEmail('mail-new');
    const code = await requestChange(session, address, `  ${address.toUpperCase()} `);
    // Until confirmed, nothing changed.
    expect((await me(session.accessToken)).body.email).toBe(oldEmail);
    expect((await login(oldEmail)).status).toBe(200);

    const res = await confirmEmail(session.accessToken, code);
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['accessToken', 'refreshToken', 'user']);
    expect(res.body.user).toEqual({ ...session.user, email: address });
    const claims = JSON.parse(Buffer.from(res.body.accessToken.split('.')[1]!, 'base64url').toString());
    expect(claims.email).toBe(address);

    await expectDead(session); // the confirming session too: its tokens carry the old address
    await expectDead(other);
    await expectLive(res.body.accessToken, session.user.id);
    expect((await me(res.body.accessToken)).body.email).toBe(address);
    expect((await refresh(res.body.refreshToken)).status).toBe(200);
    expectAuthError(await login(oldEmail), 401, 'AUTH_INVALID_CREDENTIALS');
    expect((await login(address)).body.user).toEqual({ ...session.user, email: address });

    const notice = await t.mail.nextMail(oldEmail);
    expect(notice.subject).toBe('Your e-mail address was changed');
    expect(notice.raw).toContain(address);
    expect(notice.code).toBeUndefined();
    // The code is spent.
    expectAuthError(await confirmEmail(res.body.accessToken, code), 400, 'AUTH_INVALID_CODE');
  });

  it('a wrong current password → 401 AUTH_INVALID_CREDENTIALS and no mail; a stolen token alone cannot ask', async () => {
    const session = await t.signupConfirmed(newEmail('mail-wrong'));
    const address = newEmail('mail-wrong-new');
    expectAuthError(
      await changeEmail(session.accessToken, { newEmail: address, currentPassword: 'not-it-123' }),
      401,
      'AUTH_INVALID_CREDENTIALS',
    );
    expectViolations(await changeEmail(session.accessToken, { newEmail: address }), ['currentPassword']);
    expect(t.mail.received.some((m) => m.to === address)).toBe(false);
    expect((await userRow(session.user.id))!.failed_logins).toBe(1);
  });

  it('an address another account has → 409 AUTH_EMAIL_EXISTS (any letter case); the own address or a bad one → 400', async () => {
    const session = await t.signupConfirmed(newEmail('mail-taken'));
    const otherEmail = newEmail('mail-taken-other');
    await t.signupConfirmed(otherEmail);
    expectAuthError(
      await changeEmail(session.accessToken, { newEmail: otherEmail.toUpperCase(), currentPassword: PASSWORD }),
      409,
      'AUTH_EMAIL_EXISTS',
    );
    expectAuthError(
      await changeEmail(session.accessToken, { newEmail: session.user.email.toUpperCase(), currentPassword: PASSWORD }),
      400,
      'VALIDATION_ERROR',
      {
        violations: [
          { field: 'newEmail', rule: 'same_email', message: 'newEmail is already the address of this account' },
        ],
      },
    );
    expectViolations(
      await changeEmail(session.accessToken, { newEmail: 'not-an-address', currentPassword: PASSWORD }),
      ['newEmail'],
    );
    expectViolations(
      await changeEmail(session.accessToken, { newEmail: `${'a'.repeat(250)}@example.com`, currentPassword: PASSWORD }),
      ['newEmail'],
    );
  });

  it('the address taken between request and confirmation → 409 AUTH_EMAIL_EXISTS at confirm; nothing changes, no session ends', async () => {
    const email = newEmail('mail-race');
    const session = await t.signupConfirmed(email);
    const address = newEmail('mail-race-new');
    const code = await requestChange(session, address);
    await t.signupConfirmed(address); // someone else registers it meanwhile
    expectAuthError(await confirmEmail(session.accessToken, code), 409, 'AUTH_EMAIL_EXISTS');
    expect((await userRow(session.user.id))!.email).toBe(email);
    await expectLive(session.accessToken, session.user.id);
    expect(t.mail.received.some((m) => m.to === email && m.subject === 'Your e-mail address was changed')).toBe(false);
  });

  it('wrong codes → 400 AUTH_INVALID_CODE; the 5th wrong one kills the code (then the right one fails too); a new request brings a new code', async () => {
    const session = await t.signupConfirmed(newEmail('mail-code'));
    const address = newEmail('mail-code-new');
    const code = await requestChange(session, address);
    for (let i = 1; i <= 5; i++)
      expectAuthError(await confirmEmail(session.accessToken, wrongCode(code, i)), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await confirmEmail(session.accessToken, code), 400, 'AUTH_INVALID_CODE');
    const next = await requestChange(session, address);
    const res = await confirmEmail(session.accessToken, next);
    expect(res.status, res.text).toBe(200);
    expect(res.body.user.email).toBe(address);
  });

  it("no pending change, another purpose's code, or another user's code → 400 AUTH_INVALID_CODE; bad bodies → 400 naming code", async () => {
    const a = await t.signupConfirmed(newEmail('mail-a'));
    const b = await t.signupConfirmed(newEmail('mail-b'));
    expectAuthError(await confirmEmail(a.accessToken, '123456'), 400, 'AUTH_INVALID_CODE');
    // A reset code of a's is not a change-email code.
    expect((await t.auth('POST', '/auth/recover-password', { body: { email: a.user.email } })).status).toBe(200);
    const reset = await t.mail.nextMail(a.user.email);
    expectAuthError(await confirmEmail(a.accessToken, reset.code), 400, 'AUTH_INVALID_CODE');
    // a's change-email code does nothing for b, and stays good for a.
    const address = newEmail('mail-a-new');
    const code = await requestChange(a, address);
    expectAuthError(await confirmEmail(b.accessToken, code), 400, 'AUTH_INVALID_CODE');
    expect((await userRow(b.user.id))!.email).toBe(b.user.email);
    expectViolations(await confirmEmail(a.accessToken, 123456), ['code']);
    expectViolations(await t.auth('POST', '/auth/confirm-email-change', { token: a.accessToken, body: {} }), ['code']);
    expect((await confirmEmail(a.accessToken, code)).body.user.email).toBe(address);
  });

  it('a code asked for by a session that then ended cannot be confirmed with that session', async () => {
    const email = newEmail('mail-ended');
    const thief = await t.signupConfirmed(email);
    const owner = await loggedIn(email);
    const address = newEmail('mail-ended-new');
    const code = await requestChange(thief, address);
    expect(
      (await changePassword(owner.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD })).status,
    ).toBe(200);
    expectAuthError(await confirmEmail(thief.accessToken, code), 401, 'AUTH_TOKEN_INVALID');
    expect((await userRow(owner.user.id))!.email).toBe(email);
  });
});

describe('GET /auth/sessions, DELETE /auth/sessions/{id}, DELETE /auth/sessions', () => {
  const sid = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).sid as string;

  it("lists the live sessions, most recently used first, `current` on the caller's, no token values", async () => {
    const email = newEmail('list');
    const first = await t.signupConfirmed(email);
    const second = await loggedIn(email);
    const third = await loggedIn(email);
    const ended = await loggedIn(email);
    expect((await t.auth('POST', '/auth/logout', { token: ended.accessToken })).status).toBe(200);
    // Refreshing the first makes it the most recently used.
    const refreshed = await refresh(first.refreshToken);
    expect(refreshed.status).toBe(200);
    const res = await listSessions(second.accessToken);
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.body)).toEqual(['sessions']);
    expect(res.body.sessions.map((s: { id: string }) => s.id)).toEqual([
      sid(first.accessToken),
      sid(third.accessToken),
      sid(second.accessToken),
    ]);
    for (const s of res.body.sessions) {
      expect(s).toEqual({
        id: expect.stringMatching(UUID),
        createdAt: expect.stringMatching(ISO_8601),
        lastUsedAt: expect.stringMatching(ISO_8601),
        expiresAt: expect.stringMatching(ISO_8601),
        current: s.id === sid(second.accessToken),
      });
      expect(Date.parse(s.expiresAt) - Date.parse(s.lastUsedAt)).toBeCloseTo(t.config.auth.refreshTokenTtl * 1000, -3);
    }
    const [refreshedOne] = res.body.sessions;
    expect(Date.parse(refreshedOne.lastUsedAt)).toBeGreaterThan(Date.parse(refreshedOne.createdAt));
    for (const token of [first.refreshToken, refreshed.body.refreshToken, first.accessToken])
      expect(res.text).not.toContain(token);
  });

  it('ends one of the own sessions by id → 200; its tokens stop; again → 404 AUTH_SESSION_NOT_FOUND', async () => {
    const email = newEmail('end');
    const keep = await t.signupConfirmed(email);
    const drop = await loggedIn(email);
    const res = await endSession(keep.accessToken, sid(drop.accessToken));
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ message: 'session ended' });
    await expectDead(drop);
    await expectDead(drop, peer);
    await expectLive(keep.accessToken, keep.user.id);
    expect((await listSessions(keep.accessToken)).body.sessions.map((s: { id: string }) => s.id)).toEqual([
      sid(keep.accessToken),
    ]);
    expectAuthError(await endSession(keep.accessToken, sid(drop.accessToken)), 404, 'AUTH_SESSION_NOT_FOUND');
  });

  it("another user's session id, an unknown one or a malformed one → 404 AUTH_SESSION_NOT_FOUND; the other user's session lives on", async () => {
    const mallory = await t.signupConfirmed(newEmail('mallory'));
    const alice = await t.signupConfirmed(newEmail('alice'));
    for (const id of [
      sid(alice.accessToken),
      '00000000-0000-4000-8000-000000000000',
      'not-a-uuid',
      "1'%20OR%20'1'='1",
      '%E2%9C%93',
    ]) {
      expectAuthError(await endSession(mallory.accessToken, id), 404, 'AUTH_SESSION_NOT_FOUND');
    }
    await expectLive(alice.accessToken, alice.user.id);
    expect((await refresh(alice.refreshToken)).status).toBe(200);
    // Nor does Mallory's list show Alice's session.
    expect((await listSessions(mallory.accessToken)).body.sessions.map((s: { id: string }) => s.id)).toEqual([
      sid(mallory.accessToken),
    ]);
  });

  it('ending the current session is a logout: 200, then its tokens stop', async () => {
    const session = await t.signupConfirmed(newEmail('end-current'));
    const res = await endSession(session.accessToken, sid(session.accessToken).toUpperCase());
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ message: 'session ended; this was the current session: you are logged out' });
    await expectDead(session);
    expect(
      await t.db.query('select 1 from svcgen.revoked_tokens where jti = $1', [
        JSON.parse(Buffer.from(session.accessToken.split('.')[1]!, 'base64url').toString()).jti,
      ]),
    ).toHaveLength(1);
  });

  it('DELETE /auth/sessions ends every other session → 200 with the count; the current one stays; with none left → 0', async () => {
    const email = newEmail('end-others');
    const keep = await t.signupConfirmed(email);
    const others = [await loggedIn(email), await loggedIn(email)];
    const stranger = await t.signupConfirmed(newEmail('end-others-stranger'));
    const res = await endOthers(keep.accessToken);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ message: 'every other session ended', ended: 2 });
    for (const s of others) await expectDead(s);
    await expectLive(keep.accessToken, keep.user.id);
    await expectLive(stranger.accessToken, stranger.user.id);
    expect((await endOthers(keep.accessToken)).body).toEqual({ message: 'every other session ended', ended: 0 });
  });
});

describe('POST /auth/delete-account', () => {
  it("→ 200; the user, its sessions and tokens are gone on every process; rows of the project's tables stay; the address is free again", async () => {
    const email = newEmail('delete');
    const session = await t.signupConfirmed(email);
    const other = await loggedIn(email);
    await expectLive(other.accessToken, other.user.id, peer);
    // A Customer row with the user's id, and an Order whose customerId the customer role fills from $user.id.
    const customer = await t.request('POST', '/gw/api/rest/Customer', {
      body: { id: session.user.id, email, name: 'To Delete' },
    });
    expect(customer.status, customer.text).toBe(201);
    const order = await t.asUser(session.accessToken, 'POST', '/gw/api/rest/Order', { body: { total: 12.5 } });
    expect(order.status, order.text).toBe(201);
    expect(order.body.data.customerId).toBe(session.user.id);

    const res = await deleteAccount(session.accessToken, { currentPassword: PASSWORD });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ message: 'account deleted' });
    await expectDead(session);
    await expectDead(other);
    await expectDead(other, peer);
    expectAuthError(await login(email), 401, 'AUTH_INVALID_CREDENTIALS');
    expect(await t.db.query('select 1 from svcgen.users where id = $1', [session.user.id])).toEqual([]);
    expect(await t.db.query('select 1 from svcgen.sessions where user_id = $1', [session.user.id])).toEqual([]);
    expect((await t.mail.nextMail(email)).subject).toBe('Your account was deleted');

    const kept = await t.request('GET', `/gw/api/rest/Order/${order.body.data.id}`);
    expect(kept.status, kept.text).toBe(200);
    expect(kept.body.data.customerId).toBe(session.user.id);
    expect((await t.request('GET', `/gw/api/rest/Customer/${session.user.id}`)).status).toBe(200);

    const again = await t.signupConfirmed(email);
    expect(again.user.id).not.toBe(session.user.id);
  });

  it('a wrong current password → 401 AUTH_INVALID_CREDENTIALS; no password → 400; nothing is deleted', async () => {
    const session = await t.signupConfirmed(newEmail('delete-wrong'));
    expectAuthError(
      await deleteAccount(session.accessToken, { currentPassword: 'not-it-123' }),
      401,
      'AUTH_INVALID_CREDENTIALS',
    );
    expectViolations(await deleteAccount(session.accessToken, {}), ['currentPassword']);
    expectViolations(await deleteAccount(session.accessToken, { currentPassword: ['x'] }), ['currentPassword']);
    expectAuthError(await deleteAccount('not-a-token', { currentPassword: PASSWORD }), 401, 'AUTH_TOKEN_INVALID');
    await expectLive(session.accessToken, session.user.id);
    expect((await userRow(session.user.id))!.failed_logins).toBe(1);
  });
});

describe('rate limits (defaults: 60 reads and session ends, 5 changes a minute per user)', () => {
  const freshWindow = freshWindows();
  afterEach(() => void vi.useRealTimers());

  function expectRateLimited(res: TestResponse): void {
    expectAuthError(res, 429, 'RATE_LIMIT_EXCEEDED');
    expect(res.headers.get('retry-after')).toBe('30');
  }

  it('the 61st read in a minute → 429 with Retry-After; another user is not affected', async () => {
    const session = await limited.signupConfirmed(newEmail('limit-read'));
    const other = await limited.signupConfirmed(newEmail('limit-read-other'));
    freshWindow();
    for (let i = 0; i < 60; i++) expect((await me(session.accessToken, limited)).status).toBe(200);
    expectRateLimited(await listSessions(session.accessToken, limited));
    expectRateLimited(await endOthers(session.accessToken, limited));
    expect((await me(other.accessToken, limited)).status).toBe(200);
  });

  it('the 6th change in a minute → 429 even with the right password, and changes nothing', async () => {
    const email = newEmail('limit-change');
    const session = await limited.signupConfirmed(email);
    freshWindow();
    const wrong = (i: number) =>
      changePassword(session.accessToken, { currentPassword: `wrong-${i}-x`, newPassword: NEW_PASSWORD }, limited);
    for (let i = 1; i <= 4; i++) expectAuthError(await wrong(i), 401, 'AUTH_INVALID_CREDENTIALS');
    expectAuthError(await wrong(5), 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil: expect.stringMatching(ISO_8601) });
    expectRateLimited(
      await changePassword(session.accessToken, { currentPassword: PASSWORD, newPassword: NEW_PASSWORD }, limited),
    );
    expectRateLimited(await deleteAccount(session.accessToken, { currentPassword: PASSWORD }, limited));
    expect((await limited.db.query('select 1 from svcgen.users where id = $1', [session.user.id])).length).toBe(1);
  });
});
