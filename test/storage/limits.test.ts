/**
 * Upload limits and quotas over real HTTP and PostgreSQL (docs/storage.md "Limits and quotas"):
 * uploads a minute and bytes a day per caller (429 with Retry-After and RateLimit-*), a bucket's
 * maxTotalBytes and maxFiles (413 quota-exceeded), concurrent uploads never passing a quota,
 * deletes giving the room back, and refusals that keep nothing (no row, no bytes).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { LocalDiskBackend } from '../../runtime/storage/index.ts';
import { freshWindows } from '../support/clock.ts';
import { readResponse, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-limits-'));
  t = await startTestServer({
    configPatch: (raw) => {
      raw.storage.root = root;
      raw.storage.limits = { uploadsPerMinutePerCaller: 5, bytesPerDayPerCaller: 1000 };
      const admin = { admin: { read: true, create: true, delete: true } };
      raw.storage.buckets.quota = { contentTypes: ['text/plain'], maxTotalBytes: 100, roles: admin };
      raw.storage.buckets.counted = { contentTypes: ['text/plain'], maxFiles: 2, roles: admin };
      raw.storage.buckets.open = { contentTypes: ['text/plain'], roles: admin };
      raw.storage.buckets.race = { contentTypes: ['text/plain'], maxTotalBytes: 50, roles: admin };
    },
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await rm(root, { recursive: true, force: true });
});

async function upload(bucket: string, bytes: string, key: string, name = 'a.txt'): Promise<TestResponse> {
  return readResponse(
    await fetch(`${t.url}/gw/api/rest/_files/${bucket}?name=${name}`, {
      method: 'POST',
      headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
      body: bytes,
    }),
  );
}

async function uploadMultipart(bucket: string, bytes: string, key: string): Promise<TestResponse> {
  const form = new FormData();
  form.append('file', new Blob([bytes], { type: 'text/plain' }), 'm.txt');
  return readResponse(
    await fetch(`${t.url}/gw/api/rest/_files/${bucket}`, {
      method: 'POST',
      headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}` },
      body: form,
    }),
  );
}

async function remove(bucket: string, id: string, key: string): Promise<TestResponse> {
  return readResponse(
    await fetch(`${t.url}/gw/api/rest/_files/${bucket}/${id}`, {
      method: 'DELETE',
      headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}` },
    }),
  );
}

async function rows(bucket: string): Promise<number> {
  const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM svcgen.files WHERE bucket = $1', [
    bucket,
  ]);
  return row!.n;
}

async function objects(bucket: string): Promise<number> {
  let n = 0;
  for await (const o of new LocalDiskBackend(root).list()) if (o.key.split('/')[1] === bucket) n++;
  return n;
}

/** A fresh admin key: its own minute and its own day. */
async function freshKey(): Promise<string> {
  return (await t.createKey(['admin'])).key;
}

const secondsToMidnight = () => Math.ceil((86_400_000 - (Date.now() % 86_400_000)) / 1000);

describe('uploads a minute per caller', () => {
  // The window is the calendar minute: pinned 30 s into an unused one, six uploads never straddle a boundary.
  const freshWindow = freshWindows();
  afterEach(() => void vi.useRealTimers());

  it('the sixth upload of a minute is refused before its body is read: 429 with Retry-After and RateLimit-* of the upload budget; another caller is not affected', async () => {
    freshWindow();
    const key = await freshKey();
    for (let i = 0; i < 5; i++) expect((await upload('open', 'x', key)).status).toBe(201);
    const res = await upload('open', 'y', key);
    expect(res.status, res.text).toBe(429);
    expect(res.body).toEqual({
      type: '/errors/rate-limited',
      title: 'Too Many Requests',
      status: 429,
      detail: expect.stringMatching(
        /^each caller may upload 5 files a minute \(storage\.limits\.uploadsPerMinutePerCaller\), and yours are used up; retry in \d+ s$/,
      ),
      instance: '/gw/api/rest/_files/open',
      errors: [],
    });
    expect(res.headers.get('ratelimit-limit')).toBe('5');
    expect(res.headers.get('ratelimit-remaining')).toBe('0');
    expect(res.headers.get('retry-after')).toBe('30');
    expect(res.headers.get('ratelimit-reset')).toBe('30');
    expect(await rows('open')).toBe(5);
    expect(await objects('open')).toBe(5);
    expect((await upload('open', 'z', await freshKey())).status).toBe(201);
  });
});

