/**
 * Names from requests and config that become keys of JavaScript objects (docs/config.md `roles`),
 * and the size of error bodies, through real HTTP on real PostgreSQL (docs/api.md §4, §6.1, §8.1):
 * - role names are looked up as own properties only: `toString`, `constructor`, `__proto__` are
 *   no roles, neither for POST /_apikeys nor for `svcgen keys create` nor in svcgen.config.json;
 * - API key context keys are identifiers and never an Object.prototype name; `__proto__` is
 *   refused, not dropped;
 * - webhook `filter` keys and `select` entries must be fields of the table (`__proto__` included);
 * - a Problem lists at most 20 `errors` plus `errorsOmitted`, with a short `detail`; the bulk
 *   envelope keeps every item's error.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../runtime/config/index.ts';
import { cleanupCli, copyExample, runCli, show, type CliResult } from '../support/cli.ts';
import { MANAGEMENT_TOKEN, SHOP, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

const KEYS = '/gw/api/rest/_apikeys';
const HOOKS = '/gw/api/rest/_webhooks';
const ROLES = 'admin, customer, catalog';
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true };
    },
  });
});
afterAll(async () => {
  await t?.close();
  await cleanupCli();
});

const asManager = { key: MANAGEMENT_TOKEN };
const count = async (table: string) =>
  Number((await t.db.query<{ n: string }>(`select count(*) as n from svcgen.${table}`))[0]!.n);
const JSON_TYPE = { 'content-type': 'application/json' };

/** The whole 422 validation Problem: exactly these members and values. */
function expectValidation(
  res: TestResponse,
  instance: string,
  errors: Array<{ field: string; rule: string; message: string }>,
): void {
  expect(res.status, res.text).toBe(422);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toEqual({
    type: '/errors/validation',
    title: 'Validation failed',
    status: 422,
    detail: errors.map((e) => e.message).join('; '),
    instance,
    errors,
  });
}

const validKey = { name: 'names', prefix: 'Token', roles: ['admin'], environment: 'master' };
/** A key body as raw JSON text, so that a `__proto__` member is really sent. */
const keyJson = (extra: string) =>
  `{"name":"names","prefix":"Token","roles":["admin"],"environment":"master",${extra}}`;

describe('POST /_apikeys: role names are own roles of the config', () => {
  it.each(['__proto__', 'toString', 'constructor', 'hasOwnProperty', 'valueOf'])(
    'roles ["%s"] → 422 naming roles[0], no key stored',
    async (role) => {
      const before = await count('api_keys');
      const res = await t.request('POST', KEYS, { ...asManager, body: { ...validKey, roles: [role] } });
      const message = `no role named "${role}"; roles: ${ROLES}`;
      expectValidation(res, KEYS, [{ field: 'roles[0]', rule: 'enum', message }]);
      expect(await count('api_keys')).toBe(before);
    },
  );

  it('names the index of each unknown role among known ones', async () => {
    const res = await t.request('POST', KEYS, {
      ...asManager,
      body: { ...validKey, roles: ['admin', 'toString', 'catalog', '__proto__'] },
    });
    expectValidation(res, KEYS, [
      { field: 'roles[1]', rule: 'enum', message: `no role named "toString"; roles: ${ROLES}` },
      { field: 'roles[3]', rule: 'enum', message: `no role named "__proto__"; roles: ${ROLES}` },
    ]);
  });
});

