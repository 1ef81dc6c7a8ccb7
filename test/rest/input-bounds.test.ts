// Cost bounds on input (docs/api.md §7; README "Decisions", "Cost bounds"): every recursive
// structure of a request (select in the URL and in _query, filter groups, JSON bodies) is refused
// with a 400 naming its limit before any deep work, and a body that is not valid UTF-8 / Unicode
// JSON is a 400 with nothing stored. Regression tests named after what broke.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../runtime/model/index.ts';
import { expectProblemAt } from '../support/expect.ts';
import {
  MANAGEMENT_TOKEN,
  readResponse,
  startTestServer,
  type TestResponse,
  type TestServer,
} from '../support/server.ts';

const BASE = '/gw/api/rest';
let t: TestServer;
let customerId: string;

beforeAll(async () => {
  // Hammering must meet the input bounds, not the data rate limit.
  t = await startTestServer({
    configPatch: (raw) => (raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: 10_000_000 }),
  });
  const made = await t.request('POST', `${BASE}/Customer`, {
    body: { email: `bounds-${randomUUID()}@example.com`, name: 'Bounds' },
  });
  expect(made.status, made.text).toBe(201);
  customerId = made.body.data.id;
});
afterAll(() => t?.close());

/** A body sent byte for byte (fetch would re-encode a string as UTF-8). */
async function sendBytes(
  method: string,
  path: string,
  bytes: Buffer,
  key: string = t.adminKey,
  extra: Record<string, string> = {},
): Promise<TestResponse> {
  const headers = {
    'x-project-id': t.config.project.id,
    authorization: `Bearer ${key}`,
    'content-type': 'application/json',
    ...extra,
  };
  return readResponse(await fetch(`${t.url}${path}`, { method, headers, body: Uint8Array.from(bytes) }));
}

/**
 * Median CPU time of `n` sequential requests. The server runs in this process, so process CPU per
 * request bounds the server's work (plus the client's small share) without counting the time this
 * shared machine spends running other processes, which wall-clock times would.
 */
async function medianCpuMs(
  n: number,
  send: () => Promise<TestResponse>,
): Promise<{ median: number; last: TestResponse }> {
  const times: number[] = [];
  let last: TestResponse | undefined;
  // Warm-up: the first calls of a path pay for JIT compilation, not for the input.
  for (let i = 0; i < 5; i++) await send();
  for (let i = 0; i < n; i++) {
    const started = process.cpuUsage();
    last = await send();
    const used = process.cpuUsage(started);
    times.push((used.user + used.system) / 1000);
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(n / 2)]!, last: last! };
}

const nestedSelect = (depth: number) => `${'customer('.repeat(depth)}id${')'.repeat(depth)}`;
/** `[{ field: 'customer', children: [ ... ] }]` nested `depth` embeds deep, built as text (no recursion). */
const nestedSelectJson = (depth: number) =>
  `${'[{"field":"customer","children":'.repeat(depth)}[{"field":"id"}]${'}]'.repeat(depth)}`;
const nestedGroups = (depth: number) => `(${'and('.repeat(depth - 1)}status.equals.open${')'.repeat(depth - 1)})`;

const EMBED_DEPTH = `embedded relations nest at most ${LIMITS.maxEmbedDepth} levels`;
const JSON_DEPTH = `the body nests arrays and objects more than ${LIMITS.maxJsonDepth} levels deep (the limit is ${LIMITS.maxJsonDepth})`;
const NOT_UTF8 = 'the body is not valid UTF-8; send JSON encoded as UTF-8';
const lone = (field: string) =>
  `${field}: a string holds an unpaired surrogate escape (such as \\ud800), which is not valid Unicode`;

function expectExactProblem(res: TestResponse, path: string, type: string, detail: string, errors: unknown[]) {
  expectProblemAt(res, 400, path, type);
  expect(res.body.detail, res.text).toBe(detail);
  expect(res.body.errors, res.text).toEqual(errors);
}

const cityCount = async (name: string) =>
  Number(
    (
      await t.db.query<{ n: string }>('SELECT count(*) AS n FROM env_master."City" WHERE name LIKE $1', [`${name}%`])
    )[0]!.n,
  );

