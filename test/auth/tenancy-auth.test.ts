// Tenancy (X-Project-Id, environment) and authentication of the data API, and the order in which
// the pipeline checks them (docs/api.md §2: "Headers", "Credentials", "Order of checks").
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRows, expectListEnvelope, expectProblemAt } from '../support/expect.ts';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
let stagingKey: string;
let catalogKey: string;

beforeAll(async () => {
  t = await startTestServer();
  stagingKey = (await t.createKey(['admin'], { environment: 'staging' })).key;
  catalogKey = (await t.createKey(['catalog'])).key;
});
afterAll(() => t?.close());

const fakeKey = () => `svk_${randomBytes(32).toString('base64url')}`;

describe('project', () => {
  it('missing X-Project-Id → 400 Problem naming X-Project-Id', async () => {
    const res = await t.request('GET', `${BASE}/City`, { project: false });
    expectProblemAt(res, 400, `${BASE}/City`, 'missing-project', 'X-Project-Id');
  });

  it('an empty X-Project-Id counts as missing', async () => {
    const res = await t.request('GET', `${BASE}/City`, { project: '' });
    expectProblemAt(res, 400, `${BASE}/City`, 'missing-project', 'X-Project-Id');
  });

  it('?project_id=shop works instead of the header', async () => {
    const created = await t.request('POST', `${BASE}/City?project_id=shop`, {
      project: false,
      body: { name: 'Query', country: 'QP' },
    });
    expect(created.status, created.text).toBe(201);
    const read = await t.request('GET', `${BASE}/City/${created.body.data.id}?project_id=shop`, { project: false });
    expect(read.status, read.text).toBe(200);
    expect(read.body).toEqual(created.body);
    expectListEnvelope(await t.request('GET', `${BASE}/City?project_id=shop`, { project: false }), {
      limit: 100,
      offset: 0,
      hasNextPage: false,
      hasPreviousPage: false,
    });
  });

  it.each([
    ['header', `${BASE}/City`, { project: 'other-shop' }],
    ['query parameter', `${BASE}/City?project_id=other-shop`, { project: false as const }],
  ])('unknown project (%s) → 404', async (_how, path, options) => {
    expectProblemAt(await t.request('GET', path, options), 404, path, 'unknown-project');
  });
});

describe('environment', () => {
  it.each([
    ['environment', 'production'],
    ['x-environment', 'production'],
    ['environment', 'Master'],
  ])('unknown environment (%s: %s) → 404', async (name, value) => {
    const res = await t.request('GET', `${BASE}/City`, { headers: { [name]: value } });
    expectProblemAt(res, 404, `${BASE}/City`, 'unknown-environment');
  });

  it('x-environment is an alias of environment', async () => {
    const created = await t.request('POST', `${BASE}/City`, {
      key: stagingKey,
      headers: { 'x-environment': 'staging' },
      body: { name: 'Alias', country: 'AL' },
    });
    expect(created.status, created.text).toBe(201);
    expect(await countRows(t.db, 'City', 'staging', 'id = $1', [created.body.data.id])).toBe(1);
    const read = await t.request('GET', `${BASE}/City/${created.body.data.id}`, {
      key: stagingKey,
      environment: 'staging',
    });
    expect(read.status, read.text).toBe(200);
    expect(read.body).toEqual(created.body);
  });

  it('environments are isolated, in the API and in their SQL schemas', async () => {
    const inStaging = await t.request('POST', `${BASE}/City`, {
      key: stagingKey,
      environment: 'staging',
      body: { id: 900001, name: 'Stage', country: 'ST' },
    });
    expect(inStaging.status, inStaging.text).toBe(201);
    const inMaster = await t.request('POST', `${BASE}/City`, { body: { id: 900002, name: 'Main', country: 'MA' } });
    expect(inMaster.status, inMaster.text).toBe(201);

    expectProblemAt(await t.request('GET', `${BASE}/City/900001`), 404, `${BASE}/City/900001`, 'not-found');
    expectProblemAt(
      await t.request('GET', `${BASE}/City/900002`, { key: stagingKey, environment: 'staging' }),
      404,
      `${BASE}/City/900002`,
      'not-found',
    );
    const masterIds = (await t.request('GET', `${BASE}/City?limit=1000`)).body.data.map((c: { id: number }) => c.id);
    const stagingIds = (
      await t.request('GET', `${BASE}/City?limit=1000`, { key: stagingKey, environment: 'staging' })
    ).body.data.map((c: { id: number }) => c.id);
    expect(masterIds).toContain(900002);
    expect(masterIds).not.toContain(900001);
    expect(stagingIds).toContain(900001);
    expect(stagingIds).not.toContain(900002);

    expect(await countRows(t.db, 'City', 'staging', 'id = 900001')).toBe(1);
    expect(await countRows(t.db, 'City', 'master', 'id = 900001')).toBe(0);
    expect(await countRows(t.db, 'City', 'master', 'id = 900002')).toBe(1);
    expect(await countRows(t.db, 'City', 'staging', 'id = 900002')).toBe(0);
  });
});

