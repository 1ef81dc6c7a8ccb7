/**
 * The S3 backend (runtime/storage/s3.ts) against a real S3-protocol server (s3rver): put, ranged
 * get, idempotent remove, list (only svcgen's keys under its prefix, and pending multipart
 * uploads, which remove aborts), a failing body that leaves nothing (small: no PutObject; large: the
 * multipart upload aborted), and a store that is down (503 Problem, logged).
 */
import { randomUUID } from 'node:crypto';
import { type AddressInfo, createServer, type Socket } from 'node:net';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { CreateMultipartUploadCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Problem } from '../../runtime/http/index.ts';
import { ObjectMissing, S3Backend } from '../../runtime/storage/index.ts';
import { S3_BUCKET, S3_CREDENTIALS, startS3, type TestS3 } from '../support/s3.ts';

let s3: TestS3;
let backend: S3Backend;
const logged: string[] = [];
const ENV = { TEST_S3_ID: S3_CREDENTIALS.accessKeyId, TEST_S3_SECRET: S3_CREDENTIALS.secretAccessKey };

beforeAll(async () => {
  s3 = await startS3();
  backend = new S3Backend(
    {
      bucket: S3_BUCKET,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      prefix: 'app',
      accessKeyIdEnv: 'TEST_S3_ID',
      secretAccessKeyEnv: 'TEST_S3_SECRET',
    },
    (line) => logged.push(line),
    ENV,
  );
});
afterAll(async () => {
  backend?.close();
  await s3?.close();
});

const newKey = () => `master/attachments/${randomUUID()}`;

async function keys(): Promise<string[]> {
  const found: string[] = [];
  for await (const object of backend.list()) found.push(object.key);
  return found.sort();
}

/** A body that yields `bytes` then fails. */
function failing(bytes: number, error: Error): Readable {
  return Readable.from(
    (async function* () {
      for (let sent = 0; sent < bytes; sent += 1024 * 1024) yield Buffer.alloc(Math.min(1024 * 1024, bytes - sent), 1);
      throw error;
    })(),
  );
}

