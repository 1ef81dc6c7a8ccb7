/**
 * Endpoints of a project's own code (docs/own-code.md "Endpoints"): the data routes' admission
 * (401, 429 headers, request id, CORS), the access rule per kind of caller (403), the zod input
 * (422 naming fields) and output, and what a throw answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ServiceError } from '../../examples/shop/generated/client.ts';
import { defineCode, defineEndpoint, refuse } from '../../examples/shop/generated/code.ts';
import { Problem } from '../../runtime/usercode/index.ts';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { expectProblem, MANAGEMENT_TOKEN, startTestServer, type TestResponse } from '../support/server.ts';

const REST = '/gw/api/rest';
const APP = 'https://app.example';

const echo = defineEndpoint({
  name: 'echo',
  method: 'POST',
  path: '/echo',
  access: { roles: ['catalog'] },
  input: z.object({ name: z.string().min(1), qty: z.number().int().min(1), tags: z.array(z.string()).optional() }),
  output: z.object({ greeting: z.string(), caller: z.string() }),
  async handler(input, ctx) {
    return { greeting: `hello ${input.name} x${input.qty}`, caller: ctx.caller.kind };
  },
});

const rename = defineEndpoint({
  name: 'rename',
  method: 'POST',
  path: '/items/:itemId/rename',
  access: { roles: ['catalog'] },
  input: z.object({ itemId: z.coerce.number().int(), name: z.string() }),
  output: z.object({ itemId: z.number(), name: z.string() }),
  async handler(input) {
    return input;
  },
});

const customerOrders = defineEndpoint({
  name: 'customerOrders',
  method: 'GET',
  path: '/stats/orders/:customerId',
  access: { roles: ['admin'] },
  input: z.object({ customerId: z.coerce.number().int(), status: z.enum(['open', 'paid']).optional() }),
  output: z.object({ customerId: z.number(), count: z.number(), status: z.string() }),
  async handler(input, ctx) {
    const [row] = await ctx.sql<{ n: number }>`select ${input.customerId}::int + 0 as n`;
    return { customerId: row!.n, count: 0, status: input.status ?? 'any' };
  },
});

const ping = defineEndpoint({
  name: 'ping',
  method: 'GET',
  path: '/ping',
  access: 'public',
  input: z.object({}),
  output: z.object({ caller: z.string(), environment: z.string(), requestId: z.string() }),
  async handler(_input, ctx) {
    return { caller: ctx.caller.kind, environment: ctx.environment, requestId: ctx.requestId };
  },
});

const whoami = defineEndpoint({
  name: 'whoami',
  method: 'GET',
  path: '/whoami',
  access: 'signed-in',
  input: z.object({}),
  output: z.object({ userId: z.string() }),
  async handler(_input, ctx) {
    return { userId: ctx.caller.kind === 'user' ? ctx.caller.userId : '' };
  },
});

const failures = {
  problem: defineEndpoint({
    name: 'failProblem',
    method: 'PUT',
    path: '/fail/problem',
    access: { roles: ['admin'] },
    input: z.object({}),
    output: z.object({}),
    async handler() {
      throw new Problem('conflict', 'this order is checked out already');
    },
  }),
  refused: defineEndpoint({
    name: 'failRefused',
    method: 'POST',
    path: '/fail/refused',
    access: { roles: ['admin'] },
    input: z.object({}),
    output: z.object({}),
    async handler() {
      throw refuse({ qty: 'at most 3 per customer' });
    },
  }),
  crash: defineEndpoint({
    name: 'failCrash',
    method: 'DELETE',
    path: '/fail/crash',
    access: { roles: ['admin'] },
    input: z.object({}),
    output: z.object({}),
    async handler(_input, ctx) {
      await ctx.sql`select * from no_such_table_secret_7`;
      return {};
    },
  }),
  thrown: defineEndpoint({
    name: 'failThrown',
    method: 'PATCH',
    path: '/fail/thrown',
    access: { roles: ['admin'] },
    input: z.object({}),
    output: z.object({}),
    async handler() {
      throw new Error('password=hunter2 at secret place');
    },
  }),
  output: defineEndpoint({
    name: 'failOutput',
    method: 'GET',
    path: '/fail/output',
    access: { roles: ['admin'] },
    input: z.object({}),
    output: z.object({ total: z.number() }),
    handler: async () => ({ total: 'hidden-value-9' }) as any,
  }),
  serviceError: defineEndpoint({
    name: 'failServiceError',
    method: 'GET',
    path: '/fail/service-error',
    access: { roles: ['admin'] },
    input: z.object({}),
    output: z.object({}),
    async handler() {
      // What ctx.data throws for a record the caller cannot see (the generated client's error).
      throw new ServiceError({
        type: '/errors/not-found',
        title: 'Not Found',
        status: 404,
        detail: 'no Order with id 7',
        instance: '/gw/api/rest/Order/7',
        errors: [],
      });
    },
  }),
  anonymousData: defineEndpoint({
    name: 'anonymousData',
    method: 'GET',
    path: '/fail/anonymous-data',
    access: 'public',
    input: z.object({}),
    output: z.object({}),
    async handler(_input, ctx) {
      await ctx.data.Order.list();
      return {};
    },
  }),
};

let t: AuthTestServer;
let logs: string[];
let catalogKey: string;
let otherKey: string;
let user: Session;

beforeAll(async () => {
  logs = [];
  t = await startAuthServer({
    code: defineCode({ endpoints: [echo, rename, customerOrders, ping, whoami, ...Object.values(failures)] }),
    logging: { format: 'json', level: 'warn', destination: { write: (line: string) => void logs.push(line) } },
    configPatch: (c) => {
      c.cors = { origins: [APP] };
    },
  });
  catalogKey = (await t.createKey(['catalog'])).key;
  otherKey = (await t.createKey(['customer'])).key;
  user = await t.signupConfirmed('endpoints-user@example.com');
});
afterAll(() => t?.close());

/** The same answer, but for `instance` (each names its own path). */
function sameProblem(a: TestResponse, b: TestResponse): void {
  expect(a.status, a.text).toBe(b.status);
  const { instance: _a, ...bodyA } = a.body;
  const { instance: _b, ...bodyB } = b.body;
  expect(bodyA).toEqual(bodyB);
}

