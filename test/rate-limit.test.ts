// The data API rate limit (interface "Limits": data requests are rate-limited per project with 429;
// CONTRACT §4 rateLimits.dataPerMinutePerProject, §6 data rate limit and its headers, §7 order of
// checks, §8 several processes behave as one service).
//
// The window is a calendar minute. Instead of waiting for a fresh one, each test pins the clock
// (vi.setSystemTime mocks Date only; timers stay real) to 30 s into a minute of its own, so its
// window starts empty, `RateLimit-Reset` and `Retry-After` are exactly 30, and no test can straddle
// a minute boundary.
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { expectProblemAt } from './support/expect.ts';
import { startTestServer, type TestResponse, type TestServer } from './support/server.ts';
import { freshWindows } from './support/clock.ts';

const BASE = '/gw/api/rest';
const LIMIT = 5;
const patch = (raw: any) => {
  raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: LIMIT };
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
    { limit: res.headers.get('ratelimit-limit'), remaining: res.headers.get('ratelimit-remaining'), reset: res.headers.get('ratelimit-reset') },
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

  it('the limit is per project and environment, not per caller: another key shares the window', async () => {
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

  describe('order of checks (CONTRACT §7) while over the limit', () => {
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
      expectProblemAt(await a.request('GET', `${BASE}/City`, { key: 'not-a-key' }), 401, `${BASE}/City`, 'unauthorized');
    });

    it('missing project → 400; unknown project → 404 (not 429)', async () => {
      expectProblemAt(await a.request('GET', `${BASE}/City`, { project: false }), 400, `${BASE}/City`, 'missing-project');
      expectProblemAt(await a.request('GET', `${BASE}/City`, { project: 'other' }), 404, `${BASE}/City`, 'unknown-project');
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
