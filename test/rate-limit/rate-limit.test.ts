// The data API rate limit (docs/api.md §5.18; rateLimits.* in docs/config.md): the project's budget
// and its headers, each caller's share of it (rateLimits.dataPerMinutePerCaller), the limit on
// failed credentials per client address (rateLimits.unauthenticatedPerMinutePerIp), its place in
// the order of checks (docs/api.md §2), and one budget across several processes
// (docs/deployment.md "One machine: --workers").
//
// The window is a calendar minute. Instead of waiting for a fresh one, each test pins the clock
// (vi.setSystemTime mocks Date only; timers stay real) to 30 s into a minute of its own, so its
// window starts empty, `RateLimit-Reset` and `Retry-After` are exactly 30, and no test can straddle
// a minute boundary.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectProblemAt } from '../support/expect.ts';
import { MANAGEMENT_TOKEN, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { freshWindows } from '../support/clock.ts';

const BASE = '/gw/api/rest';
const LIMIT = 5;
/** Most tests here are about the project's limit: one caller may use all of it. */
const patch = (raw: any) => {
  raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: LIMIT, dataPerMinutePerCaller: LIMIT };
};
let a: TestServer;
let b: TestServer;
let staging: string;

beforeAll(async () => {
  a = await startTestServer({ configPatch: patch });
  b = await startTestServer({ configPatch: patch, databaseUrl: a.database.url });
  staging = (await a.createKey(['admin'], { environment: 'staging' })).key;
});
afterAll(async () => {
  vi.useRealTimers();
  await b?.close();
  await a?.close();
});

const freshWindow = freshWindows();

/** Waits (by polling the shared table, not by sleeping) until the window's hits reach `n`. */
async function sharedHits(windowStart: number, n: number, environment = 'master'): Promise<number> {
  const deadline = performance.now() + 5_000;
  let hits = 0;
  while (performance.now() < deadline) {
    const rows = await a.db.query<{ hits: number }>(
      `select coalesce(sum(hits), 0)::int as hits from svcgen.rate_limits
       where bucket like $1 and window_start = to_timestamp($2::double precision / 1000)`,
      [`%:${environment}`, windowStart],
    );
    hits = rows[0]!.hits;
    if (hits >= n) return hits;
  }
  throw new Error(`svcgen.rate_limits did not reach ${n} hits within 5 s (saw ${hits})`);
}

function expectLimitHeaders(res: TestResponse, remaining: number) {
  expect(
    {
      limit: res.headers.get('ratelimit-limit'),
      remaining: res.headers.get('ratelimit-remaining'),
      reset: res.headers.get('ratelimit-reset'),
    },
    `${res.status} ${res.text}`,
  ).toEqual({ limit: String(LIMIT), remaining: String(remaining), reset: '30' });
}

function expectRateLimited(res: TestResponse, path: string) {
  expectProblemAt(res, 429, path, 'rate-limited');
  expect(res.headers.get('retry-after')).toBe('30');
  expectLimitHeaders(res, 0);
}

