/**
 * Auth hooks of a project's own code (docs/own-code.md "Auth hooks") through real HTTP: sign-up
 * refused by rule, afterSignUp and afterConfirm in the sign-up's and confirmation's transactions,
 * extra claims of access tokens (login and refresh), and mails rendered or sent by the code.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type CodeContext, defineCode, refuse } from '../../examples/shop/generated/code.ts';
import { Problem } from '../../runtime/http/index.ts';
import { MAX_EXTRA_CLAIMS_BYTES, type AuthMail, type Caller } from '../../runtime/usercode/index.ts';
import { expectAuthError, PASSWORD, startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { expectProblem } from '../support/server.ts';
import { until } from '../support/until.ts';

/** What each hook does, set per test; the code below reads it on every call. */
const behave = {
  afterSignUp: 'profile' as 'profile' | 'throw-after-insert' | 'refuse' | 'forbidden' | 'hang',
  afterConfirm: 'mark' as 'mark' | 'throw' | 'hang',
  claims: 'plan' as 'plan' | 'reserved' | 'too-large' | 'not-json' | 'throw' | 'refuse',
  mail: 'keep' as 'keep' | 'render' | 'sent' | 'throw' | 'bad' | 'hang',
};
let claimsCalls = 0;
const mailsSeen: AuthMail[] = [];
const callers: Caller[] = [];
/** The context of the last afterSignUp, kept past the hook's end. */
let keptContext: CodeContext | undefined;
const logs: string[] = [];

const code = defineCode({
  auth: {
    beforeSignUp({ email }) {
      if (email.endsWith('@closed.test')) throw refuse({ email: 'sign-ups from this domain are closed' });
      if (email.startsWith('boom-before')) throw new Error('secret-before-detail');
    },
    async afterSignUp({ user, ctx }) {
      callers.push(ctx.caller);
      keptContext = ctx;
      if (behave.afterSignUp === 'refuse') throw refuse({ email: 'no profile can be made for this address' });
      if (behave.afterSignUp === 'forbidden') throw new Problem('forbidden', 'profiles are closed today');
      await ctx.sql`INSERT INTO env_master."Customer" (id, email, name, "updatedAt") VALUES (${user.id}::uuid, ${user.email}, 'new customer', now())`;
      if (behave.afterSignUp === 'hang') await new Promise(() => {});
      if (behave.afterSignUp === 'throw-after-insert') throw new Error('secret-after-detail');
    },
    async afterConfirm({ user, ctx }) {
      await ctx.sql`UPDATE env_master."Customer" SET vip = true WHERE id = ${user.id}::uuid`;
      if (behave.afterConfirm === 'throw') throw new Error('secret-confirm-detail');
      if (behave.afterConfirm === 'hang') await new Promise(() => {});
    },
    claims(user) {
      claimsCalls++;
      switch (behave.claims) {
        case 'plan':
          return { plan: user.email.startsWith('gold') ? 'gold' : 'free', issue: claimsCalls };
        case 'reserved':
          return { roles: ['admin'] };
        case 'too-large':
          return { blob: 'x'.repeat(MAX_EXTRA_CLAIMS_BYTES) };
        case 'not-json':
          return { when: new Date() };
        case 'throw':
          throw new Error('secret-claims-detail');
        case 'refuse':
          throw refuse({ plan: 'secret-refused-claims' });
      }
    },
    mail(mail) {
      mailsSeen.push(mail);
      switch (behave.mail) {
        case 'keep':
          return undefined;
        case 'render':
          return {
            subject: `Shop: ${mail.kind}`,
            text: `Hello! Your shop code: ${mail.code ?? 'none'} (${mail.validMinutes ?? '-'} min)`,
            html: `<p>Your shop code: <b>${mail.code ?? 'none'}</b></p>`,
          };
        case 'sent':
          return 'sent';
        case 'throw':
          throw new Error('secret-mail-detail');
        case 'bad':
          return { subject: '', text: 'x' };
        case 'hang':
          return new Promise<undefined>(() => {});
      }
    },
  },
});

let t: AuthTestServer;
beforeAll(async () => {
  t = await startAuthServer({
    code,
    passwordCost: 4,
    log: (line) => logs.push(line),
    logging: { format: 'json', level: 'warn', destination: { write: (line: string) => void logs.push(line) } },
    configPatch: (raw) => {
      raw.code = { ...raw.code, hookTimeoutMs: 1500 };
      raw.auth = { ...raw.auth, lockout: { maxFailedAttempts: 2, duration: 60 } };
    },
  });
});
afterAll(() => t?.close());
beforeEach(() => {
  behave.afterSignUp = 'profile';
  behave.afterConfirm = 'mark';
  behave.claims = 'plan';
  behave.mail = 'keep';
});

