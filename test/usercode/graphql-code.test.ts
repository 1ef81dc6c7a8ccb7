/**
 * Endpoints and database functions as GraphQL fields (docs/graphql.md "Your own code",
 * docs/own-code.md "Endpoints" and "Database functions"): a caller's schema shows the fields it may
 * call; a field runs the REST route's steps (input, handler, output, errors); generated
 * schema.graphql holds them, and an endpoint GraphQL cannot express is left out with its reason.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCode, defineEndpoint } from '../../examples/shop/generated/code.ts';
import type { EndpointField } from '../../runtime/graphql/index.ts';
import { diffCodeFields } from '../../generator/diff/diff-graphql.ts';
import { renderGraphqlSchema } from '../../generator/render/graphql.ts';
import { Problem, endpointJsonSchemas } from '../../runtime/usercode/index.ts';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { generateFixtureProject } from '../support/fixture-project.ts';
import { expectProblem, MANAGEMENT_TOKEN, type TestResponse } from '../support/server.ts';

const GRAPHQL = '/gw/api/graphql';

const echo = defineEndpoint({
  name: 'echo',
  method: 'POST',
  path: '/echo',
  access: { roles: ['catalog'] },
  input: z.object({ name: z.string().min(1), qty: z.number().int().min(1), tags: z.array(z.string()).optional() }),
  output: z.object({ greeting: z.string(), caller: z.string(), tags: z.array(z.string()) }),
  async handler(input, ctx) {
    return { greeting: `hello ${input.name} x${input.qty}`, caller: ctx.caller.kind, tags: input.tags ?? [] };
  },
});

const stats = defineEndpoint({
  name: 'stats',
  method: 'GET',
  path: '/stats',
  access: { roles: ['catalog'] },
  input: z.object({ status: z.enum(['open', 'paid']).optional() }),
  output: z.object({ status: z.enum(['open', 'paid']).nullable(), lines: z.array(z.object({ n: z.number().int() })) }),
  async handler(input) {
    return { status: input.status ?? null, lines: [{ n: 1 }, { n: 2 }] };
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

const conflict = defineEndpoint({
  name: 'closeOrder',
  method: 'POST',
  path: '/close-order',
  access: { roles: ['catalog'] },
  input: z.object({ id: z.number().int() }),
  output: z.object({ closed: z.boolean() }),
  async handler() {
    throw new Problem('conflict', 'this order is checked out already');
  },
});

const crash = defineEndpoint({
  name: 'crash',
  method: 'POST',
  path: '/crash',
  access: { roles: ['catalog'] },
  input: z.object({}),
  output: z.object({ ok: z.boolean() }),
  async handler() {
    throw new Error('password=hunter2 at secret place');
  },
});

/** A record of any keys has no GraphQL type: REST only. */
const tagged = defineEndpoint({
  name: 'tagged',
  method: 'POST',
  path: '/tagged',
  access: { roles: ['catalog'] },
  input: z.object({ tags: z.record(z.string(), z.string()) }),
  output: z.object({ ok: z.boolean() }),
  async handler() {
    return { ok: true };
  },
});

const ENDPOINTS = [echo, stats, whoami, conflict, crash, tagged];

let t: AuthTestServer;
let logs: string[];
let catalogKey: string;
let otherKey: string;
let user: Session;

beforeAll(async () => {
  logs = [];
  t = await startAuthServer({
    code: defineCode({ endpoints: ENDPOINTS }),
    logging: { format: 'json', level: 'warn', destination: { write: (line: string) => void logs.push(line) } },
  });
  catalogKey = (await t.createKey(['catalog'])).key;
  otherKey = (await t.createKey(['customer'])).key;
  user = await t.signupConfirmed('graphql-code-user@example.com');
}, 120_000);
afterAll(() => t?.close());

function gql(key: string | false, query: string, variables?: Record<string, unknown>, bearer?: string) {
  return t.request('POST', GRAPHQL, {
    body: { query, variables },
    headers: {
      accept: 'application/graphql-response+json',
      ...(bearer ? { authorization: `Bearer ${bearer}` } : {}),
    },
    key: bearer ? false : key,
  });
}

