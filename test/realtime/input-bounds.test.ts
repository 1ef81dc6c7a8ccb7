// The nesting bound of every JSON input on every transport (docs/api.md §7 "Limits", docs/realtime.md
// "Lifecycle and limits"): 32 levels, checked by a linear scan before anything parses or walks the
// JSON. An attacker's 20,000-level `variables` answered 500 on the SSE endpoint ("Maximum call stack
// size exceeded" in the subscription's preparation) and closed a WebSocket with 4500; now: HTTP and
// SSE 400 Problems (or the route's own 400 form) naming the bound, the socket closed 4400 with it,
// nothing stored, and the process serves on.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { LIMITS } from '../../runtime/model/index.ts';
import { graphqlWsUrl } from '../support/realtime.ts';
import {
  MANAGEMENT_TOKEN,
  readResponse,
  startTestServer,
  type TestResponse,
  type TestServer,
} from '../support/server.ts';

const REST = '/gw/api/rest';
const GRAPHQL = '/gw/api/graphql';
const STREAM = '/gw/api/graphql/stream';
const LIMIT = LIMITS.maxJsonDepth;
const ATTACK = 20_000;

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t?.close());

/** Arrays nested `depth` levels, as text (building it as a value and stringifying would recurse). */
const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
/** A GraphQL request body (`{ query, variables: { v: … } }`) nesting `depth` levels in all. */
const graphqlBody = (query: string, depth: number) =>
  `{"query":${JSON.stringify(query)},"variables":{"v":${nested(depth - 2)}}}`;
const TOO_DEEP = (what: string) =>
  `${what} nests arrays and objects more than ${LIMIT} levels deep (the limit is ${LIMIT})`;
const BODY_TOO_DEEP = TOO_DEEP('the body');
const PAYLOAD_TOO_DEEP = TOO_DEEP('the message payload');

function send(method: string, path: string, raw: string, headers: Record<string, string> = {}) {
  return t.request(method, path, { raw, headers: { 'content-type': 'application/json', ...headers } });
}

function expectDepthProblem(res: TestResponse, path: string) {
  expect(res.status, res.text).toBe(400);
  expect(res.headers.get('content-type')).toBe('application/problem+json');
  expect(res.body).toEqual({
    type: '/errors/invalid-json',
    title: 'Malformed JSON body',
    status: 400,
    detail: BODY_TOO_DEEP,
    instance: path,
    errors: [{ field: 'body', rule: 'max_depth', message: BODY_TOO_DEEP }],
  });
}

const cityCount = async (name: string) =>
  Number(
    (await t.db.query<{ n: string }>('SELECT count(*) AS n FROM env_master."City" WHERE name = $1', [name]))[0]!.n,
  );

describe('HTTP: every JSON body and every JSON query parameter', () => {
  /** [route, method, path, body of `depth` levels, extra headers]: each route that reads JSON. */
  const routes: [string, string, string, (depth: number) => string, Record<string, string>?][] = [
    ['create', 'POST', `${REST}/City`, (d) => `{"name":"deep","country":"XX","x":${nested(d - 1)}}`],
    ['update by filter', 'PATCH', `${REST}/City?name=equals.deep`, (d) => `{"name":${nested(d - 1)}}`],
    ['_query', 'POST', `${REST}/City/_query`, (d) => `{"filter":${nested(d - 1)}}`],
    ['bulk create', 'POST', `${REST}/City/_bulk`, (d) => `{"items":${nested(d - 1)}}`],
    ['bulk delete', 'DELETE', `${REST}/City/_bulk`, (d) => `{"ids":${nested(d - 1)}}`],
  ];
  const managed: [string, string, (depth: number) => string, Record<string, string>][] = [
    ['API keys', `${REST}/_apikeys`, (d) => `{"name":"k","roles":${nested(d - 1)}}`, {}],
    ['webhooks', `${REST}/_webhooks`, (d) => `{"table":"City","filter":${nested(d - 1)}}`, { environment: 'master' }],
  ];

  it.each(routes)(
    '%s: 20,000 and 33 levels → 400 max_depth, nothing stored; 32 levels pass the bound',
    async (_name, method, path, body) => {
      for (const depth of [ATTACK, LIMIT + 1])
        expectDepthProblem(await send(method, path, body(depth)), path.split('?')[0]!);
      const within = await send(method, path, body(LIMIT));
      expect(within.status, within.text).not.toBe(500);
      expect(within.body?.errors?.[0]?.rule, within.text).not.toBe('max_depth');
      expect(await cityCount('deep')).toBe(0);
    },
  );

  it.each(managed)(
    '%s (management token): 20,000 and 33 levels → 400 max_depth',
    async (_name, path, body, headers) => {
      for (const depth of [ATTACK, LIMIT + 1])
        expectDepthProblem(
          await send('POST', path, body(depth), { authorization: `Bearer ${MANAGEMENT_TOKEN}`, ...headers }),
          path,
        );
    },
  );

  it('/auth: 20,000 and 33 levels → 400 VALIDATION_ERROR max_depth', async () => {
    for (const depth of [ATTACK, LIMIT + 1]) {
      const res = await send('POST', '/auth/login', `{"email":"a@b.c","password":"x","deep":${nested(depth - 1)}}`, {
        authorization: '',
      });
      expect(res.status, res.text).toBe(400);
      expect(res.body).toEqual({
        error: 'VALIDATION_ERROR',
        violations: [{ field: 'body', rule: 'max_depth', message: BODY_TOO_DEEP }],
      });
    }
  });

  it('GraphQL: variables in a POST body, variables and extensions in a GET query → 400 BAD_REQUEST naming the bound', async () => {
    const query = '{ cities { data { id } } }';
    const refused = {
      errors: [
        {
          message: `the request's JSON (body or variables) nests arrays and objects more than ${LIMIT} levels deep`,
          extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-json', status: 400 },
        },
      ],
    };
    for (const depth of [ATTACK, LIMIT + 1]) {
      const post = await send('POST', GRAPHQL, graphqlBody(query, depth));
      expect(post.status, post.text).toBe(400);
      expect(post.body).toEqual(refused);
      for (const name of ['variables', 'extensions']) {
        // 5,000 levels: 20,000 would pass the 64 KiB of the request line (431) before any JSON is read.
        const search = new URLSearchParams({ query, [name]: `{"v":${nested(Math.min(depth, 5000) - 1)}}` });
        const get = await t.request('GET', `${GRAPHQL}?${search}`);
        expect(get.status, get.text).toBe(400);
        expect(get.body).toEqual(refused);
      }
    }
    const within = await send('POST', GRAPHQL, graphqlBody(query, LIMIT));
    expect(within.status, within.text).toBe(200);
  });
});

