/**
 * File storage over real HTTP and PostgreSQL, local-disk backend (docs/storage.md): uploads
 * (multipart and raw), lists, permissions of the shop's `attachments` bucket, downloads (Range,
 * ETag), refusals that keep nothing, names that are never paths or headers, deletes and their job,
 * signed URLs, and the webhook event of an upload.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm, utimes, writeFile, mkdir } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFileClient, ServiceError } from '../../examples/shop/generated/client.ts';
import { LocalDiskBackend, sweepOrphans } from '../../runtime/storage/index.ts';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, readResponse, type TestResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d4948445200000001000000010806000000' +
    '1f15c4890000000d49444154789c6300010000050001' +
    '0d0a2db40000000049454e44ae426082',
  'hex',
);
const BUCKET = '/gw/api/rest/_files/attachments';

let t: AuthTestServer;
let root: string;
let receiver: Receiver;
let alice: Session;
let bob: Session;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-files-'));
  receiver = await startReceiver();
  t = await startAuthServer({
    configPatch: (raw) => {
      raw.storage.root = root;
      raw.storage.buckets.attachments.maxBytes = 64 * 1024;
      raw.storage.buckets.avatars = {
        public: true,
        contentTypes: ['image/png'],
        roles: { admin: { read: true, create: true, delete: true } },
      };
      // A rule checked after the bytes are in: catalog keys may upload files of at most 10 bytes.
      raw.storage.buckets.tiny = {
        roles: { catalog: { read: true, create: { filter: { size: { lte: 10 } } } } },
      };
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0] };
    },
  });
  alice = await t.signupConfirmed('alice@example.com');
  bob = await t.signupConfirmed('bob@example.com');
}, 60_000);
afterAll(async () => {
  await t?.close();
  await receiver?.close();
  await rm(root, { recursive: true, force: true });
});

interface Send {
  token?: string;
  headers?: Record<string, string>;
}

function authHeaders(o: Send): Record<string, string> {
  return {
    'x-project-id': 'shop',
    authorization: `Bearer ${o.token ?? t.adminKey}`,
    ...o.headers,
  };
}

async function call(method: string, url: string, o: Send & { body?: BodyInit } = {}): Promise<TestResponse> {
  return readResponse(await fetch(`${t.url}${url}`, { method, headers: authHeaders(o), body: o.body }));
}

function uploadMultipart(bytes: Buffer, name: string, type: string, o: Send & { bucket?: string } = {}) {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(bytes)], { type }), name);
  return call('POST', o.bucket ?? BUCKET, { ...o, body: form });
}

function uploadRaw(bytes: Buffer | string, name: string, type: string, o: Send & { bucket?: string } = {}) {
  return call('POST', `${o.bucket ?? BUCKET}?name=${encodeURIComponent(name)}`, {
    ...o,
    headers: { 'content-type': type, ...o.headers },
    body: typeof bytes === 'string' ? bytes : new Uint8Array(bytes),
  });
}

async function storedObjects(): Promise<string[]> {
  const found: string[] = [];
  for await (const o of new LocalDiskBackend(root).list()) found.push(o.key);
  return found;
}

async function fileRows(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM svcgen.files');
  return row!.n;
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe('uploads', () => {
  it('takes a multipart file: 201, its metadata, Location, and the bytes under the storage root', async () => {
    const res = await uploadMultipart(PNG, 'pixel.png', 'image/png');
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      bucket: 'attachments',
      name: 'pixel.png',
      contentType: 'image/png',
      size: PNG.length,
      sha256: sha256(PNG),
      ownerId: null,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(res.headers.get('location')).toBe(`${BUCKET}/${res.body.data.id}`);
    expect(await storedObjects()).toContain(`master/attachments/${res.body.data.id}`);
    const meta = await call('GET', res.headers.get('location')!);
    expect(meta.status).toBe(200);
    expect(meta.body).toEqual({ data: res.body.data });
  });

  it('takes a raw body with Content-Type and ?name=, owned by the signed-in user', async () => {
    const res = await uploadRaw('hello, files\n', 'notes.txt', 'text/plain; charset=utf-8', {
      token: alice.accessToken,
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({
      name: 'notes.txt',
      contentType: 'text/plain',
      size: 13,
      sha256: sha256('hello, files\n'),
      ownerId: alice.user.id,
    });
  });

  it('refuses a file over maxBytes with 413 and keeps nothing (no row, no bytes)', async () => {
    const before = { rows: await fileRows(), objects: (await storedObjects()).length };
    const big = Buffer.alloc(64 * 1024 + 1, 0x61);
    for (const res of [
      await uploadRaw(big, 'big.txt', 'text/plain'),
      await uploadMultipart(big, 'big.txt', 'text/plain'),
    ]) {
      expect(res.status, res.text).toBe(413);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(res.body.detail).toBe("the file is larger than this bucket's limit of 65536 bytes");
    }
    expect(await fileRows()).toBe(before.rows);
    expect((await storedObjects()).length).toBe(before.objects);
  });

  it('refuses content that is not what it declares (PNG declared, text sent) with 415, keeping nothing', async () => {
    const before = { rows: await fileRows(), objects: (await storedObjects()).length };
    const res = await uploadMultipart(Buffer.from('not a picture at all'), 'fake.png', 'image/png');
    expect(res.status, res.text).toBe(415);
    expect(res.body.detail).toBe('the file was declared image/png but its content is not image/png');
    const disguised = await uploadRaw(PNG, 'fake.txt', 'text/plain');
    expect(disguised.status).toBe(415);
    expect(disguised.body.detail).toBe('the file was declared text/plain but its content is image/png');
    expect(await fileRows()).toBe(before.rows);
    expect((await storedObjects()).length).toBe(before.objects);
  });

  it('refuses a type the bucket does not accept (415) and a raw body without a name (422)', async () => {
    const zip = await uploadRaw('PK', 'a.zip', 'application/zip');
    expect(zip.status).toBe(415);
    expect(zip.body.detail).toBe(
      'bucket attachments does not accept application/zip; it accepts image/*, application/pdf, text/plain',
    );
    const unnamed = await call('POST', BUCKET, { headers: { 'content-type': 'text/plain' }, body: 'x' });
    expect(unnamed.status).toBe(422);
    expect(unnamed.body.errors).toEqual([{ field: 'name', rule: 'required', message: 'a file name is required' }]);
    const noPart = new FormData();
    noPart.append('other', 'x');
    const missing = await call('POST', BUCKET, { body: noPart });
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toBe('the multipart body has no part named "file"');
  });

  it('keeps a path-like name as a plain name: the bytes are under the storage root by id only', async () => {
    const res = await uploadRaw('secret?', '../../etc/passwd', 'text/plain');
    expect(res.status, res.text).toBe(201);
    expect(res.body.data.name).toBe('../../etc/passwd');
    expect(await storedObjects()).toContain(`master/attachments/${res.body.data.id}`);
    expect(await readdir(root)).toEqual(expect.not.arrayContaining(['etc']));
    const listed = await call('GET', `${BUCKET}?name=equals.${encodeURIComponent('../../etc/passwd')}`);
    expect(listed.body.data.map((f: any) => f.id)).toEqual([res.body.data.id]);
  });

  it('streams a file of many chunks intact: size, sha256 and the bytes back', async () => {
    const text = Buffer.from('svcgen streams files; '.repeat(2500));
    const res = await uploadMultipart(text, 'long.txt', 'text/plain');
    expect(res.status, res.text).toBe(201);
    expect(res.body.data).toMatchObject({ size: text.length, sha256: sha256(text) });
    const back = await fetch(`${t.url}${BUCKET}/${res.body.data.id}/content`, { headers: authHeaders({}) });
    expect(Buffer.from(await back.arrayBuffer()).equals(text)).toBe(true);
  });

  it('keeps nothing of an upload whose client goes away mid-body', async () => {
    const before = { rows: await fileRows(), objects: (await storedObjects()).length };
    const url = new URL(`${t.url}${BUCKET}?name=cut.txt`);
    const req = httpRequest(url, {
      method: 'POST',
      headers: { ...authHeaders({}), 'content-type': 'text/plain', 'content-length': '50000' },
    });
    const gone = new Promise<void>((resolve) => {
      req.on('error', () => resolve());
      req.on('close', () => resolve());
    });
    // Past the sniffed head: the bytes are on their way to an incoming file when the client goes.
    req.write(Buffer.alloc(20_000, 0x61));
    await until(storedObjects, (keys) => keys.some((k) => k.startsWith('.incoming/')), 5000, 'an incoming file');
    req.destroy();
    await gone;
    await until(storedObjects, (keys) => keys.length === before.objects, 5000, 'the incoming file to be removed');
    expect(await fileRows()).toBe(before.rows);
  });

  it('refuses (403 row_filter) a file its create rule does not allow once it is in, and removes its bytes', async () => {
    const before = (await storedObjects()).length;
    const catalogKey = await t.createKey(['catalog']);
    const small = await uploadRaw('0123456789', 'ten.txt', 'text/plain', {
      token: catalogKey.key,
      bucket: '/gw/api/rest/_files/tiny',
    });
    expect(small.status, small.text).toBe(201);
    const big = await uploadRaw('0123456789!', 'eleven.txt', 'text/plain', {
      token: catalogKey.key,
      bucket: '/gw/api/rest/_files/tiny',
    });
    expect(big.status, big.text).toBe(403);
    expect(big.body.detail).toBe("the _files record would not match your role's filter on size; nothing was changed");
    expect(big.body.errors).toEqual([
      { field: 'size', rule: 'row_filter', message: "size must match your role's filter" },
    ]);
    expect((await storedObjects()).length).toBe(before + 1);
  });

  it('answers a multipart body that breaks off inside the file with 400, keeping nothing', async () => {
    const before = { rows: await fileRows(), objects: (await storedObjects()).length };
    const body =
      '--XyZ\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nno end';
    const res = await call('POST', BUCKET, { headers: { 'content-type': 'multipart/form-data; boundary=XyZ' }, body });
    expect(res.status, res.text).toBe(400);
    expect(res.body.type).toBe('/errors/bad-request');
    expect(await fileRows()).toBe(before.rows);
    expect((await storedObjects()).length).toBe(before.objects);
  });

  it('refuses names with control characters (header injection) with 422', async () => {
    const res = await uploadRaw('x', 'a.txt\r\nSet-Cookie: stolen=1', 'text/plain');
    expect(res.status).toBe(422);
    expect(res.body.errors[0]).toMatchObject({ field: 'name', rule: 'format' });
  });

  it('answers 404 for an unknown bucket and 401 without credentials', async () => {
    const unknown = await uploadRaw('x', 'a.txt', 'text/plain', { bucket: '/gw/api/rest/_files/nope' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toBe('there is no bucket named "nope"; buckets: attachments, avatars, tiny');
    const anonymous = await readResponse(
      await fetch(`${t.url}${BUCKET}?name=a.txt`, {
        method: 'POST',
        headers: { 'x-project-id': 'shop', 'content-type': 'text/plain' },
        body: 'x',
      }),
    );
    expect(anonymous.status).toBe(401);
  });
});

describe('permissions (the shop customer role: ownerId = $user.id)', () => {
  it("a customer never reads, lists, downloads or deletes another customer's files", async () => {
    const mine = await uploadRaw('alice only', 'alice.txt', 'text/plain', { token: alice.accessToken });
    const theirs = await uploadRaw('bob only', 'bob.txt', 'text/plain', { token: bob.accessToken });
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    const aliceList = await call('GET', `${BUCKET}?limit=100`, { token: alice.accessToken });
    expect(aliceList.status).toBe(200);
    expect(aliceList.body.data.length).toBeGreaterThan(0);
    expect(aliceList.body.data.every((f: any) => f.ownerId === alice.user.id)).toBe(true);
    expect(aliceList.body.data.map((f: any) => f.id)).not.toContain(theirs.body.data.id);
    const byOwner = await call('GET', `${BUCKET}?ownerId=equals.${bob.user.id}`, { token: alice.accessToken });
    expect(byOwner.body.data).toEqual([]);
    for (const [method, suffix] of [
      ['GET', ''],
      ['GET', '/content'],
      ['DELETE', ''],
      ['POST', '/signed-url'],
    ] as const) {
      const res = await call(method, `${BUCKET}/${theirs.body.data.id}${suffix}`, { token: alice.accessToken });
      expect(res.status, `${method} ${suffix}`).toBe(404);
    }
    const own = await call('GET', `${BUCKET}/${mine.body.data.id}/content`, { token: alice.accessToken });
    expect(own.status).toBe(200);
    expect(own.text).toBe('alice only');
  });

  it('the list takes the data API filters, sort, select and pages, in its envelope', async () => {
    const res = await call('GET', `${BUCKET}?contentType=equals.text/plain&sort=-size&select=name,size&limit=2`, {
      headers: { prefer: 'count=exact' },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toHaveLength(2);
    expect(Object.keys(res.body.data[0])).toEqual(['name', 'size']);
    expect(res.body.data[0].size).toBeGreaterThanOrEqual(res.body.data[1].size);
    expect(res.body.meta.pagination).toMatchObject({ limit: 2, hasNextPage: true, nextCursor: expect.any(String) });
    expect(res.body.meta.pagination.totalCount).toBeGreaterThan(2);
    const next = await call(
      'GET',
      `${BUCKET}?contentType=equals.text/plain&sort=-size&select=name,size&limit=2&after=${res.body.meta.pagination.nextCursor}`,
    );
    expect(next.status).toBe(200);
    const hidden = await call('GET', `${BUCKET}?environment=equals.master`);
    expect(hidden.status).toBe(400);
  });

  it('a role without rules for the bucket gets 403, a management token 403', async () => {
    const catalogKey = await t.createKey(['catalog']);
    const res = await call('GET', BUCKET, { token: catalogKey.key });
    expect(res.status).toBe(403);
    expect(res.body.detail).toBe('your role may not read files in bucket attachments');
    const management = await call('GET', BUCKET, { token: MANAGEMENT_TOKEN });
    expect(management.status).toBe(403);
  });
});

describe('downloads', () => {
  let id: string;
  const text = '0123456789abcdefghij';
  beforeAll(async () => {
    const res = await uploadRaw(text, 'quote "x" ü.txt', 'text/plain');
    expect(res.status, res.text).toBe(201);
    id = res.body.data.id;
  });

  it('sends the bytes with ETag, nosniff and an RFC 6266 attachment filename', async () => {
    const res = await call('GET', `${BUCKET}/${id}/content`);
    expect(res.status).toBe(200);
    expect(res.text).toBe(text);
    expect(res.headers.get('content-type')).toBe('text/plain');
    expect(res.headers.get('content-length')).toBe('20');
    expect(res.headers.get('etag')).toBe(`"${sha256(text)}"`);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="quote _x_ _.txt"; filename*=UTF-8''quote%20%22x%22%20%C3%BC.txt`,
    );
    expect(res.headers.get('ratelimit-limit')).not.toBeNull();
  });

  it('answers HEAD with the headers and no body', async () => {
    const res = await call('HEAD', `${BUCKET}/${id}/content`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe('20');
    expect(res.headers.get('etag')).toBe(`"${sha256(text)}"`);
    expect(res.text).toBe('');
  });

  it('answers a Range with 206 and its bytes, an unsatisfiable one with 416', async () => {
    const part = await call('GET', `${BUCKET}/${id}/content`, { headers: { range: 'bytes=5-9' } });
    expect(part.status).toBe(206);
    expect(part.text).toBe('56789');
    expect(part.headers.get('content-range')).toBe('bytes 5-9/20');
    const tail = await call('GET', `${BUCKET}/${id}/content`, { headers: { range: 'bytes=-3' } });
    expect(tail.status).toBe(206);
    expect(tail.text).toBe('hij');
    const outside = await call('GET', `${BUCKET}/${id}/content`, { headers: { range: 'bytes=50-60' } });
    expect(outside.status).toBe(416);
    expect(outside.headers.get('content-range')).toBe('bytes */20');
    expect(outside.body.detail).toBe('the file has 20 bytes; ask for a range within them');
  });

  it('several ranges, even overlapping ones, get the whole file (200); a suffix longer than the file gets all of it (206 bytes 0-19/20)', async () => {
    for (const range of ['bytes=0-0,0-0', 'bytes=0-1,5-6', 'bytes=0-1,500-600']) {
      const whole = await call('GET', `${BUCKET}/${id}/content`, { headers: { range } });
      expect([range, whole.status, whole.text, whole.headers.get('content-range')]).toEqual([range, 200, text, null]);
    }
    for (const range of ['bytes=-20', 'bytes=-21', 'bytes=-99999999999999']) {
      const all = await call('GET', `${BUCKET}/${id}/content`, { headers: { range } });
      expect([range, all.status, all.text, all.headers.get('content-range')]).toEqual([
        range,
        206,
        text,
        'bytes 0-19/20',
      ]);
    }
  });

  it('answers If-None-Match with the ETag with 304 and no body', async () => {
    const first = await call('GET', `${BUCKET}/${id}/content`);
    const again = await call('GET', `${BUCKET}/${id}/content`, {
      headers: { 'if-none-match': first.headers.get('etag')! },
    });
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    const other = await call('GET', `${BUCKET}/${id}/content`, { headers: { 'if-none-match': '"other"' } });
    expect(other.status).toBe(200);
  });

  it('serves a public bucket without credentials', async () => {
    const up = await uploadMultipart(PNG, 'avatar.png', 'image/png', { bucket: '/gw/api/rest/_files/avatars' });
    expect(up.status, up.text).toBe(201);
    const res = await fetch(`${t.url}/gw/api/rest/_files/avatars/${up.body.data.id}/content?project_id=shop`);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(PNG);
    const privateOne = await fetch(`${t.url}${BUCKET}/${id}/content?project_id=shop`);
    expect(privateOne.status).toBe(401);
    const meta = await readResponse(
      await fetch(`${t.url}/gw/api/rest/_files/avatars/${up.body.data.id}?project_id=shop`),
    );
    expect(meta.status).toBe(200);
    expect(meta.body).toEqual({ data: up.body.data });
  });
});

