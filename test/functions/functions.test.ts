/**
 * PostgreSQL functions served as endpoints (docs/own-code.md "Database functions"): the fixture
 * project test/fixtures/functions, whose migration creates them, over real HTTP.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MANAGEMENT_TOKEN, startTestServer, type TestResponse } from '../support/server.ts';
import { startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { generateFixtureProject } from '../support/fixture-project.ts';

const RPC = '/gw/api/rest/rpc';

let project: Awaited<ReturnType<typeof generateFixtureProject>>;
let t: AuthTestServer;
let clerk: { id: string; key: string };
const errors: string[] = [];

beforeAll(async () => {
  project = await generateFixtureProject('functions');
  t = await startAuthServer({
    project: project.dir,
    log: (line) => errors.push(line),
    configPatch: (raw) => {
      raw.auth = { ...raw.auth, defaultRole: 'clerk' };
      raw.environments = ['master', 'staging'];
    },
  });
  clerk = await t.createKey(['clerk'], { context: { shop: 'north' } });
  for (const [day, status, amount] of [
    ['2026-01-01', 'PAID', 10],
    ['2026-01-01', 'PENDING', 5],
    ['2026-01-02', 'PAID', 7.5],
    ['2025-12-31', 'PAID', 100],
  ] as const)
    await t.db.query(
      `INSERT INTO env_master.sales (day, status, amount, seller_id, "updatedAt") VALUES ($1, $2, $3, 'seed', now())`,
      [day, status, amount],
    );
}, 120_000);

afterAll(async () => {
  if (process.env.SHOW_LOG) console.log(errors.join('\n'));
  await t?.close();
  await project?.remove();
});

/** A Problem answer, exactly. */
function expectProblem(res: TestResponse, status: number, type: string, detail: string, errors: unknown[] = []): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toEqual({
    type: `/errors/${type}`,
    title: expect.any(String),
    status,
    detail,
    instance: expect.any(String),
    errors,
  });
}

describe('calling a function', () => {
  it('answers the rows of RETURNS TABLE(...), its DEFAULT taking the place of a left-out argument', async () => {
    const res = await t.request('POST', `${RPC}/sales_report`, { body: { since: '2026-01-01' } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      data: [
        { day: '2026-01-01', orders: 2, revenue: 15 },
        { day: '2026-01-02', orders: 1, revenue: 7.5 },
      ],
    });
    const paid = await t.request('POST', `${RPC}/sales_report`, { body: { since: '2026-01-01', status: 'PAID' } });
    expect(paid.body).toEqual({
      data: [
        { day: '2026-01-01', orders: 1, revenue: 10 },
        { day: '2026-01-02', orders: 1, revenue: 7.5 },
      ],
    });
    const none = await t.request('POST', `${RPC}/sales_report`, { body: { since: '2030-01-01' } });
    expect(none.body).toEqual({ data: [] });
  });

  it('answers a scalar, SETOF a scalar, void, and SETOF a model table by field names', async () => {
    expect((await t.request('POST', `${RPC}/check_amount`, { body: { amount: '2.5' } })).body).toEqual({ data: 5 });
    expect((await t.request('POST', `${RPC}/check_amount`, { body: { amount: null } })).body).toEqual({ data: null });
    const labels = await t.request('POST', `${RPC}/labels`, {
      body: { ids: [1, 2], loud: true, meta: { suffix: 'x' }, big: '9007199254740993' },
    });
    expect(labels.body, labels.text).toEqual({ data: ['ID 1 x 9007199254740993', 'ID 2 x 9007199254740993'] });
    const touched = await t.request('POST', `${RPC}/touch_nothing`);
    expect(touched.status, touched.text).toBe(200);
    expect(touched.body).toEqual({ data: null });
    const recorded = await t.request('POST', `${RPC}/record_sale`, { body: { day: '2026-02-01', amount: 3 } });
    expect(recorded.status, recorded.text).toBe(200);
    expect(recorded.body.data).toEqual([
      {
        id: expect.any(Number),
        day: '2026-02-01',
        status: 'PENDING',
        amount: 3,
        sellerId: expect.any(String),
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      },
    ]);
  });

  it("runs in the environment of the request: its schema's function, on its schema's tables", async () => {
    const staging = await t.createKey(['admin'], { environment: 'staging' });
    const res = await t.request('POST', `${RPC}/sales_report`, {
      key: staging.key,
      body: { since: '2000-01-01' },
      environment: 'staging',
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: [] });
    const who = await t.request('POST', `${RPC}/whoami`, { key: staging.key, environment: 'staging' });
    expect(who.body.data).toMatchObject({ environment: 'staging', api_key_id: staging.id });
  });
});

