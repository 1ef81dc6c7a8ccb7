/**
 * Long uploads (docs/storage.md "Long uploads"): an upload is bounded by its progress
 * (storage.uploadIdleTimeoutMs, storage.limits.minUploadBytesPerSecond) and by
 * storage.uploadTimeoutMs, not by http.requestTimeoutMs, which still cuts every other request. Raw
 * sockets against a real server and PostgreSQL.
 */
import { parseRawResponse as parse } from '../support/raw-response.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalDiskBackend } from '../../runtime/storage/index.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let root: string;
let port: number;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-upload-timeouts-'));
  t = await startTestServer({
    configPatch: (raw) => {
      raw.http = { headersTimeoutMs: 500, requestTimeoutMs: 1000, keepAliveTimeoutMs: 1000 };
      raw.storage.root = root;
      raw.storage.uploadIdleTimeoutMs = 700;
      raw.storage.uploadTimeoutMs = 4000;
      // 10 bytes a second over 1 s windows: the steady uploads below send 50 and more.
      raw.storage.limits = { minUploadBytesPerSecond: 10, uploadRateWindowMs: 1000 };
      raw.storage.buckets.slow = {
        contentTypes: ['text/plain'],
        roles: { admin: { read: true, create: true, delete: true } },
      };
    },
  });
  port = Number(new URL(t.url).port);
}, 60_000);
afterAll(async () => {
  await t?.close();
  await rm(root, { recursive: true, force: true });
});

interface Raw {
  socket: Socket;
  /** Everything received, once the server closed the connection (or ended the response and we closed). */
  closed: Promise<{ text: string; at: number }>;
}

function open(): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
    });
    socket.on('error', () => {});
    const closed = new Promise<{ text: string; at: number }>((done) =>
      socket.on('close', () => done({ text, at: performance.now() })),
    );
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

function uploadHead(length: number): string {
  return (
    `POST /gw/api/rest/_files/slow?name=slow.txt HTTP/1.1\r\nHost: test\r\nX-Project-Id: shop\r\n` +
    `Authorization: Bearer ${t.adminKey}\r\nContent-Type: text/plain\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`
  );
}