describe('access', () => {
  const call = (key: string | false, headers?: Record<string, string>) =>
    t.request('POST', `${REST}/echo`, { key, headers, body: { name: 'ann', qty: 2 } });

  it('the role the endpoint names → 200 with the parsed output', async () => {
    const res = await call(catalogKey);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ greeting: 'hello ann x2', caller: 'apiKey' });
  });

  it('without credentials → the 401 of the data API, exactly', async () => {
    const res = await call(false);
    expectProblem(res, 401, 'unauthorized');
    sameProblem(res, await t.request('GET', `${REST}/City`, { key: false }));
    expect(res.body.detail).toBe(
      'send credentials in the Authorization header: "Bearer <access token or API key>" or "<key prefix> <API key>"',
    );
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('an invalid credential → 401 like the data API', async () => {
    const res = await call('ApiKey_not-a-real-key');
    expectProblem(res, 401, 'unauthorized');
    sameProblem(res, await t.request('GET', `${REST}/City`, { key: 'ApiKey_not-a-real-key' }));
  });

  it('every other role → 403 naming the endpoint', async () => {
    for (const key of [otherKey, t.adminKey]) {
      const res = await call(key);
      expectProblem(res, 403, 'forbidden');
      expect(res.body.detail).toBe('your role may not call echo');
    }
    const res = await t.asUser(user.accessToken, 'POST', `${REST}/echo`, { body: { name: 'ann', qty: 2 } });
    expectProblem(res, 403, 'forbidden');
    expect(res.body.detail).toBe('your role may not call echo');
  });

  it('a management token → 403, even at a public endpoint', async () => {
    for (const path of ['/echo', '/ping']) {
      const res = await t.request(path === '/ping' ? 'GET' : 'POST', `${REST}${path}`, {
        key: MANAGEMENT_TOKEN,
        body: path === '/ping' ? undefined : { name: 'ann', qty: 2 },
      });
      expectProblem(res, 403, 'forbidden');
      expect(res.body.detail).toBe('management tokens manage API keys and webhooks; they call no endpoints');
    }
  });

  it('a forbidden caller learns nothing of the input rules: 403 before validation', async () => {
    const res = await t.request('POST', `${REST}/echo`, { key: otherKey, body: { qty: 'x' } });
    expectProblem(res, 403, 'forbidden');
  });

  it('public: no credentials → 200 as an anonymous caller; credentials are still verified', async () => {
    const anonymous = await t.request('GET', `${REST}/ping`, { key: false });
    expect(anonymous.status, anonymous.text).toBe(200);
    expect(anonymous.body).toMatchObject({ caller: 'anonymous', environment: 'master' });
    expect(anonymous.body.requestId).toBe(anonymous.headers.get('x-request-id'));

    const keyed = await t.request('GET', `${REST}/ping`, { key: catalogKey });
    expect(keyed.body.caller).toBe('apiKey');
    const staging = await t.request('GET', `${REST}/ping`, { key: false, environment: 'staging' });
    expect(staging.body.environment).toBe('staging');

    const bad = await t.request('GET', `${REST}/ping`, { key: 'ApiKey_not-a-real-key' });
    expectProblem(bad, 401, 'unauthorized');
    // tenancy still applies without credentials
    const noProject = await t.request('GET', `${REST}/ping`, { key: false, project: false });
    expectProblem(noProject, 400, 'missing-project');
  });

  it('public: ctx.data of an anonymous caller holds no grant (its 403 passes through), never the system', async () => {
    const res = await t.request('GET', `${REST}/fail/anonymous-data`, { key: false });
    expectProblem(res, 403, 'forbidden');
    expect(res.body.detail).toBe('your role may not read Order records');
  });

  it("signed-in: a user's access token → 200; an API key → 403; none → 401", async () => {
    const ok = await t.asUser(user.accessToken, 'GET', `${REST}/whoami`);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual({ userId: user.user.id });
    const key = await t.request('GET', `${REST}/whoami`, { key: t.adminKey });
    expectProblem(key, 403, 'forbidden');
    expect(key.body.detail).toBe('whoami is for signed-in users; an API key may not call it');
    expectProblem(await t.request('GET', `${REST}/whoami`, { key: false }), 401, 'unauthorized');
  });
});