function expectInvalid(res: TestResponse, message: string) {
  expect(res.status, res.text).toBe(400);
  expect(res.body.errors.map((e: { message: string }) => e.message)).toEqual([message]);
  expect(res.body.errors[0].extensions).toEqual({
    code: 'GRAPHQL_VALIDATION_FAILED',
    type: '/errors/invalid-parameter',
    status: 400,
  });
}

describe('an endpoint as a GraphQL field', () => {
  it('POST → a Mutation field, its input properties the arguments, its output the result', async () => {
    const res = await gql(
      catalogKey,
      'mutation { echo(name: "ann", qty: 2, tags: ["a", "b"]) { greeting caller tags } }',
    );
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { echo: { greeting: 'hello ann x2', caller: 'apiKey', tags: ['a', 'b'] } } });
  });

  it('GET → a Query field; enums and nested lists of objects map, variables work', async () => {
    const res = await gql(catalogKey, 'query ($s: StatsInput_Status) { stats(status: $s) { status lines { n } } }', {
      s: 'paid',
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { stats: { status: 'paid', lines: [{ n: 1 }, { n: 2 }] } } });
    const none = await gql(catalogKey, '{ stats { status } }');
    expect(none.body).toEqual({ data: { stats: { status: null } } });
  });

  it('a role the endpoint does not name sees no such field, as it sees no table it may not read', async () => {
    expectInvalid(
      await gql(t.adminKey, 'mutation { echo(name: "ann", qty: 2) { greeting } }'),
      'Cannot query field "echo" on type "Mutation".',
    );
    const other = await gql(otherKey, '{ stats { status } }');
    expectInvalid(other, 'Cannot query field "stats" on type "Query".');
  });

  it('without credentials → the 401 of the data API', async () => {
    const res = await gql(false, '{ stats { status } }');
    expectProblem(res, 401, 'unauthorized');
  });

  it('a management token gets the management schema: no endpoint there', async () => {
    const res = await gql(MANAGEMENT_TOKEN, '{ stats { status } }');
    expect(res.status, res.text).toBe(400);
    expect(res.body.errors[0].message).toBe('Cannot query field "stats" on type "Query".');
  });

  it("'signed-in': a user's field; an API key does not see it", async () => {
    const res = await gql(false, '{ whoami { userId } }', undefined, user.accessToken);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { whoami: { userId: user.user.id } } });
    expectInvalid(await gql(catalogKey, '{ whoami { userId } }'), 'Cannot query field "whoami" on type "Query".');
  });

  it('an input the zod schema refuses → the 422 validation Problem in extensions, naming the field', async () => {
    const res = await gql(catalogKey, 'mutation { echo(name: "", qty: 0) { greeting } }');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({ echo: null });
    expect(res.body.errors).toHaveLength(1);
    const [error] = res.body.errors;
    expect(error.path).toEqual(['echo']);
    expect(error.message).toBe(
      'name: Too small: expected string to have >=1 characters; qty: Too small: expected number to be >=1',
    );
    expect(error.extensions).toEqual({
      code: 'VALIDATION',
      type: '/errors/validation',
      status: 422,
      errors: [
        { field: 'name', rule: 'too_small', message: 'name: Too small: expected string to have >=1 characters' },
        { field: 'qty', rule: 'too_small', message: 'qty: Too small: expected number to be >=1' },
      ],
    });
  });

  it('a wrongly typed argument is refused by GraphQL before the handler runs', async () => {
    const res = await gql(catalogKey, 'mutation { echo(name: "ann", qty: "two") { greeting } }');
    expect(res.status, res.text).toBe(400);
    expect(res.body.errors[0].message).toBe('Int cannot represent non-integer value: "two"');
  });

  it('a thrown Problem keeps its status in extensions', async () => {
    const res = await gql(catalogKey, 'mutation { closeOrder(id: 7) { closed } }');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({ closeOrder: null });
    expect(res.body.errors[0].message).toBe('this order is checked out already');
    expect(res.body.errors[0].extensions).toEqual({ code: 'CONFLICT', type: '/errors/conflict', status: 409 });
  });

  it('anything else thrown → internal with the request id only; the log has the detail', async () => {
    const res = await gql(catalogKey, 'mutation { crash { ok } }');
    expect(res.status, res.text).toBe(200);
    const requestId = res.headers.get('x-request-id');
    expect(res.body.errors[0].message).toBe(
      `endpoint crash failed; the server's log has the detail under request id ${requestId}`,
    );
    expect(res.body.errors[0].extensions).toEqual({ code: 'INTERNAL', type: '/errors/internal', status: 500 });
    expect(res.text).not.toContain('hunter2');
    expect(logs.some((line) => line.includes('hunter2') && line.includes(requestId!))).toBe(true);
  });

  it('an endpoint GraphQL cannot express is not a field (it stays on REST)', async () => {
    expectInvalid(
      await gql(catalogKey, 'mutation { tagged(tags: {}) { ok } }'),
      'Cannot query field "tagged" on type "Mutation".',
    );
    const rest = await t.request('POST', '/gw/api/rest/tagged', { key: catalogKey, body: { tags: { a: 'b' } } });
    expect(rest.status, rest.text).toBe(200);
  });
});