describe('who may call', () => {
  it('a role the function lists may; another role gets 403; an empty roles list lets nobody', async () => {
    const allowed = await t.request('POST', `${RPC}/sales_report`, { key: clerk.key, body: { since: '2026-01-02' } });
    expect(allowed.status, allowed.text).toBe(200);
    expectProblem(
      await t.request('POST', `${RPC}/check_amount`, { key: clerk.key, body: { amount: 1 } }),
      403,
      'forbidden',
      'your role may not call the database function check_amount',
    );
    expectProblem(
      await t.request('POST', `${RPC}/locked`),
      403,
      'forbidden',
      'your role may not call the database function locked',
    );
  });

  it('the grant comes before the arguments: a refused caller learns nothing of them', async () => {
    expectProblem(
      await t.request('POST', `${RPC}/check_amount`, { key: clerk.key, body: { nope: 1 } }),
      403,
      'forbidden',
      'your role may not call the database function check_amount',
    );
  });

  it('a refused call runs nothing: a role without the function writes no row through it', async () => {
    const count = async () =>
      (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM env_master.sales'))[0]!.n;
    const before = await count();
    expectProblem(
      await t.request('POST', `${RPC}/record_sale`, { key: clerk.key, body: { day: '2026-03-01', amount: 1 } }),
      403,
      'forbidden',
      'your role may not call the database function record_sale',
    );
    expectProblem(
      await t.request('POST', `${RPC}/record_sale`, { key: MANAGEMENT_TOKEN, body: { day: '2026-03-01', amount: 1 } }),
      403,
      'forbidden',
      'management tokens manage API keys and webhooks; they read and write no data',
    );
    expect(await count()).toBe(before);
  });

  it('without credentials: 401; with a management token: 403', async () => {
    expectProblem(
      await t.request('POST', `${RPC}/sales_report`, { key: false, body: { since: '2026-01-01' } }),
      401,
      'unauthorized',
      'send credentials in the Authorization header: "Bearer <access token or API key>" or "<key prefix> <API key>"',
    );
    expectProblem(
      await t.request('POST', `${RPC}/sales_report`, { key: MANAGEMENT_TOKEN, body: { since: '2026-01-01' } }),
      403,
      'forbidden',
      'management tokens manage API keys and webhooks; they read and write no data',
    );
  });

  it('an unknown function is 404 after the credentials; another method is 405', async () => {
    expect((await t.request('POST', `${RPC}/nothing_here`, { key: false })).status).toBe(401);
    expectProblem(
      await t.request('POST', `${RPC}/nothing_here`),
      404,
      'not-found',
      'there is no database function named "nothing_here"',
    );
    const get = await t.request('GET', `${RPC}/sales_report`);
    expectProblem(get, 405, 'method-not-allowed', '/gw/api/rest/rpc/sales_report answers POST, not GET');
    expect(get.headers.get('allow')).toBe('POST');
  });

  it('answers carry the data rate limit headers', async () => {
    const res = await t.request('POST', `${RPC}/sales_report`, { body: { since: '2026-01-01' } });
    expect(res.headers.get('ratelimit-limit')).toMatch(/^\d+$/);
    const refused = await t.request('POST', `${RPC}/check_amount`, { key: clerk.key, body: { amount: 1 } });
    expect(refused.headers.get('ratelimit-remaining')).toMatch(/^\d+$/);
  });
});

describe('arguments', () => {
  it('a wrong type, an unknown argument and a missing one are 422 naming each', async () => {
    expectProblem(
      await t.request('POST', `${RPC}/sales_report`, { body: { since: 'yesterday', status: 'LOST', extra: 1 } }),
      422,
      'validation',
      'sales_report has no argument "extra" (arguments: since, status); since: expected a date (YYYY-MM-DD); status: expected one of PENDING, PAID, SHIPPED',
      [
        {
          field: 'extra',
          rule: 'unknown_field',
          message: 'sales_report has no argument "extra" (arguments: since, status)',
        },
        { field: 'since', rule: 'type', message: 'since: expected a date (YYYY-MM-DD)' },
        { field: 'status', rule: 'enum', message: 'status: expected one of PENDING, PAID, SHIPPED' },
      ],
    );
    expectProblem(
      await t.request('POST', `${RPC}/sales_report`, { body: {} }),
      422,
      'validation',
      'since is required: expected a date (YYYY-MM-DD)',
      [{ field: 'since', rule: 'required', message: 'since is required: expected a date (YYYY-MM-DD)' }],
    );
    expectProblem(
      await t.request('POST', `${RPC}/sales_report`),
      422,
      'validation',
      'since is required: expected a date (YYYY-MM-DD)',
      [{ field: 'since', rule: 'required', message: 'since is required: expected a date (YYYY-MM-DD)' }],
    );
  });

  it('arrays, 64-bit integers, UUIDs and timestamps are checked element by element', async () => {
    expectProblem(
      await t.request('POST', `${RPC}/labels`, { body: { ids: [1, 'two'] } }),
      422,
      'validation',
      'ids[1]: expected an array of whole number (int4)s',
      [{ field: 'ids[1]', rule: 'type', message: 'ids[1]: expected an array of whole number (int4)s' }],
    );
    const res = await t.request('POST', `${RPC}/labels`, {
      body: { ids: [1], big: '99999999999999999999', ref: 'not-a-uuid', at: '2026-01-01T00:00:00' },
    });
    expect(res.status, res.text).toBe(422);
    expect(res.body.errors.map((e: { field: string }) => e.field)).toEqual(['at', 'ref', 'big']);
    expect((await t.request('POST', `${RPC}/check_amount`, { body: { amount: 2147483648 * 4 } })).status).toBe(200);
  });

  it('a body that is not a JSON object is 422; one that is not JSON is 400; another media type 415', async () => {
    expectProblem(
      await t.request('POST', `${RPC}/sales_report`, { body: ['2026-01-01'] }),
      422,
      'validation',
      "the body must be a JSON object of sales_report's arguments by name",
      [{ field: '', rule: 'type', message: 'the body must be a JSON object' }],
    );
    const broken = await t.request('POST', `${RPC}/sales_report`, {
      raw: '{"since": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(broken.status, broken.text).toBe(400);
    expect(broken.body.type).toBe('/errors/invalid-json');
    expectProblem(
      await t.request('POST', `${RPC}/sales_report`, { raw: 'since=2026', headers: { 'content-type': 'text/plain' } }),
      415,
      'unsupported-media-type',
      'Content-Type text/plain is not accepted here; send application/json',
    );
  });

  it('values reach the function as parameters, never as SQL', async () => {
    const res = await t.request('POST', `${RPC}/labels`, {
      body: { ids: [1], meta: { suffix: "'); DROP TABLE sales; --" } },
    });
    expect(res.body).toEqual({ data: ["id 1 '); DROP TABLE sales; --"] });
    expect((await t.db.query('SELECT count(*)::int AS n FROM env_master.sales'))[0]).toMatchObject({
      n: expect.any(Number),
    });
  });
});

describe('errors the function raises', () => {
  it('RAISE EXCEPTION (P0001) is 400 bad-request with its message', async () => {
    expectProblem(
      await t.request('POST', `${RPC}/check_amount`, { body: { amount: -1 } }),
      400,
      'bad-request',
      'amount must not be negative, got -1',
    );
  });

  it('any other error is a 500 naming only the request id; the log has the detail', async () => {
    const res = await t.request('POST', `${RPC}/check_amount`, { body: { amount: 13 } });
    expect(res.status, res.text).toBe(500);
    expect(res.text).not.toContain('secret internals');
    expect(res.text).not.toContain('check_amount(');
    expect(res.headers.get('x-request-id')).toMatch(/./);
    expect(res.body).toEqual({
      type: '/errors/internal',
      title: 'Internal Server Error',
      status: 500,
      detail: 'the server could not complete the request',
      instance: '/gw/api/rest/rpc/check_amount',
      errors: [],
    });
  });
});

describe('the statement timeout', () => {
  it('a function running past database.statementTimeoutMs is cancelled: 503 statement-timeout', async () => {
    const quick = await startTestServer({
      project: project.dir,
      databaseUrl: t.database.url,
      configPatch: (raw) => {
        raw.environments = ['master', 'staging'];
        raw.database = { ...raw.database, statementTimeoutMs: 200 };
      },
    });
    try {
      const res = await quick.request('POST', `${RPC}/nap`, { key: t.adminKey, body: { seconds: 5 } });
      expect(res.status, res.text).toBe(503);
      expect(res.body).toMatchObject({
        type: '/errors/statement-timeout',
        detail: 'the database statement took longer than the statement timeout and was cancelled',
      });
      expect(res.headers.get('retry-after')).toBe('1');
    } finally {
      await quick.close();
    }
  });
});

describe("the caller's settings", () => {
  it('an API key: svcgen.api_key_id, svcgen.roles, svcgen.context; nothing stays for the next call', async () => {
    const res = await t.request('POST', `${RPC}/whoami`, { key: clerk.key });
    expect(res.body).toEqual({
      data: {
        caller: 'apiKey',
        user_id: '',
        api_key_id: clerk.id,
        roles: ['clerk'],
        environment: 'master',
        context: { shop: 'north' },
      },
    });
    const admin = await t.request('POST', `${RPC}/whoami`);
    expect(admin.body.data).toMatchObject({
      api_key_id: expect.not.stringMatching(clerk.id),
      roles: ['admin'],
      context: {},
    });
  });

  it('a signed-in user: svcgen.user_id and its roles', async () => {
    const session = await t.signupConfirmed('clerk@functions.test');
    const res = await t.asUser(session.accessToken, 'POST', `${RPC}/whoami`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({
      caller: 'user',
      user_id: session.user.id,
      api_key_id: '',
      roles: ['clerk'],
      environment: 'master',
      context: {},
    });
  });
});

describe('the signatures at start', () => {
  const start = () =>
    startTestServer({
      project: project.dir,
      databaseUrl: t.database.url,
      configPatch: (raw) => {
        raw.environments = ['master', 'staging'];
      },
    });

  it('a function whose signature drifted from the migrations refuses the start, saying what differs', async () => {
    await t.db.exec(`
      DROP FUNCTION env_staging.check_amount(numeric);
      CREATE FUNCTION env_staging.check_amount(amount integer) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$ SELECT amount * 2 $$;
      DROP FUNCTION env_master.locked();`);
    try {
      await expect(start()).rejects.toThrow(
        [
          'the database functions of svcgen.config.json do not match the database:',
          'function locked in environment master (schema env_master) does not exist: migration 20260102000000_functions creates it; apply the migrations (svcgen migrate deploy)',
          'function check_amount in environment staging (schema env_staging) does not match the signature svcgen generated from the migrations: its arguments are (amount int4), not (amount numeric).',
          '  migrations (20260102000000_functions): check_amount(amount numeric) RETURNS numeric IMMUTABLE',
          '  database: check_amount(amount int4) RETURNS numeric IMMUTABLE, 0 with DEFAULT',
          '  Apply the migrations (svcgen migrate deploy), or run svcgen generate after changing one',
        ].join('\n'),
      );
    } finally {
      await t.db.exec(`
        DROP FUNCTION env_staging.check_amount(integer);
        CREATE FUNCTION env_staging.check_amount(amount numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$ SELECT amount * 2 $$;
        CREATE FUNCTION env_master.locked() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;`);
    }
  });

  it('a changed volatility or return type is drift too; restored, the server starts', async () => {
    await t.db.exec(`
      CREATE OR REPLACE FUNCTION env_master.locked() RETURNS integer LANGUAGE sql VOLATILE AS $$ SELECT 1 $$;`);
    try {
      await expect(start()).rejects.toThrow(
        'function locked in environment master (schema env_master) does not match the signature svcgen generated from the migrations: it is VOLATILE, not IMMUTABLE.',
      );
    } finally {
      await t.db.exec(
        `CREATE OR REPLACE FUNCTION env_master.locked() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;`,
      );
    }
    await t.db.exec(`
      DROP FUNCTION env_master.touch_nothing();
      CREATE FUNCTION env_master.touch_nothing() RETURNS integer LANGUAGE sql AS $$ SELECT 1 $$;`);
    try {
      await expect(start()).rejects.toThrow(
        'touch_nothing in environment master (schema env_master) does not match the signature svcgen generated from the migrations: it does not return void.',
      );
    } finally {
      await t.db.exec(`
        DROP FUNCTION env_master.touch_nothing();
        CREATE FUNCTION env_master.touch_nothing() RETURNS void LANGUAGE sql AS $$ SELECT $$;`);
    }
    const again = await start();
    await again.close();
  });

  it('a configured function that generated/ does not describe refuses the start', async () => {
    await expect(
      startTestServer({
        project: project.dir,
        databaseUrl: t.database.url,
        configPatch: (raw) => {
          raw.environments = ['master', 'staging'];
          raw.functions.added_later = { roles: ['admin'] };
        },
      }),
    ).rejects.toThrow(
      'functions added_later of svcgen.config.json are not in generated/: run `svcgen generate`, which reads their signatures from the migrations',
    );
  });
});

describe('what generate writes', () => {
  it('openapi.json describes each function: its arguments, what it answers, its refusals', async () => {
    const doc = JSON.parse(await readFile(path.join(project.dir, 'generated/openapi.json'), 'utf8'));
    const op = doc.paths['/gw/api/rest/rpc/sales_report'].post;
    expect(op.operationId).toBe('rpc_sales_report');
    expect(op.requestBody.content['application/json'].schema).toEqual({
      type: 'object',
      additionalProperties: false,
      required: ['since'],
      properties: {
        since: { anyOf: [{ type: 'string', format: 'date' }, { type: 'null' }], description: 'a date (YYYY-MM-DD)' },
        status: {
          anyOf: [{ type: 'string', enum: ['PENDING', 'PAID', 'SHIPPED'] }, { type: 'null' }],
          description: "one of PENDING, PAID, SHIPPED; optional: the function's DEFAULT applies",
        },
      },
    });
    expect(op.responses['200'].content['application/json'].schema.properties.data.items.properties).toEqual({
      day: { anyOf: [{ type: 'string', format: 'date' }, { type: 'null' }] },
      orders: { anyOf: [{ type: 'integer' }, { type: 'null' }] },
      revenue: { anyOf: [{ type: 'number' }, { type: 'null' }] },
    });
    expect(Object.keys(op.responses)).toEqual(
      expect.arrayContaining(['200', '400', '401', '403', '415', '422', '429']),
    );
    expect(op.responses['400'].content['application/problem+json'].schema).toBeDefined();
    expect(Object.keys(doc.paths).filter((p: string) => p.startsWith('/gw/api/rest/rpc/'))).toEqual([
      '/gw/api/rest/rpc/check_amount',
      '/gw/api/rest/rpc/labels',
      '/gw/api/rest/rpc/locked',
      '/gw/api/rest/rpc/nap',
      '/gw/api/rest/rpc/record_sale',
      '/gw/api/rest/rpc/sales_report',
      '/gw/api/rest/rpc/touch_nothing',
      '/gw/api/rest/rpc/whoami',
    ]);
  });

  it('generated/functions.ts holds the signatures the server checks and validates with', async () => {
    const text = await readFile(path.join(project.dir, 'generated/functions.ts'), 'utf8');
    expect(text).toContain("name: 'sales_report'");
    expect(await readFile(path.join(project.dir, 'generated/index.ts'), 'utf8')).toContain(
      "import { functions } from './functions.ts';",
    );
  });
});

describe('the typed client', () => {
  it('createFunctionClient calls each function with its arguments and answers { data }; a refusal throws the Problem', async () => {
    const { createFunctionClient, ServiceError } = await import(path.join(project.dir, 'generated/client.ts'));
    const rpc = createFunctionClient({ baseUrl: t.url, projectId: 'functions', apiKey: t.adminKey });
    expect(await rpc.sales_report({ since: '2026-01-02', status: 'PAID' })).toEqual({
      data: [{ day: '2026-01-02', orders: 1, revenue: 7.5 }],
    });
    expect(await rpc.touch_nothing()).toEqual({ data: null });
    const refused = await rpc.check_amount({ amount: -2 }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ServiceError);
    expect(refused.problem).toMatchObject({ status: 400, detail: 'amount must not be negative, got -2' });
  });
});
