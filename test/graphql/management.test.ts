// The GraphQL management schema (docs/graphql.md "Management") against REST /_apikeys and
// /_webhooks, through real HTTP: the same answers, the same stored rows, the same errors (as
// extensions); keys work and stop working at once; webhooks deliver and stop; data credentials
// never see these fields, and a management token sees no data.
import { serverAudits } from 'graphql-http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
const KEY_FIELDS = 'id name prefix roles environment createdAt key';
const WEBHOOK_FIELDS = 'id projectId environment table events url active filter select createdAt updatedAt';
const DELIVERY_FIELDS = 'id eventId event status httpStatus attempts lastError nextAttemptAt createdAt updatedAt';

let t: AuthTestServer;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startAuthServer({
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0, 100, 100], timeoutMs: 1000 };
    },
  });
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

interface Call {
  token?: string;
  environment?: string;
  headers?: Record<string, string>;
}

function gql(query: string, variables?: Record<string, unknown>, call: Call = {}) {
  return t.request('POST', '/gw/api/graphql', {
    body: { query, variables },
    key: call.token ?? MANAGEMENT_TOKEN,
    environment: call.environment,
    headers: { accept: 'application/graphql-response+json', ...call.headers },
  });
}

function rest(method: string, path: string, body?: unknown, call: Call = {}) {
  return t.request(method, `${BASE}/${path}`, {
    body,
    key: call.token ?? MANAGEMENT_TOKEN,
    environment: call.environment,
    headers: call.headers,
  });
}

/** The one GraphQL error of a refused root field: REST's Problem as message and extensions. */
function expectProblemAnswer(res: { status: number; body: any; text: string }, field: string, problem: any) {
  expect(res.status, res.text).toBe(200);
  expect(res.body.data).toEqual({ [field]: null });
  expect(res.body.errors).toHaveLength(1);
  expect(res.body.errors[0].path).toEqual([field]);
  expect(res.body.errors[0].message).toBe(problem.detail);
  expect(res.body.errors[0].extensions).toEqual({
    code: problem.type.replace('/errors/', '').toUpperCase().replace(/-/g, '_'),
    type: problem.type,
    status: problem.status,
    ...(problem.errors?.length ? { errors: problem.errors } : {}),
  });
}

/** A document graphql-js refuses before running it: 400, and no data member. */
function expectInvalid(res: { status: number; body: any; text: string }, message: string) {
  expect(res.status, res.text).toBe(400);
  expect(res.body.data).toBeUndefined();
  expect(res.body.errors.map((e: any) => e.message)).toEqual([message]);
  expect(res.body.errors[0].extensions).toEqual({
    code: 'GRAPHQL_VALIDATION_FAILED',
    type: '/errors/invalid-parameter',
    status: 400,
  });
}

const CREATE_KEY = `mutation ($input: CreateApiKeyInput!) { createApiKey(input: $input) { ${KEY_FIELDS} } }`;
const DELETE_KEY = 'mutation ($id: ID!) { deleteApiKey(id: $id) }';
const CREATE_WEBHOOK = `mutation ($input: CreateWebhookInput!) { createWebhook(input: $input) { ${WEBHOOK_FIELDS} } }`;