describe('schema.graphql', () => {
  it('holds the endpoints that map, and names those left out with the reason', () => {
    const omitted: string[] = [];
    const sdl = renderGraphqlSchema(
      [],
      '',
      { endpoints: ENDPOINTS.map((e) => endpointJsonSchemas(e)), functions: [] },
      (name, reason) => omitted.push(`${name}: ${reason}`),
    );
    expect(sdl).toContain('echo(name: String!, qty: Int!, tags: [String!]): EchoOutput');
    expect(sdl).toContain('stats(status: StatsInput_Status): StatsOutput');
    expect(sdl).toContain('closeOrder(id: Int!): CloseOrderOutput');
    expect(sdl).not.toContain('tagged');
    expect(omitted).toEqual(['tagged: tags: an object with keys of its own (a record)']);
  });

  it('an endpoint named as a table field is left out: the table keeps its name', () => {
    const omitted: string[] = [];
    renderGraphqlSchema(
      [],
      '',
      {
        endpoints: [
          { name: 'echo', method: 'GET', input: { type: 'object' }, output: { type: 'string' } },
          endpointJsonSchemas({ ...echo, method: 'GET' }),
        ],
        functions: [],
      },
      (name, reason) => omitted.push(`${name}: ${reason}`),
    );
    expect(omitted).toEqual(['echo: a Query field of that name exists already']);
  });
});

describe('svcgen diff', () => {
  it('reports a code field removed or changed as breaking, from the two schema.graphql files', () => {
    const sdl = (endpoints: EndpointField[]) => renderGraphqlSchema([], '', { endpoints, functions: [] });
    const [echoField, statsField] = [echo, stats].map((e) => endpointJsonSchemas(e)) as [EndpointField, EndpointField];
    const changedEcho = {
      ...echoField,
      output: { type: 'object', properties: { greeting: { type: 'number' } }, required: ['greeting'] },
    };
    const changes = diffCodeFields(sdl([echoField, statsField]), sdl([changedEcho]), []);
    expect(changes).toEqual([
      {
        type: 'FIELD_CHANGED_KIND',
        description: 'EchoOutput.greeting changed type from String! to Float!.',
        breaking: true,
      },
      { type: 'FIELD_REMOVED', description: 'EchoOutput.caller was removed.', breaking: true },
      { type: 'FIELD_REMOVED', description: 'EchoOutput.tags was removed.', breaking: true },
      { type: 'FIELD_REMOVED', description: 'Query.stats was removed.', breaking: true },
      { type: 'TYPE_REMOVED', description: 'StatsInput_Status was removed.', breaking: true },
      { type: 'TYPE_REMOVED', description: 'StatsOutput was removed.', breaking: true },
      { type: 'TYPE_REMOVED', description: 'StatsOutput_LinesItem was removed.', breaking: true },
      { type: 'TYPE_REMOVED', description: 'StatsOutput_Status was removed.', breaking: true },
    ]);
    expect(diffCodeFields(sdl([echoField]), sdl([echoField, statsField]), [])).toEqual([]);
  });
});