describe('input and output', () => {
  it('a body the input schema refuses → 422 validation naming each field', async () => {
    const res = await t.request('POST', `${REST}/echo`, { key: catalogKey, body: { name: '', qty: 1.5, tags: [1] } });
    expectProblem(res, 422, 'validation');
    expect(res.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['name', 'qty', 'tags.0']);
    for (const e of res.body.errors) expect(e.message.startsWith(`${e.field}: `)).toBe(true);
    expect(res.body.errors.find((e: { field: string }) => e.field === 'qty').rule).toBe('invalid_type');
  });

  it('no body, not JSON, or not application/json → the data routes’ 400 and 415', async () => {
    expectProblem(await t.request('POST', `${REST}/echo`, { key: catalogKey }), 400, 'invalid-json');
    expectProblem(
      await t.request('POST', `${REST}/echo`, {
        key: catalogKey,
        raw: '{"name":',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'invalid-json',
    );
    expectProblem(
      await t.request('POST', `${REST}/echo`, {
        key: catalogKey,
        raw: 'name=ann',
        headers: { 'content-type': 'text/plain' },
      }),
      415,
      'unsupported-media-type',
    );
    const deep = `${'['.repeat(200)}${']'.repeat(200)}`;
    expectProblem(
      await t.request('POST', `${REST}/echo`, {
        key: catalogKey,
        raw: deep,
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'invalid-json',
    );
  });

  it('GET: path and query parameters are the input (coerced by the schema); project_id is not', async () => {
    const res = await t.request('GET', `${REST}/stats/orders/42?status=paid`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ customerId: 42, count: 0, status: 'paid' });
    const bad = await t.request('GET', `${REST}/stats/orders/abc?status=lost`);
    expectProblem(bad, 422, 'validation');
    expect(bad.body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['customerId', 'status']);
  });

  it('an answer the output schema refuses → 500 with nothing of it; the log has it', async () => {
    const res = await t.request('GET', `${REST}/fail/output`);
    expectProblem(res, 500, 'internal');
    expect(res.text).not.toContain('hidden-value-9');
    expect(logs.join('\n')).toContain('endpoint failOutput returned a value its output schema refuses');
  });
});

describe('path parameters of a POST', () => {
  const call = (body: unknown) => t.request('POST', `${REST}/items/7/rename`, { key: catalogKey, body });

  it('join the body', async () => {
    const res = await call({ name: 'bolt' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ itemId: 7, name: 'bolt' });
  });

  it('the body may repeat one only with the path value; else 422 naming it', async () => {
    expect((await call({ itemId: '7', name: 'bolt' })).status).toBe(200);
    const res = await call({ itemId: 8, name: 'bolt' });
    expectProblem(res, 422, 'validation');
    expect(res.body.errors).toEqual([
      { field: 'itemId', rule: 'path', message: 'itemId: it is given by the path ("7"); leave it out of the body' },
    ]);
  });

  it('a body that is no object → 422', async () => {
    const res = await call(['bolt']);
    expectProblem(res, 422, 'validation');
    expect(res.body.detail).toBe('the body must be a JSON object: this endpoint adds its path parameters to it');
  });
});

describe('errors', () => {
  it('a thrown Problem keeps its status and body', async () => {
    const res = await t.request('PUT', `${REST}/fail/problem`, { body: {} });
    expectProblem(res, 409, 'conflict');
    expect(res.body.detail).toBe('this order is checked out already');
    expect(res.body.instance).toBe(`${REST}/fail/problem`);
  });

  it('refuse() → 422 naming the field', async () => {
    const res = await t.request('POST', `${REST}/fail/refused`, { body: {} });
    expectProblem(res, 422, 'validation', 'qty');
    expect(res.body.errors).toEqual([{ field: 'qty', rule: 'refused', message: 'at most 3 per customer' }]);
  });

  it("a data API ServiceError keeps its Problem's status and body", async () => {
    const res = await t.request('GET', `${REST}/fail/service-error`);
    expectProblem(res, 404, 'not-found');
    expect(res.body.detail).toBe('no Order with id 7');
    expect(res.body.instance).toBe(`${REST}/fail/service-error`);
  });

  it('anything else → 500 with the request id only: no message, stack or SQL', async () => {
    for (const [method, path, secret] of [
      ['PATCH', '/fail/thrown', 'hunter2'],
      ['DELETE', '/fail/crash', 'no_such_table_secret_7'],
    ] as const) {
      const res = await t.request(method, `${REST}${path}`, { body: method === 'PATCH' ? {} : undefined });
      expectProblem(res, 500, 'internal');
      const id = res.headers.get('x-request-id');
      expect(id).toBeTruthy();
      const name = path === '/fail/thrown' ? 'failThrown' : 'failCrash';
      expect(res.body.detail).toBe(`endpoint ${name} failed; the server's log has the detail under request id ${id}`);
      expect(res.body.requestId).toBe(id);
      expect(res.text).not.toContain(secret);
      expect(res.text).not.toMatch(/\bat \S+:\d+/); // no stack frame
      expect(logs.some((line) => line.includes(id!) && line.includes(secret))).toBe(true);
    }
  });
});

describe('the admission of the data routes', () => {
  it('rate limit and request id headers on answers and errors', async () => {
    for (const res of [
      await t.request('POST', `${REST}/echo`, { key: catalogKey, body: { name: 'ann', qty: 1 } }),
      await t.request('POST', `${REST}/echo`, { key: catalogKey, body: {} }),
      await t.request('GET', `${REST}/ping`, { key: false }),
    ]) {
      expect(res.headers.get('ratelimit-limit'), res.text).toMatch(/^\d+$/);
      expect(res.headers.get('ratelimit-remaining')).toMatch(/^\d+$/);
      expect(res.headers.get('x-request-id')).toBeTruthy();
    }
    const sent = await t.request('GET', `${REST}/ping`, { key: false, headers: { 'x-request-id': 'trace-123' } });
    expect(sent.headers.get('x-request-id')).toBe('trace-123');
    expect(sent.body.requestId).toBe('trace-123');
  });

  it('anonymous callers of a public endpoint count per client address', async () => {
    const first = await t.request('GET', `${REST}/ping`, { key: false });
    const second = await t.request('GET', `${REST}/ping`, { key: false });
    expect(Number(second.headers.get('ratelimit-remaining'))).toBeLessThan(
      Number(first.headers.get('ratelimit-remaining')),
    );
  });

  it('CORS: a preflight of an endpoint → 204 allowing its method; the answer carries the origin', async () => {
    const preflight = await fetch(`${t.url}${REST}/fail/problem`, {
      method: 'OPTIONS',
      headers: {
        origin: APP,
        'access-control-request-method': 'PUT',
        'access-control-request-headers': 'authorization,content-type,x-project-id',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(APP);
    expect(preflight.headers.get('access-control-allow-methods')?.toLowerCase().split(',')).toContain('put');
    const res = await t.request('GET', `${REST}/ping`, { key: false, headers: { origin: APP } });
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
  });

  it('another method at an endpoint path → 404 Problem', async () => {
    expectProblem(await t.request('GET', `${REST}/echo`, { key: catalogKey }), 404, 'not-found');
  });
});

describe('http.requestTimeoutMs', () => {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let slow: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    slow = await startTestServer({
      code: defineCode({
        endpoints: [
          defineEndpoint({
            name: 'slow',
            method: 'GET',
            path: '/slow',
            access: 'public',
            input: z.object({}),
            output: z.object({}),
            async handler() {
              await held;
              return {};
            },
          }),
        ],
      }),
      configPatch: (c) => {
        c.http = { ...c.http, requestTimeoutMs: 300, headersTimeoutMs: 300 };
      },
    });
  });
  afterAll(async () => {
    release();
    await slow?.close();
  });

  it("an endpoint that does not answer in time → 500 internal naming the setting (the code's fault)", async () => {
    const res = await slow.request('GET', `${REST}/slow`, { key: false });
    expectProblem(res, 500, 'internal');
    const id = res.headers.get('x-request-id');
    expect(res.body.detail).toBe(
      `endpoint slow did not answer within http.requestTimeoutMs (300 ms); the server's log has the detail under request id ${id}`,
    );
    expect(res.body.requestId).toBe(id);
    expect(res.headers.get('ratelimit-limit')).toMatch(/^\d+$/);
  });
});
