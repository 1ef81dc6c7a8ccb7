/**
 * CORS for browser apps (config `cors: { origins, credentials }`, default: none): preflights and
 * actual requests on /auth and the data API, allowed and disallowed origins, "*", credentials, and
 * the config rule that "*" cannot go with credentials. Raw fetch, to see exactly the headers sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../runtime/config/index.ts';
import { PASSWORD, startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { readResponse, type TestResponse } from '../support/server.ts';

const APP = 'https://app.example';
const EVIL = 'https://evil.example';
const CITY = '/gw/api/rest/City';

let counter = 0;
const uniqueEmail = (label: string) => `cors-${label}-${++counter}@example.com`;

async function raw(
  t: AuthTestServer,
  method: string,
  p: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<TestResponse> {
  const h = { ...headers };
  let text: string | undefined;
  if (body !== undefined) {
    text = JSON.stringify(body);
    h['content-type'] = 'application/json';
  }
  return readResponse(await fetch(`${t.url}${p}`, { method, headers: h, body: text }));
}

function preflight(
  t: AuthTestServer,
  p: string,
  origin: string,
  method: string,
  requestHeaders: string,
): Promise<TestResponse> {
  return raw(t, 'OPTIONS', p, {
    origin,
    'access-control-request-method': method,
    'access-control-request-headers': requestHeaders,
  });
}

/** A comma-separated header as a lower-cased list. */
function list(value: string | null): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '');
}

function corsHeaderNames(res: TestResponse): string[] {
  return [...res.headers.keys()].filter((name) => name.startsWith('access-control-'));
}

describe('default config (no cors.origins)', () => {
  let t: AuthTestServer;
  beforeAll(async () => {
    t = await startAuthServer();
  });
  afterAll(() => t?.close());

  it('a request with an Origin gets no Access-Control-Allow-Origin', async () => {
    const login = await raw(
      t,
      'POST',
      '/auth/login',
      { origin: APP, 'x-project-id': 'shop' },
      { email: uniqueEmail('none'), password: PASSWORD },
    );
    expect(login.status, login.text).toBe(401);
    expect(corsHeaderNames(login)).toEqual([]);

    const data = await raw(t, 'GET', CITY, {
      origin: APP,
      'x-project-id': 'shop',
      authorization: `Bearer ${t.adminKey}`,
    });
    expect(data.status, data.text).toBe(200);
    expect(corsHeaderNames(data)).toEqual([]);
  });

  it('an OPTIONS preflight to /auth/login is not answered with CORS headers', async () => {
    const res = await preflight(t, '/auth/login', APP, 'POST', 'content-type,x-project-id');
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(corsHeaderNames(res)).toEqual([]);

    const data = await preflight(t, CITY, APP, 'GET', 'authorization,x-project-id');
    expect(corsHeaderNames(data)).toEqual([]);
  });
});