describe('bytes a day per caller', () => {
  it('counts bytes stored: an upload that would pass the day budget is refused (429, nothing kept), before its body when Content-Length says so, while streaming when it does not', async () => {
    const key = await freshKey();
    expect((await upload('open', 'a'.repeat(600), key)).status).toBe(201);
    const before = await rows('open');

    const declared = await upload('open', 'b'.repeat(500), key);
    expect(declared.status, declared.text).toBe(429);
    expect(declared.body.detail).toBe(
      `each caller may store 1000 bytes a day (UTC) and this upload does not fit in what is left today; 400 bytes are left today, the budget starts again in ${declared.headers.get('retry-after')} s`,
    );
    expect(declared.headers.get('ratelimit-limit')).toBe('1000');
    expect(declared.headers.get('ratelimit-remaining')).toBe('400');
    expect(Math.abs(Number(declared.headers.get('ratelimit-reset')) - secondsToMidnight())).toBeLessThanOrEqual(2);

    // Multipart: no length of the file is known before it streams; it is cut at the budget.
    const streamed = await uploadMultipart('open', 'c'.repeat(500), key);
    expect(streamed.status, streamed.text).toBe(429);
    expect(streamed.body.type).toBe('/errors/rate-limited');
    expect(streamed.headers.get('ratelimit-remaining')).toBe('400');
    expect(await rows('open')).toBe(before);
    expect(await objects('open')).toBe(before);

    // What is left still fits, to the byte; then nothing does.
    const last = await upload('open', 'd'.repeat(400), key);
    expect(last.status, last.text).toBe(201);
    const full = await upload('open', 'e', key);
    expect(full.status).toBe(429);
    expect(full.headers.get('ratelimit-remaining')).toBe('0');
    // Deleting a file does not give the day's bytes back: they were stored.
    expect((await remove('open', last.body.data.id, key)).status).toBe(204);
    expect((await upload('open', 'e', key)).status).toBe(429);
  });

  it('concurrent uploads of one caller never store more than the day budget together', async () => {
    const key = await freshKey();
    const results = await Promise.all(Array.from({ length: 5 }, () => upload('open', 'f'.repeat(300), key)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 201, 201, 429, 429]);
  });
});

describe('bucket quotas', () => {
  it('maxTotalBytes: an upload that would pass it → 413 quota-exceeded, nothing kept; a delete gives the room back', async () => {
    const key = await freshKey();
    const first = await upload('quota', 'g'.repeat(80), key);
    expect(first.status, first.text).toBe(201);
    const res = await upload('quota', 'h'.repeat(30), key);
    expect(res.status, res.text).toBe(413);
    expect(res.body).toEqual({
      type: '/errors/quota-exceeded',
      title: 'Quota exceeded',
      status: 413,
      detail:
        'bucket quota is full: 20 of its 100 bytes are free and the file has 30; delete files to make room, or raise the quota',
      instance: '/gw/api/rest/_files/quota',
      errors: [],
    });
    const streamed = await uploadMultipart('quota', 'i'.repeat(30), key);
    expect(streamed.status, streamed.text).toBe(413);
    expect(streamed.body.type).toBe('/errors/quota-exceeded');
    expect(await rows('quota')).toBe(1);
    expect(await objects('quota')).toBe(1);
    expect((await remove('quota', first.body.data.id, key)).status).toBe(204);
    expect((await upload('quota', 'h'.repeat(30), key)).status).toBe(201);
  });

  it('maxFiles: the third file of a two-file bucket → 413 quota-exceeded before its body is read', async () => {
    const key = await freshKey();
    expect((await upload('counted', 'j', key)).status).toBe(201);
    expect((await upload('counted', 'k', key)).status).toBe(201);
    const res = await upload('counted', 'l', key);
    expect(res.status, res.text).toBe(413);
    expect(res.body.detail).toBe(
      'bucket counted is full: it holds 2 of its 2 files; delete files to make room, or raise the quota',
    );
    expect(await rows('counted')).toBe(2);
    expect(await objects('counted')).toBe(2);
  });

  it('ten concurrent 20-byte uploads into a 50-byte bucket: exactly two are kept, the others refused with nothing left behind', async () => {
    const keys = await Promise.all(Array.from({ length: 10 }, () => freshKey()));
    const results = await Promise.all(keys.map((key) => upload('race', 'm'.repeat(20), key)));
    const kept = results.filter((r) => r.status === 201);
    expect(kept.length, results.map((r) => `${r.status} ${r.text}`).join('\n')).toBe(2);
    expect(results.filter((r) => r.status === 413).length).toBe(8);
    expect(await rows('race')).toBe(2);
    expect(await objects('race')).toBe(2);
  });
});