describe('API keys', () => {
  it('createApiKey answers the key with its value once; it works on REST data; apiKeys lists it without the value', async () => {
    const input = { name: 'gql deploy', prefix: 'Token', roles: ['admin'], environment: 'master', context: { a: 'b' } };
    const res = await gql(CREATE_KEY, { input });
    expect(res.status, res.text).toBe(200);
    expect(res.body.errors).toBeUndefined();
    // As on /_apikeys: not counted against the data rate limits.
    expect(res.headers.get('ratelimit-limit')).toBeNull();
    expect(
      (await gql('{ __typename }', undefined, { token: t.adminKey })).headers.get('ratelimit-limit'),
    ).not.toBeNull();
    const created = res.body.data.createApiKey;
    expect(created).toEqual({
      id: expect.stringMatching(/^key_/),
      name: 'gql deploy',
      prefix: 'Token',
      roles: ['admin'],
      environment: 'master',
      createdAt: expect.any(String),
      key: expect.stringMatching(/^svk_/),
    });

    const data = await t.request('GET', `${BASE}/Order`, { headers: { authorization: `Token ${created.key}` } });
    expect(data.status, data.text).toBe(200);

    const listed = await gql('{ apiKeys { id name prefix environment roles context createdAt lastUsedAt } }');
    expect(listed.status, listed.text).toBe(200);
    const restList = await rest('GET', '_apikeys');
    expect(listed.body.data.apiKeys).toEqual(restList.body.data);
    const mine = listed.body.data.apiKeys.find((k: any) => k.id === created.id);
    expect(mine).toMatchObject({ name: 'gql deploy', context: { a: 'b' } });
    expect(JSON.stringify(listed.body)).not.toContain(created.key);
    // No field of the list type answers a value.
    expectInvalid(await gql('{ apiKeys { id key } }'), 'Cannot query field "key" on type "ApiKey".');
  });

  it('deleteApiKey: true, the key answers 401 at once; a second delete is the REST 404', async () => {
    const created = (
      await gql(CREATE_KEY, { input: { name: 'doomed', prefix: 'Bearer', roles: ['admin'], environment: 'master' } })
    ).body.data.createApiKey;
    expect((await rest('GET', 'Order', undefined, { token: created.key })).status).toBe(200);
    const res = await gql(DELETE_KEY, { id: created.id });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { deleteApiKey: true } });
    expect((await rest('GET', 'Order', undefined, { token: created.key })).status).toBe(401);

    const again = await gql(DELETE_KEY, { id: created.id });
    const restAgain = await rest('DELETE', `_apikeys/${created.id}`);
    expect(restAgain.status).toBe(404);
    expectProblemAnswer(again, 'deleteApiKey', restAgain.body);
  });

  it('bad roles and environment: the REST 422 with the same field errors, and nothing stored', async () => {
    const input = { name: 'bad', prefix: 'Bearer', roles: ['admin', 'nobody'], environment: 'prod' };
    const before = await t.db.query('select id from svcgen.api_keys');
    const res = await gql(CREATE_KEY, { input });
    const restRes = await rest('POST', '_apikeys', input);
    expect(restRes.status).toBe(422);
    expectProblemAnswer(res, 'createApiKey', restRes.body);
    expect(res.body.errors[0].extensions.errors.map((e: any) => e.field)).toEqual(['environment', 'roles[1]']);
    expect(await t.db.query('select id from svcgen.api_keys')).toEqual(before);
  });

  it('a bad prefix or context key: the REST 422 naming the field', async () => {
    for (const input of [
      { name: 'x', prefix: 'Not A Word', roles: ['admin'], environment: 'master' },
      { name: 'x', prefix: 'Bearer', roles: ['admin'], environment: 'master', context: { proto: 'x' } },
      { name: 'x', prefix: 'Bearer', roles: ['admin'], environment: 'master', context: { team: 7 } },
    ]) {
      // JSON.parse makes `__proto__` an own key, as the REST body's parser does.
      const sent = JSON.parse(JSON.stringify(input).replace('"proto"', '"__proto__"'));
      const restRes = await rest('POST', '_apikeys', sent);
      expect(restRes.status, restRes.text).toBe(422);
      expectProblemAnswer(await gql(CREATE_KEY, { input: sent }), 'createApiKey', restRes.body);
    }
  });

  it('REST and GraphQL store the same key for the same input', async () => {
    const input = { name: 'twin', prefix: 'ApiKey', roles: ['catalog'], environment: 'staging', context: { t: 'w' } };
    const viaRest = await rest('POST', '_apikeys', input);
    const viaGql = await gql(CREATE_KEY, { input });
    expect(viaRest.status).toBe(201);
    const restKey = viaRest.body.data;
    const gqlKey = viaGql.body.data.createApiKey;
    expect(Object.keys(gqlKey).sort()).toEqual(Object.keys(restKey).sort());
    const stored = await t.db.query<Record<string, unknown>>(
      `select id, project_id, environment, name, prefix, roles, context, revoked_at, last_used_at
       from svcgen.api_keys where id = any($1) order by created_at`,
      [[restKey.id, gqlKey.id]],
    );
    expect(stored).toHaveLength(2);
    const { id: _a, ...restRow } = stored[0]!;
    const { id: _b, ...gqlRow } = stored[1]!;
    expect(gqlRow).toEqual(restRow);
    expect(gqlRow).toEqual({
      project_id: 'shop',
      environment: 'staging',
      name: 'twin',
      prefix: 'ApiKey',
      roles: ['catalog'],
      context: { t: 'w' },
      revoked_at: null,
      last_used_at: null,
    });
  });

  it('an Idempotency-Key is ignored, as POST /_apikeys ignores it: each call makes a key', async () => {
    const input = { name: 'twice', prefix: 'Bearer', roles: ['admin'], environment: 'master' };
    const headers = { 'idempotency-key': 'mgmt-gql-1' };
    const first = await gql(CREATE_KEY, { input }, { headers });
    const second = await gql(CREATE_KEY, { input }, { headers });
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    expect(second.headers.get('idempotency-replayed')).toBeNull();
    expect(second.body.data.createApiKey.id).not.toBe(first.body.data.createApiKey.id);
    const restFirst = await rest('POST', '_apikeys', input, { headers: { 'idempotency-key': 'mgmt-rest-1' } });
    const restSecond = await rest('POST', '_apikeys', input, { headers: { 'idempotency-key': 'mgmt-rest-1' } });
    expect(restSecond.body.data.id).not.toBe(restFirst.body.data.id);
  });
});