describe('deep structures are refused before any deep work', () => {
  it('select nested 2,000 levels deep in the URL overflowed the stack (500): now 400 naming the embed limit, in < 20 ms', async () => {
    const path = `${BASE}/Order?select=${nestedSelect(2000)}`;
    const { median, last } = await medianCpuMs(20, () => t.request('GET', path));
    expectExactProblem(last, path, 'invalid-parameter', `select: ${EMBED_DEPTH}`, [
      { field: 'select', rule: 'filter', message: EMBED_DEPTH },
    ]);
    expect(median).toBeLessThan(20);
  });

  it('select 1,000 deep in the URL of a GET by id: same 400', async () => {
    const path = `${BASE}/Customer/${customerId}?select=orders(${nestedSelect(1000)})`;
    expectExactProblem(await t.request('GET', path), path, 'invalid-parameter', `select: ${EMBED_DEPTH}`, [
      { field: 'select', rule: 'filter', message: EMBED_DEPTH },
    ]);
  });

  it('a select just over the limit (the 64 ms correct-depth 400) is refused in < 20 ms, and exactly at the limit still works', async () => {
    const path = `${BASE}/Order?select=${nestedSelect(4)}`;
    const { median, last } = await medianCpuMs(20, () => t.request('GET', path));
    expectExactProblem(last, path, 'invalid-parameter', `select: ${EMBED_DEPTH}`, [
      { field: 'select', rule: 'filter', message: EMBED_DEPTH },
    ]);
    expect(median).toBeLessThan(20);
    const fine = await t.request('GET', `${BASE}/City?select=customers(orders(items(quantity)))`);
    expect(fine.status, fine.text).toBe(200);
  });

  it('more than 10 embeds in the URL are counted on the raw text', async () => {
    const path = `${BASE}/Order?select=${Array.from({ length: 200 }, (_, i) => `customer:c${i}(name)`).join(',')}`;
    const message = `at most ${LIMITS.maxEmbeds} embedded relations per select`;
    expectExactProblem(await t.request('GET', path), path, 'invalid-parameter', `select: ${message}`, [
      { field: 'select', rule: 'filter', message },
    ]);
  });

  it('select nested 1,000 deep in a _query body overflowed the stack (500): now 400 naming the JSON nesting limit, in < 20 ms', async () => {
    const path = `${BASE}/Order/_query`;
    const raw = `{"select":${nestedSelectJson(1000)}}`;
    const { median, last } = await medianCpuMs(20, () =>
      t.request('POST', path, { raw, headers: { 'content-type': 'application/json' } }),
    );
    expectExactProblem(last, path, 'invalid-json', JSON_DEPTH, [
      { field: 'body', rule: 'max_depth', message: JSON_DEPTH },
    ]);
    expect(median).toBeLessThan(20);
  });

  it('a _query select 10 deep (within the JSON limit) is refused by the embed limit before validation walks it', async () => {
    const path = `${BASE}/Order/_query`;
    const raw = `{"select":${nestedSelectJson(10)}}`;
    const { median, last } = await medianCpuMs(20, () =>
      t.request('POST', path, { raw, headers: { 'content-type': 'application/json' } }),
    );
    expectExactProblem(last, path, 'invalid-parameter', `select: ${EMBED_DEPTH}`, [
      { field: 'select', rule: 'filter', message: EMBED_DEPTH },
    ]);
    expect(median).toBeLessThan(20);
    const fine = await t.request('POST', `${BASE}/City/_query`, { body: { select: JSON.parse(nestedSelectJson(0)) } });
    expect(fine.status, fine.text).toBe(200);
  });

  it('or-groups nested 200 deep in the URL: 400 naming the group limit, in < 20 ms', async () => {
    const path = `${BASE}/Order?or=${nestedGroups(200)}`;
    const message = `groups nest at most ${LIMITS.maxGroupDepth} levels`;
    const { median, last } = await medianCpuMs(20, () => t.request('GET', path));
    expectExactProblem(last, path, 'invalid-parameter', `or: ${message}`, [{ field: 'or', rule: 'filter', message }]);
    expect(median).toBeLessThan(20);
  });

  it('groups 2,000 deep in an update-by-filter and in an aggregate: the same 400', async () => {
    const message = `groups nest at most ${LIMITS.maxGroupDepth} levels`;
    const patch = `${BASE}/Order?and=${nestedGroups(2000)}`;
    expectExactProblem(
      await t.request('PATCH', patch, { body: { note: 'x' } }),
      patch,
      'invalid-parameter',
      `and: ${message}`,
      [{ field: 'and', rule: 'filter', message }],
    );
    const aggregate = `${BASE}/Order/_aggregate?fn=count&not=${nestedGroups(2000)}`;
    const res = await t.request('GET', aggregate);
    expect(res.status, res.text).toBe(400);
    expect(res.body.detail, res.text).toBe(`not: ${message}`);
  });

  it('groups exactly 8 deep with an in-list in the innermost still work', async () => {
    const res = await t.request('GET', `${BASE}/Order?or=(${'and('.repeat(7)}status.in.(open,paid)${')'.repeat(7)})`);
    expect(res.status, res.text).toBe(200);
  });

  it('a JSON body nested 100,000 deep: 400 naming the JSON nesting limit, in < 20 ms, nothing stored', async () => {
    const path = `${BASE}/City`;
    const raw = `{"name":"deep-json","country":"XX","x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const { median, last } = await medianCpuMs(20, () =>
      t.request('POST', path, { raw, headers: { 'content-type': 'application/json' } }),
    );
    expectExactProblem(last, path, 'invalid-json', JSON_DEPTH, [
      { field: 'body', rule: 'max_depth', message: JSON_DEPTH },
    ]);
    expect(median).toBeLessThan(20);
    expect(await cityCount('deep-json')).toBe(0);
  });

  it('brackets inside strings do not count as nesting', async () => {
    const res = await t.request('POST', `${BASE}/City`, {
      body: { name: `br-${'[{'.repeat(40)}"\\${'['.repeat(40)}`, country: 'XX' },
    });
    expect(res.status, res.text).toBe(201);
  });
});