const signup = (email: string) =>
  t.auth('POST', '/auth/signup', { body: { email, password: PASSWORD, firstName: 'Ann', lastName: 'Lee' } });
const userRows = async (email: string) =>
  await t.db.query<{ id: string; verified_at: Date | null }>(
    'SELECT id, verified_at FROM svcgen.users WHERE email = $1',
    [email],
  );
const customer = async (email: string) =>
  (
    await t.db.query<{ id: string; vip: boolean }>('SELECT id, vip FROM env_master."Customer" WHERE email = $1', [
      email,
    ])
  )[0];
const payload = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));

/** A 500 that says nothing of the cause but the request id; the log has the cause under it. */
function expectInternal(res: { status: number; text: string; headers: Headers; body: any }, secret: string): void {
  expectProblem(res as never, 500, 'internal');
  expect(res.text).not.toContain(secret);
  const requestId = res.headers.get('x-request-id');
  expect(requestId).toBeTruthy();
  expect(res.body.requestId).toBe(requestId);
  expect(res.body.detail).toContain(`the server's log has the detail under request id ${requestId}`);
  expect(res.headers.get('retry-after')).toBeNull();
  // The log line of the failure names the request and carries the cause.
  expect(logs.find((line) => line.includes(`"requestId":"${requestId}"`))).toContain(secret);
}

describe('beforeSignUp', () => {
  it('refuses by rule with 422 AUTH_REFUSED naming the field, and creates nothing', async () => {
    const res = await signup('  Ann@Closed.TEST ');
    expectAuthError(res, 422, 'AUTH_REFUSED', {
      violations: [{ field: 'email', rule: 'refused', message: 'sign-ups from this domain are closed' }],
    });
    expect(await userRows('ann@closed.test')).toEqual([]);
    expect(await customer('ann@closed.test')).toBeUndefined();
  });

  it('any other throw answers 500 with the request id only, and creates nothing', async () => {
    const res = await signup('boom-before@example.com');
    expectInternal(res, 'secret-before-detail');
    expect(await userRows('boom-before@example.com')).toEqual([]);
  });
});

describe('afterSignUp', () => {
  it("runs in the sign-up's transaction, acting as the new user", async () => {
    const res = await signup('profile@example.com');
    expect(res.status, res.text).toBe(201);
    const row = await customer('profile@example.com');
    expect(row?.id).toBe(res.body.userId);
    expect(callers.at(-1)).toEqual({
      kind: 'user',
      userId: res.body.userId,
      email: 'profile@example.com',
      roles: ['customer'],
      environment: 'master',
    });
  });

  it('a throw undoes the sign-up: no user, no row of the hook, no mail; 500 with the request id only', async () => {
    behave.afterSignUp = 'throw-after-insert';
    const res = await signup('undone@example.com');
    expectInternal(res, 'secret-after-detail');
    expect(await userRows('undone@example.com')).toEqual([]);
    expect(await customer('undone@example.com')).toBeUndefined();
    // The address is free again; the one mail it gets is the second sign-up's.
    behave.afterSignUp = 'profile';
    expect((await signup('undone@example.com')).status).toBe(201);
    await t.mail.nextMail('undone@example.com');
    expect(t.mail.received.filter((m) => m.to === 'undone@example.com')).toHaveLength(1);
  });

  it('past code.hookTimeoutMs: 500 naming the request id, no user; statements of the abandoned hook are refused', async () => {
    behave.afterSignUp = 'hang';
    const res = await signup('slow-signup@example.com');
    expectInternal(res, 'auth.afterSignUp did not finish within code.hookTimeoutMs');
    expect(await userRows('slow-signup@example.com')).toEqual([]);
    expect(await customer('slow-signup@example.com')).toBeUndefined();
    await expect(keptContext!.sql`SELECT 1`).rejects.toThrow(
      'auth.afterSignUp has ended (returned, failed or timed out): its context takes no more statements',
    );
  });

  it('refuse() answers 422 AUTH_REFUSED; another Problem answers as thrown; both undo the sign-up', async () => {
    behave.afterSignUp = 'refuse';
    expectAuthError(await signup('refused-after@example.com'), 422, 'AUTH_REFUSED', {
      violations: [{ field: 'email', rule: 'refused', message: 'no profile can be made for this address' }],
    });
    behave.afterSignUp = 'forbidden';
    const res = await signup('refused-after@example.com');
    expectProblem(res, 403, 'forbidden');
    expect(res.body.detail).toBe('profiles are closed today');
    expect(await userRows('refused-after@example.com')).toEqual([]);
  });
});