describe('who sees which schema', () => {
  it('a data API key and a user token: no management field exists for them', async () => {
    const session = await t.signupConfirmed(`mgmt-${Date.now()}@example.com`, { roleId: 'customer' });
    const keysBefore = await t.db.query('select id from svcgen.api_keys');
    for (const [token, suggestion] of [
      [t.adminKey, ' Did you mean "createCity" or "createOrder"?'],
      [session.accessToken, ' Did you mean "createOrder"?'],
    ] as const) {
      expectInvalid(
        await gql(
          'mutation ($input: Json) { createApiKey(input: $input) { id key } }',
          { input: { name: 'sneaky', prefix: 'Bearer', roles: ['admin'], environment: 'master' } },
          { token },
        ),
        `Cannot query field "createApiKey" on type "Mutation".${suggestion}`,
      );
      expectInvalid(
        await gql('{ apiKeys { id } }', undefined, { token }),
        'Cannot query field "apiKeys" on type "Query".',
      );
    }
    expect(await t.db.query('select id from svcgen.api_keys')).toEqual(keysBefore);
  });

  it('a management token: no data field exists for it', async () => {
    expectInvalid(await gql('{ orderList { id } }'), 'Cannot query field "orderList" on type "Query".');
    expectInvalid(
      await gql('mutation { createOrder(data: {total: 1}) { id } }'),
      'Cannot query field "createOrder" on type "Mutation". Did you mean "createApiKey"?',
    );
  });

  it('the management schema passes graphql-http’s MUST and SHOULD audits too', async () => {
    const fetchFn = (input: string | URL, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      headers.set('x-project-id', t.config.project.id);
      headers.set('authorization', `Bearer ${MANAGEMENT_TOKEN}`);
      return fetch(input, { ...init, headers });
    };
    const failures: string[] = [];
    for (const audit of serverAudits({ url: `${t.url}/gw/api/graphql`, fetchFn })) {
      if (!audit.name.startsWith('MUST') && !audit.name.startsWith('SHOULD')) continue;
      const result = await audit.fn();
      if (result.status !== 'ok') failures.push(`${audit.name}: ${result.reason}`);
    }
    expect(failures).toEqual([]);
  });

  it('introspection shows the management root fields', async () => {
    const res = await gql('{ __schema { queryType { fields { name } } mutationType { fields { name } } } }');
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.__schema.queryType.fields.map((f: any) => f.name)).toEqual(['apiKeys', 'webhooks', 'webhook']);
    expect(res.body.data.__schema.mutationType.fields.map((f: any) => f.name)).toEqual([
      'createApiKey',
      'deleteApiKey',
      'createWebhook',
      'updateWebhook',
      'deleteWebhook',
      'redeliverWebhookDelivery',
    ]);
  });
});

