/**
 * File storage over real HTTP and PostgreSQL on the S3 backend (docs/storage.md "Backends"),
 * against a real S3-protocol server (s3rver) started here: uploads (multipart form and raw,
 * small and multipart to S3), refusals that keep nothing (no object, no row, no pending multipart
 * upload), downloads (Range, ETag, signed URLs, a public bucket), a customer who never sees
 * another's files, deletes and their job, the orphan sweep, and a store that is down (503, then
 * the removal job retries).
 */
import { createHash, randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { CreateMultipartUploadCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3Backend, type StorageBackend, sweepOrphans } from '../../runtime/storage/index.ts';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { S3_BUCKET, S3_CREDENTIALS, startS3, type TestS3 } from '../support/s3.ts';
import { readResponse, type TestResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

const BUCKET = '/gw/api/rest/_files/attachments';
const MAX_BYTES = 6 * 1024 * 1024;
const PREFIX = 'shop';
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6300010000050001' +
    '0d0a2db40000000049454e44ae426082',
  'hex',
);

let s3: TestS3;
let t: AuthTestServer;
let alice: Session;
let bob: Session;
const logged: string[] = [];

beforeAll(async () => {
  s3 = await startS3();
  process.env.SVCGEN_TEST_S3_KEY = S3_CREDENTIALS.accessKeyId;
  process.env.SVCGEN_TEST_S3_SECRET = S3_CREDENTIALS.secretAccessKey;
  t = await startAuthServer({
    log: (line) => logged.push(line),
    configPatch: (raw) => {
      raw.storage.backend = {
        type: 's3',
        bucket: S3_BUCKET,
        endpoint: s3.endpoint,
        forcePathStyle: true,
        prefix: PREFIX,
        accessKeyIdEnv: 'SVCGEN_TEST_S3_KEY',
        secretAccessKeyEnv: 'SVCGEN_TEST_S3_SECRET',
      };
      raw.storage.buckets.attachments.maxBytes = MAX_BYTES;
      raw.storage.buckets.avatars = {
        public: true,
        contentTypes: ['image/png'],
        roles: { admin: { read: true, create: true, delete: true } },
      };
    },
  });
  alice = await t.signupConfirmed('alice@example.com');
  bob = await t.signupConfirmed('bob@example.com');
}, 60_000);
afterAll(async () => {
  await t?.close();
  await s3?.close();
});

function authHeaders(token?: string, more: Record<string, string> = {}): Record<string, string> {
  return { 'x-project-id': 'shop', authorization: `Bearer ${token ?? t.adminKey}`, ...more };
}

async function call(
  method: string,
  url: string,
  o: { token?: string; headers?: Record<string, string>; body?: BodyInit } = {},
): Promise<TestResponse> {
  return readResponse(
    await fetch(`${t.url}${url}`, { method, headers: authHeaders(o.token, o.headers), body: o.body }),
  );
}

function uploadMultipart(bytes: Buffer, name: string, type: string, token?: string) {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)], { type }), name);
  return call('POST', BUCKET, { token, body: form });
}

function uploadRaw(bytes: Buffer | string, name: string, type: string, token?: string) {
  return call('POST', `${BUCKET}?name=${encodeURIComponent(name)}`, {
    token,
    headers: { 'content-type': type },
    body: typeof bytes === 'string' ? bytes : new Uint8Array(bytes),
  });
}

const objectOf = (id: string) => `${PREFIX}/master/attachments/${id}`;

async function fileRows(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM svcgen.files');
  return row!.n;
}