describe('a database function as a GraphQL field', () => {
  let project: Awaited<ReturnType<typeof generateFixtureProject>>;
  let f: AuthTestServer;
  let clerk: string;

  beforeAll(async () => {
    project = await generateFixtureProject('functions');
    f = await startAuthServer({
      project: project.dir,
      configPatch: (raw) => {
        raw.auth = { ...raw.auth, defaultRole: 'clerk' };
      },
    });
    clerk = (await f.createKey(['clerk'])).key;
    await f.db.query(
      `INSERT INTO env_master.sales (day, status, amount, seller_id, "updatedAt") VALUES ('2026-01-01', 'PAID', 10, 'seed', now())`,
    );
  }, 120_000);
  afterAll(async () => {
    await f?.close();
    await project?.remove();
  });

  const call = (key: string, query: string, variables?: Record<string, unknown>) =>
    f.request('POST', GRAPHQL, {
      body: { query, variables },
      key,
      headers: { accept: 'application/graphql-response+json' },
    });

  it('a STABLE function is a Query field rpc_<name> answering Json, for a role it lists', async () => {
    for (const key of [f.adminKey, clerk]) {
      const res = await call(key, '{ rpc_sales_report(since: "2026-01-01") }');
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ data: { rpc_sales_report: [{ day: '2026-01-01', orders: 1, revenue: 10 }] } });
    }
  });

  it('a VOLATILE function is a Mutation field; a DEFAULT argument may be left out', async () => {
    const res = await call(f.adminKey, 'mutation { rpc_record_sale(day: "2026-02-01", amount: 3) }');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.rpc_record_sale).toEqual([
      expect.objectContaining({ day: '2026-02-01', status: 'PENDING', amount: 3 }),
    ]);
  });

  it('a role the function does not list sees no such field', async () => {
    expectInvalid(
      await call(clerk, '{ rpc_check_amount(amount: "2.5") }'),
      'Cannot query field "rpc_check_amount" on type "Query".',
    );
    // The clerk writes no table and may call no VOLATILE function: it has no Mutation type at all.
    expectInvalid(
      await call(clerk, 'mutation { rpc_record_sale(day: "2026-02-01", amount: 3) }'),
      'your roles may write no table, so this API has no mutations for you',
    );
    // A function no role lists is nobody's field.
    expectInvalid(
      await call(f.adminKey, '{ rpc_locked }'),
      'Cannot query field "rpc_locked" on type "Query". Did you mean "rpc_labels"?',
    );
  });

  it('arguments are checked as REST checks them: 422 validation naming the argument', async () => {
    const res = await call(f.adminKey, '{ rpc_sales_report(since: "not a date") }');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toEqual({ rpc_sales_report: null });
    expect(res.body.errors[0].extensions).toMatchObject({
      code: 'VALIDATION',
      type: '/errors/validation',
      status: 422,
      errors: [expect.objectContaining({ field: 'since' })],
    });
  });

  it('RAISE EXCEPTION → 400 bad-request with its message', async () => {
    const res = await call(f.adminKey, '{ rpc_check_amount(amount: "-1") }');
    expect(res.status, res.text).toBe(200);
    expect(res.body.errors[0].message).toBe('amount must not be negative, got -1');
    expect(res.body.errors[0].extensions).toEqual({ code: 'BAD_REQUEST', type: '/errors/bad-request', status: 400 });
    // Any other error: internal, nothing of the database's message.
    const other = await call(f.adminKey, '{ rpc_check_amount(amount: "13") }');
    expect(other.body.errors[0].extensions).toEqual({ code: 'INTERNAL', type: '/errors/internal', status: 500 });
    expect(other.text).not.toContain('secret internals');
  });

  it('generated schema.graphql holds the functions with their arguments', async () => {
    const sdl = await readFile(path.join(project.dir, 'generated/schema.graphql'), 'utf8');
    expect(sdl).toContain('rpc_sales_report(since: String!, status: String): Json');
    expect(sdl).toContain('rpc_record_sale(amount: Float!, day: String!, status: String): Json');
    expect(sdl).toContain('rpc_locked: Json');
  });
});