describe('data rate limit (5 a minute)', () => {
  it('5 requests pass with RateLimit-Remaining 4..0; the 6th → 429 Problem with Retry-After and RateLimit-*', async () => {
    freshWindow();
    const path = `${BASE}/City`;
    for (let i = 0; i < LIMIT; i++) {
      const res = await a.request('GET', path);
      expect(res.status, res.text).toBe(200);
      expectLimitHeaders(res, LIMIT - 1 - i);
    }
    expectRateLimited(await a.request('GET', path), path);
    expectRateLimited(await a.request('POST', path, { body: { name: 'Over', country: 'OV' } }), path);
    expect(await a.db.query(`select 1 from env_master."City" where name = 'Over'`)).toHaveLength(0);
  });

  it('every kind of data request counts (list, read, create, _query, _aggregate)', async () => {
    freshWindow();
    const created = await a.request('POST', `${BASE}/City`, { body: { name: 'Counted', country: 'CO' } });
    expect(created.status, created.text).toBe(201);
    expectLimitHeaders(created, 4);
    const calls: [string, string, unknown?][] = [
      ['GET', `${BASE}/City/${created.body.data.id}`],
      ['GET', `${BASE}/City?limit=1`],
      ['POST', `${BASE}/City/_query`, {}],
      ['GET', `${BASE}/City/_aggregate?fn=count`],
    ];
    for (const [i, [method, path, body]] of calls.entries()) {
      const res = await a.request(method, path, { body });
      expect(res.status, res.text).toBe(200);
      expectLimitHeaders(res, 3 - i);
    }
    expectRateLimited(await a.request('GET', `${BASE}/City/_aggregate?fn=count`), `${BASE}/City/_aggregate`);
  });

  it('RateLimit-* headers are on error responses after the limit check too (404 record, 422, 400)', async () => {
    freshWindow();
    const missing = await a.request('GET', `${BASE}/City/999999999`);
    expect(missing.status).toBe(404);
    expectLimitHeaders(missing, 4);
    const invalid = await a.request('POST', `${BASE}/City`, { body: { name: 1 } });
    expect(invalid.status).toBe(422);
    expectLimitHeaders(invalid, 3);
    const badParam = await a.request('GET', `${BASE}/City?limit=abc`);
    expect(badParam.status).toBe(400);
    expectLimitHeaders(badParam, 2);
  });

  it('the limit is per environment: staging still works while master is over', async () => {
    freshWindow();
    for (let i = 0; i < LIMIT; i++) expect((await a.request('GET', `${BASE}/City`)).status).toBe(200);
    expectRateLimited(await a.request('GET', `${BASE}/City`), `${BASE}/City`);
    const res = await a.request('GET', `${BASE}/City`, { key: staging, environment: 'staging' });
    expect(res.status, res.text).toBe(200);
    expectLimitHeaders(res, 4);
  });

  it('the project limit is per project and environment, across callers: another key shares the window', async () => {
    freshWindow();
    const other = (await a.createKey(['catalog'])).key;
    for (let i = 0; i < 3; i++) expect((await a.request('GET', `${BASE}/City`)).status).toBe(200);
    const res = await a.request('GET', `${BASE}/City`, { key: other });
    expect(res.status, res.text).toBe(200);
    expectLimitHeaders(res, 1);
  });

  it('a new minute starts a new window', async () => {
    const start = freshWindow();
    for (let i = 0; i < LIMIT; i++) await a.request('GET', `${BASE}/City`);
    expectRateLimited(await a.request('GET', `${BASE}/City`), `${BASE}/City`);
    expect(freshWindow()).toBe(start + 60_000); // the next minute, 30 s in
    const res = await a.request('GET', `${BASE}/City`);
    expect(res.status, res.text).toBe(200);
    expectLimitHeaders(res, 4);
  });

  describe('order of checks (docs/api.md §2) while over the limit', () => {
    beforeAll(async () => {
      freshWindow();
      for (let i = 0; i < LIMIT; i++) expect((await a.request('GET', `${BASE}/City`)).status).toBe(200);
      expectRateLimited(await a.request('GET', `${BASE}/City`), `${BASE}/City`);
    });

    it('unknown table → 404 (not 429)', async () => {
      expectProblemAt(await a.request('GET', `${BASE}/Nope`), 404, `${BASE}/Nope`, 'unknown-table');
    });

    it('missing credentials → 401 (not 429); a bad key → 401', async () => {
      expectProblemAt(await a.request('GET', `${BASE}/City`, { key: false }), 401, `${BASE}/City`, 'unauthorized');
      expectProblemAt(
        await a.request('GET', `${BASE}/City`, { key: 'not-a-key' }),
        401,
        `${BASE}/City`,
        'unauthorized',
      );
    });

    it('missing project → 400; unknown project → 404 (not 429)', async () => {
      expectProblemAt(
        await a.request('GET', `${BASE}/City`, { project: false }),
        400,
        `${BASE}/City`,
        'missing-project',
      );
      expectProblemAt(
        await a.request('GET', `${BASE}/City`, { project: 'other' }),
        404,
        `${BASE}/City`,
        'unknown-project',
      );
    });

    it('a role without permission → 429 (the limit comes before permission)', async () => {
      const catalog = (await a.createKey(['catalog'])).key;
      expectRateLimited(await a.request('GET', `${BASE}/Order`, { key: catalog }), `${BASE}/Order`);
    });

    it('an invalid body or parameter → 429 (the limit comes before validation)', async () => {
      expectRateLimited(await a.request('POST', `${BASE}/City`, { body: { bogus: 1 } }), `${BASE}/City`);
      expectRateLimited(await a.request('GET', `${BASE}/City?limit=abc`), `${BASE}/City`);
    });
  });
});