/** Sends `chunks` pieces of `size` bytes, one every `everyMs`, while the socket is open. */
async function drip(raw: Raw, chunks: number, size: number, everyMs: number): Promise<void> {
  for (let i = 0; i < chunks && !raw.socket.destroyed; i++) {
    raw.socket.write('x'.repeat(size));
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

async function kept(): Promise<{ rows: number; objects: number }> {
  const [row] = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM svcgen.files WHERE bucket = 'slow'");
  let objects = 0;
  for await (const o of new LocalDiskBackend(root).list()) if (o.key.split('/')[1] === 'slow') objects++;
  return { rows: row!.n, objects };
}

describe('uploads are bounded by progress, not by http.requestTimeoutMs', { timeout: 30_000 }, () => {
  it('an upload lasting ~2.4 s, more than twice requestTimeoutMs (1 s), with a byte at least every 300 ms: 201 and stored whole', async () => {
    const before = await kept();
    const raw = await open();
    const started = performance.now();
    raw.socket.write(uploadHead(8 * 100));
    await drip(raw, 8, 100, 300);
    const { text, at } = await raw.closed;
    expect((at - started) / 1000).toBeGreaterThan(2);
    const res = parse(text);
    expect(res.status, text).toBe(201);
    expect(res.body.data).toMatchObject({ bucket: 'slow', name: 'slow.txt', size: 800 });
    expect(await kept()).toEqual({ rows: before.rows + 1, objects: before.objects + 1 });
  });

  it('an upload that stalls after 100 of 1000 bytes: 408 at ~0.7 s (uploadIdleTimeoutMs), the connection closed, nothing kept', async () => {
    const before = await kept();
    const raw = await open();
    raw.socket.write(uploadHead(1000));
    const started = performance.now();
    raw.socket.write('y'.repeat(100));
    const { text, at } = await raw.closed;
    expect((at - started) / 1000).toBeGreaterThan(0.6);
    expect((at - started) / 1000).toBeLessThan(2.5);
    const res = parse(text);
    expect(res.status, text).toBe(408);
    expect(res.headers.connection).toBe('close');
    expect(res.body).toEqual({
      type: '/errors/request-timeout',
      title: 'Request Timeout',
      status: 408,
      detail:
        'no byte of the upload arrived for 700 ms (storage.uploadIdleTimeoutMs); nothing was kept, send the file again',
      instance: '/gw/api/rest/_files/slow',
      errors: [],
    });
    expect(await kept()).toEqual(before);
  });

  it('an upload still arriving after storage.uploadTimeoutMs (4 s), however steadily: 408, nothing kept', async () => {
    const before = await kept();
    const raw = await open();
    raw.socket.write(uploadHead(1_000_000));
    const started = performance.now();
    void drip(raw, 1000, 10, 200);
    const { text, at } = await raw.closed;
    expect((at - started) / 1000).toBeGreaterThan(3.9);
    expect((at - started) / 1000).toBeLessThan(6.5);
    const res = parse(text);
    expect(res.status, text).toBe(408);
    expect(res.body.detail).toBe(
      'the upload took longer than 4000 ms (storage.uploadTimeoutMs); nothing was kept, send the file again',
    );
    expect(await kept()).toEqual(before);
  });

  it('an upload trickling a byte every 250 ms, never idle but under storage.limits.minUploadBytesPerSecond (10 a second over 1 s): 408 naming the key, the connection closed, nothing kept', async () => {
    const before = await kept();
    const raw = await open();
    raw.socket.write(uploadHead(1000));
    void drip(raw, 1000, 1, 250);
    const { text } = await raw.closed;
    const res = parse(text);
    expect(res.status, text).toBe(408);
    expect(res.headers.connection).toBe('close');
    expect(res.body).toEqual({
      type: '/errors/request-timeout',
      title: 'Request Timeout',
      status: 408,
      detail:
        'the upload arrived slower than 10 bytes a second over 1000 ms (storage.limits.minUploadBytesPerSecond); nothing was kept, send the file again',
      instance: '/gw/api/rest/_files/slow',
      errors: [],
    });
    expect(await kept()).toEqual(before);
  });

  it('a refused upload whose client keeps trickling the rest of its body, under the minimum rate: answered 415, then the connection closed', async () => {
    const raw = await open();
    raw.socket.write(uploadHead(1000).replace('text/plain', 'image/png').replace('Connection: close\r\n', ''));
    raw.socket.write('z'.repeat(10));
    void drip(raw, 1000, 1, 250);
    const { text } = await raw.closed;
    expect(text.match(/^HTTP\/1\.1 /gm)).toHaveLength(1);
    expect(parse(text).status, text).toBe(415);
  });

  it('other routes keep http.requestTimeoutMs: a JSON body dripped for longer → 408 at ~1 s, nothing created', async () => {
    const raw = await open();
    const body = JSON.stringify({ name: 'Dripped', country: 'FR' });
    raw.socket.write(
      `POST /gw/api/rest/City HTTP/1.1\r\nHost: test\r\nX-Project-Id: shop\r\nAuthorization: Bearer ${t.adminKey}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    );
    const started = performance.now();
    void (async () => {
      for (const ch of body) {
        if (raw.socket.destroyed) return;
        raw.socket.write(ch);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const { text, at } = await raw.closed;
    expect((at - started) / 1000).toBeGreaterThan(0.9);
    expect((at - started) / 1000).toBeLessThan(2.5);
    const res = parse(text);
    expect(res.status, text).toBe(408);
    expect(res.body.type).toBe('/errors/request-timeout');
    const found = await t.request('GET', '/gw/api/rest/City?name=equals.Dripped');
    expect(found.status).toBe(200);
    expect(found.body.data).toEqual([]);
  });

  it('a refused upload on a keep-alive connection whose client then stalls: answered 415 at once, the connection closed within the timeouts', async () => {
    const raw = await open();
    const started = performance.now();
    raw.socket.write(uploadHead(1000).replace('text/plain', 'image/png').replace('Connection: close\r\n', ''));
    raw.socket.write('z'.repeat(10));
    const { text, at } = await raw.closed;
    expect(parse(text).status, text).toBe(415);
    expect((at - started) / 1000).toBeLessThan(3);
  });
});