describe('POST /_apikeys: context keys', () => {
  const BAD_NAME = 'a context key is a letter or _, then letters, digits or _, at most 64 characters';
  const prototypeName = (key: string) =>
    `"${key}" is the name of a property every JavaScript object has; choose another context key`;

  it.each([
    ['__proto__', prototypeName('__proto__')],
    ['constructor', prototypeName('constructor')],
    ['toString', prototypeName('toString')],
    ['hasOwnProperty', prototypeName('hasOwnProperty')],
    ['valueOf', prototypeName('valueOf')],
    ['team-id', BAD_NAME],
    ['1team', BAD_NAME],
    ['', BAD_NAME],
    ['tëam', BAD_NAME],
    ['a.b', BAD_NAME],
    ['x'.repeat(65), BAD_NAME],
  ])('context key %j → 422 naming context.<key>, no key stored', async (key, reason) => {
    const before = await count('api_keys');
    const res = await t.request('POST', KEYS, {
      ...asManager,
      raw: keyJson(`"context":{"team":"ops",${JSON.stringify(key)}:"x"}`),
      headers: JSON_TYPE,
    });
    const field = `context.${key}`;
    expectValidation(res, KEYS, [{ field, rule: 'name', message: `${field}: ${reason}` }]);
    expect(await count('api_keys')).toBe(before);
  });

  it('reports every bad key, not only the first', async () => {
    const res = await t.request('POST', KEYS, {
      ...asManager,
      raw: keyJson('"context":{"__proto__":{"team":"ops"},"ok":"1","toString":"x"}'),
      headers: JSON_TYPE,
    });
    expectValidation(res, KEYS, [
      { field: 'context.__proto__', rule: 'name', message: `context.__proto__: ${prototypeName('__proto__')}` },
      { field: 'context.toString', rule: 'name', message: `context.toString: ${prototypeName('toString')}` },
    ]);
  });

  it('identifiers up to 64 characters are kept exactly', async () => {
    const context = { team: 'ops', _x: '1', Region_2: 'eu', ['k'.repeat(64)]: 'long' };
    const res = await t.request('POST', KEYS, { ...asManager, body: { ...validKey, context } });
    expect(res.status, res.text).toBe(201);
    const listed = await t.request('GET', KEYS, asManager);
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.find((k: { id: string }) => k.id === res.body.data.id).context).toEqual(context);
  });
});

describe('svcgen.config.json: role names', () => {
  const raw = async () => JSON.parse(await fs.readFile(path.join(SHOP, 'svcgen.config.json'), 'utf8'));
  const problemsOf = (config: unknown): string[] => {
    try {
      parseConfig(config, 'svcgen.config.json');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as ConfigError).problems;
    }
    throw new Error('the config was accepted');
  };
  const PROTOTYPE_NAME =
    'a name every JavaScript object already has (constructor, toString, valueOf, ...); choose another';

  it.each(['toString', 'constructor', 'valueOf', 'hasOwnProperty', 'isPrototypeOf'])(
    'a role named %s is a ConfigError naming $.roles.%s',
    async (name) => {
      const config = await raw();
      config.roles[name] = { tables: { City: { read: true } } };
      expect(problemsOf(config)).toEqual([`$.roles.${name}: the name "${name}" is not allowed: ${PROTOTYPE_NAME}`]);
    },
  );

  it('a role named __proto__ (an own key of the JSON text) is refused, not dropped', async () => {
    // The top-level "roles" (a file bucket has its own "roles", indented deeper).
    const text = (await fs.readFile(path.join(SHOP, 'svcgen.config.json'), 'utf8')).replace(
      '\n  "roles": {',
      '\n  "roles": { "__proto__": { "tables": { "City": { "read": true } } },',
    );
    const config = JSON.parse(text);
    expect(Object.hasOwn(config.roles, '__proto__')).toBe(true);
    expect(problemsOf(config)).toEqual([
      '$.roles.__proto__: "__proto__" cannot be used as a name (it is a property every JavaScript object has)',
    ]);
  });

  it('a role name that breaks the name rule says which rule', async () => {
    const config = await raw();
    config.roles['no good'] = {};
    expect(problemsOf(config)).toEqual([
      '$.roles["no good"]: the name "no good" is not allowed: letters, digits, _ and -',
    ]);
  });

  it('auth.defaultRole "toString" is not a defined role', async () => {
    const config = await raw();
    config.auth.defaultRole = 'toString';
    expect(problemsOf(config)).toEqual(['$.auth.defaultRole: role "toString" is not defined under roles']);
  });

  it('the example config is still valid', async () => {
    expect(Object.keys(parseConfig(await raw(), 'svcgen.config.json').roles)).toEqual(['admin', 'customer', 'catalog']);
  });
});