describe('Server-Sent Events: the subscription body', () => {
  const post = (body: string) => send('POST', STREAM, body, { accept: 'text/event-stream' });
  const SUBSCRIPTION = 'subscription { cityChanged { id } }';

  it('20,000 levels of variables overflowed the stack (500): now 400 max_depth, as every JSON body', async () => {
    expectDepthProblem(await post(graphqlBody(SUBSCRIPTION, ATTACK)), STREAM);
  });

  it('33 levels → the same 400; a JSON string (which graphql-sse would parse again) → 400; 32 levels stream', async () => {
    expectDepthProblem(await post(graphqlBody(SUBSCRIPTION, LIMIT + 1)), STREAM);
    const twice = await post(JSON.stringify(graphqlBody(SUBSCRIPTION, ATTACK)));
    expect(twice.status, twice.text).toBe(400);
    expect(twice.body).toEqual({
      type: '/errors/bad-request',
      title: 'Bad Request',
      status: 400,
      detail: 'the body must be a JSON object: {"query": "subscription { … }", "variables": {…}}',
      instance: STREAM,
      errors: [],
    });
    // Within the bound: the subscription is prepared; an unknown field answers its one error event.
    const res = await fetch(`${t.url}${STREAM}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'text/event-stream',
        'x-project-id': 'shop',
        authorization: `Bearer ${t.adminKey}`,
      },
      body: graphqlBody('subscription { nope }', LIMIT),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('Cannot query field \\"nope\\" on type \\"Subscription\\".');
    expect(text).toContain('event: complete');
  });
});

describe('WebSocket: every graphql-ws message', () => {
  /** Messages (raw text) sent on open, then `afterAck` once the server acknowledges connection_init: what came back and the close. */
  function socket(
    first: string,
    afterAck: string[] = [],
  ): Promise<{ received: { type: string; id?: string; payload?: unknown }[]; code: number; reason: string }> {
    return new Promise((resolve, reject) => {
      const received: { type: string; id?: string; payload?: unknown }[] = [];
      const ws = new WebSocket(graphqlWsUrl(t.url), 'graphql-transport-ws');
      ws.on('open', () => ws.send(first));
      ws.on('message', (data) => {
        const message = JSON.parse(String(data));
        received.push(message);
        if (message.type === 'connection_ack') for (const m of afterAck) ws.send(m);
        // The last message answered: close from this side (1000) to end the test.
        if (message.type === 'error' || message.type === 'complete') ws.close(1000);
      });
      ws.on('close', (code, reason) => resolve({ received, code, reason: reason.toString() }));
      ws.on('error', reject);
    });
  }
  const init = (extra = '') =>
    `{"type":"connection_init","payload":{"X-Project-Id":"shop","Authorization":"Bearer ${t.adminKey}"${extra}}}`;
  const subscribeMessage = (query: string, depth: number) =>
    `{"id":"1","type":"subscribe","payload":${graphqlBody(query, depth)}}`;

  it('connection_init with a 20,000-level or a 33-level payload → 4400 naming the bound', async () => {
    for (const depth of [ATTACK, LIMIT + 1])
      expect(await socket(init(`,"deep":${nested(depth - 1)}`))).toEqual({
        received: [],
        code: 4400,
        reason: PAYLOAD_TOO_DEEP,
      });
  });

  it('subscribe with 20,000 levels of variables closed the socket 4500: now 4400 naming the bound; 33 levels too', async () => {
    for (const depth of [ATTACK, LIMIT + 1])
      expect(await socket(init(), [subscribeMessage('subscription { cityChanged { id } }', depth)])).toEqual({
        received: [{ type: 'connection_ack' }],
        code: 4400,
        reason: PAYLOAD_TOO_DEEP,
      });
  });

  it('32 levels in connection_init and in subscribe pass the bound: the subscription is prepared (an unknown field → its error)', async () => {
    const got = await socket(init(`,"deep":${nested(LIMIT - 1)}`), [subscribeMessage('subscription { nope }', LIMIT)]);
    expect(got).toEqual({
      received: [
        { type: 'connection_ack' },
        {
          type: 'error',
          id: '1',
          payload: [expect.objectContaining({ message: 'Cannot query field "nope" on type "Subscription".' })],
        },
      ],
      code: 1000,
      reason: '',
    });
  });

  it('the process serves on after every attack above', async () => {
    const city = await t.request('POST', `${REST}/City`, { body: { name: 'after-attacks', country: 'XX' } });
    expect(city.status, city.text).toBe(201);
    const health = await readResponse(await fetch(`${t.url}/healthz`));
    expect(health.status).toBe(200);
  });
});
