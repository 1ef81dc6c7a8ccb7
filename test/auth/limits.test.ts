// What the /auth surface refuses before it looks at accounts, over real HTTP: the rate limits with
// their default values (docs/api.md §3 "Rate limits of /auth"; rateLimits.*, trustProxy in
// docs/config.md), AUTH_NOT_CONFIGURED (auth.enabled / auth.environments, unknown project and
// environment) and VALIDATION_ERROR with its violations (the password rule, roleId, X-Project-Id;
// docs/api.md §3, §6.3).
// Accounts, codes, lockout and recovery: test/auth/accounts.test.ts.
//
// Rate-limit windows are calendar minutes counted in the database. Each rate-limit test pins Date
// (vi.setSystemTime; timers stay real) to 30 s into a minute of its own, as test/rate-limit/rate-limit.test.ts
// does: its windows start empty, Retry-After is exactly 30, and no test straddles a minute boundary.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  expectAuthError,
  expectViolations,
  PASSWORD,
  startAuthServer,
  type AuthTestServer,
  type Session,
} from '../support/auth.ts';
import type { TestResponse } from '../support/server.ts';
import { freshWindows } from '../support/clock.ts';

const NAMES = { firstName: 'Test', lastName: 'User' };
const NEW_PASSWORD = 'brand-new-pass-7';
let counter = 0;
const newEmail = (tag: string) => `${tag}-${++counter}@example.com`;

/** The product's rate limits: the three /auth keys left to their defaults. */
function defaultAuthLimits(raw: any): void {
  for (const key of ['signupPerMinutePerIp', 'loginPerMinutePerIp', 'recoveryPerMinutePerEmail'])
    delete raw.rateLimits[key];
}

let t: AuthTestServer; // relaxed limits; auth only in master (staging → AUTH_NOT_CONFIGURED)
let off: AuthTestServer; // auth.enabled false
let limited: AuthTestServer; // default limits, trustProxy false (the default)
let proxied: AuthTestServer; // default limits, trustProxy true
let listed: AuthTestServer; // default limits, trustProxy lists the proxy's address (loopback)
beforeAll(async () => {
  [t, off, limited, proxied, listed] = await Promise.all([
    startAuthServer({
      configPatch: (raw) => ((raw.environments = ['master', 'staging']), (raw.auth.environments = ['master'])),
    }),
    startAuthServer({ configPatch: (raw) => void (raw.auth.enabled = false) }),
    startAuthServer({ passwordCost: 4, configPatch: defaultAuthLimits }),
    startAuthServer({ passwordCost: 4, configPatch: (raw) => (defaultAuthLimits(raw), (raw.trustProxy = true)) }),
    startAuthServer({
      passwordCost: 4,
      configPatch: (raw) => (defaultAuthLimits(raw), (raw.trustProxy = ['127.0.0.1/8'])),
    }),
  ]);
});
afterAll(async () => {
  vi.useRealTimers();
  await Promise.all([t?.close(), off?.close(), limited?.close(), proxied?.close(), listed?.close()]);
});

const freshWindow = freshWindows();

function expectRateLimited(res: TestResponse): void {
  expectAuthError(res, 429, 'RATE_LIMIT_EXCEEDED');
  expect(res.headers.get('retry-after')).toBe('30');
}

const signupFrom = (server: AuthTestServer, email: string, forwardedFor?: string) =>
  server.auth('POST', '/auth/signup', {
    body: { email, password: PASSWORD, ...NAMES },
    headers: forwardedFor ? { 'x-forwarded-for': forwardedFor } : {},
  });
const userCount = async (server: AuthTestServer, email: string) =>
  (await server.db.query('select 1 from svcgen.users where email = $1', [email])).length;