describe('webhook filter keys and select entries are fields of the table', () => {
  const hook = (extra: string) =>
    `{"projectId":"shop","environment":"master","table":"Order","events":["INSERT"],"url":"http://127.0.0.1:9/names","secret":"s3cret-value"${extra}}`;
  const send = (method: string, p: string, raw: string) =>
    t.request(method, `${HOOKS}${p}`, { ...asManager, environment: 'master', raw, headers: JSON_TYPE });

  it.each([
    [
      '{"__proto__":{"status":"paid"}}',
      [{ field: 'filter.__proto__', rule: 'exists', message: 'filter.__proto__: no table has a field "__proto__"' }],
    ],
    [
      '{"constructor":"x"}',
      [{ field: 'filter.constructor', rule: 'exists', message: 'Order has no field "constructor"' }],
    ],
    [
      '{"status":"paid","toString":"x"}',
      [{ field: 'filter.toString', rule: 'exists', message: 'Order has no field "toString"' }],
    ],
    ['{"nosuch":1}', [{ field: 'filter.nosuch', rule: 'exists', message: 'Order has no field "nosuch"' }]],
  ])('POST filter %s → 422 naming the key, nothing stored', async (filter, errors) => {
    const before = await count('webhooks');
    expectValidation(await send('POST', '', hook(`,"filter":${filter}`)), HOOKS, errors);
    expect(await count('webhooks')).toBe(before);
  });

  it('POST select with __proto__ and constructor → 422 naming each entry', async () => {
    const before = await count('webhooks');
    expectValidation(await send('POST', '', hook(',"select":["id","__proto__","constructor","status"]')), HOOKS, [
      { field: 'select[1]', rule: 'exists', message: 'Order has no field "__proto__"' },
      { field: 'select[2]', rule: 'exists', message: 'Order has no field "constructor"' },
    ]);
    expect(await count('webhooks')).toBe(before);
  });

  it('PATCH refuses the same keys and leaves the subscription as it was', async () => {
    const created = await send('POST', '', hook(',"filter":{"status":"paid"},"select":["id","status"]'));
    expect(created.status, created.text).toBe(201);
    const at = `/${created.body.id}`;
    const instance = `${HOOKS}${at}`;
    expectValidation(await send('PATCH', at, '{"filter":{"__proto__":{"status":"open"}}}'), instance, [
      { field: 'filter.__proto__', rule: 'exists', message: 'filter.__proto__: no table has a field "__proto__"' },
    ]);
    expectValidation(await send('PATCH', at, '{"filter":{"constructor":null}}'), instance, [
      { field: 'filter.constructor', rule: 'exists', message: 'Order has no field "constructor"' },
    ]);
    expectValidation(await send('PATCH', at, '{"select":["__proto__"]}'), instance, [
      { field: 'select[0]', rule: 'exists', message: 'Order has no field "__proto__"' },
    ]);
    const now = await t.request('GET', `${HOOKS}${at}`, { ...asManager, environment: 'master' });
    expect(now.status, now.text).toBe(200);
    expect(now.body.webhook).toMatchObject({ filter: { status: 'paid' }, select: ['id', 'status'] });
  });
});

