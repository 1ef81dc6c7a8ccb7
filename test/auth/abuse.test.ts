// Abuse limits of /auth over real HTTP and PostgreSQL (docs/api.md §3 "Log in", "Password recovery",
// "Rate limits of /auth"): an e-mail without an account locks out exactly like an account (same
// answers, the address never stored), every login answer costs one password comparison, the owner
// of an account that locks gets one mail, wrong codes are bounded per account across re-issued codes
// (also with two server processes racing), and confirm-signup / reset-password are limited per address.
// Lockout and codes of a single account: test/auth/accounts.test.ts; the other rate limits:
// test/auth/limits.test.ts.
import { createHmac } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Codes } from '../../runtime/auth/codes.ts';
import { Lockout } from '../../runtime/auth/lockout.ts';
import type { PasswordHasher, PasswordHasherOptions } from '../../runtime/auth/passwords/index.ts';
import { expectAuthError, PASSWORD, startAuthServer, type AuthTestServer, type ReceivedMail } from '../support/auth.ts';
import { freshWindows } from '../support/clock.ts';
import { ISO_8601 } from '../support/expect.ts';
import type { TestResponse } from '../support/server.ts';

// Every server of this file hashes through this wrapper: the calls are counted, the work is the real one.
const hasherCalls = vi.hoisted(() => ({ compare: 0, hash: 0 }));
vi.mock('../../runtime/auth/passwords/index.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../runtime/auth/passwords/index.ts')>();
  return {
    ...real,
    createPasswordHasher(options?: PasswordHasherOptions): PasswordHasher {
      const hasher = real.createPasswordHasher(options);
      return {
        ...hasher,
        hash: (password) => (hasherCalls.hash++, hasher.hash(password)),
        verify: (password, hash) => (hasherCalls.compare++, hasher.verify(password, hash)),
        verifyDummy: (password) => (hasherCalls.compare++, hasher.verifyDummy(password)),
      };
    },
  };
});

const NAMES = { firstName: 'Test', lastName: 'User' };
const NEW_PASSWORD = 'brand-new-pass-7';
const LOCK_SUBJECT = 'Your account is locked';
let counter = 0;
const newEmail = (tag: string) => `abuse-${tag}-${++counter}@example.com`;
/** A code other than `code` (the n-th one after it). */
const wrongCode = (code: string, n = 1) => String((Number(code) + n) % 1_000_000).padStart(6, '0');

let t: AuthTestServer; // relaxed rate limits, the product's lockout (5, 900 s) and code limits (5 a code, 10 an account)
beforeAll(async () => {
  t = await startAuthServer({ passwordCost: 4 });
});
afterAll(() => t?.close());

const login = (email: string, password: string, server = t) =>
  server.auth('POST', '/auth/login', { body: { email, password } });
const recover = (email: string, server = t) => server.auth('POST', '/auth/recover-password', { body: { email } });
const reset = (email: string, code: string, server = t) =>
  server.auth('POST', '/auth/reset-password', { body: { email, code, newPassword: NEW_PASSWORD } });
const confirm = (email: string, code: string, server = t) =>
  server.auth('POST', '/auth/confirm-signup', { body: { email, code } });

/** A fresh reset code for `email`, read from its mail. */
async function resetCode(email: string, server = t): Promise<string> {
  expect((await recover(email, server)).status).toBe(200);
  const { code } = await server.mail.nextMail(email);
  expect(code).toMatch(/^\d{6}$/);
  return code!;
}

/** Status, body keys and error code: what a caller can compare between two answers. */
const shape = (res: TestResponse) => `${res.status} ${Object.keys(res.body).sort().join(',')} ${res.body.error}`;

/** 4 wrong passwords → 401 each, the 5th → 423 `{ error, lockedUntil }`; returns every answer and the lock's end. */
async function lockOut(email: string): Promise<{ answers: TestResponse[]; lockedUntil: string }> {
  const answers: TestResponse[] = [];
  for (let i = 0; i < 4; i++) {
    const res = await login(email, `wrong-password-${i}`);
    expectAuthError(res, 401, 'AUTH_INVALID_CREDENTIALS');
    answers.push(res);
  }
  const locked = await login(email, 'wrong-password-4');
  expectAuthError(locked, 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil: expect.stringMatching(ISO_8601) });
  answers.push(locked);
  return { answers, lockedUntil: locked.body.lockedUntil };
}