describe('rate limits (defaults: 10 signups and 20 logins a minute per IP, 5 recoveries a minute per e-mail)', () => {
  let account: Session;
  let accountEmail: string;
  beforeAll(async () => {
    accountEmail = newEmail('limits-account');
    account = await limited.signupConfirmed(accountEmail); // in the real minute: no pinned window is touched
  });
  afterEach(() => void vi.useRealTimers());

  it('signup: 10 from one IP pass, the 11th → 429 with Retry-After and makes no account; the next minute works again', async () => {
    const start = freshWindow();
    for (let i = 0; i < 10; i++) {
      const res = await signupFrom(limited, newEmail('burst'));
      expect(res.status, `signup ${i + 1}: ${res.text}`).toBe(201);
    }
    const refused = newEmail('burst-11th');
    expectRateLimited(await signupFrom(limited, refused));
    expect(await userCount(limited, refused)).toBe(0);
    expect(freshWindow()).toBe(start + 60_000); // the next minute, 30 s in
    expect((await signupFrom(limited, refused)).status).toBe(201);
  });

  it('login: 20 from one IP pass (wrong or right), the 21st → 429 even with the right password', async () => {
    freshWindow();
    for (let i = 0; i < 19; i++)
      expectAuthError(
        await limited.auth('POST', '/auth/login', { body: { email: newEmail('nobody'), password: PASSWORD } }),
        401,
        'AUTH_INVALID_CREDENTIALS',
      );
    const twentieth = await limited.auth('POST', '/auth/login', { body: { email: accountEmail, password: PASSWORD } });
    expect(twentieth.status, twentieth.text).toBe(200);
    expect(twentieth.body.user.id).toBe(account.user.id);
    expectRateLimited(await limited.auth('POST', '/auth/login', { body: { email: accountEmail, password: PASSWORD } }));
    expectRateLimited(
      await limited.auth('POST', '/auth/login', { body: { email: newEmail('nobody'), password: PASSWORD } }),
    );
  });

  it('recover-password: 5 per e-mail pass, the 6th → 429 (in any letter case); another e-mail still 200', async () => {
    freshWindow();
    const recover = (email: string) => limited.auth('POST', '/auth/recover-password', { body: { email } });
    for (let i = 0; i < 5; i++) expect((await recover(accountEmail)).status).toBe(200);
    expectRateLimited(await recover(accountEmail));
    expectRateLimited(await recover(accountEmail.toUpperCase()));
    const other = await recover(newEmail('other'));
    expect(other.status, other.text).toBe(200);
  });

  it('recover-password for an unknown e-mail: limited after exactly 5 as well, with the same answers', async () => {
    freshWindow();
    const known = newEmail('known');
    await limited.signupConfirmed(known); // signup counts in this minute's signup window, not in recovery's
    const unknown = newEmail('unknown');
    const answers: Record<string, string[]> = { known: [], unknown: [] };
    for (let i = 0; i < 6; i++) {
      for (const [name, email] of [
        ['known', known],
        ['unknown', unknown],
      ] as const) {
        const res = await limited.auth('POST', '/auth/recover-password', { body: { email } });
        answers[name]!.push(
          `${res.status} ${res.headers.get('retry-after') ?? '-'} ${res.text.replaceAll(email, '<email>')}`,
        );
        if (i === 5) expectRateLimited(res);
      }
    }
    expect(answers.unknown).toEqual(answers.known);
    expect(answers.known.map((a) => a.split(' ')[0])).toEqual(['200', '200', '200', '200', '200', '429']);
  });

  it('trustProxy false (default): X-Forwarded-For is ignored, the 11th signup → 429 whatever it says', async () => {
    freshWindow();
    for (let i = 0; i < 10; i++)
      expect((await signupFrom(limited, newEmail('xff-ignored'), `203.0.113.${i + 1}`)).status).toBe(201);
    const refused = newEmail('xff-ignored-11th');
    expectRateLimited(await signupFrom(limited, refused, '203.0.113.99'));
    expectRateLimited(await signupFrom(limited, newEmail('xff-ignored-12th'), '198.51.100.7, 203.0.113.98'));
    expect(await userCount(limited, refused)).toBe(0);
  });

  it('trustProxy true: each X-Forwarded-For address has its own signup bucket', async () => {
    freshWindow();
    for (let i = 0; i < 12; i++) {
      const res = await signupFrom(proxied, newEmail('xff'), `203.0.113.${i + 1}`);
      expect(res.status, `signup from 203.0.113.${i + 1}: ${res.text}`).toBe(201);
    }
    // one address is still held to 10: 9 more from 203.0.113.1 pass, the next is refused
    for (let i = 0; i < 9; i++)
      expect((await signupFrom(proxied, newEmail('xff-same'), '203.0.113.1')).status).toBe(201);
    expectRateLimited(await signupFrom(proxied, newEmail('xff-same-11th'), '203.0.113.1'));
    // the proxy's own address (no header) is yet another bucket
    expect((await signupFrom(proxied, newEmail('xff-none'))).status).toBe(201);
  });

  it('trustProxy listing the proxy (127.0.0.1/8): X-Forwarded-For from it gives each client its own bucket', async () => {
    freshWindow();
    for (let i = 0; i < 11; i++) {
      const res = await signupFrom(listed, newEmail('xff-listed'), `198.51.100.${i + 1}`);
      expect(res.status, `signup from 198.51.100.${i + 1}: ${res.text}`).toBe(201);
    }
  });
});