describe('signed URLs', () => {
  it('downloads without credentials until the link expires', async () => {
    const up = await uploadRaw('signed bytes', 'signed.txt', 'text/plain', { token: alice.accessToken });
    const signed = await call('POST', `${BUCKET}/${up.body.data.id}/signed-url`, {
      token: alice.accessToken,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ expiresIn: 2 }),
    });
    expect(signed.status, signed.text).toBe(200);
    expect(signed.body.data.url).toMatch(new RegExp(`^${BUCKET}/${up.body.data.id}/content\\?token=`));
    const expiresAt = Date.parse(signed.body.data.expiresAt);
    expect(expiresAt).toBeGreaterThan(Date.now());
    const res = await fetch(`${t.url}${signed.body.data.url}`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('signed bytes');
    // A character inside the token (the last one of base64 may carry only padding bits: changing it can decode alike).
    const link: string = signed.body.data.url;
    const at = link.length - 6;
    const forgedLink = `${link.slice(0, at)}${link[at] === 'A' ? 'B' : 'A'}${link.slice(at + 1)}`;
    const forged = await fetch(`${t.url}${forgedLink}`);
    expect(forged.status).toBe(401);
    const otherFile = await uploadRaw('other', 'other.txt', 'text/plain', { token: alice.accessToken });
    const reused = await fetch(`${t.url}${signed.body.data.url.replace(up.body.data.id, otherFile.body.data.id)}`);
    expect(reused.status).toBe(401);
    await until(
      async () => Date.now(),
      (now) => now >= expiresAt,
      5000,
      'the link to expire',
    );
    const expired = await readResponse(await fetch(`${t.url}${signed.body.data.url}`));
    expect(expired.status).toBe(401);
    expect(expired.body.detail).toBe('the download link has expired; ask for a new signed URL');
  });

  it('refuses an expiresIn out of range with 422', async () => {
    const up = await uploadRaw('x', 'x.txt', 'text/plain');
    const res = await call('POST', `${BUCKET}/${up.body.data.id}/signed-url`, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ expiresIn: 0 }),
    });
    expect(res.status).toBe(422);
  });
});