/** What is in the store and the database, to compare before and after a refusal. */
async function kept() {
  return { rows: await fileRows(), objects: await s3.objects(), pending: await s3.pendingUploads() };
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/** Bytes that are not all one value, so a misplaced part would show. */
function pattern(size: number): Buffer {
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = (i * 7) % 251;
  return bytes;
}

describe('uploads to S3', () => {
  it('takes a multipart form file and a raw body; each is an object under the prefix', async () => {
    const form = await uploadMultipart(PNG, 'pixel.png', 'image/png');
    expect(form.status, form.text).toBe(201);
    expect(form.body.data).toMatchObject({ name: 'pixel.png', size: PNG.length, sha256: sha256(PNG) });
    const raw = await uploadRaw('hello, s3\n', 'notes.txt', 'text/plain', alice.accessToken);
    expect(raw.status, raw.text).toBe(201);
    expect(raw.body.data).toMatchObject({ size: 10, ownerId: alice.user.id });
    expect(await s3.objects()).toEqual(
      expect.arrayContaining([objectOf(form.body.data.id), objectOf(raw.body.data.id)]),
    );
    const back = await fetch(`${t.url}${BUCKET}/${form.body.data.id}/content`, { headers: authHeaders() });
    expect(back.status).toBe(200);
    expect(Buffer.from(await back.arrayBuffer()).equals(PNG)).toBe(true);
  });

  it('streams a file larger than one part as a multipart upload: intact, nothing pending', async () => {
    const bytes = pattern(MAX_BYTES);
    const res = await uploadRaw(bytes, 'big.txt', 'text/plain');
    expect(res.status, `${res.text} ${logged.join('\n')}`).toBe(201);
    expect(res.body.data).toMatchObject({ size: MAX_BYTES, sha256: sha256(bytes) });
    const back = await fetch(`${t.url}${BUCKET}/${res.body.data.id}/content`, { headers: authHeaders() });
    expect(back.status).toBe(200);
    expect(Buffer.from(await back.arrayBuffer()).equals(bytes)).toBe(true);
    expect(await s3.pendingUploads()).toEqual([]);
  });

  it('refuses a file over maxBytes with 413, keeping no object, no row and no pending multipart upload', async () => {
    const before = await kept();
    const big = pattern(MAX_BYTES + 1);
    for (const res of [
      await uploadRaw(big, 'big.txt', 'text/plain'),
      await uploadMultipart(big, 'big.txt', 'text/plain'),
    ]) {
      expect(res.status, res.text).toBe(413);
      expect(res.body).toEqual({
        type: '/errors/payload-too-large',
        title: 'Payload Too Large',
        status: 413,
        detail: `the file is larger than this bucket's limit of ${MAX_BYTES} bytes`,
        instance: expect.stringMatching(/^\/gw\/api\/rest\/_files\/attachments/),
        errors: [],
      });
    }
    expect(await kept()).toEqual(before);
  });

  it('refuses a type the bucket does not take and bytes that are not what they declare (415), keeping nothing', async () => {
    const before = await kept();
    const zip = await uploadRaw('PK', 'a.zip', 'application/zip');
    expect(zip.status).toBe(415);
    expect(zip.body.detail).toBe(
      'bucket attachments does not accept application/zip; it accepts image/*, application/pdf, text/plain',
    );
    const fake = await uploadMultipart(Buffer.from('not a picture at all'), 'fake.png', 'image/png');
    expect(fake.status).toBe(415);
    expect(fake.body.detail).toBe('the file was declared image/png but its content is not image/png');
    expect(await kept()).toEqual(before);
  });

  it('keeps nothing of an upload whose client goes away after its first part reached S3', async () => {
    const before = await kept();
    const req = httpRequest(new URL(`${t.url}${BUCKET}?name=cut.txt`), {
      method: 'POST',
      headers: { ...authHeaders(), 'content-type': 'text/plain', 'content-length': String(MAX_BYTES) },
    });
    const gone = new Promise<void>((resolve) => {
      req.on('error', () => resolve());
      req.on('close', () => resolve());
    });
    req.write(pattern(5 * 1024 * 1024 + 100_000));
    await until(s3.pendingUploads, (keys) => keys.length > before.pending.length, 30_000, 'a multipart upload');
    req.destroy();
    await gone;
    await until(kept, (now) => now.pending.length === before.pending.length, 30_000, 'the upload to be aborted');
    expect(await kept()).toEqual(before);
  }, 70_000);
});

describe('downloads from S3', () => {
  let id: string;
  const text = '0123456789abcdefghij';
  beforeAll(async () => {
    const res = await uploadRaw(text, 'range.txt', 'text/plain');
    expect(res.status, res.text).toBe(201);
    id = res.body.data.id;
  });

  it('answers a Range with 206 and its bytes, an unsatisfiable one with 416', async () => {
    const part = await call('GET', `${BUCKET}/${id}/content`, { headers: { range: 'bytes=5-9' } });
    expect(part.status).toBe(206);
    expect(part.text).toBe('56789');
    expect(part.headers.get('content-range')).toBe('bytes 5-9/20');
    const tail = await call('GET', `${BUCKET}/${id}/content`, { headers: { range: 'bytes=-3' } });
    expect([tail.status, tail.text]).toEqual([206, 'hij']);
    const outside = await call('GET', `${BUCKET}/${id}/content`, { headers: { range: 'bytes=50-60' } });
    expect(outside.status).toBe(416);
    expect(outside.headers.get('content-range')).toBe('bytes */20');
  });

  it('sends the ETag; If-None-Match with it answers 304 and no body', async () => {
    const first = await call('GET', `${BUCKET}/${id}/content`);
    expect([first.status, first.text]).toEqual([200, text]);
    expect(first.headers.get('etag')).toBe(`"${sha256(text)}"`);
    const again = await call('GET', `${BUCKET}/${id}/content`, {
      headers: { 'if-none-match': first.headers.get('etag')! },
    });
    expect([again.status, again.text]).toEqual([304, '']);
  });
});

describe('links without credentials on S3', () => {
  it('a signed URL downloads the bytes from the store; a public bucket serves them by id', async () => {
    const up = await uploadRaw('signed bytes', 'signed.txt', 'text/plain', alice.accessToken);
    const signed = await call('POST', `${BUCKET}/${up.body.data.id}/signed-url`, { token: alice.accessToken });
    expect(signed.status, signed.text).toBe(200);
    const res = await fetch(`${t.url}${signed.body.data.url}`, { headers: { range: 'bytes=7-11' } });
    expect([res.status, await res.text()]).toEqual([206, 'bytes']);
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(PNG)], { type: 'image/png' }), 'avatar.png');
    const avatar = await call('POST', '/gw/api/rest/_files/avatars', { body: form });
    expect(avatar.status, avatar.text).toBe(201);
    const open = await fetch(`${t.url}/gw/api/rest/_files/avatars/${avatar.body.data.id}/content?project_id=shop`);
    expect(open.status).toBe(200);
    expect(Buffer.from(await open.arrayBuffer()).equals(PNG)).toBe(true);
    expect(await s3.objects()).toContain(`${PREFIX}/master/avatars/${avatar.body.data.id}`);
  });
});