describe('afterConfirm', () => {
  it("runs in the confirmation's transaction; a throw undoes it and the code stays valid", async () => {
    const email = 'confirm@example.com';
    expect((await signup(email)).status).toBe(201);
    const { code: mailed } = await t.mail.nextMail(email);
    behave.afterConfirm = 'throw';
    expectInternal(
      await t.auth('POST', '/auth/confirm-signup', { body: { email, code: mailed } }),
      'secret-confirm-detail',
    );
    expect((await userRows(email))[0]?.verified_at).toBeNull();
    expect((await customer(email))?.vip).toBe(false);
    expectAuthError(
      await t.auth('POST', '/auth/login', { body: { email, password: PASSWORD } }),
      403,
      'AUTH_EMAIL_NOT_VERIFIED',
    );
    behave.afterConfirm = 'mark';
    const ok = await t.auth('POST', '/auth/confirm-signup', { body: { email, code: mailed } });
    expect(ok.status, ok.text).toBe(200);
    expect((await customer(email))?.vip).toBe(true);
  });

  it('a wrong code is still counted (the failed attempt commits) and answers AUTH_INVALID_CODE', async () => {
    const email = 'wrong-code@example.com';
    expect((await signup(email)).status).toBe(201);
    const { code: mailed } = await t.mail.nextMail(email);
    const wrong = mailed === '000000' ? '111111' : '000000';
    expectAuthError(
      await t.auth('POST', '/auth/confirm-signup', { body: { email, code: wrong } }),
      400,
      'AUTH_INVALID_CODE',
    );
    const [attempts] = await t.db.query<{ attempts: number }>(
      `SELECT c.attempts FROM svcgen.auth_codes c JOIN svcgen.users u ON u.id = c.user_id WHERE u.email = $1`,
      [email],
    );
    expect(attempts?.attempts).toBe(1);
  });

  it('past code.hookTimeoutMs: 500 naming the request id, logged, the confirmation undone', async () => {
    const email = 'slow-confirm@example.com';
    expect((await signup(email)).status).toBe(201);
    const { code: mailed } = await t.mail.nextMail(email);
    behave.afterConfirm = 'hang';
    const res = await t.auth('POST', '/auth/confirm-signup', { body: { email, code: mailed } });
    expectInternal(res, 'auth.afterConfirm did not finish within code.hookTimeoutMs; it was abandoned');
    expect(res.body.detail).toContain('auth.afterConfirm did not finish within 1500 ms (code.hookTimeoutMs)');
    expect((await userRows(email))[0]?.verified_at).toBeNull();
  });
});

describe('claims', () => {
  it('adds the extra claims to access tokens of confirm, login and refresh', async () => {
    const session = await t.signupConfirmed('gold-claims@example.com');
    const confirmed = payload(session.accessToken);
    expect(confirmed.plan).toBe('gold');
    expect(confirmed.sub).toBe(session.user.id);
    const login = await t.auth('POST', '/auth/login', {
      body: { email: 'gold-claims@example.com', password: PASSWORD },
    });
    expect(login.status, login.text).toBe(200);
    const refreshed = await t.auth('POST', '/auth/refresh-token', { body: { refreshToken: login.body.refreshToken } });
    expect(refreshed.status, refreshed.text).toBe(200);
    const claims = payload(refreshed.body.accessToken);
    expect(claims.plan).toBe('gold');
    expect(claims.issue).toBeGreaterThan(payload(login.body.accessToken).issue);
    // The token still works as a credential.
    expect((await t.asUser(refreshed.body.accessToken, 'GET', '/gw/api/rest/City')).status).toBe(200);
  });

  it.each([
    ['reserved', 'roles\\" are reserved (iss, sub, aud, exp'],
    ['too-large', `more than the ${MAX_EXTRA_CLAIMS_BYTES} allowed`],
    ['not-json', 'claims.when (a Date object) is not'],
    ['throw', 'secret-claims-detail'],
    ['refuse', 'secret-refused-claims'],
  ] as const)('%s claims fail the login with 500 (logged) and start no session', async (kind, logged) => {
    const email = `claims-${kind}@example.com`;
    const session = await t.signupConfirmed(email);
    behave.claims = kind;
    const sessions = async () =>
      (
        await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM svcgen.sessions WHERE user_id = $1', [
          session.user.id,
        ])
      )[0]!.n;
    const before = await sessions();
    expectInternal(await t.auth('POST', '/auth/login', { body: { email, password: PASSWORD } }), logged);
    expect(await sessions()).toBe(before);
    // A refresh fails too, and leaves its refresh token unspent: once the code is fixed it works.
    expectInternal(
      await t.auth('POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } }),
      logged,
    );
    behave.claims = 'plan';
    const again = await t.auth('POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } });
    expect(again.status, again.text).toBe(200);
  });
});