describe('deletes and the sweep', () => {
  it('DELETE answers 204, then 404; the bytes are removed by the job', async () => {
    const up = await uploadRaw('to delete', 'bye.txt', 'text/plain', { token: bob.accessToken });
    const key = `master/attachments/${up.body.data.id}`;
    expect(await storedObjects()).toContain(key);
    const del = await call('DELETE', `${BUCKET}/${up.body.data.id}`, { token: bob.accessToken });
    expect(del.status).toBe(204);
    expect((await call('GET', `${BUCKET}/${up.body.data.id}`, { token: bob.accessToken })).status).toBe(404);
    expect((await call('DELETE', `${BUCKET}/${up.body.data.id}`, { token: bob.accessToken })).status).toBe(404);
    await until(storedObjects, (keys) => !keys.includes(key), 10_000, 'the bytes to be removed');
  });

  it('the sweep removes old bytes without metadata and leaves young ones and files with rows', async () => {
    const kept = await uploadRaw('kept', 'kept.txt', 'text/plain');
    const orphan = `master/attachments/${crypto.randomUUID()}`;
    const young = `master/attachments/${crypto.randomUUID()}`;
    await mkdir(path.join(root, 'master/attachments'), { recursive: true });
    await writeFile(path.join(root, orphan), 'orphan');
    await writeFile(path.join(root, young), 'young');
    const old = new Date(Date.now() - 2 * 3600_000);
    await utimes(path.join(root, orphan), old, old);
    await utimes(path.join(root, 'master/attachments', kept.body.data.id), old, old);
    const removed = await sweepOrphans(t.db, new LocalDiskBackend(root), 3600);
    expect(removed).toBe(1);
    const keys = await storedObjects();
    expect(keys).not.toContain(orphan);
    expect(keys).toContain(young);
    expect(keys).toContain(`master/attachments/${kept.body.data.id}`);
  });
});

