// Accounts and codes over real HTTP, with the mail read from a loopback SMTP server: every
// account and code state of docs/api.md §3, the account error codes with their exact bodies
// (docs/api.md §6.3), password recovery, and the timing of logins with unknown e-mails. Rate
// limits, AUTH_NOT_CONFIGURED and VALIDATION_ERROR: test/auth/limits.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectAuthError, expectViolations, PASSWORD, startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { ISO_8601, UUID } from '../support/expect.ts';
import type { TestResponse } from '../support/server.ts';

let t: AuthTestServer;
beforeAll(async () => {
  t = await startAuthServer();
});
afterAll(() => t?.close());

let counter = 0;
const newEmail = (tag: string) => `${tag}-${++counter}@example.com`;
const NAMES = { firstName: 'Test', lastName: 'User' }; // as t.signupConfirmed names its users
const NEW_PASSWORD = 'brand-new-pass-7';

/** A code other than `code` (the n-th one after it). */
const wrongCode = (code: string, n = 1) => String((Number(code) + n) % 1_000_000).padStart(6, '0');

async function signup(email: string, extra: Record<string, unknown> = {}, server = t): Promise<TestResponse> {
  const res = await server.auth('POST', '/auth/signup', { body: { email, password: PASSWORD, ...NAMES, ...extra } });
  expect(res.status, res.text).toBe(201);
  return res;
}
const login = (email: string, password: string, server = t) =>
  server.auth('POST', '/auth/login', { body: { email, password } });
const confirm = (email: string, code: string) => t.auth('POST', '/auth/confirm-signup', { body: { email, code } });
const recover = (email: string, server = t) => server.auth('POST', '/auth/recover-password', { body: { email } });
const reset = (email: string, code: string, newPassword = NEW_PASSWORD) =>
  t.auth('POST', '/auth/reset-password', { body: { email, code, newPassword } });

async function userRow(email: string) {
  const rows = await t.db.query<{
    id: string;
    verified_at: Date | null;
    locked_until: Date | null;
    failed_logins: number;
  }>('select id, verified_at, locked_until, failed_logins from svcgen.users where email = $1', [email]);
  return rows[0];
}

/** A verified account and a mailed reset code for it. */
async function resetCodeFor(email: string): Promise<string> {
  const res = await recover(email);
  expect(res.status, res.text).toBe(200);
  const { code } = await t.mail.nextMail(email);
  expect(code).toMatch(/^\d{6}$/);
  return code!;
}

function expectTokenPair(res: TestResponse, user: { id: string; email: string }) {
  expect(res.status, res.text).toBe(200);
  expect(Object.keys(res.body).sort()).toEqual(['accessToken', 'refreshToken', 'user']);
  expect(res.body.accessToken).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
  expect(res.body.refreshToken).toMatch(/^[A-Za-z0-9+/_-]+={0,2}$/);
  expect(res.body.user).toEqual({ id: user.id, email: user.email, ...NAMES, roles: ['customer'] });
}

const rules = (res: TestResponse, field: string) =>
  res.body.violations
    .filter((v: { field: string }) => v.field === field)
    .map((v: { rule: string }) => v.rule)
    .sort();