/** The svcgen.login_failures row of an e-mail without an account, found by the keyed hash the server uses. */
async function unknownRow(email: string) {
  const [secret] = await t.db.query<{ value: string }>(
    `select value from svcgen.secrets where name = 'auth-login-failures'`,
  );
  const hash = createHmac('sha256', secret!.value).update(email.trim().toLowerCase()).digest('base64url');
  const rows = await t.db.query<Record<string, unknown>>('select * from svcgen.login_failures where email_hash = $1', [
    hash,
  ]);
  return rows[0];
}

/** The mails to `to` whose subject is `subject`, with quoted-printable soft line breaks undone. */
const mailsTo = (to: string, subject: string) =>
  t.mail.received
    .filter((m: ReceivedMail) => m.to === to && m.subject === subject)
    .map((m) => m.raw.replace(/=\r?\n/g, ''));

describe('lockout without enumeration', () => {
  it('an e-mail without an account: 4 failures → 401, the 5th → 423 with lockedUntil, then 423 with the same lockedUntil', async () => {
    const email = newEmail('ghost');
    const { lockedUntil } = await lockOut(email);
    expect(Math.abs(Date.parse(lockedUntil) - (Date.now() + 900_000))).toBeLessThan(10_000);
    // further attempts, with any password and in any letter case, meet the same lock
    for (const [address, password] of [
      [email, PASSWORD],
      [email.toUpperCase(), 'wrong-password-5'],
      [` ${email} `, 'x'],
    ]) {
      expectAuthError(await login(address!, password!), 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil });
    }
    // the count is kept under a keyed hash of the lower-cased e-mail, never the address
    const row = await unknownRow(email);
    expect(row).toEqual({
      project_id: 'shop',
      environment: 'master',
      email_hash: expect.any(String),
      failed_logins: 5,
      locked_until: expect.any(Date),
    });
    expect((row!.locked_until as Date).toISOString()).toBe(lockedUntil);
    const everything = JSON.stringify(await t.db.query('select * from svcgen.login_failures')).toLowerCase();
    expect(everything).not.toContain(email.split('@')[0]);
    expect(everything).not.toContain('example.com');
  });

  it('an account and an e-mail without one give the same answers, in the same order, with the same keys', async () => {
    const real = newEmail('real');
    await t.signupConfirmed(real);
    const ghost = newEmail('ghost');
    const sequences: Record<string, string[]> = {};
    for (const [name, email] of [
      ['real', real],
      ['ghost', ghost],
    ] as const) {
      const { answers, lockedUntil } = await lockOut(email);
      const later = [await login(email, 'wrong-password-5'), await login(email, PASSWORD)];
      for (const res of later) expectAuthError(res, 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil });
      sequences[name] = [...answers, ...later].map(shape);
    }
    expect(sequences.ghost).toEqual(sequences.real);
    expect(sequences.real).toEqual([
      ...Array(4).fill('401 error AUTH_INVALID_CREDENTIALS'),
      ...Array(3).fill('423 error,lockedUntil AUTH_ACCOUNT_LOCKED'),
    ]);
  });

  it('once the lock has run out, an e-mail without an account counts from 1 again (4 → 401, the 5th → 423 with a new lockedUntil)', async () => {
    const email = newEmail('ghost-lapsed');
    const first = await lockOut(email);
    const row = await unknownRow(email);
    await t.db.query(
      `update svcgen.login_failures set locked_until = now() - interval '1 second' where email_hash = $1`,
      [row!.email_hash],
    );
    const second = await lockOut(email);
    expect(second.lockedUntil).not.toBe(first.lockedUntil);
    expectAuthError(await login(email, PASSWORD), 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil: second.lockedUntil });
  });

  it('the owner gets one mail when the account locks (when it lasts, how to unlock); an e-mail without an account gets none', async () => {
    const real = newEmail('mailed');
    await t.signupConfirmed(real);
    const ghost = newEmail('ghost-unmailed');
    const { lockedUntil } = await lockOut(real);
    await lockOut(ghost);
    for (let i = 0; i < 2; i++) {
      expectAuthError(await login(real, `wrong-again-${i}`), 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil });
      expectAuthError(await login(ghost, `wrong-again-${i}`), 423, 'AUTH_ACCOUNT_LOCKED', {
        lockedUntil: expect.any(String),
      });
    }
    const mail = await t.mail.nextMail(real);
    expect(mail.subject).toBe(LOCK_SUBJECT);
    const text = mail.raw.replace(/=\r?\n/g, '');
    expect(text).toContain(`locked until ${lockedUntil}`);
    expect(text).toContain('POST /auth/recover-password');
    expect(text).toContain('POST /auth/reset-password');
    expect(mail.code).toBeUndefined();
    // a later mail to the same address has arrived: the lock was announced once, the ghost got nothing
    await resetCode(real);
    expect(mailsTo(real, LOCK_SUBJECT)).toHaveLength(1);
    expect(t.mail.received.filter((m) => m.to === ghost)).toEqual([]);
  });

  it('8 wrong logins at once: exactly 4 → 401 and 4 → 423 with one lockedUntil, for an account (one lock mail) and an e-mail without one', async () => {
    const real = newEmail('burst-real');
    await t.signupConfirmed(real);
    for (const email of [real, newEmail('burst-ghost')]) {
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => login(email, `wrong-password-${i}`)));
      expect(answers.map((res) => res.status).sort()).toEqual([401, 401, 401, 401, 423, 423, 423, 423]);
      const locks = answers.filter((res) => res.status === 423);
      for (const res of locks)
        expectAuthError(res, 423, 'AUTH_ACCOUNT_LOCKED', { lockedUntil: locks[0]!.body.lockedUntil });
    }
    expect((await t.mail.nextMail(real)).subject).toBe(LOCK_SUBJECT);
    await resetCode(real);
    expect(mailsTo(real, LOCK_SUBJECT)).toHaveLength(1);
  });

  it('reset-password unlocks at once: the new password logs in, and the count starts again', async () => {
    const email = newEmail('unlocked');
    const session = await t.signupConfirmed(email);
    await lockOut(email);
    expect((await t.mail.nextMail(email)).subject).toBe(LOCK_SUBJECT);
    const res = await reset(email, await resetCode(email));
    expect(res.status, res.text).toBe(200);
    const logged = await login(email, NEW_PASSWORD);
    expect(logged.status, logged.text).toBe(200);
    expect(logged.body.user.id).toBe(session.user.id);
    // a fresh count: 4 failures are 401 again, the 5th locks again (and mails again)
    await lockOut(email);
    expect((await t.mail.nextMail(email)).subject).toBe(LOCK_SUBJECT);
  });
});

