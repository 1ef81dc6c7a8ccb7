// File changes to real-time subscribers (docs/realtime.md "File changes"): fileChanged(bucket:)
// gets a bucket's uploads (INSERT) and removals (DELETE), each checked in memory against the
// caller's read rule of the bucket: a customer (attachments: ownerId = $user.id) never sees
// another's files; a bucket the role may not read, or no bucket of that name, is refused. Over
// WebSocket (graphql-ws) and Server-Sent Events (graphql-sse).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createClient as createSseClient } from 'graphql-sse';
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { primed, subscribe, waitFor } from '../support/realtime.ts';

const BUCKET = '/gw/api/rest/_files/attachments';
const QUERY = `subscription($bucket: String!) {
  fileChanged(bucket: $bucket) { id event record { id bucket name contentType size ownerId } changedFields }
}`;

let root: string;
let t: AuthTestServer;
let alice: Session;
let bob: Session;
const clients: Client[] = [];

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-live-files-'));
  t = await startAuthServer({
    configPatch: (raw) => {
      raw.storage.root = root;
      raw.storage.buckets.secret = { roles: { admin: { read: true, create: true, delete: true } } };
    },
  });
  alice = await t.signupConfirmed(`alice-${Date.now()}@example.com`, { roleId: 'customer' });
  bob = await t.signupConfirmed(`bob-${Date.now()}@example.com`, { roleId: 'customer' });
}, 60_000);
afterAll(async () => {
  for (const c of clients) await c.dispose();
  await t?.close();
  await rm(root, { recursive: true, force: true });
});

async function upload(token: string, name: string): Promise<string> {
  const res = await fetch(`${t.url}${BUCKET}?name=${encodeURIComponent(name)}`, {
    method: 'POST',
    headers: { 'x-project-id': 'shop', authorization: `Bearer ${token}`, 'content-type': 'text/plain' },
    body: `bytes of ${name}`,
  });
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(201);
  return body.data.id as string;
}

function ws(token: string): Client {
  const c = createClient({
    url: `${t.url.replace(/^http/, 'ws')}/gw/api/graphql`,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { 'X-Project-Id': 'shop', Authorization: `Bearer ${token}` },
  });
  clients.push(c);
  return c;
}

it("a customer gets its own files' uploads and removals, never another customer's (WebSocket and SSE)", async () => {
  const overWs = subscribe(ws(alice.accessToken), QUERY, { bucket: 'attachments' });
  const overSse = subscribe(
    createSseClient({
      url: `${t.url}/gw/api/graphql/stream`,
      headers: { 'X-Project-Id': 'shop', Authorization: `Bearer ${alice.accessToken}` },
      fetchFn: fetch,
      retryAttempts: 0,
    }),
    QUERY,
    { bucket: 'attachments' },
  );
  await primed(overWs, () => upload(alice.accessToken, 'probe.txt'));
  await waitFor(() => (overSse.results.length ? true : undefined), 'the SSE subscription');
  overSse.results.length = 0;

  const bobs = await upload(bob.accessToken, 'bob.txt');
  const mine = await upload(alice.accessToken, 'alice.txt');
  const gone = await fetch(`${t.url}${BUCKET}/${mine}`, {
    method: 'DELETE',
    headers: { 'x-project-id': 'shop', authorization: `Bearer ${alice.accessToken}` },
  });
  expect(gone.status).toBe(204);
  for (const sub of [overWs, overSse]) {
    await waitFor(() => (sub.results.length >= 2 ? true : undefined), 'two changes');
    expect(sub.results.map((r) => r.data.fileChanged)).toEqual([
      expect.objectContaining({
        event: 'INSERT',
        record: {
          id: mine,
          bucket: 'attachments',
          name: 'alice.txt',
          contentType: 'text/plain',
          size: 18,
          ownerId: alice.user.id,
        },
        changedFields: [],
      }),
      expect.objectContaining({ event: 'DELETE', record: expect.objectContaining({ id: mine }) }),
    ]);
    expect(JSON.stringify(sub.results)).not.toContain(bobs);
  }
  // Nobody who may see bob's file listens: its upload captured no event at all (docs/realtime.md
  // "What a write costs": the rule pins bucket, environment and owner).
  const captured = await t.db.query(
    `SELECT 1 FROM svcgen.webhook_events WHERE table_name = '_files' AND record->>'id' = $1`,
    [bobs],
  );
  expect(captured).toEqual([]);
  const [interest] = await t.db.query<{ filters: unknown }>(
    `SELECT filters FROM svcgen.live_interest WHERE table_name = '_files'`,
  );
  expect(interest?.filters).toEqual([{ bucket: 'attachments', environment: 'master', owner_id: alice.user.id }]);
});

it('a bucket the role may not read, or no bucket of that name, is refused with the reason', async () => {
  const secret = subscribe(ws(alice.accessToken), QUERY, { bucket: 'secret' });
  await waitFor(() => (secret.closed ? true : undefined), 'the refusal');
  expect(secret.results).toEqual([
    {
      errors: [
        expect.objectContaining({
          message: 'your role may not read the files of bucket "secret"',
          extensions: { code: 'FORBIDDEN', type: '/errors/forbidden', status: 403 },
        }),
      ],
    },
  ]);
  const none = subscribe(ws(alice.accessToken), QUERY, { bucket: 'nope' });
  await waitFor(() => (none.closed ? true : undefined), 'the refusal');
  expect(none.results).toEqual([
    {
      errors: [
        expect.objectContaining({
          message: 'there is no bucket named "nope"; buckets: attachments, secret',
          extensions: { code: 'BAD_REQUEST', type: '/errors/invalid-parameter', status: 400 },
        }),
      ],
    },
  ]);
});