describe('signup and confirmation (States and transitions)', () => {
  it('signup → 201 {userId, message}; a 6-digit code by mail; the account is unverified: login → 403 AUTH_EMAIL_NOT_VERIFIED', async () => {
    const email = newEmail('signup');
    const res = await signup(email);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.body).sort()).toEqual(['message', 'userId']);
    expect(res.body).toEqual({ userId: expect.stringMatching(UUID), message: expect.any(String) });
    const mail = await t.mail.nextMail(email);
    expect(mail.code).toMatch(/^\d{6}$/);
    const row = await userRow(email);
    expect(row).toMatchObject({ id: res.body.userId, verified_at: null, locked_until: null });
    expectAuthError(await login(email, PASSWORD), 403, 'AUTH_EMAIL_NOT_VERIFIED');
    // only the right password tells that the account exists
    expectAuthError(await login(email, 'wrong-password-1'), 401, 'AUTH_INVALID_CREDENTIALS');
  });

  it('confirm-signup with the mailed code → 200 token pair and user (roles = defaultRole); then login works', async () => {
    const email = newEmail('confirm');
    const { body } = await signup(email);
    const { code } = await t.mail.nextMail(email);
    const confirmed = await confirm(email, code!);
    expectTokenPair(confirmed, { id: body.userId, email });
    expect((await userRow(email))!.verified_at).toBeInstanceOf(Date);
    expectTokenPair(await login(email, PASSWORD), { id: body.userId, email });
    expectTokenPair(await login(email.toUpperCase(), PASSWORD), { id: body.userId, email });
    // the code is spent, and the account is verified already
    expectAuthError(await confirm(email, code!), 400, 'AUTH_INVALID_CODE');
  });

  it('signup stores the e-mail lower-cased; roleId "customer" (signup: true) is accepted', async () => {
    const email = newEmail('Mixed.Case').replace('example.com', 'Example.COM');
    const { body } = await signup(email, { roleId: 'customer' });
    const lower = email.toLowerCase();
    const { code } = await t.mail.nextMail(lower);
    expectTokenPair(await confirm(email, code!), { id: body.userId, email: lower });
  });

  it('signup trims the e-mail: surrounding spaces → 201, stored without them, login and confirm work', async () => {
    const email = newEmail('spaces');
    const res = await t.auth('POST', '/auth/signup', { body: { email: `  ${email} `, password: PASSWORD, ...NAMES } });
    expect(res.status, res.text).toBe(201);
    expect((await userRow(email))?.id).toBe(res.body.userId);
    const { code } = await t.mail.nextMail(email);
    expectTokenPair(await confirm(` ${email} `, code!), { id: res.body.userId, email });
  });

  it('a wrong code → 400 AUTH_INVALID_CODE and the account stays unverified', async () => {
    const email = newEmail('wrong-code');
    await signup(email);
    const { code } = await t.mail.nextMail(email);
    expectAuthError(await confirm(email, wrongCode(code!)), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await confirm(email, 'abcdef'), 400, 'AUTH_INVALID_CODE');
    expect((await userRow(email))!.verified_at).toBeNull();
    expectAuthError(await login(email, PASSWORD), 403, 'AUTH_EMAIL_NOT_VERIFIED');
  });

  it('5 wrong codes → the code is dead: the right one fails too', async () => {
    const email = newEmail('dead-code');
    await signup(email);
    const { code } = await t.mail.nextMail(email);
    for (let i = 1; i <= 5; i++) expectAuthError(await confirm(email, wrongCode(code!, i)), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await confirm(email, code!), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await login(email, PASSWORD), 403, 'AUTH_EMAIL_NOT_VERIFIED');
  });

  it('4 wrong codes, then the right one → 200', async () => {
    const email = newEmail('four-wrong');
    const { body } = await signup(email);
    const { code } = await t.mail.nextMail(email);
    for (let i = 1; i <= 4; i++) expectAuthError(await confirm(email, wrongCode(code!, i)), 400, 'AUTH_INVALID_CODE');
    expectTokenPair(await confirm(email, code!), { id: body.userId, email });
  });

  it('an expired code (expires_at in the past) → AUTH_INVALID_CODE', async () => {
    const email = newEmail('expired');
    const { body } = await signup(email);
    const { code } = await t.mail.nextMail(email);
    await t.db.query(`update svcgen.auth_codes set expires_at = now() - interval '1 second' where user_id = $1`, [
      body.userId,
    ]);
    expectAuthError(await confirm(email, code!), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await login(email, PASSWORD), 403, 'AUTH_EMAIL_NOT_VERIFIED');
  });

  it('confirm-signup for an unknown e-mail → AUTH_INVALID_CODE', async () => {
    expectAuthError(await confirm(newEmail('nobody'), '123456'), 400, 'AUTH_INVALID_CODE');
  });
});