describe('webhook events', () => {
  it('an upload publishes an INSERT event of table _files, a delete a DELETE event', async () => {
    const created = await t.request('POST', '/gw/api/rest/_webhooks', {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: '_files',
        events: ['INSERT', 'DELETE'],
        url: `${receiver.url}/files`,
        secret: 's3cret',
      },
    });
    expect(created.status, created.text).toBe(201);
    const up = await uploadRaw('event', 'event.txt', 'text/plain');
    const [got] = await receiver.waitFor('/files', 1);
    expect(got!.headers['x-service-event']).toBe('INSERT');
    expect(got!.body.record).toMatchObject({ id: up.body.data.id, bucket: 'attachments', name: 'event.txt' });
    expect((await call('DELETE', `${BUCKET}/${up.body.data.id}`)).status).toBe(204);
    const [, deleted] = await receiver.waitFor('/files', 2);
    expect(deleted!.headers['x-service-event']).toBe('DELETE');
    expect(deleted!.body.record).toMatchObject({ id: up.body.data.id, name: 'event.txt' });
  });
});

describe('the generated client (createFileClient)', () => {
  it('uploads, lists, reads, downloads a range, signs, deletes; errors are ServiceErrors', async () => {
    const files = createFileClient({ baseUrl: t.url, projectId: 'shop', token: alice.accessToken })('attachments');
    const { data: file } = await files.upload(new Blob(['client bytes']), { name: 'c.txt', contentType: 'text/plain' });
    expect(file).toMatchObject({ name: 'c.txt', size: 12, ownerId: alice.user.id });
    const page = await files.list({ name: 'equals.c.txt' });
    expect(page.data.map((f) => f.id)).toEqual([file.id]);
    expect((await files.get(file.id)).data).toEqual(file);
    const part = await files.download(file.id, { range: 'bytes=0-5' });
    expect([part.status, await part.text()]).toEqual([206, 'client']);
    const same = await files.download(file.id, { etag: `"${file.sha256}"` });
    expect(same.status).toBe(304);
    const { data: signed } = await files.signedUrl(file.id, 60);
    expect(await (await fetch(`${t.url}${signed.url}`)).text()).toBe('client bytes');
    await files.delete(file.id);
    const gone = await files.get(file.id).catch((error: unknown) => error);
    expect(gone).toBeInstanceOf(ServiceError);
    expect((gone as ServiceError).status).toBe(404);
  });
});

