// Every 429 carries Retry-After (docs/api.md §6.2, docs/realtime.md "Lifecycle and limits"). The
// SSE per-caller connection cap answered its 429 without one, and so did the WebSocket upgrade
// past realtime.maxConnections; both now ask the client to wait CAP_RETRY_AFTER_SECONDS.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { graphqlWsUrl } from '../support/realtime.ts';
import { readResponse, startTestServer, type TestServer } from '../support/server.ts';

const STREAM = '/gw/api/graphql/stream';

let t: TestServer;
let other: { key: string };

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.realtime = { maxConnectionsPerCaller: 1, maxConnections: 2 };
    },
  });
  other = await t.createKey(['admin']);
});
afterAll(() => t?.close());

/** POSTs a subscription stream for `key`; the response once its headers came (a 200 stream is admitted by then). */
function stream(key: string): Promise<Response> {
  return fetch(`${t.url}${STREAM}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-project-id': 'shop',
      authorization: `Bearer ${key}`,
    },
    body: JSON.stringify({ query: 'subscription { cityChanged { id } }' }),
  });
}

/** An upgrade to the subscription socket: the status and Retry-After of a refusal, or 'open'. */
function upgrade(): Promise<{ status: number; retryAfter: string | undefined } | 'open'> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(graphqlWsUrl(t.url), 'graphql-transport-ws');
    ws.on('open', () => {
      ws.close();
      resolve('open');
    });
    ws.on('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] });
      res.resume();
    });
    ws.on('error', (error) => {
      if (!/Unexpected server response/.test(error.message)) reject(error);
    });
  });
}

describe('Retry-After on the real-time caps', () => {
  it('SSE: a second stream of a caller → 429 with Retry-After (it had none); past the process cap → 429 with Retry-After; the upgrade past the cap → 429 with Retry-After (it had none)', async () => {
    const first = await stream(t.adminKey);
    expect(first.status).toBe(200);
    try {
      const second = await readResponse(await stream(t.adminKey));
      expect(second.status, second.text).toBe(429);
      expect(second.headers.get('retry-after')).toBe('5');
      expect(second.body).toEqual({
        type: '/errors/rate-limited',
        title: 'Too Many Requests',
        status: 429,
        detail: 'at most 1 connections per caller; close one first',
        instance: STREAM,
        errors: [],
      });

      const another = await stream(other.key);
      expect(another.status).toBe(200);
      try {
        const third = await readResponse(await stream(t.adminKey));
        expect(third.status, third.text).toBe(429);
        expect(third.headers.get('retry-after')).toBe('5');
        expect(third.body).toMatchObject({ detail: 'this server holds its maximum of 2 connections; try again later' });
        expect(await upgrade()).toEqual({ status: 429, retryAfter: '5' });
      } finally {
        await another.body?.cancel();
      }
    } finally {
      await first.body?.cancel();
    }
  });
});