describe('e-mail verification disabled (auth.emailVerification false)', () => {
  let nv: AuthTestServer;
  beforeAll(async () => {
    nv = await startAuthServer({ configPatch: (raw) => void (raw.auth.emailVerification = false) });
  });
  afterAll(() => nv?.close());

  it('signup → 201, login works at once, and no mail is sent', async () => {
    const email = newEmail('no-verify');
    const res = await signup(email, {}, nv);
    expect(Object.keys(res.body).sort()).toEqual(['message', 'userId']);
    expect(res.body.userId).toMatch(UUID);
    const logged = await login(email, PASSWORD, nv);
    expect(logged.status, logged.text).toBe(200);
    expect(logged.body.user).toEqual({ id: res.body.userId, email, ...NAMES, roles: ['customer'] });
    expect(await nv.db.query('select 1 from svcgen.auth_codes where user_id = $1', [res.body.userId])).toHaveLength(0);
    // A later mail to the same address (a reset code, as its use proves) is the first it gets.
    expect((await recover(email, nv)).status).toBe(200);
    const mail = await nv.mail.nextMail(email);
    const replaced = await nv.auth('POST', '/auth/reset-password', {
      body: { email, code: mail.code, newPassword: NEW_PASSWORD },
    });
    expect(replaced.status, replaced.text).toBe(200);
    expect(nv.mail.received.filter((m) => m.to === email)).toEqual([mail]);
  });
});

describe('lockout (docs/api.md §3 "Log in")', () => {
  /** 4 failed logins → 401, the 5th → 423: its body. */
  async function lock(email: string) {
    for (let i = 0; i < 4; i++)
      expectAuthError(await login(email, `wrong-password-${i}`), 401, 'AUTH_INVALID_CREDENTIALS');
    const res = await login(email, 'wrong-password-4');
    expect(res.status, res.text).toBe(423);
    expect(Object.keys(res.body).sort()).toEqual(['error', 'lockedUntil']);
    expectAuthError(res, 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil: expect.stringMatching(ISO_8601) });
    return res.body as { error: string; lockedUntil: string };
  }

  it('the 5th failed login → 423 {error, lockedUntil} with lockedUntil ≈ now + 900 s', async () => {
    const email = newEmail('lock');
    await t.signupConfirmed(email);
    const { lockedUntil } = await lock(email);
    expect(Math.abs(Date.parse(lockedUntil) - (Date.now() + 900_000))).toBeLessThan(10_000);
    expect((await userRow(email))!.locked_until!.toISOString()).toBe(new Date(lockedUntil).toISOString());
  });

  it('while locked, the right password → 423 with the same lockedUntil (and a wrong one too)', async () => {
    const email = newEmail('locked');
    await t.signupConfirmed(email);
    const { lockedUntil } = await lock(email);
    expectAuthError(await login(email, PASSWORD), 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil });
    expectAuthError(await login(email, 'wrong-password-9'), 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil });
  });

  it('reset-password with a valid code unlocks: the new password logs in, the old one → 401; old sessions end', async () => {
    const email = newEmail('unlock');
    const session = await t.signupConfirmed(email);
    await lock(email);
    // the lock is announced by mail before the reset code comes (test/auth/abuse.test.ts)
    expect((await t.mail.nextMail(email)).subject).toBe('Your account is locked');
    const code = await resetCodeFor(email);
    const res = await reset(email, code);
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.body)).toEqual(['message']);
    expect(res.body.message).toEqual(expect.any(String));
    expect(await userRow(email)).toMatchObject({ locked_until: null, failed_logins: 0 });
    expectTokenPair(await login(email, NEW_PASSWORD), { id: session.user.id, email });
    expectAuthError(await login(email, PASSWORD), 401, 'AUTH_INVALID_CREDENTIALS');
    const refreshed = await t.auth('POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } });
    expectAuthError(refreshed, 401, 'AUTH_TOKEN_INVALID');
    // the code is spent
    expectAuthError(await reset(email, code, 'another-pass-8'), 400, 'AUTH_INVALID_CODE');
  });

  it('the lock runs out (locked_until in the past) → the right password logs in; the count starts again', async () => {
    const email = newEmail('expiry');
    const session = await t.signupConfirmed(email);
    await lock(email);
    await t.db.query(`update svcgen.users set locked_until = now() - interval '1 second' where email = $1`, [email]);
    expectTokenPair(await login(email, PASSWORD), { id: session.user.id, email });
    await lock(email);
    await t.db.query(`update svcgen.users set locked_until = now() - interval '1 second' where email = $1`, [email]);
    // a lapsed lock does not count its old failures: the next failure is the first of a new count
    expectAuthError(await login(email, 'wrong-password-x'), 401, 'AUTH_INVALID_CREDENTIALS');
  });

  it('a successful login clears the failed count (4 failures, success, 4 failures → no lock)', async () => {
    const email = newEmail('clear');
    await t.signupConfirmed(email);
    for (let i = 0; i < 4; i++) expectAuthError(await login(email, `wrong-${i}-pass`), 401, 'AUTH_INVALID_CREDENTIALS');
    expect((await login(email, PASSWORD)).status).toBe(200);
    for (let i = 0; i < 4; i++) expectAuthError(await login(email, `wrong-${i}-pass`), 401, 'AUTH_INVALID_CREDENTIALS');
    expect((await login(email, PASSWORD)).status).toBe(200);
  });

  it('reset-password verifies an account that never confirmed its signup', async () => {
    const email = newEmail('reset-verifies');
    const { body } = await signup(email);
    await t.mail.nextMail(email); // the signup code, left unused
    const res = await reset(email, await resetCodeFor(email));
    expect(res.status, res.text).toBe(200);
    expectTokenPair(await login(email, NEW_PASSWORD), { id: body.userId, email });
  });
});

