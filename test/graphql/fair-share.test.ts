// One caller's GraphQL documents cannot take the process from everyone (docs/graphql.md "Limits"):
// introspection is counted and held to one copy of the schema, its answer kept per schema; each
// document's answer bytes, expensive reads and rate-limit count are bounded; other methods get 405.
import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { introspectionExecutions } from '../../runtime/graphql/introspection.ts';
import { freshWindows } from '../support/clock.ts';
import { buildSeed, writeSeed } from '../support/query-seed.ts';
import { expectProblem, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

const GRAPHQL = '/gw/api/graphql';
const STANDARD = getIntrospectionQuery();
/** The attacker's document: 700 aliases of `types`, each with a fragment over fields, args and types (12 kB). */
const ALIASED_INTROSPECTION = `{ __schema { ${Array.from({ length: 700 }, (_, i) => `a${i}: types { ...I }`).join(' ')} } } fragment I on __Type { name fields { name args { name type { name } } type { name } } }`;
const ONE_COPY =
  'introspection answers one copy of the schema: types is selected as both "a0" and "a1" in one selection set; select it once';

function post(t: TestServer, key: string, body: unknown): Promise<TestResponse> {
  return t.request('POST', GRAPHQL, { key, body, headers: { accept: 'application/graphql-response+json' } });
}

const remaining = (res: TestResponse) => Number(res.headers.get('ratelimit-remaining'));

const freshWindow = freshWindows();

/**
 * What each request of `send` took of the caller's rate limit: the differences of
 * RateLimit-Remaining from one answer to the next (the first one's from a probe before it), in a
 * rate-limit window of their own (no minute ends in between).
 */
async function counted(t: TestServer, key: string, send: (() => Promise<TestResponse>)[]): Promise<number[]> {
  freshWindow();
  try {
    const probe = await t.request('GET', '/gw/api/rest/City?limit=1', { key });
    let before = remaining(probe);
    const used: number[] = [];
    for (const request of send) {
      const res = await request();
      used.push(before - remaining(res));
      before = remaining(res);
    }
    return used;
  } finally {
    vi.useRealTimers();
  }
}

describe('documents bounded before they run', () => {
  let t: TestServer;
  let abuser: string;
  let victim: string;
  beforeAll(async () => {
    t = await startTestServer();
    await writeSeed(t.db, buildSeed());
    abuser = (await t.createKey(['catalog'])).key;
    victim = (await t.createKey(['catalog'])).key;
  });
  afterAll(() => t?.close());

  it('the aliased introspection document is refused before it runs (400 QUERY_TOO_COMPLEX), counted once', async () => {
    const executions = introspectionExecutions();
    const [used] = await counted(t, abuser, [() => post(t, abuser, { query: ALIASED_INTROSPECTION })]);
    const res = await post(t, abuser, { query: ALIASED_INTROSPECTION });
    expect(res.status, res.text.slice(0, 300)).toBe(400);
    expect(res.body).toEqual({
      errors: [
        {
          message: ONE_COPY,
          locations: [{ line: 1, column: 33 }],
          extensions: { code: 'QUERY_TOO_COMPLEX', type: '/errors/invalid-parameter', status: 400 },
        },
      ],
    });
    expect(used).toBe(1);
    expect(introspectionExecutions()).toBe(executions);
  });

  it('the standard introspection query is built once per schema, then answered from the kept answer', async () => {
    // A role set no other test uses: its schema's answer is not kept yet.
    const first = (await t.createKey(['catalog', 'customer'])).key;
    const second = (await t.createKey(['customer', 'catalog'])).key;
    const executions = introspectionExecutions();
    const answers: TestResponse[] = [];
    const keep = (res: TestResponse) => (answers.push(res), res);
    const used = await counted(t, first, [
      async () => keep(await post(t, first, { query: STANDARD })),
      async () => keep(await post(t, first, { query: STANDARD })),
    ]);
    keep(await post(t, second, { query: STANDARD }));
    for (const res of answers) {
      expect(res.status, res.text.slice(0, 300)).toBe(200);
      expect(res.text).toBe(answers[0]!.text);
    }
    expect(answers[0]!.body.data.__schema.queryType).toMatchObject({ name: 'Query' });
    // Built once (counted as 10 requests), then kept: one request each.
    expect(introspectionExecutions() - executions).toBe(1);
    expect(used).toEqual([10, 1]);
  });

  it('a document counts one request per root field; introspection built for it, 10', async () => {
    const four =
      '{ a: productList(limit: 1) { id } b: productList(limit: 1) { id } c: cityList { id } d: city(id: 1) { id } }';
    const used = await counted(t, victim, [
      () => post(t, victim, { query: '{ productList(limit: 1) { id } }' }),
      () => post(t, victim, { query: four }),
      () => post(t, victim, { query: '{ cityList(limit: 1) { id } __typename }' }),
      // Introspection built for the document (mixed with data, or behind a fragment: never kept) counts 10.
      () => post(t, victim, { query: '{ __schema { queryType { name } } cityList(limit: 1) { id } }' }),
      () => post(t, victim, { query: '{ ...Q } fragment Q on Query { __schema { queryType { name } } }' }),
      // Refused before it runs: counted once.
      () =>
        post(t, victim, {
          query: 'query($w: CityWhere) { a: cityList(where: $w) { id } b: cityList { id } }',
          variables: { w: { nope: 1 } },
        }),
    ]);
    expect(used).toEqual([1, 4, 1, 10, 10, 1]);
  });

  it('one caller sending expensive documents in a loop: the other caller’s paced GETs all complete, the abuser’s documents are refused or bounded', async () => {
    const PACED = 15;
    const LOOPS = 3;
    const aggregates = `{ ${Array.from({ length: 3 }, (_, i) => `a${i}: productAggregate { count }`).join(' ')} }`;
    /** Each abuser answer as it came: what was sent, its status, its size. */
    const abused: { kind: string; status: number; bytes: number; code?: string }[] = [];
    let waiters: (() => void)[] = [];
    const answered = () => {
      for (const w of waiters) w();
      waiters = [];
    };
    const nextAbuserAnswer = () => new Promise<void>((resolve) => waiters.push(resolve));
    let done = false;
    const abuse = async (loop: number) => {
      for (let n = 0; !done; n++) {
        // The attack; a standard introspection query made new each time (built, never kept); 3 aggregates.
        const documents: [string, string][] = [
          ['aliased', ALIASED_INTROSPECTION],
          ['fresh-introspection', `# ${loop}.${n}\n${STANDARD}`],
          ['aggregates', aggregates],
        ];
        for (const [kind, query] of documents) {
          const res = await post(t, abuser, { query });
          abused.push({
            kind,
            status: res.status,
            bytes: res.text.length,
            code: res.body?.errors?.[0]?.extensions?.code,
          });
          answered();
        }
      }
    };
    const loops = Array.from({ length: LOOPS }, (_, i) => abuse(i));
    const victimAnswers: { status: number; abuserAnswersBefore: number; abuserAnswersAfter: number }[] = [];
    try {
      for (let i = 0; i < PACED; i++) {
        // Paced by the abuser: each GET goes out after the abuser got one more answer.
        await nextAbuserAnswer();
        const before = abused.length;
        const res = await t.request('GET', '/gw/api/rest/Product?limit=5', { key: victim });
        victimAnswers.push({ status: res.status, abuserAnswersBefore: before, abuserAnswersAfter: abused.length });
      }
    } finally {
      done = true;
      await Promise.all(loops);
    }
    expect(victimAnswers.map((a) => a.status)).toEqual(Array(PACED).fill(200));
    // The abuser kept going all along: its documents were answered between the victim's GETs.
    for (let i = 1; i < PACED; i++)
      expect(victimAnswers[i]!.abuserAnswersBefore).toBeGreaterThan(victimAnswers[i - 1]!.abuserAnswersBefore);
    const aliased = abused.filter((a) => a.kind === 'aliased');
    expect(aliased.length).toBeGreaterThanOrEqual(LOOPS);
    // Refused before running, or (once the abuser's share of the rate limit is used up) before reading it at all.
    for (const a of aliased)
      expect(a.status === 429 ? [429] : [a.status, a.code]).toEqual(
        a.status === 429 ? [429] : [400, 'QUERY_TOO_COMPLEX'],
      );
    expect(aliased.filter((a) => a.status === 400).length).toBeGreaterThanOrEqual(LOOPS);
    // One copy of the schema, never more: every introspection answer is the same size as the first.
    const fresh = abused.filter((a) => a.kind === 'fresh-introspection' && a.status === 200);
    expect(fresh.length).toBeGreaterThan(0);
    for (const a of fresh) expect(a.bytes).toBe(fresh[0]!.bytes);
    expect(fresh[0]!.bytes).toBeLessThan(200_000);
    for (const a of abused.filter((a) => a.kind !== 'aliased')) expect([200, 429]).toContain(a.status);
  });
});

describe('answer bytes and expensive reads per document', () => {
  let t: TestServer;
  let key: string;
  const MAX = 65_536;
  beforeAll(async () => {
    t = await startTestServer({
      configPatch: (raw) => {
        raw.graphql = { maxAnswerBytes: MAX };
        raw.database = { ...raw.database, expensiveReadConcurrency: 1, expensiveReadQueue: 0 };
      },
    });
    await writeSeed(t.db, buildSeed());
    // 600 products of about 250 bytes of JSON each: 150 kB in all, 25 kB a hundred.
    await t.db.query(
      `insert into env_master."Product" (sku, title, price, tags, "updatedAt")
       select 'SKU-' || g, repeat('x', 200), 1, '{}', now() from generate_series(1, 600) g`,
    );
    key = (await t.createKey(['admin'])).key;
  });
  afterAll(() => t?.close());

  const TOO_LARGE = {
    message: `the answer would pass ${MAX} bytes of JSON (graphql.maxAnswerBytes); this field's records were read and dropped: ask for fewer records (limit, first) or fields, or split the document`,
    extensions: { code: 'ANSWER_TOO_LARGE', type: '/errors/invalid-parameter', status: 400 },
  };

  it.each([
    ['answered from the records’ text', ''],
    ['answered by graphql-js', ' __typename'],
  ])('records past graphql.maxAnswerBytes: that root field is null with ANSWER_TOO_LARGE (%s)', async (_, extra) => {
    const small = await post(t, key, { query: `{ productList(limit: 100) { id title${extra} } }` });
    expect(small.status, small.text.slice(0, 300)).toBe(200);
    expect(small.body.data.productList).toHaveLength(100);
    expect(small.body.errors).toBeUndefined();

    const all = await post(t, key, { query: `{ productList(limit: 1000) { id title${extra} } }` });
    expect(all.status).toBe(200);
    expect(all.body).toEqual({
      data: { productList: null },
      errors: [{ ...TOO_LARGE, locations: [{ line: 1, column: 3 }], path: ['productList'] }],
    });

    // Two fields of 50 kB each: whichever comes second passes the bound.
    const two = await post(t, key, {
      query: `{ a: productList(limit: 200) { id title${extra} } b: productList(limit: 200, offset: 200) { id title${extra} } }`,
    });
    expect(two.status).toBe(200);
    expect(Object.values(two.body.data).filter((v) => v === null)).toHaveLength(1);
    expect(Object.values(two.body.data).filter((v) => Array.isArray(v) && v.length === 200)).toHaveLength(1);
    expect(two.body.errors).toHaveLength(1);
    expect(two.body.errors[0]).toMatchObject(TOO_LARGE);
    expect(two.text.length).toBeLessThan(MAX);
  });

  it('an introspection answer past graphql.maxAnswerBytes: 400 ANSWER_TOO_LARGE, no data', async () => {
    const res = await post(t, key, { query: STANDARD });
    expect(res.status, res.text.slice(0, 300)).toBe(400);
    expect(res.body).toEqual({ errors: [TOO_LARGE] });
  });

  it('the expensive reads of one document take the expensive-read budget one at a time', async () => {
    // One slot, no queue: three aggregates at once would get one slot and two 503s.
    const res = await post(t, key, {
      query: '{ a: productAggregate { count } b: cityAggregate { count } c: orderAggregate { count } }',
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ data: { a: [{ count: 604 }], b: [{ count: 3 }], c: [{ count: 60 }] } });
  });
});

describe('405 for the methods an endpoint does not answer', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t?.close());

  it.each([
    [GRAPHQL, 'PUT', 'GET, POST'],
    [GRAPHQL, 'PATCH', 'GET, POST'],
    [GRAPHQL, 'DELETE', 'GET, POST'],
    [GRAPHQL, 'OPTIONS', 'GET, POST'],
    [GRAPHQL, 'PROPFIND', 'GET, POST'],
    [`${GRAPHQL}/stream`, 'GET', 'POST'],
    [`${GRAPHQL}/stream`, 'PUT', 'POST'],
    [`${GRAPHQL}/stream`, 'PATCH', 'POST'],
    [`${GRAPHQL}/stream`, 'DELETE', 'POST'],
    [`${GRAPHQL}/stream`, 'OPTIONS', 'POST'],
  ])('%s %s: 405 with Allow: %s and a Problem, before credentials, nothing counted', async (path, method, allow) => {
    for (const key of [t.adminKey, false] as const) {
      const body = method === 'GET' ? undefined : { query: '{ __typename }' };
      const res = await t.request(method, path, { key, body });
      expectProblem(res, 405, 'method-not-allowed');
      expect(res.headers.get('allow')).toBe(allow);
      expect(res.headers.get('ratelimit-remaining')).toBeNull();
      expect(res.body).toEqual({
        type: '/errors/method-not-allowed',
        title: 'Method Not Allowed',
        status: 405,
        detail: `${path} answers ${allow}, not ${method}`,
        instance: path,
        errors: [],
      });
    }
  });

  it('HEAD /gw/api/graphql: 405 with Allow: GET, POST', async () => {
    const res = await t.request('HEAD', GRAPHQL);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, POST');
  });
});