describe('data rate limit across two server processes on one database', () => {
  it('the limit is shared: 5 requests in total across both pass, the next → 429 on either', async () => {
    const start = freshWindow();
    const answers: string[] = [];
    for (let i = 0; i < LIMIT + 1; i++) {
      const server = i % 2 === 0 ? a : b;
      const res = await server.request('GET', `${BASE}/City`, { key: a.adminKey });
      answers.push(`${i % 2 === 0 ? 'A' : 'B'} ${res.status}`);
      if (res.status === 200) await sharedHits(start, i + 1);
    }
    const seventh = await a.request('GET', `${BASE}/City`);
    answers.push(`A ${seventh.status}`);
    const eighth = await b.request('GET', `${BASE}/City`, { key: a.adminKey });
    answers.push(`B ${eighth.status}`);
    expect(answers).toEqual(['A 200', 'B 200', 'A 200', 'B 200', 'A 200', 'B 429', 'A 429', 'B 429']);
    expect(await sharedHits(start, LIMIT)).toBe(LIMIT);
  });

  it('five on A, then B answers 429 at once', async () => {
    const start = freshWindow();
    for (let i = 0; i < LIMIT; i++) expect((await a.request('GET', `${BASE}/City`)).status).toBe(200);
    await sharedHits(start, LIMIT);
    expectRateLimited(await b.request('GET', `${BASE}/City`, { key: a.adminKey }), `${BASE}/City`);
  });

  it('RateLimit-Remaining counts the hits of the other process', async () => {
    const start = freshWindow();
    const remaining: (string | null)[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const res = await (i % 2 === 0 ? a : b).request('GET', `${BASE}/City`, { key: a.adminKey });
      expect(res.status, res.text).toBe(200);
      remaining.push(res.headers.get('ratelimit-remaining'));
      await sharedHits(start, i + 1);
    }
    expect(remaining).toEqual(['4', '3', '2', '1', '0']);
  });
});

/** Each bucket's hits in the window starting at `windowStart`, as the shared table holds them. */
async function bucketHits(server: TestServer, windowStart: number): Promise<Record<string, number>> {
  const rows = await server.db.query<{ bucket: string; hits: number }>(
    `select bucket, hits from svcgen.rate_limits where window_start = to_timestamp($1::double precision / 1000) order by bucket`,
    [windowStart],
  );
  return Object.fromEntries(rows.map((r) => [r.bucket, r.hits]));
}

function expectHeaders(res: TestResponse, limit: number, remaining: number) {
  expect(
    {
      limit: res.headers.get('ratelimit-limit'),
      remaining: res.headers.get('ratelimit-remaining'),
      reset: res.headers.get('ratelimit-reset'),
    },
    `${res.status} ${res.text}`,
  ).toEqual({ limit: String(limit), remaining: String(remaining), reset: '30' });
}

/** A 429 Problem, exactly: body, Retry-After and the RateLimit-* of the limit that was reached. */
function expect429(res: TestResponse, path: string, detail: string, limit: number) {
  expect(res.status, res.text).toBe(429);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toEqual({
    type: '/errors/rate-limited',
    title: 'Too Many Requests',
    status: 429,
    detail,
    instance: path,
    errors: [],
  });
  expect(res.headers.get('retry-after')).toBe('30');
  expectHeaders(res, limit, 0);
}