describe('password recovery', () => {
  it('an unknown e-mail → 200 with the same body as a known one, and no mail', async () => {
    const known = newEmail('known');
    await t.signupConfirmed(known);
    const unknown = newEmail('unknown');
    const a = await recover(unknown);
    const b = await recover(known);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.headers.get('content-type')).toBe(b.headers.get('content-type'));
    expect(Object.keys(a.body)).toEqual(['message']);
    expect(Object.keys(b.body)).toEqual(['message']);
    expect(a.body.message.replaceAll(unknown, '<email>')).toBe(b.body.message.replaceAll(known, '<email>'));
    // the known address's mail arrives; by then the unknown one (asked first) got none
    expect((await t.mail.nextMail(known)).code).toMatch(/^\d{6}$/);
    expect(t.mail.received.filter((m) => m.to === unknown)).toEqual([]);
    expect(await userRow(unknown)).toBeUndefined();
  });

  it('a known e-mail gets a code by mail; reset-password with it → 200 and the new password works', async () => {
    const email = newEmail('recover');
    const session = await t.signupConfirmed(email);
    const res = await reset(email, await resetCodeFor(email));
    expect(res.status, res.text).toBe(200);
    expectTokenPair(await login(email, NEW_PASSWORD), { id: session.user.id, email });
  });

  it('a second recover-password replaces the code: the first fails, the second works', async () => {
    const email = newEmail('replace');
    await t.signupConfirmed(email);
    const first = await resetCodeFor(email);
    const second = await resetCodeFor(email);
    expectAuthError(await reset(email, first), 400, 'AUTH_INVALID_CODE');
    expect((await reset(email, second)).status).toBe(200);
    expect((await login(email, NEW_PASSWORD)).status).toBe(200);
  });

  it('reset codes: 5 wrong tries kill the code; an expired one fails; a signup code is no reset code', async () => {
    const email = newEmail('reset-codes');
    await signup(email);
    const signupCode = (await t.mail.nextMail(email)).code!;
    expectAuthError(await reset(email, signupCode), 400, 'AUTH_INVALID_CODE');
    let code = await resetCodeFor(email);
    for (let i = 1; i <= 5; i++) expectAuthError(await reset(email, wrongCode(code, i)), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await reset(email, code), 400, 'AUTH_INVALID_CODE');
    code = await resetCodeFor(email);
    await t.db.query(
      `update svcgen.auth_codes set expires_at = now() - interval '1 second'
       where purpose = 'reset-password' and user_id = (select id from svcgen.users where email = $1)`,
      [email],
    );
    expectAuthError(await reset(email, code), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await login(email, NEW_PASSWORD), 401, 'AUTH_INVALID_CREDENTIALS');
  });

  it('reset-password: unknown e-mail or no code issued → AUTH_INVALID_CODE', async () => {
    expectAuthError(await reset(newEmail('ghost'), '123456'), 400, 'AUTH_INVALID_CODE');
    const email = newEmail('no-code');
    await t.signupConfirmed(email);
    expectAuthError(await reset(email, '123456'), 400, 'AUTH_INVALID_CODE');
  });

  it('reset-password checks the newPassword rule (every violation) before spending the code', async () => {
    const email = newEmail('reset-rule');
    await t.signupConfirmed(email);
    const code = await resetCodeFor(email);
    const weak = await reset(email, code, 'short');
    expectViolations(weak, ['newPassword']);
    expect(rules(weak, 'newPassword')).toEqual(['digit', 'min_length']);
    expectViolations(await reset(email, code, '12345678'), ['newPassword']);
    expect((await reset(email, code)).status).toBe(200);
  });
});

