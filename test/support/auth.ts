/**
 * User-authentication test support: a real SMTP server on loopback that collects the mail svcgen
 * sends (codes are read from it, as a user would read them), a server whose mail goes there, and
 * helpers for the /auth endpoints and their `{ error }` bodies.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { expect } from 'vitest';
import { startTestServer, type TestResponse, type TestServer, type TestServerOptions } from './server.ts';

export interface ReceivedMail {
  to: string;
  raw: string;
  subject: string;
  /** The 6-digit code in the text. */
  code: string | undefined;
}

export interface MailServer {
  url: string;
  received: ReceivedMail[];
  /** Waits for the next mail to `to` after the `seen` mails it had (default: any it has not returned yet). */
  nextMail(to: string, timeoutMs?: number): Promise<ReceivedMail>;
  close(): Promise<void>;
}

export async function startMailServer(): Promise<MailServer> {
  const received: ReceivedMail[] = [];
  const returned = new Set<ReceivedMail>();
  const waiters = new Set<() => void>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        const unfolded = raw.replace(/=\r?\n/g, '');
        for (const rcpt of session.envelope.rcptTo) {
          received.push({
            to: rcpt.address.toLowerCase(),
            raw,
            subject: /^Subject: (.*)$/m.exec(raw)?.[1]?.trim() ?? '',
            code: /\b(\d{6})\b/.exec(
              unfolded
                .split(/\r?\n\r?\n/)
                .slice(1)
                .join('\n'),
            )?.[1],
          });
        }
        for (const wake of waiters) wake();
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    async nextMail(to, timeoutMs = 10_000) {
      const address = to.toLowerCase();
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const mail = received.find((m) => m.to === address && !returned.has(m));
        if (mail) {
          returned.add(mail);
          return mail;
        }
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no mail to ${to} within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const wake = () => {
            waiters.delete(wake);
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(wake, left);
          waiters.add(wake);
        });
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export interface AuthTestServer extends TestServer {
  mail: MailServer;
  /** A request to /auth (no API key; project header unless `project: false`). */
  auth(
    method: string,
    path: string,
    options?: {
      body?: unknown;
      token?: string;
      environment?: string;
      headers?: Record<string, string | undefined>;
      project?: string | false;
    },
  ): Promise<TestResponse>;
  /** Signs a user up, reads the code from the mail, confirms: the confirm-signup answer (token pair and user). */
  signupConfirmed(
    email: string,
    options?: { password?: string; roleId?: string; environment?: string },
  ): Promise<Session>;
  /** A data request with a user's access token. */
  asUser(
    token: string,
    method: string,
    path: string,
    options?: { body?: unknown; environment?: string },
  ): Promise<TestResponse>;
}

export interface Session {
  accessToken: string;
  refreshToken: string;
  user: { id: string; email: string; firstName: string; lastName: string; roles: string[] };
}

export const PASSWORD = 'correct-horse-42';

/** Rate limits high enough that only tests about them meet them. */
export function relaxedLimits(raw: any): void {
  raw.rateLimits = {
    ...raw.rateLimits,
    signupPerMinutePerIp: 10_000,
    loginPerMinutePerIp: 10_000,
    recoveryPerMinutePerEmail: 10_000,
    codePerMinutePerIp: 10_000,
    accountPerMinutePerUser: 10_000,
    accountChangesPerMinutePerUser: 10_000,
    dataPerMinutePerCaller: raw.rateLimits?.dataPerMinutePerProject ?? 6000,
  };
}

export async function startAuthServer(
  options: TestServerOptions & { mail?: MailServer } = {},
): Promise<AuthTestServer> {
  const mail = options.mail ?? (await startMailServer());
  const t = await startTestServer({
    ...options,
    configPatch: (raw) => {
      relaxedLimits(raw);
      raw.mail = { ...raw.mail, smtpUrl: mail.url, from: 'shop <no-reply@shop.test>' };
      options.configPatch?.(raw);
    },
  });
  const auth: AuthTestServer['auth'] = (method, path, o = {}) =>
    t.request(method, path, {
      key: false,
      body: o.body,
      project: o.project,
      environment: o.environment,
      headers: { ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...o.headers },
    });
  const signupConfirmed: AuthTestServer['signupConfirmed'] = async (email, o = {}) => {
    const password = o.password ?? PASSWORD;
    const signup = await auth('POST', '/auth/signup', {
      environment: o.environment,
      body: { email, password, firstName: 'Test', lastName: 'User', ...(o.roleId ? { roleId: o.roleId } : {}) },
    });
    expect(signup.status, signup.text).toBe(201);
    const { code } = await mail.nextMail(email);
    const confirmed = await auth('POST', '/auth/confirm-signup', { environment: o.environment, body: { email, code } });
    expect(confirmed.status, confirmed.text).toBe(200);
    return confirmed.body as Session;
  };
  const asUser: AuthTestServer['asUser'] = (token, method, path, o = {}) =>
    t.request(method, path, {
      key: false,
      body: o.body,
      environment: o.environment,
      headers: { authorization: `Bearer ${token}` },
    });
  return {
    ...t,
    mail,
    auth,
    signupConfirmed,
    asUser,
    async close() {
      await t.close();
      if (!options.mail) await mail.close();
    },
  };
}

/** An /auth error answer, exactly: status, JSON, `{ error: code }` plus the members given. */
export function expectAuthError(
  res: TestResponse,
  status: number,
  code: string,
  extra: Record<string, unknown> = {},
): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.body).toEqual({ error: code, ...extra });
}

/** A VALIDATION_ERROR naming `fields` (each violation exactly `{ field, rule, message }`). */
export function expectViolations(res: TestResponse, fields: string[]): void {
  expect(res.status, res.text).toBe(400);
  expect(Object.keys(res.body).sort()).toEqual(['error', 'violations']);
  expect(res.body.error).toBe('VALIDATION_ERROR');
  for (const v of res.body.violations) expect(Object.keys(v).sort()).toEqual(['field', 'message', 'rule']);
  expect([...new Set(res.body.violations.map((v: { field: string }) => v.field))].sort()).toEqual([...fields].sort());
}