describe('credentials', () => {
  it('missing Authorization → 401 with WWW-Authenticate', async () => {
    const res = await t.request('GET', `${BASE}/City`, { key: false });
    expectProblemAt(res, 401, `${BASE}/City`, 'unauthorized');
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer\b/);
  });

  it.each([
    ['scheme only', 'Bearer'],
    ['key without a scheme', '<key>'],
    ['three words', 'Bearer <key> extra'],
    ['scheme with a colon', 'Bearer: <key>'],
    ['Basic credentials', 'Basic dXNlcjpwYXNz'],
  ])('malformed Authorization (%s) → 401', async (_name, value) => {
    const res = await t.request('GET', `${BASE}/City`, {
      headers: { authorization: value.replace('<key>', t.adminKey) },
    });
    expectProblemAt(res, 401, `${BASE}/City`, 'unauthorized');
  });

  it.each([
    ['well-formed unknown key', () => `Bearer ${fakeKey()}`],
    ['random word', () => 'Bearer not-a-key'],
    ['unknown key with a custom prefix', () => `ApiKey ${fakeKey()}`],
    [
      'admin key with one character changed',
      () => `Bearer ${t.adminKey.slice(0, -1)}${t.adminKey.endsWith('A') ? 'B' : 'A'}`,
    ],
  ])('unknown key (%s) → 401', async (_name, value) => {
    expectProblemAt(
      await t.request('GET', `${BASE}/City`, { headers: { authorization: value() } }),
      401,
      `${BASE}/City`,
      'unauthorized',
    );
  });

  it('a revoked key → 401 from then on', async () => {
    const { id, key } = await t.createKey(['admin']);
    expect((await t.request('GET', `${BASE}/City`, { key })).status).toBe(200);
    const revoked = await t.request('DELETE', `${BASE}/_apikeys/${id}`, { key: MANAGEMENT_TOKEN });
    expect(revoked.status, revoked.text).toBe(204);
    expect(revoked.text).toBe('');
    expectProblemAt(await t.request('GET', `${BASE}/City`, { key }), 401, `${BASE}/City`, 'unauthorized');
    expectProblemAt(
      await t.request('POST', `${BASE}/City`, { key, body: { name: 'X', country: 'XX' } }),
      401,
      `${BASE}/City`,
      'unauthorized',
    );
  });

  it.each([
    ['a staging key on master (default)', () => ({ key: stagingKey })],
    ['a staging key with environment: master', () => ({ key: stagingKey, environment: 'master' })],
    ['a master key on staging', () => ({ key: t.adminKey, environment: 'staging' })],
    ['a master key on staging via x-environment', () => ({ key: t.adminKey, headers: { 'x-environment': 'staging' } })],
  ])('key of another environment: %s → 401', async (_name, options) => {
    expectProblemAt(await t.request('GET', `${BASE}/City`, options()), 401, `${BASE}/City`, 'unauthorized');
  });

  it('"<Prefix> <key>" and "Bearer <key>" both work; another scheme word → 401', async () => {
    const { key } = await t.createKey(['admin'], { prefix: 'Token' });
    for (const authorization of [`Token ${key}`, `Bearer ${key}`]) {
      expect((await t.request('GET', `${BASE}/City`, { headers: { authorization } })).status, authorization).toBe(200);
    }
    for (const authorization of [`ApiKey ${key}`, `Tokens ${key}`, `Basic ${key}`]) {
      expectProblemAt(
        await t.request('GET', `${BASE}/City`, { headers: { authorization } }),
        401,
        `${BASE}/City`,
        'unauthorized',
      );
    }
  });
});

