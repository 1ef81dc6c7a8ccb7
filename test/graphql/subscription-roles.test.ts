// A user's roles changing ends their live subscriptions on every process (docs/realtime.md
// "Lifecycle and limits"): an UPDATE of svcgen.users.roles by plain SQL closes their WebSocket on one process
// with 4403 and ends their SSE stream on another with a last event ROLES_CHANGED (4403); the access
// token issued before the change is then refused on both transports, a refreshed one is taken; the
// subscriptions of another user stay open.
import { randomUUID } from 'node:crypto';
import { createClient as createWsClient } from 'graphql-ws';
import { createClient as createSseClient } from 'graphql-sse';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { subscribe, waitFor } from '../support/realtime.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

const STREAM = '/gw/api/graphql/stream';
const METRICS = 'realtime-roles-metrics-0123456789';
const QUERY = 'subscription { orderChanged { event record { id } } }';

let a: AuthTestServer;
let b: TestServer;

beforeAll(async () => {
  const configPatch = (raw: any) => {
    raw.metrics = { enabled: true, token: METRICS };
  };
  a = await startAuthServer({ configPatch });
  b = await startTestServer({ databaseUrl: a.database.url, configPatch });
});
afterAll(async () => {
  await b?.close();
  await a?.close();
});

/** A raw WebSocket that inits with `token` and subscribes; resolves its close. */
function socket(token: string): { acked: Promise<void>; closed: Promise<{ code: number; reason: string }> } {
  const ws = new WebSocket(`${b.url.replace(/^http/, 'ws')}/gw/api/graphql`, 'graphql-transport-ws');
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  const acked = new Promise<void>((resolve) =>
    ws.on('message', (data) => {
      if (JSON.parse(String(data)).type !== 'connection_ack') return;
      ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: QUERY } }));
      resolve();
    }),
  );
  ws.on('open', () =>
    ws.send(
      JSON.stringify({
        type: 'connection_init',
        payload: { 'X-Project-Id': 'shop', Authorization: `Bearer ${token}`, environment: 'master' },
      }),
    ),
  );
  return { acked, closed };
}

/** An SSE subscription on process `a` with graphql-sse's client. */
function stream(token: string) {
  return subscribe(
    createSseClient({
      url: `${a.url}${STREAM}`,
      headers: { 'X-Project-Id': 'shop', Authorization: `Bearer ${token}` },
      fetchFn: fetch,
      retryAttempts: 0,
    }),
    QUERY,
  );
}

/** Sockets and streams held (both test servers run in this one Node process: /metrics counts both). */
async function connections(server: TestServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS}` } })).text();
  return Number(/^realtime_connections (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

it("changing a user's roles by SQL ends their socket (4403) and stream (ROLES_CHANGED) on both processes; the old token is then refused, a refreshed one taken", async () => {
  const carol: Session = await a.signupConfirmed(`carol-${randomUUID()}@example.com`, { roleId: 'customer' });
  const dave: Session = await a.signupConfirmed(`dave-${randomUUID()}@example.com`, { roleId: 'customer' });
  const carolSocket = socket(carol.accessToken);
  const daveSocket = socket(dave.accessToken);
  await Promise.all([carolSocket.acked, daveSocket.acked]);
  const carolStream = stream(carol.accessToken);
  await waitFor(async () => ((await connections(a)) === 3 ? true : undefined), 'the stream on process a');

  await a.db.query(`UPDATE svcgen.users SET roles = ARRAY['catalog'] WHERE id = $1`, [carol.user.id]);

  expect(await carolSocket.closed).toEqual({
    code: 4403,
    reason: 'your roles changed; refresh the access token and connect again',
  });
  await waitFor(() => (carolStream.closed ? true : undefined), 'the end of the stream');
  expect(carolStream.errors).toEqual([]);
  expect(carolStream.results).toEqual([
    {
      errors: [
        {
          message: 'your roles changed; refresh the access token and connect again',
          extensions: { code: 'ROLES_CHANGED', closeCode: 4403 },
        },
      ],
    },
  ]);
  // Dave's socket is untouched: it is the one connection left.
  await waitFor(async () => ((await connections(b)) === 1 ? true : undefined), 'one connection left');

  // The token from before the change carries the old roles: refused on both transports.
  const again = socket(carol.accessToken);
  expect(await again.closed).toEqual({
    code: 4403,
    reason: expect.stringMatching(/^your roles changed after this access token was issued; refresh it/),
  });
  const refused = await fetch(`${a.url}${STREAM}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'text/event-stream',
      'x-project-id': 'shop',
      authorization: `Bearer ${carol.accessToken}`,
    },
    body: JSON.stringify({ query: QUERY }),
  });
  expect(refused.status).toBe(403);
  expect(await refused.json()).toMatchObject({
    status: 403,
    detail:
      'your roles changed after this access token was issued; refresh it (POST /auth/refresh-token) and connect again',
  });

  // A refreshed token carries the new roles: taken (the catalog role may read no Order, so its
  // schema has no orderChanged; the socket itself is accepted).
  const refreshed = await a.auth('POST', '/auth/refresh-token', { body: { refreshToken: carol.refreshToken } });
  expect(refreshed.status, refreshed.text).toBe(200);
  const fresh = createWsClient({
    url: `${b.url.replace(/^http/, 'ws')}/gw/api/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    lazy: false,
    connectionParams: { 'X-Project-Id': 'shop', Authorization: `Bearer ${refreshed.body.accessToken}` },
    onNonLazyError: () => {},
  });
  await new Promise<void>((resolve, reject) => {
    fresh.on('connected', () => resolve());
    fresh.on('closed', (event) => reject(new Error(`closed: ${JSON.stringify(event)}`)));
  });
  await fresh.dispose();
});