describe("each caller's share of the data rate limit (project 8, caller 3 a minute)", () => {
  const PROJECT = 8;
  const CALLER = 3;
  const CALLER_DETAIL = `each caller (API key or user) may make ${CALLER} data requests a minute in this project and environment, and yours are used up; retry in 30 s`;
  const PROJECT_DETAIL = `this project and environment may make ${PROJECT} data requests a minute across all its callers, and they are used up; retry in 30 s`;
  const path = `${BASE}/City`;
  let c: TestServer;
  let c2: TestServer;
  beforeAll(async () => {
    const shares = (raw: any) => {
      raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: PROJECT, dataPerMinutePerCaller: CALLER };
    };
    c = await startTestServer({ configPatch: shares });
    c2 = await startTestServer({ configPatch: shares, databaseUrl: c.database.url });
  });
  afterAll(async () => {
    await c2?.close();
    await c?.close();
  });

  it('a key that used up its share gets 429 (not counted for the project); other keys still get 200 until the project total', async () => {
    const start = freshWindow();
    const [one, two, three] = [
      await c.createKey(['admin']),
      await c.createKey(['admin']),
      await c.createKey(['admin']),
    ];
    for (let i = 0; i < CALLER; i++) {
      const res = await c.request('GET', path, { key: one.key });
      expect(res.status, res.text).toBe(200);
      expectHeaders(res, CALLER, CALLER - 1 - i); // the caller's share is the tighter one
    }
    expect429(await c.request('GET', path, { key: one.key }), path, CALLER_DETAIL, CALLER);
    expect429(
      await c.request('POST', path, { key: one.key, body: { name: 'Over', country: 'OV' } }),
      path,
      CALLER_DETAIL,
      CALLER,
    );
    expect(await c.db.query(`select 1 from env_master."City" where name = 'Over'`)).toHaveLength(0);

    for (let i = 0; i < CALLER; i++) {
      const res = await c.request('GET', path, { key: two.key });
      expect(res.status, res.text).toBe(200);
      expectHeaders(res, CALLER, CALLER - 1 - i); // the project has 5, 4, 3 left
    }
    expect429(await c.request('GET', path, { key: two.key }), path, CALLER_DETAIL, CALLER);

    // Two left for the project: the third key sees the project's budget, the tighter one now.
    const first = await c.request('GET', path, { key: three.key });
    expect(first.status, first.text).toBe(200);
    expectHeaders(first, PROJECT, 1);
    const second = await c.request('GET', path, { key: three.key });
    expect(second.status, second.text).toBe(200);
    expectHeaders(second, PROJECT, 0);
    expect429(await c.request('GET', path, { key: three.key }), path, PROJECT_DETAIL, PROJECT);
    expect429(await c.request('GET', path, { key: one.key }), path, CALLER_DETAIL, CALLER);

    // The project total holds: 8 counted; the refused requests counted nowhere, except the third
    // key's last, which its own share had room for.
    expect(await bucketHits(c, start)).toEqual({
      'data:shop:master': PROJECT,
      [`data-caller:shop:master:${one.id}`]: CALLER,
      [`data-caller:shop:master:${two.id}`]: CALLER,
      [`data-caller:shop:master:${three.id}`]: CALLER,
    });
  });

  it("requests refused with 403 use up only the refused key's share: the admin key is not affected", async () => {
    const start = freshWindow();
    const catalog = await c.createKey(['catalog']);
    const admin = await c.createKey(['admin']);
    for (let i = 0; i < CALLER; i++) {
      const res = await c.request('GET', `${BASE}/Order`, { key: catalog.key });
      expectProblemAt(res, 403, `${BASE}/Order`, 'forbidden');
      expectHeaders(res, CALLER, CALLER - 1 - i);
    }
    for (let i = 0; i < 20; i++)
      expect429(await c.request('GET', `${BASE}/Order`, { key: catalog.key }), `${BASE}/Order`, CALLER_DETAIL, CALLER);
    const res = await c.request('GET', `${BASE}/Order`, { key: admin.key });
    expect(res.status, res.text).toBe(200);
    expectHeaders(res, CALLER, CALLER - 1);
    expect(await bucketHits(c, start)).toEqual({
      'data:shop:master': CALLER + 1,
      [`data-caller:shop:master:${catalog.id}`]: CALLER,
      [`data-caller:shop:master:${admin.id}`]: 1,
    });
  });

  it("a caller's share is shared by the server processes: alternating between two, the fourth request → 429 on either", async () => {
    freshWindow();
    const key = (await c.createKey(['admin'])).key;
    const statuses: string[] = [];
    for (let i = 0; i < CALLER + 2; i++) {
      const server = i % 2 === 0 ? c : c2;
      statuses.push(`${i % 2 === 0 ? 'A' : 'B'} ${(await server.request('GET', path, { key })).status}`);
    }
    expect(statuses).toEqual(['A 200', 'B 200', 'A 200', 'B 429', 'A 429']);
    expect((await c2.request('GET', path, { key: (await c.createKey(['admin'])).key })).status).toBe(200);
  });
});