describe('one password comparison for every login answer', () => {
  let verified: string;
  let unverified: string;
  let locked: string;
  let lockedGhost: string;
  beforeAll(async () => {
    verified = newEmail('cost-verified');
    await t.signupConfirmed(verified);
    unverified = newEmail('cost-unverified');
    expect(
      (await t.auth('POST', '/auth/signup', { body: { email: unverified, password: PASSWORD, ...NAMES } })).status,
    ).toBe(201);
    locked = newEmail('cost-locked');
    await t.signupConfirmed(locked);
    await lockOut(locked);
    lockedGhost = newEmail('cost-ghost-locked');
    await lockOut(lockedGhost); // this also made the dummy hash, so no answer below pays for it
  });

  const cases: { name: string; login: () => [string, string]; status: number; error?: string }[] = [
    { name: 'success', login: () => [verified, PASSWORD], status: 200 },
    {
      name: 'wrong password',
      login: () => [verified, 'wrong-password-1'],
      status: 401,
      error: 'AUTH_INVALID_CREDENTIALS',
    },
    {
      name: 'unknown e-mail',
      login: () => [newEmail('cost-nobody'), PASSWORD],
      status: 401,
      error: 'AUTH_INVALID_CREDENTIALS',
    },
    { name: 'unknown e-mail, locked', login: () => [lockedGhost, PASSWORD], status: 423, error: 'AUTH_ACCOUNT_LOCKED' },
    { name: 'locked, right password', login: () => [locked, PASSWORD], status: 423, error: 'AUTH_ACCOUNT_LOCKED' },
    {
      name: 'locked, wrong password',
      login: () => [locked, 'wrong-password-9'],
      status: 423,
      error: 'AUTH_ACCOUNT_LOCKED',
    },
    {
      name: 'unverified, right password',
      login: () => [unverified, PASSWORD],
      status: 403,
      error: 'AUTH_EMAIL_NOT_VERIFIED',
    },
    {
      name: 'unverified, wrong password',
      login: () => [unverified, 'wrong-password-1'],
      status: 401,
      error: 'AUTH_INVALID_CREDENTIALS',
    },
  ];

  it.each(cases)(
    '$name → $status, after exactly one comparison and no hashing',
    async ({ login: credentials, status, error }) => {
      const [email, password] = credentials();
      const before = { ...hasherCalls };
      const res = await login(email, password);
      expect(res.status, res.text).toBe(status);
      if (error) expect(res.body.error).toBe(error);
      expect({ compare: hasherCalls.compare - before.compare, hash: hasherCalls.hash - before.hash }).toEqual({
        compare: 1,
        hash: 0,
      });
    },
  );

  it('the failure that reaches the threshold (423, lock mail queued) also costs exactly one comparison', async () => {
    const email = newEmail('cost-threshold');
    await t.signupConfirmed(email);
    for (let i = 0; i < 4; i++)
      expectAuthError(await login(email, `wrong-password-${i}`), 401, 'AUTH_INVALID_CREDENTIALS');
    const before = hasherCalls.compare;
    expect((await login(email, 'wrong-password-4')).status).toBe(423);
    expect(hasherCalls.compare - before).toBe(1);
    expect((await t.mail.nextMail(email)).subject).toBe(LOCK_SUBJECT);
  });
});