describe('webhooks', () => {
  const subscription = (path: string) => ({
    projectId: 'shop',
    environment: 'master',
    table: 'Customer',
    events: ['INSERT'],
    url: `${receiver.url}${path}`,
    secret: 's3cret',
  });
  const newCustomer = async (tag: string) => {
    const res = await rest(
      'POST',
      'Customer',
      { email: `${tag}-${Date.now()}@example.com`, name: tag },
      { token: t.adminKey },
    );
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  };
  const master = { environment: 'master' };

  it('createWebhook, then a REST write delivers to it; webhook(id) lists the delivery; redeliver sends it again; deleteWebhook stops it', async () => {
    const created = await gql(CREATE_WEBHOOK, { input: subscription('/gql') }, master);
    expect(created.status, created.text).toBe(200);
    const hook = created.body.data.createWebhook;
    expect(hook).toMatchObject({
      id: expect.stringMatching(/^wh_/),
      table: 'Customer',
      events: ['INSERT'],
      active: true,
    });
    expect((await rest('GET', `_webhooks/${hook.id}`, undefined, master)).body.webhook).toEqual(hook);

    const customer = await newCustomer('gql-hook');
    const [got] = await receiver.waitFor('/gql', 1);
    expect(got!.body.record.id).toBe(customer.id);

    const detailQuery = `query ($id: ID!) { webhook(id: $id) { webhook { ${WEBHOOK_FIELDS} } deliveries { ${DELIVERY_FIELDS} } } }`;
    await expect
      .poll(async () => (await gql(detailQuery, { id: hook.id }, master)).body.data.webhook.deliveries[0]?.status)
      .toBe('delivered');
    const detail = (await gql(detailQuery, { id: hook.id }, master)).body.data.webhook;
    expect(detail).toEqual((await rest('GET', `_webhooks/${hook.id}`, undefined, master)).body);

    const again = await gql(
      `mutation ($id: ID!, $d: ID!) { redeliverWebhookDelivery(id: $id, deliveryId: $d) { id eventId status } }`,
      { id: hook.id, d: detail.deliveries[0].id },
      master,
    );
    expect(again.body).toEqual({
      data: { redeliverWebhookDelivery: { id: detail.deliveries[0].id, eventId: got!.body.id, status: 'pending' } },
    });
    const [, resent] = await receiver.waitFor('/gql', 2);
    expect(resent!.body.id).toBe(got!.body.id);

    const removed = await gql('mutation ($id: ID!) { deleteWebhook(id: $id) }', { id: hook.id }, master);
    expect(removed.body).toEqual({ data: { deleteWebhook: true } });
    expect((await rest('GET', `_webhooks/${hook.id}`, undefined, master)).status).toBe(404);
    await newCustomer('gql-hook-after');
    // Deliveries are recorded with the write: none for the deleted subscription.
    const recorded = await t.db.query('select id from svcgen.webhook_deliveries where webhook_id = $1', [hook.id]);
    expect(recorded).toEqual([]);
  });

  it('updateWebhook changes what it is given, like PATCH; webhooks lists as GET /_webhooks', async () => {
    const hook = (await gql(CREATE_WEBHOOK, { input: subscription('/gql-update') }, master)).body.data.createWebhook;
    const res = await gql(
      `mutation ($id: ID!, $input: UpdateWebhookInput!) { updateWebhook(id: $id, input: $input) { ${WEBHOOK_FIELDS} } }`,
      { id: hook.id, input: { active: false, events: ['INSERT', 'DELETE'], filter: { name: 'x' }, select: ['id'] } },
      master,
    );
    expect(res.status, res.text).toBe(200);
    const updated = res.body.data.updateWebhook;
    expect(updated).toMatchObject({
      active: false,
      events: ['INSERT', 'DELETE'],
      filter: { name: 'x' },
      select: ['id'],
    });
    expect((await rest('GET', `_webhooks/${hook.id}`, undefined, master)).body.webhook).toEqual(updated);
    const listed = await gql(`{ webhooks { ${WEBHOOK_FIELDS} } }`, undefined, master);
    expect(listed.body.data.webhooks).toEqual((await rest('GET', '_webhooks', undefined, master)).body.data);
  });

  it('refusals are REST’s: a bad table, a foreign environment, an unknown id, a missing environment header', async () => {
    const bad = { ...subscription('/x'), table: 'Nope', filter: { nope: 1 } };
    const restBad = await rest('POST', '_webhooks', bad, master);
    expect(restBad.status).toBe(422);
    expectProblemAnswer(await gql(CREATE_WEBHOOK, { input: bad }, master), 'createWebhook', restBad.body);

    const other = { ...subscription('/x'), environment: 'staging' };
    const restOther = await rest('POST', '_webhooks', other, master);
    expect(restOther.status).toBe(400);
    expectProblemAnswer(await gql(CREATE_WEBHOOK, { input: other }, master), 'createWebhook', restOther.body);

    const restMissing = await rest('GET', '_webhooks/wh_none', undefined, master);
    expect(restMissing.status).toBe(404);
    expectProblemAnswer(
      await gql('query { webhook(id: "wh_none") { webhook { id } } }', undefined, master),
      'webhook',
      restMissing.body,
    );

    const restNoHeader = await rest('GET', '_webhooks');
    expect(restNoHeader.status).toBe(400);
    expectProblemAnswer(await gql('{ webhooks { id } }'), 'webhooks', restNoHeader.body);
  });

  it('REST and GraphQL store the same subscription for the same input', async () => {
    const input = {
      ...subscription('/twin'),
      events: ['UPDATE', 'DELETE'],
      filter: { name: 'n' },
      select: ['id', 'name'],
    };
    const viaRest = (await rest('POST', '_webhooks', input, master)).body;
    const viaGql = (await gql(CREATE_WEBHOOK, { input }, master)).body.data.createWebhook;
    const strip = ({ id: _i, createdAt: _c, updatedAt: _u, ...rest }: any) => rest;
    expect(strip(viaGql)).toEqual(strip(viaRest));
    expect(Object.keys(viaGql).sort()).toEqual(Object.keys(viaRest).sort());
    const stored = await t.db.query<Record<string, unknown>>(
      `select project_id, environment, table_name, events, url, endpoint, active, filter, select_fields
       from svcgen.webhooks where id = any($1) order by created_at`,
      [[viaRest.id, viaGql.id]],
    );
    expect(stored).toHaveLength(2);
    expect(stored[1]).toEqual(stored[0]);
  });
});

describe('introspection off (graphql.introspection)', () => {
  let closed: TestServer;
  beforeAll(async () => {
    closed = await startTestServer({
      configPatch: (raw) => {
        raw.graphql = { ...raw.graphql, introspection: ['staging'] };
      },
    });
  });
  afterAll(() => closed?.close());

  it('refuses __schema to a management token where data schemas refuse it, and answers it elsewhere', async () => {
    const ask = (environment: string) =>
      closed.request('POST', '/gw/api/graphql', {
        body: { query: '{ __schema { queryType { name } } }' },
        key: MANAGEMENT_TOKEN,
        environment,
        headers: { accept: 'application/graphql-response+json' },
      });
    const refused = await ask('master');
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body.errors[0].extensions).toEqual({
      code: 'INTROSPECTION_DISABLED',
      type: '/errors/forbidden',
      status: 403,
    });
    const answered = await ask('staging');
    expect(answered.body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
  });
});