const ROUTES: [string, string, unknown][] = [
  ['POST', '/auth/signup', { email: 'nc@example.com', password: PASSWORD, ...NAMES }],
  ['POST', '/auth/confirm-signup', { email: 'nc@example.com', code: '123456' }],
  ['POST', '/auth/login', { email: 'nc@example.com', password: PASSWORD }],
  ['POST', '/auth/recover-password', { email: 'nc@example.com' }],
  ['POST', '/auth/reset-password', { email: 'nc@example.com', code: '123456', newPassword: NEW_PASSWORD }],
  ['POST', '/auth/refresh-token', { refreshToken: 'aGVsbG8=' }],
  ['POST', '/auth/logout', undefined],
  ['GET', '/auth/.well-known/jwks.json', undefined],
];

describe('AUTH_NOT_CONFIGURED (404)', () => {
  it.each(ROUTES)('auth.enabled false: %s %s → 404 (master and staging)', async (method, path, body) => {
    expectAuthError(await off.auth(method, path, { body }), 404, 'AUTH_NOT_CONFIGURED');
    expectAuthError(await off.auth(method, path, { body, environment: 'staging' }), 404, 'AUTH_NOT_CONFIGURED');
  });

  it.each(ROUTES)('auth.environments ["master"]: %s %s → 404 on staging', async (method, path, body) => {
    expectAuthError(await t.auth(method, path, { body, environment: 'staging' }), 404, 'AUTH_NOT_CONFIGURED');
  });

  it('auth.environments ["master"]: master works (signup 201, confirm 200, jwks 200); staging got no users', async () => {
    const email = newEmail('master-only');
    const res = await signupFrom(t, email);
    expect(res.status, res.text).toBe(201);
    const { code } = await t.mail.nextMail(email);
    const confirmed = await t.auth('POST', '/auth/confirm-signup', { body: { email, code } });
    expect(confirmed.status, confirmed.text).toBe(200);
    expect((await t.auth('GET', '/auth/.well-known/jwks.json')).status).toBe(200);
    expect(await t.db.query('select environment from svcgen.users where id = $1', [res.body.userId])).toEqual([
      { environment: 'master' },
    ]);
    expect(await t.db.query(`select 1 from svcgen.users where environment = 'staging'`)).toHaveLength(0);
  });

  it.each(ROUTES)('unknown project or environment: %s %s → 404', async (method, path, body) => {
    expectAuthError(await t.auth(method, path, { body, project: 'other-shop' }), 404, 'AUTH_NOT_CONFIGURED');
    expectAuthError(await t.auth(method, path, { body, environment: 'production' }), 404, 'AUTH_NOT_CONFIGURED');
  });

  it('jwks by query parameters: unknown project or environment → 404 AUTH_NOT_CONFIGURED', async () => {
    const path = '/auth/.well-known/jwks.json';
    expectAuthError(
      await t.auth('GET', `${path}?project_id=other-shop`, { project: false }),
      404,
      'AUTH_NOT_CONFIGURED',
    );
    expectAuthError(
      await t.auth('GET', `${path}?project_id=shop&environment=staging`, { project: false }),
      404,
      'AUTH_NOT_CONFIGURED',
    );
    expect((await t.auth('GET', `${path}?project_id=shop&environment=master`, { project: false })).status).toBe(200);
  });
});

const rules = (res: TestResponse, field: string) =>
  res.body.violations
    .filter((v: { field: string }) => v.field === field)
    .map((v: { rule: string }) => v.rule)
    .sort();