describe('permissions on S3 (the shop customer role: ownerId = $user.id)', () => {
  it("a customer never reads, lists, downloads, signs or deletes another customer's file", async () => {
    const theirs = await uploadRaw('bob only', 'bob.txt', 'text/plain', bob.accessToken);
    expect(theirs.status).toBe(201);
    const list = await call('GET', `${BUCKET}?limit=100`, { token: alice.accessToken });
    expect(list.status).toBe(200);
    expect(list.body.data.map((f: { id: string }) => f.id)).not.toContain(theirs.body.data.id);
    for (const [method, suffix] of [
      ['GET', ''],
      ['GET', '/content'],
      ['DELETE', ''],
      ['POST', '/signed-url'],
    ] as const) {
      const res = await call(method, `${BUCKET}/${theirs.body.data.id}${suffix}`, { token: alice.accessToken });
      expect(res.status, `${method} ${suffix}`).toBe(404);
    }
    expect(await s3.objects()).toContain(objectOf(theirs.body.data.id));
    const own = await call('GET', `${BUCKET}/${theirs.body.data.id}/content`, { token: bob.accessToken });
    expect([own.status, own.text]).toEqual([200, 'bob only']);
  });
});

describe('deletes and the sweep on S3', () => {
  it('DELETE answers 204, then 404; the job removes the object', async () => {
    const up = await uploadRaw('to delete', 'bye.txt', 'text/plain', bob.accessToken);
    const key = objectOf(up.body.data.id);
    expect(await s3.objects()).toContain(key);
    expect((await call('DELETE', `${BUCKET}/${up.body.data.id}`, { token: bob.accessToken })).status).toBe(204);
    expect((await call('GET', `${BUCKET}/${up.body.data.id}`, { token: bob.accessToken })).status).toBe(404);
    await until(s3.objects, (keys) => !keys.includes(key), 30_000, 'the object to be removed');
  });

  it('the sweep removes an old object without a row and aborts an old pending upload, leaving the rest', async () => {
    const keptFile = await uploadRaw('kept', 'kept.txt', 'text/plain');
    const orphan = `master/attachments/${randomUUID()}`;
    const young = `master/attachments/${randomUUID()}`;
    await s3.put(`${PREFIX}/${orphan}`, 'orphan');
    await s3.put(`${PREFIX}/${young}`, 'young');
    await s3.put(`${PREFIX}/notes/readme.txt`, 'not a svcgen key');
    await s3.client.send(
      new CreateMultipartUploadCommand({ Bucket: S3_BUCKET, Key: `${PREFIX}/master/attachments/${randomUUID()}` }),
    );
    const backend = new S3Backend({
      bucket: S3_BUCKET,
      endpoint: s3.endpoint,
      forcePathStyle: true,
      prefix: PREFIX,
      accessKeyIdEnv: 'SVCGEN_TEST_S3_KEY',
      secretAccessKeyEnv: 'SVCGEN_TEST_S3_SECRET',
    });
    // S3 sets LastModified itself: everything but `young` is reported two hours older than it is.
    const aged: StorageBackend = {
      put: (k, b) => backend.put(k, b),
      get: (k, r) => backend.get(k, r),
      remove: (k) => backend.remove(k),
      async *list() {
        for await (const o of backend.list())
          yield o.key === young ? o : { key: o.key, modifiedAt: new Date(o.modifiedAt.getTime() - 2 * 3600_000) };
      },
    };
    try {
      expect(await sweepOrphans(t.db, aged, 3600)).toBe(2);
    } finally {
      backend.close();
    }
    const objects = await s3.objects();
    expect(objects).not.toContain(`${PREFIX}/${orphan}`);
    expect(objects).toEqual(
      expect.arrayContaining([`${PREFIX}/${young}`, `${PREFIX}/notes/readme.txt`, objectOf(keptFile.body.data.id)]),
    );
    expect(await s3.pendingUploads()).toEqual([]);
  });
});