describe('failed credentials per client address (3 a minute)', () => {
  const FAILURES = 3;
  const DETAIL = `${FAILURES} requests a minute with missing or invalid credentials are answered from this address, and they are used up; send a valid API key or access token, or retry in 30 s`;
  const path = `${BASE}/City`;
  let u: TestServer;
  let revoked: string;
  let staging: string;
  beforeAll(async () => {
    u = await startTestServer({
      configPatch: (raw) => {
        raw.rateLimits = { ...raw.rateLimits, unauthenticatedPerMinutePerIp: FAILURES };
        raw.trustProxy = ['127.0.0.1'];
      },
    });
    staging = (await u.createKey(['admin'], { environment: 'staging' })).key;
    const doomed = await u.createKey(['admin']);
    const gone = await u.request('DELETE', `${BASE}/_apikeys/${doomed.id}`, { key: MANAGEMENT_TOKEN });
    expect(gone.status, gone.text).toBe(204);
    revoked = doomed.key;
  });
  afterAll(() => u?.close());

  /** A 401 Problem, exactly; it carries no RateLimit-* headers. */
  function expect401(res: TestResponse, detail: string) {
    expect(res.status, res.text).toBe(401);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(res.body).toEqual({
      type: '/errors/unauthorized',
      title: 'Unauthorized',
      status: 401,
      detail,
      instance: path,
      errors: [],
    });
    expect(res.headers.get('ratelimit-limit')).toBeNull();
    expect(res.headers.get('retry-after')).toBeNull();
  }

  const MISSING =
    'send credentials in the Authorization header: "Bearer <access token or API key>" or "<key prefix> <API key>"';
  const MALFORMED = 'the Authorization header must be "<scheme> <credential>"';
  const UNKNOWN = 'the credential is not a valid API key or token, or it was revoked';
  const STAGING = 'this API key belongs to environment "staging", not "master"';

  it('missing, malformed and unknown credentials → 401 three times, then 429 for any failing credential; valid keys are never refused', async () => {
    const start = freshWindow();
    expect401(await u.request('GET', path, { key: false }), MISSING);
    expect401(await u.request('GET', path, { key: false, headers: { authorization: 'Bearer' } }), MALFORMED);
    expect401(await u.request('GET', path, { key: 'not-a-key' }), UNKNOWN);
    // Valid credentials pass; their headers are the data limits' (by default a caller's share is a
    // fifth of the project's 6000: 1200).
    const valid = await u.request('GET', path);
    expect(valid.status, valid.text).toBe(200);
    expectHeaders(valid, 1200, 1199);
    expect429(await u.request('GET', path, { key: revoked }), path, DETAIL, FAILURES);
    expect429(await u.request('GET', path, { key: staging }), path, DETAIL, FAILURES);
    expect429(
      await u.request('POST', path, { key: false, body: { name: 'Nobody', country: 'NB' } }),
      path,
      DETAIL,
      FAILURES,
    );
    for (let i = 0; i < 3; i++) {
      const res = await u.request('GET', path);
      expect(res.status, res.text).toBe(200);
      expectHeaders(res, 1200, 1198 - i);
    }
    // A new minute, a new count.
    expect(freshWindow()).toBe(start + 60_000);
    expect401(await u.request('GET', path, { key: false }), MISSING);
    expect((await bucketHits(u, start))['data-unauthenticated:127.0.0.1']).toBe(FAILURES);
  });

  it('revoked keys and keys of another environment count too', async () => {
    freshWindow();
    expect401(await u.request('GET', path, { key: revoked }), UNKNOWN);
    expect401(await u.request('GET', path, { key: staging }), STAGING);
    expect401(await u.request('GET', path, { key: revoked }), UNKNOWN);
    expect429(await u.request('GET', path, { key: staging }), path, DETAIL, FAILURES);
  });

  it('the count is per client address (X-Forwarded-For from a trusted proxy): another address still gets 401', async () => {
    const start = freshWindow();
    const from = (ip: string) => ({ key: 'not-a-key', headers: { 'x-forwarded-for': ip } });
    for (let i = 0; i < FAILURES; i++) expect401(await u.request('GET', path, from('203.0.113.7')), UNKNOWN);
    expect429(await u.request('GET', path, from('203.0.113.7')), path, DETAIL, FAILURES);
    expect401(await u.request('GET', path, from('203.0.113.8')), UNKNOWN);
    expect401(await u.request('GET', path, { key: 'not-a-key' }), UNKNOWN);
    const ok = await u.request('GET', path, { headers: { 'x-forwarded-for': '203.0.113.7' } });
    expect(ok.status, ok.text).toBe(200);
    const hits = await bucketHits(u, start);
    expect([
      hits['data-unauthenticated:203.0.113.7'],
      hits['data-unauthenticated:203.0.113.8'],
      hits['data-unauthenticated:127.0.0.1'],
    ]).toEqual([FAILURES, 1, 1]);
  });
});