describe('Problem error lists are capped', () => {
  const unknownFields = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, i]));
  const unknown = (n: number) =>
    Array.from({ length: n }, (_, i) => ({
      field: `f${i}`,
      rule: 'unknown_field',
      message: `City has no field "f${i}"`,
    }));

  it('1,000 unknown fields → 422 with 20 errors, errorsOmitted 980, a short detail and a body under 10 kB', async () => {
    const res = await t.request('POST', '/gw/api/rest/City', {
      body: { name: 'Lyon', country: 'FR', ...unknownFields(1000) },
    });
    expect(res.status, res.text).toBe(422);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(res.text.length).toBeLessThan(10_000);
    const shown = unknown(1000).map((e) => e.message);
    let kept = 0;
    while (shown.slice(0, kept + 1).join('; ').length <= 970) kept++;
    expect(res.body).toEqual({
      type: '/errors/validation',
      title: 'Validation failed',
      status: 422,
      detail: `${shown.slice(0, kept).join('; ')}; … and ${1000 - kept} more`,
      instance: '/gw/api/rest/City',
      errors: unknown(20),
      errorsOmitted: 980,
    });
    expect(res.body.detail.length).toBeLessThanOrEqual(1000);
  });

  it('21 unknown fields → 20 errors and errorsOmitted 1; 20 → all of them and no errorsOmitted', async () => {
    const over = await t.request('POST', '/gw/api/rest/City', {
      body: { name: 'Lyon', country: 'FR', ...unknownFields(21) },
    });
    expect(over.status, over.text).toBe(422);
    expect(over.body.errors).toEqual(unknown(20));
    expect(over.body.errorsOmitted).toBe(1);
    const exact = await t.request('POST', '/gw/api/rest/City', {
      body: { name: 'Lyon', country: 'FR', ...unknownFields(20) },
    });
    expectValidation(exact, '/gw/api/rest/City', unknown(20));
  });

  it('an ALL_OR_NOTHING bulk of 30 bad items: the Problem lists 20, its data envelope all 30', async () => {
    const items = Array.from({ length: 30 }, (_, i) => ({ name: `Bad ${i}`, country: 'FRA' }));
    const res = await t.request('POST', '/gw/api/rest/City/_bulk', { body: { items } });
    expect(res.status, res.text).toBe(422);
    expect(res.body.errors).toHaveLength(20);
    expect(res.body.errors[19]).toEqual({ field: 'items[19]', rule: 'item', message: expect.any(String) });
    expect(res.body.errorsOmitted).toBe(10);
    expect(res.body.data).toMatchObject({
      success: false,
      totalRequested: 30,
      totalSucceeded: 0,
      totalFailed: 30,
      items: [],
    });
    expect(res.body.data.errors.map((e: { index: number }) => e.index)).toEqual(
      Array.from({ length: 30 }, (_, i) => i),
    );
  });

  it('a BEST_EFFORT bulk of 30 bad items is a 207 envelope with all 30 errors', async () => {
    const items = Array.from({ length: 30 }, (_, i) => ({ name: `Bad ${i}`, country: 'FRA' }));
    const res = await t.request('POST', '/gw/api/rest/City/_bulk', { body: { items, transactionMode: 'BEST_EFFORT' } });
    expect(res.status, res.text).toBe(207);
    expect(res.body.data.errors).toHaveLength(30);
    expect(res.body.errorsOmitted).toBeUndefined();
  });

  it('a __proto__ member of a data body is an unknown field, not a changed prototype', async () => {
    const res = await t.request('POST', '/gw/api/rest/City', {
      raw: '{"name":"Lyon","country":"FR","__proto__":{"id":1}}',
      headers: JSON_TYPE,
    });
    expectValidation(res, '/gw/api/rest/City', [
      { field: '__proto__', rule: 'unknown_field', message: 'City has no field "__proto__"' },
    ]);
  });
});

describe('svcgen keys create', () => {
  /** A usage error: exit 2 and one `svcgen:` line on stderr, nothing on stdout. */
  function expectUsageError(result: CliResult, message: string): void {
    expect(result.code, show(result)).toBe(2);
    expect(result.stderr, show(result)).toBe(`svcgen: ${message}\n`);
    expect(result.stdout, show(result)).toBe('');
  }
  const create = (...extra: string[]) =>
    runCli(
      ['keys', 'create', '--project', SHOP, '--env', 'master', '--name', 'names', '--prefix', 'ApiKey', ...extra],
      {
        env: { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
      },
    );

  it.each(['toString', '__proto__', 'constructor'])('--role %s → exit 2, no such role', async (role) => {
    expectUsageError(await create('--role', role), `no role "${role}" in svcgen.config.json (roles: ${ROLES})`);
  });

  it.each([
    ['toString', '"toString" is the name of a property every JavaScript object has; choose another context key'],
    ['__proto__', '"__proto__" is the name of a property every JavaScript object has; choose another context key'],
    ['team-id', 'a context key is a letter or _, then letters, digits or _, at most 64 characters'],
  ])('--context %s=x → exit 2 naming the key', async (key, reason) => {
    expectUsageError(
      await create('--role', 'admin', '--context', 'team=ops', '--context', `${key}=x`),
      `--context "${key}": ${reason}`,
    );
  });

  it('a config with a role named toString → exit 1 naming $.roles.toString', async () => {
    const copy = await copyExample('input-names');
    const file = path.join(copy.dir, 'svcgen.config.json');
    const config = JSON.parse(await fs.readFile(file, 'utf8'));
    config.roles.toString = { tables: {} };
    await fs.writeFile(file, JSON.stringify(config, null, 2));
    const r = await runCli([
      'keys',
      'create',
      '--project',
      copy.dir,
      '--env',
      'master',
      '--name',
      'n',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
    ]);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toContain('$.roles.toString: the name "toString" is not allowed');
    expect(r.stdout, show(r)).toBe('');
  });
});