describe('a store that is down', () => {
  it('uploads and downloads answer 503 storage-unavailable, nothing is kept; a delete succeeds and its job retries', async () => {
    const up = await uploadRaw('still here', 'here.txt', 'text/plain');
    expect(up.status).toBe(201);
    const gone = await uploadRaw('to delete while down', 'gone.txt', 'text/plain');
    const rows = await fileRows();
    await s3.stop();
    try {
      const refused = await uploadRaw('x', 'down.txt', 'text/plain');
      expect(refused.status, refused.text).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(refused.body).toEqual({
        type: '/errors/storage-unavailable',
        title: 'File storage unavailable',
        status: 503,
        detail: 'the file store did not take the upload; nothing was kept, retry in a moment',
        instance: '/gw/api/rest/_files/attachments',
        errors: [],
      });
      const download = await call('GET', `${BUCKET}/${up.body.data.id}/content`);
      expect(download.status).toBe(503);
      expect(download.body.detail).toBe("the file store did not send the file's bytes; retry in a moment");
      const meta = await call('GET', `${BUCKET}/${up.body.data.id}`);
      expect(meta.status).toBe(200);
      expect(await fileRows()).toBe(rows);
      expect(logged.join('\n')).toMatch(
        /file store \(S3 bucket svcgen-test\): upload of master\/attachments\/\S+ failed/,
      );

      expect((await call('DELETE', `${BUCKET}/${gone.body.data.id}`)).status).toBe(204);
      // graphile-worker counts an attempt when it takes the job, and records the error when it fails.
      const failed = await until(
        () =>
          t.db.query<{ attempts: number; last_error: string | null }>(
            'SELECT attempts, last_error FROM svcgen_worker.jobs WHERE key = $1',
            [`master/attachments/${gone.body.data.id}`],
          ),
        (jobs) => jobs[0]?.last_error != null,
        20_000,
        'the removal job to fail once',
      );
      expect(failed[0]!.last_error).toContain('the file store did not complete the removal; retry in a moment');
    } finally {
      await s3.start();
    }
    await until(s3.objects, (keys) => !keys.includes(objectOf(gone.body.data.id)), 20_000, 'the retried removal');
    const back = await call('GET', `${BUCKET}/${up.body.data.id}/content`);
    expect([back.status, back.text]).toEqual([200, 'still here']);
  }, 60_000);
});