describe('cors.origins ["https://app.example"]', () => {
  let t: AuthTestServer;
  beforeAll(async () => {
    t = await startAuthServer({
      configPatch: (c) => {
        c.cors = { origins: [APP] };
      },
    });
  });
  afterAll(() => t?.close());

  it('preflight OPTIONS /auth/login → 204 with the origin, POST allowed, the requested headers echoed, no credentials', async () => {
    const res = await preflight(t, '/auth/login', APP, 'POST', 'content-type,x-project-id');
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(list(res.headers.get('access-control-allow-methods'))).toContain('post');
    expect(list(res.headers.get('access-control-allow-headers')).sort()).toEqual(['content-type', 'x-project-id']);
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    expect(list(res.headers.get('vary'))).toContain('origin');
  });

  it('preflight OPTIONS on a data route → 204 likewise', async () => {
    const res = await preflight(t, CITY, APP, 'GET', 'authorization,x-project-id');
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(list(res.headers.get('access-control-allow-methods'))).toContain('get');
    expect(list(res.headers.get('access-control-allow-headers')).sort()).toEqual(['authorization', 'x-project-id']);
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();

    // the other data methods a browser app needs
    const patch = await preflight(t, `${CITY}/1`, APP, 'PATCH', 'authorization,content-type,x-project-id');
    expect(patch.status, patch.text).toBe(204);
    expect(patch.headers.get('access-control-allow-origin')).toBe(APP);
    expect(list(patch.headers.get('access-control-allow-methods'))).toEqual(
      expect.arrayContaining(['patch', 'delete', 'post', 'get']),
    );
  });

  it('an actual POST /auth/login from the origin carries Access-Control-Allow-Origin and Vary: Origin', async () => {
    const email = uniqueEmail('login');
    await t.signupConfirmed(email);
    const res = await raw(
      t,
      'POST',
      '/auth/login',
      { origin: APP, 'x-project-id': 'shop' },
      { email, password: PASSWORD },
    );
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(list(res.headers.get('vary'))).toContain('origin');
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();

    // an error answer is readable by the app too
    const bad = await raw(
      t,
      'POST',
      '/auth/login',
      { origin: APP, 'x-project-id': 'shop' },
      { email, password: 'wrong-password-1' },
    );
    expect(bad.status, bad.text).toBe(401);
    expect(bad.body).toEqual({ error: 'AUTH_INVALID_CREDENTIALS' });
    expect(bad.headers.get('access-control-allow-origin')).toBe(APP);
  });

  it('an actual GET on a data route carries Access-Control-Allow-Origin and exposes Location and RateLimit-Remaining', async () => {
    const res = await raw(t, 'GET', CITY, {
      origin: APP,
      'x-project-id': 'shop',
      authorization: `Bearer ${t.adminKey}`,
    });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(list(res.headers.get('vary'))).toContain('origin');
    expect(list(res.headers.get('access-control-expose-headers'))).toEqual(
      expect.arrayContaining(['location', 'ratelimit-remaining']),
    );

    // a 401 Problem from the data API is readable by the app as well
    const denied = await raw(t, 'GET', CITY, {
      origin: APP,
      'x-project-id': 'shop',
      authorization: 'Bearer not-a-key',
    });
    expect(denied.status, denied.text).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe(APP);
  });

  it('a disallowed origin gets no Access-Control-Allow-Origin (preflight or actual request)', async () => {
    const pre = await preflight(t, '/auth/login', EVIL, 'POST', 'content-type,x-project-id');
    expect(pre.headers.get('access-control-allow-origin')).toBeNull();
    expect(pre.headers.get('access-control-allow-credentials')).toBeNull();

    const login = await raw(
      t,
      'POST',
      '/auth/login',
      { origin: EVIL, 'x-project-id': 'shop' },
      { email: uniqueEmail('evil'), password: PASSWORD },
    );
    expect(login.status, login.text).toBe(401);
    expect(login.headers.get('access-control-allow-origin')).toBeNull();

    const data = await raw(t, 'GET', CITY, {
      origin: EVIL,
      'x-project-id': 'shop',
      authorization: `Bearer ${t.adminKey}`,
    });
    expect(data.status, data.text).toBe(200);
    expect(data.headers.get('access-control-allow-origin')).toBeNull();
    expect(data.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('a request without an Origin gets no CORS headers', async () => {
    const data = await raw(t, 'GET', CITY, { 'x-project-id': 'shop', authorization: `Bearer ${t.adminKey}` });
    expect(data.status, data.text).toBe(200);
    expect(data.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('cors.origins ["*"]', () => {
  let t: AuthTestServer;
  beforeAll(async () => {
    t = await startAuthServer({
      configPatch: (c) => {
        c.cors = { origins: ['*'] };
      },
    });
  });
  afterAll(() => t?.close());

  it('any origin gets Access-Control-Allow-Origin "*" (preflight and actual requests), without credentials', async () => {
    const pre = await preflight(t, '/auth/login', EVIL, 'POST', 'content-type,x-project-id');
    expect(pre.status, pre.text).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-credentials')).toBeNull();

    const login = await raw(
      t,
      'POST',
      '/auth/login',
      { origin: APP, 'x-project-id': 'shop' },
      { email: uniqueEmail('star'), password: PASSWORD },
    );
    expect(login.status, login.text).toBe(401);
    expect(login.headers.get('access-control-allow-origin')).toBe('*');

    const data = await raw(t, 'GET', CITY, {
      origin: EVIL,
      'x-project-id': 'shop',
      authorization: `Bearer ${t.adminKey}`,
    });
    expect(data.status, data.text).toBe(200);
    expect(data.headers.get('access-control-allow-origin')).toBe('*');
    expect(data.headers.get('access-control-allow-credentials')).toBeNull();
  });
});

describe('cors.credentials', () => {
  let t: AuthTestServer;
  beforeAll(async () => {
    t = await startAuthServer({
      configPatch: (c) => {
        c.cors = { origins: [APP], credentials: true };
      },
    });
  });
  afterAll(() => t?.close());

  it('with a listed origin: Access-Control-Allow-Credentials true on preflight and actual requests', async () => {
    const pre = await preflight(t, '/auth/login', APP, 'POST', 'content-type,x-project-id');
    expect(pre.status, pre.text).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe(APP);
    expect(pre.headers.get('access-control-allow-credentials')).toBe('true');

    const data = await raw(t, 'GET', CITY, {
      origin: APP,
      'x-project-id': 'shop',
      authorization: `Bearer ${t.adminKey}`,
    });
    expect(data.status, data.text).toBe(200);
    expect(data.headers.get('access-control-allow-origin')).toBe(APP);
    expect(data.headers.get('access-control-allow-credentials')).toBe('true');

    const evil = await raw(t, 'GET', CITY, {
      origin: EVIL,
      'x-project-id': 'shop',
      authorization: `Bearer ${t.adminKey}`,
    });
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('origins ["*"] with credentials true is rejected at config validation', () => {
    const config = { project: { id: 'shop' }, cors: { origins: ['*'], credentials: true } };
    let error: unknown;
    try {
      parseConfig(config, 'svcgen.config.json');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.length).toBe(1);
    expect(problems[0]).toMatch(/^\$\.cors\b/);
    expect((error as ConfigError).message).toContain('cors');
    // each part alone is fine
    expect(() =>
      parseConfig({ project: { id: 'shop' }, cors: { origins: ['*'] } }, 'svcgen.config.json'),
    ).not.toThrow();
    expect(() =>
      parseConfig({ project: { id: 'shop' }, cors: { origins: [APP], credentials: true } }, 'svcgen.config.json'),
    ).not.toThrow();
  });
});
