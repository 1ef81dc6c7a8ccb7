/**
 * storage.downloadStallTimeoutMs (docs/storage.md "Downloading"): a download whose client stops
 * reading held its connection, its download slot and its open file (or store request) for as long
 * as the client kept the connection open. Now it is cut after the bound, the log says so, and the
 * caller's slot is free again: on the local disk and on the S3 backend. Real server, real
 * PostgreSQL, raw sockets; order and counts, no clock.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startS3, S3_BUCKET, S3_CREDENTIALS, type TestS3 } from '../support/s3.ts';
import { readResponse, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

/** Large enough that a client that stops reading holds its download (socket buffers fill long before). */
const BIG = 16 * 1024 * 1024;
/** Small, so the test is quick; a second download asked for right after the stall starts is far inside it. */
const STALL_MS = 1000;

/** A download that reads its first bytes (the status line among them) and then stops reading. */
async function stalledDownload(port: number, pathAndQuery: string, key: string): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.setEncoding('latin1');
  const first = await new Promise<string>((resolve) => {
    socket.once('data', (chunk: string) => resolve(chunk));
    socket.write(
      `GET ${pathAndQuery} HTTP/1.1\r\nHost: test\r\nX-Project-Id: shop\r\nAuthorization: Bearer ${key}\r\n\r\n`,
    );
  });
  socket.pause();
  expect(first.slice(0, 12)).toBe('HTTP/1.1 200');
  return socket;
}

describe.each(['local', 's3'] as const)('a download whose client stops reading (%s backend)', (backend) => {
  let t: TestServer;
  let s3: TestS3 | undefined;
  let root: string;
  const logged: string[] = [];

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'svcgen-download-stall-'));
    if (backend === 's3') {
      s3 = await startS3();
      process.env.SVCGEN_TEST_S3_KEY = S3_CREDENTIALS.accessKeyId;
      process.env.SVCGEN_TEST_S3_SECRET = S3_CREDENTIALS.secretAccessKey;
    }
    t = await startTestServer({
      log: (line) => logged.push(line),
      configPatch: (raw) => {
        raw.storage.root = root;
        if (s3)
          raw.storage.backend = {
            type: 's3',
            bucket: S3_BUCKET,
            endpoint: s3.endpoint,
            forcePathStyle: true,
            accessKeyIdEnv: 'SVCGEN_TEST_S3_KEY',
            secretAccessKeyEnv: 'SVCGEN_TEST_S3_SECRET',
          };
        raw.storage.downloadStallTimeoutMs = STALL_MS;
        raw.storage.limits = { concurrentDownloadsPerCaller: 1 };
        const admin = { admin: { read: true, create: true, delete: true } };
        raw.storage.buckets.big = { contentTypes: ['text/plain'], maxBytes: BIG, roles: admin };
      },
    });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    await s3?.close();
    await rm(root, { recursive: true, force: true });
  });

  async function get(url: string, key: string): Promise<TestResponse> {
    return readResponse(
      await fetch(`${t.url}${url}`, { headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}` } }),
    );
  }

  it('held its slot and connection forever: now cut after storage.downloadStallTimeoutMs, logged, and the slot is free again (200, not 429)', {
    timeout: 60_000,
  }, async () => {
    const key = (await t.createKey(['admin'])).key;
    const stored = await readResponse(
      await fetch(`${t.url}/gw/api/rest/_files/big?name=big.txt`, {
        method: 'POST',
        headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
        body: 'd'.repeat(BIG),
      }),
    );
    expect(stored.status, stored.text).toBe(201);
    const id = stored.body.data.id as string;
    const content = `/gw/api/rest/_files/big/${id}/content`;

    const stalled = await stalledDownload(Number(new URL(t.url).port), content, key);
    // The stalled download holds the caller's one slot.
    const refused = await get(content, key);
    expect(refused.status).toBe(429);
    expect(refused.body.detail).toBe(
      'each caller may have 1 downloads in progress at once (storage.limits.concurrentDownloadsPerCaller), and you have 1; retry in 1 s, once one of them has finished',
    );

    const line = `download of file ${id} (bucket big) cut: its client read nothing for ${STALL_MS} ms (storage.downloadStallTimeoutMs); connection closed, download slot freed`;
    await until(
      async () => logged.filter((l) => l.startsWith('download of file')),
      (lines) => lines.length > 0,
      20_000,
      'the stall logged',
    );
    expect(logged.filter((l) => l.startsWith('download of file'))).toEqual([line]);
    const again = await until(
      () => get(content, key),
      (res) => res.status !== 429,
      10_000,
      "the caller's download slot given back",
    );
    expect(again.status).toBe(200);
    expect(again.text.length).toBe(BIG);
    // The client that stopped reading sees its connection end once it reads again: fewer bytes than announced.
    let received = 0;
    stalled.on('data', (chunk: string) => (received += chunk.length));
    stalled.resume();
    await new Promise((resolve) => stalled.once('close', resolve));
    expect(received).toBeLessThan(BIG);
    expect(logged.filter((l) => l.startsWith('download of file'))).toEqual([line]);
  });
});