describe('account error codes with their exact bodies', () => {
  const signupAgain = (email: string) =>
    t.auth('POST', '/auth/signup', { body: { email, password: PASSWORD, ...NAMES } });

  it('AUTH_EMAIL_EXISTS: the same e-mail again, also in other case', async () => {
    const email = newEmail('dup');
    await signup(email);
    for (const again of [email, email.toUpperCase(), email.replace('dup', 'DuP')])
      expectAuthError(await signupAgain(again), 409, 'AUTH_EMAIL_EXISTS');
    expect(await t.db.query('select 1 from svcgen.users where lower(email) = $1', [email])).toHaveLength(1);
  });

  it('AUTH_EMAIL_EXISTS: the same e-mail with surrounding spaces', async () => {
    const email = newEmail('dup-spaces');
    await signup(email);
    for (const again of [`  ${email}  `, ` ${email.toUpperCase()}`])
      expectAuthError(await signupAgain(again), 409, 'AUTH_EMAIL_EXISTS');
    expect(await t.db.query('select 1 from svcgen.users where lower(email) = $1', [email])).toHaveLength(1);
  });

  it('AUTH_INVALID_CREDENTIALS: unknown e-mail and wrong password give the same answer', async () => {
    const email = newEmail('creds');
    await t.signupConfirmed(email);
    const unknown = await login(newEmail('nobody'), PASSWORD);
    const wrong = await login(email, 'wrong-password-1');
    expectAuthError(unknown, 401, 'AUTH_INVALID_CREDENTIALS');
    expectAuthError(wrong, 401, 'AUTH_INVALID_CREDENTIALS');
    expect(unknown.text).toBe(wrong.text);
  });
});

describe('timing', () => {
  // Equal time comes from equal work: every login answer costs exactly one bcrypt comparison at the
  // configured cost (runtime/auth/login.ts), against the dummy hash when the e-mail has no account.
  // Counted through the hasher rather than timed, so a busy machine cannot make it fail.
  const jobs: string[] = [];
  let s: AuthTestServer;
  beforeAll(async () => {
    s = await startAuthServer({ onPasswordJob: (op) => jobs.push(op) });
  });
  afterAll(() => s?.close());

  /** The login's answer and the bcrypt jobs it ran. */
  async function loginJobs(email: string, password: string): Promise<{ res: TestResponse; jobs: string[] }> {
    jobs.length = 0;
    const res = await login(email, password, s);
    return { res, jobs: [...jobs] };
  }

  it('login with an unknown e-mail does one bcrypt comparison, as a wrong or right password does', async () => {
    const known = newEmail('timing');
    await s.signupConfirmed(known);
    // the first unknown login also makes the dummy hash (once per process)
    const first = await loginJobs(newEmail('timing-nobody'), 'wrong-password-1');
    expectAuthError(first.res, 401, 'AUTH_INVALID_CREDENTIALS');
    expect(first.jobs).toEqual(['hash', 'verify']);
    for (let i = 0; i < 3; i++) {
      const unknown = await loginJobs(newEmail('timing-nobody'), 'wrong-password-1');
      expectAuthError(unknown.res, 401, 'AUTH_INVALID_CREDENTIALS');
      expect(unknown.jobs).toEqual(['verify']);
      const wrong = await loginJobs(known, 'wrong-password-1');
      expectAuthError(wrong.res, 401, 'AUTH_INVALID_CREDENTIALS');
      expect(wrong.jobs).toEqual(['verify']);
    }
    const right = await loginJobs(known, PASSWORD);
    expect(right.res.status, right.res.text).toBe(200);
    expect(right.jobs).toEqual(['verify']);
  });
});