describe('request paths', () => {
  // The file routes are answered outside Express when the path is exactly a route's (app.ts
  // DirectRoutes); other spellings still go through Express. Both must answer alike.
  it('an upload and a download at the exact paths carry the request id; a trailing slash answers the same through Express', async () => {
    const direct = await call('POST', `${BUCKET}?name=direct.txt`, {
      headers: { 'content-type': 'text/plain', 'x-request-id': 'upload-direct-1' },
      body: 'direct',
    });
    expect(direct.status, direct.text).toBe(201);
    expect(direct.headers.get('x-request-id')).toBe('upload-direct-1');
    const slashed = await call('POST', `${BUCKET}/?name=slashed.txt`, {
      headers: { 'content-type': 'text/plain', 'x-request-id': 'upload-slash-1' },
      body: 'slashed',
    });
    expect(slashed.status, slashed.text).toBe(201);
    expect(slashed.headers.get('x-request-id')).toBe('upload-slash-1');
    expect(Object.keys(slashed.body.data).sort()).toEqual(Object.keys(direct.body.data).sort());

    const content = await call('GET', `${BUCKET}/${direct.body.data.id}/content`, {
      headers: { 'x-request-id': 'download-direct-1' },
    });
    expect(content.status).toBe(200);
    expect(content.text).toBe('direct');
    expect(content.headers.get('x-request-id')).toBe('download-direct-1');
    const viaExpress = await call('GET', `${BUCKET}/${slashed.body.data.id}/content/`);
    expect(viaExpress.status).toBe(200);
    expect(viaExpress.text).toBe('slashed');
  });

  it('decodes percent-encoded parameters as Express does, and refuses invalid percent-encoding with a 400 Problem', async () => {
    const encoded = '/gw/api/rest/_files/%61ttachments';
    const up = await call('POST', `${encoded}?name=encoded.txt`, {
      headers: { 'content-type': 'text/plain' },
      body: 'enc',
    });
    expect(up.status, up.text).toBe(201);
    expect(up.body.data.bucket).toBe('attachments');
    const read = await call('GET', `${encoded}/${up.body.data.id}/content`);
    expect(read.status).toBe(200);
    expect(read.text).toBe('enc');

    const bad = await call('GET', `/gw/api/rest/_files/%E0%A4%A/${up.body.data.id}/content`);
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(bad.body.detail).toBe('the path is not valid percent-encoding (RFC 3986)');
  });
});