describe('management token and API keys stay in their lanes', () => {
  it.each([
    ['GET', '/City', undefined],
    ['GET', '/City/1', undefined],
    ['POST', '/City', { name: 'Mgmt', country: 'MG' }],
    ['PATCH', '/City/1', { name: 'Mgmt' }],
    ['DELETE', '/City/1', undefined],
    ['GET', '/OrderItem', undefined],
  ])('management token on %s %s → 403', async (method, path, body) => {
    const before = await countRows(t.db, 'City');
    const res = await t.request(method, `${BASE}${path}`, { key: MANAGEMENT_TOKEN, body });
    expectProblemAt(res, 403, `${BASE}${path}`, 'forbidden');
    expect(await countRows(t.db, 'City')).toBe(before);
  });

  it.each([
    ['GET', '/_apikeys', undefined],
    ['POST', '/_apikeys', { name: 'x', prefix: 'Bearer', roles: ['admin'], environment: 'master' }],
    ['DELETE', '/_apikeys/key_doesnotexist', undefined],
  ])('admin API key on %s %s → 403', async (method, path, body) => {
    const before = await t.db.query<{ n: string }>('select count(*) as n from svcgen.api_keys');
    expectProblemAt(await t.request(method, `${BASE}${path}`, { body }), 403, `${BASE}${path}`, 'forbidden');
    expect(await t.db.query('select count(*) as n from svcgen.api_keys')).toEqual(before);
  });
});

describe('order of checks (docs/api.md §2)', () => {
  const P = (p: string) => `${BASE}${p}`;
  it.each([
    [
      'missing project beats missing credentials',
      'GET',
      '/City',
      { project: false, key: false },
      400,
      'missing-project',
    ],
    ['missing project beats an unknown table', 'GET', '/Nope', { project: false, key: false }, 400, 'missing-project'],
    [
      'unknown project beats missing credentials',
      'GET',
      '/City',
      { project: 'other', key: false },
      404,
      'unknown-project',
    ],
    [
      'unknown environment beats missing credentials',
      'GET',
      '/City',
      { environment: 'prod', key: false },
      404,
      'unknown-environment',
    ],
    [
      'unknown environment beats a bad key',
      'GET',
      '/City',
      { environment: 'prod', headers: { authorization: 'Bearer nope' } },
      404,
      'unknown-environment',
    ],
    ['unknown table without credentials → 401', 'GET', '/Nope', { key: false }, 401, 'unauthorized'],
    [
      'unknown table with a bad key → 401',
      'POST',
      '/Nope',
      { headers: { authorization: 'Bearer nope' }, body: {} },
      401,
      'unauthorized',
    ],
    ['unknown table (wrong case) without credentials → 401', 'GET', '/city/1', { key: false }, 401, 'unauthorized'],
    ['unknown table with credentials → 404', 'GET', '/Nope', {}, 404, 'unknown-table'],
    ['unknown table with credentials, id path → 404', 'DELETE', '/Nope/1', {}, 404, 'unknown-table'],
    ['table names are case-sensitive → 404', 'GET', '/city', {}, 404, 'unknown-table'],
    ['unknown table beats permission', 'GET', '/Nope', { key: 'catalog' }, 404, 'unknown-table'],
    ['unknown table beats the management token 403', 'GET', '/Nope', { key: MANAGEMENT_TOKEN }, 404, 'unknown-table'],
    [
      'unknown table beats body validation',
      'POST',
      '/Nope',
      { raw: '{bad', headers: { 'content-type': 'application/json' } },
      404,
      'unknown-table',
    ],
    [
      'forbidden table beats invalid JSON',
      'POST',
      '/Order',
      { key: 'catalog', raw: '{bad', headers: { 'content-type': 'application/json' } },
      403,
      'forbidden',
    ],
    [
      'forbidden table beats an unknown field',
      'POST',
      '/Order',
      { key: 'catalog', body: { bogus: 1, total: 'abc' } },
      403,
      'forbidden',
    ],
    [
      'forbidden table beats a wrong Content-Type',
      'POST',
      '/Order',
      { key: 'catalog', raw: '{}', headers: { 'content-type': 'text/plain' } },
      403,
      'forbidden',
    ],
    [
      'forbidden table beats a bad PATCH body',
      'PATCH',
      '/Order/1',
      { key: 'catalog', body: { createdAt: 'x' } },
      403,
      'forbidden',
    ],
    ['forbidden table beats bad query parameters', 'GET', '/Order?limit=abc', { key: 'catalog' }, 403, 'forbidden'],
    ['forbidden action beats record existence', 'DELETE', '/Product/987654', { key: 'catalog' }, 403, 'forbidden'],
    ['forbidden table beats record existence', 'GET', '/Order/987654', { key: 'catalog' }, 403, 'forbidden'],
    ['body validation beats record existence', 'PATCH', '/City/987654', { body: { bogus: true } }, 422, 'validation'],
    ['query validation on a list → 400', 'GET', '/City?limit=abc', {}, 400, 'invalid-parameter'],
  ] as const)('%s', async (_name, method, path, options, status, kind) => {
    const o: any = { ...options };
    if (o.key === 'catalog') o.key = catalogKey;
    const res = await t.request(method, P(path), o);
    expectProblemAt(res, status, P(path), kind);
  });
});