describe('wrong codes bounded per account (auth.codeMaxFailuresPerAccount 10 per codeTtl window)', () => {
  /** Sends `wrong` wrong codes for each of `spread` fresh reset codes; all must be 400. */
  async function guess(email: string, spread: number[]) {
    for (const wrong of spread) {
      const code = await resetCode(email);
      for (let i = 1; i <= wrong; i++)
        expectAuthError(await reset(email, wrongCode(code, i)), 400, 'AUTH_INVALID_CODE');
    }
  }
  const failuresOf = async (email: string) =>
    t.db.query<{ purpose: string; failures: number }>(
      'select purpose, failures from svcgen.auth_code_failures where user_id = (select id from svcgen.users where email = $1) order by purpose',
      [email],
    );

  it('10 wrong tries over 3 codes → the right code of a 4th fails; once the window has passed, a fresh code works', async () => {
    const email = newEmail('guessed');
    await t.signupConfirmed(email);
    await guess(email, [4, 4, 2]);
    expect(await failuresOf(email)).toEqual([{ purpose: 'reset-password', failures: 10 }]);
    const fourth = await resetCode(email);
    expectAuthError(await reset(email, fourth), 400, 'AUTH_INVALID_CODE');
    expectAuthError(await login(email, NEW_PASSWORD), 401, 'AUTH_INVALID_CREDENTIALS');
    // the window (auth.codeTtl, 3600 s) began with the first wrong code: move it an hour and a second back
    await t.db.query(
      `update svcgen.auth_code_failures set window_start = window_start - interval '3601 seconds'
       where user_id = (select id from svcgen.users where email = $1)`,
      [email],
    );
    const res = await reset(email, await resetCode(email));
    expect(res.status, res.text).toBe(200);
    expect((await login(email, NEW_PASSWORD)).status).toBe(200);
    expect(await failuresOf(email)).toEqual([]); // a code that worked ends the count
  });

  it('9 wrong tries over 2 codes: the right code of a 3rd still works', async () => {
    const email = newEmail('nine');
    await t.signupConfirmed(email);
    await guess(email, [5, 4]);
    const res = await reset(email, await resetCode(email));
    expect(res.status, res.text).toBe(200);
  });

  it('each purpose has its own count: 10 wrong reset codes leave the signup code working', async () => {
    const email = newEmail('purposes');
    const signup = await t.auth('POST', '/auth/signup', { body: { email, password: PASSWORD, ...NAMES } });
    expect(signup.status, signup.text).toBe(201);
    const { code } = await t.mail.nextMail(email);
    await guess(email, [5, 5]);
    const confirmed = await confirm(email, code!);
    expect(confirmed.status, confirmed.text).toBe(200);
  });

  describe('two server processes racing with guesses (auth.codeMaxAttempts 100, so only the account bound stops them)', () => {
    let a: AuthTestServer;
    let b: AuthTestServer;
    beforeAll(async () => {
      const configPatch = (raw: any) => void (raw.auth.codeMaxAttempts = 100);
      a = await startAuthServer({ passwordCost: 4, configPatch });
      b = await startAuthServer({ passwordCost: 4, configPatch, databaseUrl: a.database.url, mail: a.mail });
    });
    afterAll(async () => {
      await b?.close();
      await a?.close();
    });

    it('30 wrong codes at once over both processes: exactly 10 count, then the right code fails', async () => {
      const email = newEmail('race');
      await a.signupConfirmed(email);
      const code = await resetCode(email, a);
      const answers = await Promise.all(
        Array.from({ length: 30 }, (_, i) => reset(email, wrongCode(code, i + 1), i % 2 ? b : a)),
      );
      for (const res of answers) expectAuthError(res, 400, 'AUTH_INVALID_CODE');
      const [row] = await a.db.query<{ failures: number; attempts: number }>(
        `select f.failures, c.attempts from svcgen.auth_code_failures f join svcgen.auth_codes c using (user_id, purpose)
         where f.user_id = (select id from svcgen.users where email = $1)`,
        [email],
      );
      expect(row).toEqual({ failures: 10, attempts: 10 });
      expectAuthError(await reset(email, code, b), 400, 'AUTH_INVALID_CODE');
    });
  });
});