describe('mail', () => {
  it("undefined keeps svcgen's text; the hook sees the mail's kind, code and svcgen's own text", async () => {
    expect((await signup('keep-mail@example.com')).status).toBe(201);
    const mail = await t.mail.nextMail('keep-mail@example.com');
    expect(mail.subject).toBe('Confirm your e-mail address');
    const seen = [...mailsSeen].reverse().find((m) => m.to === 'keep-mail@example.com');
    expect(seen).toMatchObject({
      kind: 'confirm-signup',
      environment: 'master',
      code: mail.code,
      subject: 'Confirm your e-mail address',
      validMinutes: 60,
    });
  });

  it('a rendered mail is sent with its subject, text and html (sign-up, then password reset)', async () => {
    behave.mail = 'render';
    expect((await signup('render-mail@example.com')).status).toBe(201);
    const mail = await t.mail.nextMail('render-mail@example.com');
    expect(mail.subject).toBe('Shop: confirm-signup');
    expect(mail.raw).toContain('Hello! Your shop code');
    expect(mail.raw).toContain('text/html');
    expect(mail.raw).toContain(`<b>${mail.code}</b>`);
    const confirmed = await t.auth('POST', '/auth/confirm-signup', {
      body: { email: 'render-mail@example.com', code: mail.code },
    });
    expect(confirmed.status, confirmed.text).toBe(200);
    expect(
      (await t.auth('POST', '/auth/recover-password', { body: { email: 'render-mail@example.com' } })).status,
    ).toBe(200);
    const reset = await t.mail.nextMail('render-mail@example.com');
    expect(reset.subject).toBe('Shop: reset-password');
    const done = await t.auth('POST', '/auth/reset-password', {
      body: { email: 'render-mail@example.com', code: reset.code, newPassword: 'another-horse-43' },
    });
    expect(done.status, done.text).toBe(200);
  });

  it('the e-mail change mails go through the hook, with the new address', async () => {
    const session = await t.signupConfirmed('mover@example.com');
    behave.mail = 'render';
    const change = await t.auth('POST', '/auth/change-email', {
      token: session.accessToken,
      body: { newEmail: 'moved@example.com', currentPassword: PASSWORD },
    });
    expect(change.status, change.text).toBe(200);
    const mail = await t.mail.nextMail('moved@example.com');
    expect(mail.subject).toBe('Shop: change-email');
    expect([...mailsSeen].reverse().find((m) => m.to === 'moved@example.com')).toMatchObject({
      kind: 'change-email',
      code: mail.code,
      newEmail: 'moved@example.com',
    });
    const confirmed = await t.auth('POST', '/auth/confirm-email-change', {
      token: session.accessToken,
      body: { code: mail.code },
    });
    expect(confirmed.status, confirmed.text).toBe(200);
    expect(payload(confirmed.body.accessToken)).toMatchObject({ email: 'moved@example.com', plan: 'free' });
    expect((await t.mail.nextMail('mover@example.com')).subject).toBe('Shop: email-changed');
  });

  it('the lockout notice goes through the hook too', async () => {
    const email = 'locked-mail@example.com';
    await t.signupConfirmed(email);
    behave.mail = 'render';
    for (let i = 0; i < 2; i++) await t.auth('POST', '/auth/login', { body: { email, password: `wrong-${i}-pass` } });
    const mail = await t.mail.nextMail(email);
    expect(mail.subject).toBe('Shop: account-locked');
    expect([...mailsSeen].reverse().find((m) => m.to === email)?.lockedUntil).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  it.each([
    ['sent', undefined],
    ['throw', 'secret-mail-detail'],
    ['bad', 'subject must be a non-empty string'],
    ['hang', 'auth.mail of your code did not finish within code.hookTimeoutMs (1500 ms)'],
  ] as const)("'%s': svcgen sends nothing, the sign-up still answers 201", async (kind, logged) => {
    behave.mail = kind;
    const email = `mail-${kind}@example.com`;
    const res = await signup(email);
    expect(res.status, res.text).toBe(201);
    expect(res.text).not.toContain('secret');
    // A later mail to another address arrives after this one would have.
    behave.mail = 'keep';
    expect((await signup(`after-${email}`)).status).toBe(201);
    await t.mail.nextMail(`after-${email}`);
    expect(mailsSeen.some((m) => m.to === email && m.kind === 'confirm-signup')).toBe(true);
    expect(t.mail.received.filter((m) => m.to === email)).toEqual([]);
    if (logged) {
      const line = await until(
        async () => logs.find((l) => l.includes(`the confirm-signup mail to ${email} was not sent`)),
        (found) => found !== undefined,
        5000,
        'the mail failure logged',
      );
      expect(line).toContain(logged);
    }
  });
});