describe('S3Backend', () => {
  it('puts an object under its prefix, gets it whole and by range, lists it with its time, removes it twice', async () => {
    const key = newKey();
    const before = Date.now();
    await backend.put(key, Readable.from([Buffer.from('0123456789')]));
    expect(await s3.objects()).toContain(`app/${key}`);
    expect(await text(await backend.get(key))).toBe('0123456789');
    expect(await text(await backend.get(key, { start: 2, end: 5 }))).toBe('2345');
    const listed: { key: string; modifiedAt: Date }[] = [];
    for await (const o of backend.list()) listed.push(o);
    const mine = listed.find((o) => o.key === key);
    expect(mine?.modifiedAt.getTime()).toBeGreaterThan(before - 2000);
    await backend.remove(key);
    await backend.remove(key);
    expect(await s3.objects()).not.toContain(`app/${key}`);
    await expect(backend.get(key)).rejects.toBeInstanceOf(ObjectMissing);
  });

  it('stores an empty object', async () => {
    const key = newKey();
    await backend.put(key, Readable.from([]));
    expect(await text(await backend.get(key))).toBe('');
    await backend.remove(key);
  });

  it('stores a multipart upload (over one 5 MiB part) intact', async () => {
    const key = newKey();
    const body = Buffer.alloc(11 * 1024 * 1024);
    for (let i = 0; i < body.length; i++) body[i] = i % 251;
    await backend.put(key, Readable.from([body.subarray(0, 3_000_000), body.subarray(3_000_000)]));
    const back = Buffer.concat(await (await backend.get(key)).toArray());
    expect(back.equals(body)).toBe(true);
    expect(await text(await backend.get(key, { start: 6 * 1024 * 1024, end: 6 * 1024 * 1024 + 2 }))).toBe(
      body.subarray(6 * 1024 * 1024, 6 * 1024 * 1024 + 3).toString(),
    );
    expect(await s3.pendingUploads()).toEqual([]);
    await backend.remove(key);
  });

  it('a body that fails leaves nothing: no object and no pending multipart upload; put rejects with its error', async () => {
    const before = await s3.objects();
    for (const size of [1000, 7 * 1024 * 1024]) {
      const key = newKey();
      const error = new Problem('payload-too-large', 'too big');
      await expect(backend.put(key, failing(size, error))).rejects.toBe(error);
      expect(await s3.objects()).toEqual(before);
      expect(await s3.pendingUploads()).toEqual([]);
    }
  });

  it('lists only svcgen keys under its prefix, and pending uploads, which remove aborts', async () => {
    const key = newKey();
    await s3.put('app/notes/readme.txt', 'not ours');
    await s3.put(`other/${key}`, 'another prefix');
    const started = await s3.client.send(new CreateMultipartUploadCommand({ Bucket: S3_BUCKET, Key: `app/${key}` }));
    expect(started.UploadId).toBeTruthy();
    const listed = await keys();
    expect(listed.filter((k) => !k.startsWith('.incoming/'))).toEqual(
      listed.filter((k) => /^master\/attachments\/[0-9a-f-]{36}$/.test(k)),
    );
    expect(listed).not.toContain('notes/readme.txt');
    const pending = listed.filter((k) => k.startsWith('.incoming/'));
    expect(pending).toHaveLength(1);
    expect(await s3.pendingUploads()).toEqual([`app/${key}`]);
    await backend.remove(pending[0]!);
    await backend.remove(pending[0]!);
    expect(await s3.pendingUploads()).toEqual([]);
    expect(await s3.objects()).toEqual(expect.arrayContaining(['app/notes/readme.txt', `other/${key}`]));
  });

  it('refuses keys it did not make', async () => {
    await expect(backend.get('../../etc/passwd')).rejects.toThrow('not an object key: ../../etc/passwd');
    await expect(backend.remove('.incoming/not-a-token')).rejects.toThrow('not a pending upload');
  });

  it('a store that is down answers the 503 Problem storage-unavailable and logs why', async () => {
    const key = newKey();
    await backend.put(key, Readable.from(['kept']));
    await s3.stop();
    try {
      for (const attempt of [
        () => backend.put(newKey(), Readable.from(['x'])),
        () => backend.get(key),
        () => backend.remove(key),
      ]) {
        const error = await attempt().catch((e: unknown) => e);
        expect(error).toBeInstanceOf(Problem);
        expect((error as Problem).status).toBe(503);
        expect((error as Problem).kind).toBe('storage-unavailable');
        expect((error as Problem).headers).toEqual({ 'retry-after': '5' });
      }
      expect(logged.join('\n')).toMatch(
        /file store \(S3 bucket svcgen-test\): upload of master\/attachments\/.* failed/,
      );
    } finally {
      await s3.start();
    }
    expect(await text(await backend.get(key))).toBe('kept');
  });

  it('a store that refuses (unknown access key, no such bucket) answers 503 and logs what S3 said', async () => {
    const said: string[] = [];
    for (const [settings, reason] of [
      [{ bucket: S3_BUCKET, idEnv: 'WRONG' }, /InvalidAccessKeyId/],
      [{ bucket: 'no-such-bucket', idEnv: 'TEST_S3_ID' }, /NoSuchBucket/],
    ] as const) {
      const refusing = new S3Backend(
        {
          bucket: settings.bucket,
          endpoint: s3.endpoint,
          forcePathStyle: true,
          accessKeyIdEnv: settings.idEnv,
          secretAccessKeyEnv: 'TEST_S3_SECRET',
        },
        (line) => said.push(line),
        { ...ENV, WRONG: 'NOT-A-KNOWN-KEY' },
      );
      try {
        const error = await refusing.put(newKey(), Readable.from(['x'])).catch((e: unknown) => e);
        expect((error as Problem).kind).toBe('storage-unavailable');
        expect(said.at(-1)).toMatch(reason);
      } finally {
        refusing.close();
      }
    }
  });

  it('a store that accepts connections but never answers: 503 once the request times out', async () => {
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const hung = new S3Backend(
      {
        bucket: S3_BUCKET,
        endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
        forcePathStyle: true,
        accessKeyIdEnv: 'TEST_S3_ID',
        secretAccessKeyEnv: 'TEST_S3_SECRET',
      },
      () => {},
      ENV,
      300,
    );
    try {
      const started = Date.now();
      const error = await hung.get(newKey()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(Problem);
      expect((error as Problem).kind).toBe('storage-unavailable');
      expect(Date.now() - started).toBeLessThan(10_000);
      const upload = await hung.put(newKey(), Readable.from(['x'])).catch((e: unknown) => e);
      expect((upload as Problem).kind).toBe('storage-unavailable');
    } finally {
      hung.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('names missing credential variables clearly', () => {
    expect(
      () =>
        new S3Backend(
          { bucket: S3_BUCKET, accessKeyIdEnv: 'NO_SUCH_ID', secretAccessKeyEnv: 'NO_SUCH_SECRET' },
          () => {},
          {},
        ),
    ).toThrow('storage.backend names NO_SUCH_ID and NO_SUCH_SECRET for the S3 credentials, but they are not set');
  });
});