describe('VALIDATION_ERROR (400)', () => {
  const signupWith = (body: unknown) => t.auth('POST', '/auth/signup', { body });
  const valid = () => ({ email: newEmail('v'), password: PASSWORD, ...NAMES });
  const userCountT = (email: string) => userCount(t, email);

  it.each(ROUTES)('missing X-Project-Id: %s %s → field X-Project-Id', async (method, path, body) => {
    expectViolations(await t.auth(method, path, { body, project: false }), ['X-Project-Id']);
  });

  it('signup without any field names each of them (rule required)', async () => {
    const res = await signupWith({});
    expectViolations(res, ['email', 'password', 'firstName', 'lastName']);
    for (const field of ['email', 'password', 'firstName', 'lastName']) expect(rules(res, field)).toEqual(['required']);
  });

  it.each(['email', 'password', 'firstName', 'lastName'])('signup without %s names it', async (field) => {
    const body: Record<string, unknown> = valid();
    delete body[field];
    const res = await signupWith(body);
    expectViolations(res, [field]);
    expect(rules(res, field)).toEqual(['required']);
  });

  it('a malformed e-mail → field email', async () => {
    expectViolations(await signupWith({ ...valid(), email: 'not-an-email' }), ['email']);
  });

  it.each([
    ['short', ['digit', 'min_length']],
    ['abcdefgh', ['digit']],
    ['12345678', ['letter']],
    [`a1${'x'.repeat(71)}`, ['max_bytes']],
    [`a1${'é'.repeat(35)}x`, ['max_bytes']],
    ['', ['digit', 'letter', 'min_length']],
  ])('password %j → rules %j', async (password, expected) => {
    const email = newEmail('pw');
    const res = await signupWith({ ...valid(), email, password });
    expectViolations(res, ['password']);
    expect(rules(res, 'password')).toEqual(expected);
    expect(await userCountT(email)).toBe(0);
  });

  it('a password of exactly 72 bytes (multi-byte characters) is accepted', async () => {
    const res = await signupWith({ ...valid(), password: `a1${'é'.repeat(35)}` });
    expect(res.status, res.text).toBe(201);
  });

  it('every violation at once: bad e-mail, weak password, missing lastName, roleId not open to signup', async () => {
    const res = await signupWith({ email: 'not-an-email', password: 'short', firstName: 'Ada', roleId: 'admin' });
    expectViolations(res, ['email', 'password', 'lastName', 'roleId']);
    expect(rules(res, 'password')).toEqual(['digit', 'min_length']);
  });

  it('roleId "admin" (not signup) → roleId/signup_role; an unknown roleId → roleId; no account made', async () => {
    const email = newEmail('role');
    const admin = await signupWith({ ...valid(), email, roleId: 'admin' });
    expectViolations(admin, ['roleId']);
    expect(rules(admin, 'roleId')).toEqual(['signup_role']);
    expectViolations(await signupWith({ ...valid(), email, roleId: 'wizard' }), ['roleId']);
    expectViolations(await signupWith({ ...valid(), email, roleId: 'catalog' }), ['roleId']);
    expect(await userCountT(email)).toBe(0);
  });

  it('Content-Type text/plain → field Content-Type; malformed JSON → field body', async () => {
    const raw = JSON.stringify(valid());
    const plain = await t.auth('POST', '/auth/signup', { headers: { 'content-type': 'text/plain' } });
    expectViolations(plain, ['Content-Type']);
    const asText = await t.request('POST', '/auth/signup', {
      key: false,
      raw,
      headers: { 'content-type': 'text/plain' },
    });
    expectViolations(asText, ['Content-Type']);
    const broken = await t.request('POST', '/auth/login', {
      key: false,
      raw: '{"email": "a@b.c",',
      headers: { 'content-type': 'application/json' },
    });
    expectViolations(broken, ['body']);
  });

  it('login, confirm-signup and reset-password name their missing fields', async () => {
    expectViolations(await t.auth('POST', '/auth/login', { body: { email: 'x@example.com' } }), ['password']);
    expectViolations(await t.auth('POST', '/auth/confirm-signup', { body: { code: '123456' } }), ['email']);
    expectViolations(await t.auth('POST', '/auth/reset-password', { body: { email: 'x@example.com' } }), [
      'code',
      'newPassword',
    ]);
  });
});