describe('rateLimits.codePerMinutePerIp (default 20): confirm-signup and reset-password per client address', () => {
  let limited: AuthTestServer;
  beforeAll(async () => {
    limited = await startAuthServer({
      passwordCost: 4,
      configPatch: (raw) => void delete raw.rateLimits.codePerMinutePerIp,
    });
  });
  afterAll(async () => {
    vi.useRealTimers();
    await limited?.close();
  });
  afterEach(() => void vi.useRealTimers());
  const freshWindow = freshWindows();

  it('20 attempts a minute over both routes pass, the 21st → 429 with Retry-After even with the right code; the next minute works', async () => {
    const email = newEmail('code-limit');
    const signup = await limited.auth('POST', '/auth/signup', { body: { email, password: PASSWORD, ...NAMES } });
    expect(signup.status, signup.text).toBe(201);
    const { code } = await limited.mail.nextMail(email);
    freshWindow();
    for (let i = 0; i < 20; i++) {
      const res =
        i % 2
          ? await reset(newEmail('nobody'), '123456', limited)
          : await confirm(newEmail('nobody'), '123456', limited);
      expectAuthError(res, 400, 'AUTH_INVALID_CODE');
    }
    for (const res of [
      await confirm(email, code!, limited),
      await reset(email, '123456', limited),
      await limited.auth('POST', '/auth/confirm-signup', { body: {} }), // counted before the body is read
    ]) {
      expectAuthError(res, 429, 'RATE_LIMIT_EXCEEDED');
      expect(res.headers.get('retry-after')).toBe('30');
    }
    // login is a budget of its own
    expectAuthError(await login(email, PASSWORD, limited), 403, 'AUTH_EMAIL_NOT_VERIFIED');
    freshWindow();
    const confirmed = await confirm(email, code!, limited);
    expect(confirmed.status, confirmed.text).toBe(200);
  });
});

describe('pruning (UserAuth.prune, off the request path)', () => {
  it('drops lapsed locks of e-mails without an account and passed code windows; keeps live locks, counts and windows', async () => {
    const keep = ['prune-live', 'prune-counting'];
    await t.db.query(
      `insert into svcgen.login_failures (project_id, environment, email_hash, failed_logins, locked_until) values
         ('shop', 'master', 'prune-lapsed', 5, now() - interval '1 second'),
         ('shop', 'master', 'prune-live', 5, now() + interval '10 minutes'),
         ('shop', 'master', 'prune-counting', 3, null)`,
    );
    const email = newEmail('prune');
    const { user } = await t.signupConfirmed(email);
    await t.db.query(
      `insert into svcgen.auth_code_failures (user_id, purpose, failures, window_start) values
         ($1, 'confirm-signup', 10, now() - interval '3601 seconds'), ($1, 'reset-password', 4, now() - interval '3599 seconds')`,
      [user.id],
    );
    await new Lockout('unused', 5, 900).prune(t.db);
    await new Codes('unused', 3600, 5, 10).prune(t.db);
    const failures = await t.db.query<{ email_hash: string }>(
      `select email_hash from svcgen.login_failures where email_hash like 'prune-%' order by email_hash`,
    );
    expect(failures.map((r) => r.email_hash)).toEqual(keep.sort());
    expect(
      await t.db.query('select purpose, failures from svcgen.auth_code_failures where user_id = $1', [user.id]),
    ).toEqual([{ purpose: 'reset-password', failures: 4 }]);
  });
});