describe('bodies that are not valid UTF-8 / Unicode were stored with U+FFFD and answered 201: now 400, nothing stored', () => {
  const path = `${BASE}/City`;

  it.each([
    ['a Latin-1 byte (é as 0xE9)', [0xe9]],
    ['a truncated sequence (0xE2 0x82)', [0xe2, 0x82]],
    ['an encoded surrogate (CESU-8 0xED 0xA0 0x80)', [0xed, 0xa0, 0x80]],
    ['an overlong encoding (0xC0 0xAF)', [0xc0, 0xaf]],
  ])('invalid UTF-8 bytes in a POST body: %s', async (_name, bad) => {
    const tag = `utf8-${randomUUID().slice(0, 8)}`;
    const bytes = Buffer.concat([Buffer.from(`{"name":"${tag}`), Buffer.from(bad), Buffer.from('","country":"XX"}')]);
    expectExactProblem(await sendBytes('POST', path, bytes), path, 'invalid-json', NOT_UTF8, [
      { field: 'body', rule: 'utf8', message: NOT_UTF8 },
    ]);
    expect(await cityCount(tag)).toBe(0);
  });

  it.each([
    ['a lone high surrogate', '\\ud800'],
    ['a lone low surrogate', '\\uDC00'],
    ['a pair in the wrong order', '\\udc00\\ud800'],
    ['a high surrogate at the end', 'x\\uD83D'],
  ])('"\\ud800" in a string field: %s', async (_name, escaped) => {
    const tag = `sur-${randomUUID().slice(0, 8)}`;
    const res = await t.request('POST', path, {
      raw: `{"name":"${tag}${escaped}","country":"XX"}`,
      headers: { 'content-type': 'application/json' },
    });
    expectExactProblem(res, path, 'invalid-json', lone('name'), [
      { field: 'name', rule: 'unicode', message: lone('name') },
    ]);
    expect(await cityCount(tag)).toBe(0);
  });

  it('a lone surrogate deep in a bulk item names its path; in a key it names the object', async () => {
    const bulk = `${BASE}/City/_bulk`;
    const res = await t.request('POST', bulk, {
      raw: '{"items":[{"name":"ok","country":"XX"},{"name":"b\\ud800","country":"XX"}]}',
      headers: { 'content-type': 'application/json' },
    });
    expectExactProblem(res, bulk, 'invalid-json', lone('items[1].name'), [
      { field: 'items[1].name', rule: 'unicode', message: lone('items[1].name') },
    ]);
    const key = await t.request('POST', path, {
      raw: '{"name":"k","country":"XX","\\ud800":1}',
      headers: { 'content-type': 'application/json' },
    });
    expectExactProblem(key, path, 'invalid-json', lone('body'), [
      { field: 'body', rule: 'unicode', message: lone('body') },
    ]);
  });

  it('valid non-BMP characters (emoji), raw or as an escaped pair, are still stored exactly', async () => {
    const tag = `emoji-${randomUUID().slice(0, 8)}`;
    const raw = await sendBytes('POST', path, Buffer.from(`{"name":"${tag}-😀𝄞","country":"XX"}`, 'utf8'));
    expect(raw.status, raw.text).toBe(201);
    expect(raw.body.data.name).toBe(`${tag}-😀𝄞`);
    const escaped = await t.request('POST', path, {
      raw: `{"name":"${tag}-\\ud83d\\ude00","country":"XX"}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(escaped.status, escaped.text).toBe(201);
    const stored = await t.db.query<{ name: string }>(
      'SELECT name FROM env_master."City" WHERE name LIKE $1 ORDER BY id',
      [`${tag}%`],
    );
    expect(stored.map((r) => r.name)).toEqual([`${tag}-😀𝄞`, `${tag}-😀`]);
  });

  it('every JSON-body route reads through the same reader: PATCH, _bulk, _query, keys, webhooks and /auth', async () => {
    const bad = Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]); // {"a":"\xff"}
    for (const [method, p, key] of [
      ['PATCH', `${BASE}/Customer/${customerId}`, t.adminKey],
      ['POST', `${BASE}/City/_bulk`, t.adminKey],
      ['POST', `${BASE}/Order/_query`, t.adminKey],
      ['POST', `${BASE}/_apikeys`, MANAGEMENT_TOKEN],
    ] as const) {
      expectExactProblem(await sendBytes(method, p, bad, key), p, 'invalid-json', NOT_UTF8, [
        { field: 'body', rule: 'utf8', message: NOT_UTF8 },
      ]);
    }
    const hooks = `${BASE}/_webhooks`;
    expectExactProblem(
      await sendBytes('POST', hooks, bad, MANAGEMENT_TOKEN, { environment: 'master' }),
      hooks,
      'invalid-json',
      NOT_UTF8,
      [{ field: 'body', rule: 'utf8', message: NOT_UTF8 }],
    );
    const login = await readResponse(
      await fetch(`${t.url}/auth/login`, {
        method: 'POST',
        headers: { 'x-project-id': t.config.project.id, 'content-type': 'application/json' },
        body: `{"email":"a@b.c","password":"x","deep":${'['.repeat(40)}${']'.repeat(40)}}`,
      }),
    );
    expect(login.status, login.text).toBe(400);
    expect(login.body, login.text).toEqual({
      error: 'VALIDATION_ERROR',
      violations: [{ field: 'body', rule: 'max_depth', message: JSON_DEPTH }],
    });
    const customer = await t.request('GET', `${BASE}/Customer/${customerId}`);
    expect(customer.body.data.name).toBe('Bounds');
  });
});

describe('fairness under deep-input attack', () => {
  it('while 4 clients hammer deep selects and deep bodies, cheap GETs by id are all answered, and more deep requests are refused meanwhile', async () => {
    const deepUrl = `${BASE}/Order?select=${nestedSelect(2000)}`;
    const deepBody = `{"select":${nestedSelectJson(1000)}}`;
    let stop = false;
    let refused = 0;
    const attacker = async (i: number) => {
      while (!stop) {
        const res =
          i % 2
            ? await t.request('GET', deepUrl)
            : await t.request('POST', `${BASE}/Order/_query`, {
                raw: deepBody,
                headers: { 'content-type': 'application/json' },
              });
        expect(res.status, res.text).toBe(400);
        refused++;
      }
    };
    const attackers = [0, 1, 2, 3].map(attacker);
    try {
      for (let i = 0; i < 100; i++) {
        const res = await t.request('GET', `${BASE}/Customer/${customerId}`);
        expect(res.status, res.text).toBe(200);
      }
    } finally {
      stop = true;
      await Promise.all(attackers);
    }
    // A ratio, not a latency: 4 attackers against 1 reader get about 4 refusals per GET when a refusal
    // costs what a GET does; deep input parsed at more than its length's cost would fall well short.
    expect(refused).toBeGreaterThan(100);
  });
});
