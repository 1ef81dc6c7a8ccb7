/**
 * One caller cannot hog uploads or downloads (docs/storage.md "Limits and quotas"): per caller,
 * uploads and downloads in progress are capped (storage.limits.concurrentUploadsPerCaller,
 * concurrentDownloadsPerCaller), raw and multipart uploads alike, downloads by credentials, signed
 * URL and public bucket alike (the last two per client address). A caller holding its cap of slow
 * uploads gets 429 for more, and another caller's requests are still served, on a server whose
 * http.maxConnections the abuser alone would otherwise fill. Raw sockets against a real server and
 * PostgreSQL; order and counts, no clock.
 */
import { parseRawResponse as parse } from '../support/raw-response.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { readResponse, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

const UPLOAD_CAP = 3;
const DOWNLOAD_CAP = 2;
/** Large enough that a client that stops reading holds its download (socket buffers fill long before). */
const BIG = 16 * 1024 * 1024;

let t: TestServer;
let root: string;
let port: number;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-caller-caps-'));
  t = await startTestServer({
    configPatch: (raw) => {
      // Few connections: the abuser's uploads alone would fill them without the cap.
      raw.http = { ...raw.http, maxConnections: 10 };
      raw.storage.root = root;
      raw.storage.limits = {
        concurrentUploadsPerCaller: UPLOAD_CAP,
        concurrentDownloadsPerCaller: DOWNLOAD_CAP,
        // Off here (null): the abuser's uploads trickle as slowly as the attack found, held by the idle timeout only.
        minUploadBytesPerSecond: null,
      };
      const admin = { admin: { read: true, create: true, delete: true } };
      raw.storage.buckets.held = { contentTypes: ['text/plain'], maxBytes: 16 * 1024 * 1024, roles: admin };
      raw.storage.buckets.shown = { contentTypes: ['text/plain'], public: true, maxBytes: BIG, roles: admin };
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
  /** Everything received so far. */
  text(): string;
  /** Whether the server closed the connection (or it was destroyed). */
  readonly isClosed: boolean;
  closed: Promise<string>;
  /** The first bytes of an answer. */
  answered: Promise<string>;
}

function open(): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let isClosed = false;
    let answer: (text: string) => void = () => {};
    const answered = new Promise<string>((done) => {
      answer = done;
    });
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      text += chunk;
      answer(text);
    });
    socket.on('error', () => {});
    const closed = new Promise<string>((done) =>
      socket.on('close', () => {
        isClosed = true;
        done(text);
      }),
    );
    socket.once('connect', () =>
      resolve({
        socket,
        text: () => text,
        get isClosed() {
          return isClosed;
        },
        closed,
        answered,
      }),
    );
    socket.once('error', reject);
  });
}

const BOUNDARY = 'svcgen-caps-boundary';

/** The head of an upload (and, multipart, the file part's head) that announces `length` bytes of file. */
function uploadStart(key: string, kind: 'raw' | 'multipart', length: number): string {
  const common = `Host: test\r\nX-Project-Id: shop\r\nAuthorization: Bearer ${key}\r\n`;
  if (kind === 'raw')
    return `POST /gw/api/rest/_files/held?name=slow.txt HTTP/1.1\r\n${common}Content-Type: text/plain\r\nContent-Length: ${length}\r\n\r\n`;
  const partHead = `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="slow.txt"\r\nContent-Type: text/plain\r\n\r\n`;
  const tail = `\r\n--${BOUNDARY}--\r\n`;
  return (
    `POST /gw/api/rest/_files/held HTTP/1.1\r\n${common}Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\n` +
    `Content-Length: ${partHead.length + length + tail.length}\r\n\r\n${partHead}`
  );
}

/** An upload that announces 10 MB and trickles one byte every 500 ms until stopped. */
async function slowUpload(key: string, kind: 'raw' | 'multipart'): Promise<Raw & { stop(): void }> {
  const raw = await open();
  raw.socket.write(uploadStart(key, kind, 10_000_000));
  const timer = setInterval(() => {
    if (!raw.socket.destroyed) raw.socket.write('x');
  }, 500);
  return Object.assign(raw, {
    stop() {
      clearInterval(timer);
      raw.socket.destroy();
    },
  });
}

/**
 * The first answer to `extra`. Any other answer than the cap's (a 503 on a starved machine, say)
 * leaves the trickled body draining, as it should, and an upload the server took (one of `held`
 * was answered instead of held, so a slot was free) is never answered: both fail here, saying
 * what the server sent, rather than waiting for the test's timeout.
 */
async function firstAnswer(extra: Raw, held: readonly Raw[], what: string): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      extra.answered,
      extra.closed.then((text) =>
        Promise.reject(new Error(`${what}: closed without an answer (${text.length} bytes)`)),
      ),
      ...held.map((h, n) =>
        h.answered.then((text) =>
          Promise.reject(new Error(`${what}: held upload ${n + 1} was answered instead: ${text.slice(0, 400)}`)),
        ),
      ),
      new Promise<string>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `${what}: no answer within 15 s; held uploads received ${JSON.stringify(held.map((h) => h.text().slice(0, 200)))}`,
              ),
            ),
          15_000,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A download that reads its first bytes (the status line among them) and then stops reading. */
async function stalledDownload(pathAndQuery: string, key?: string): Promise<Raw> {
  const raw = await open();
  raw.socket.write(
    `GET ${pathAndQuery} HTTP/1.1\r\nHost: test\r\nX-Project-Id: shop\r\n` +
      (key ? `Authorization: Bearer ${key}\r\n` : '') +
      '\r\n',
  );
  const first = await raw.answered;
  raw.socket.pause();
  expect(first.slice(0, 12)).toBe('HTTP/1.1 200');
  return raw;
}

async function uploadText(bucket: string, text: string, key: string): Promise<TestResponse> {
  return readResponse(
    await fetch(`${t.url}/gw/api/rest/_files/${bucket}?name=t.txt`, {
      method: 'POST',
      headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}`, 'content-type': 'text/plain' },
      body: text,
    }),
  );
}

async function get(url: string, key?: string): Promise<TestResponse> {
  return readResponse(
    await fetch(`${t.url}${url}`, {
      headers: { 'x-project-id': 'shop', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    }),
  );
}

const uploadsCapped = (held: number) => ({
  type: '/errors/rate-limited',
  title: 'Too Many Requests',
  status: 429,
  detail: `each caller may have ${UPLOAD_CAP} uploads in progress at once (storage.limits.concurrentUploadsPerCaller), and you have ${held}; retry in 1 s, once one of them has finished`,
  instance: '/gw/api/rest/_files/held',
  errors: [],
});

const downloadsCapped = (instance: string) => ({
  type: '/errors/rate-limited',
  title: 'Too Many Requests',
  status: 429,
  detail: `each caller may have ${DOWNLOAD_CAP} downloads in progress at once (storage.limits.concurrentDownloadsPerCaller), and you have ${DOWNLOAD_CAP}; retry in 1 s, once one of them has finished`,
  instance,
  errors: [],
});

async function heldRows(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM svcgen.files WHERE bucket = 'held'");
  return row!.n;
}

describe('uploads in progress per caller', { timeout: 60_000 }, () => {
  // A retry starts clean (every socket of the failed attempt is stopped); see firstAnswer for the
  // waits that fail with what they saw instead of hanging to the timeout.
  it("one caller's slow uploads (raw and multipart) up to its cap and past it: the extra ones 429 and closed; another caller's paced GETs of a table and a file all 200 meanwhile", {
    retry: 1,
  }, async () => {
    const opened: { stop(): void }[] = [];
    onTestFinished(() => {
      for (const s of opened) s.stop();
    });
    const abuser = (await t.createKey(['admin'])).key;
    const other = (await t.createKey(['admin'])).key;
    // The abuser's key is known to the server (resolved and cached) before its uploads count.
    expect((await get('/gw/api/rest/City?limit=1', abuser)).status).toBe(200);
    const stored = await uploadText('held', 'the other caller reads this', other);
    expect(stored.status, stored.text).toBe(201);
    const rowsBefore = await heldRows();

    const kinds = ['raw', 'multipart', 'raw'] as const;
    const held: (Raw & { stop(): void })[] = [];
    for (const kind of kinds) {
      held.push(await slowUpload(abuser, kind));
      opened.push(held.at(-1)!);
    }
    // Nine more, one after another, raw and multipart: each refused before its body is read.
    const refused: ReturnType<typeof parse>[] = [];
    for (let i = 0; i < 9; i++) {
      const extra = await slowUpload(abuser, i % 2 === 0 ? 'multipart' : 'raw');
      opened.push(extra);
      const first = await firstAnswer(extra, held, `extra upload ${i + 1}`);
      expect(first.slice(0, 12), first.slice(0, 400)).toBe('HTTP/1.1 429');
      const text = await extra.closed; // the server answers and closes the connection itself
      extra.stop();
      refused.push(parse(text));
    }
    expect(refused.map((r) => r.status)).toEqual(Array(9).fill(429));
    for (const r of refused) {
      expect(r.body).toEqual(uploadsCapped(UPLOAD_CAP));
      expect(r.headers['retry-after']).toBe('1');
      expect(r.headers.connection).toBe('close');
    }

    // The other caller, paced (one request after the other), while the abuser's uploads are open.
    const answers: number[] = [];
    for (let i = 0; i < 5; i++) {
      answers.push((await get('/gw/api/rest/City?limit=1', other)).status);
      const file = await get(`/gw/api/rest/_files/held/${stored.body.data.id}/content`, other);
      expect(file.text).toBe('the other caller reads this');
      answers.push(file.status);
    }
    expect(answers).toEqual(Array(10).fill(200));
    expect(held.map((h) => h.isClosed)).toEqual([false, false, false]);
    expect(held.map((h) => h.text())).toEqual(['', '', '']);

    // The abuser goes away: its slots come back; nothing of its uploads was kept.
    for (const h of held) h.stop();
    await until(
      () => uploadText('held', 'after', abuser),
      (res) => res.status === 201,
      10_000,
      "the abuser's slots given back",
    );
    expect(await heldRows()).toBe(rowsBefore + 1);
  });

  it('slots are given back after each upload, refused ones included: many sequential uploads of one caller are all answered', async () => {
    const key = (await t.createKey(['admin'])).key;
    const statuses: number[] = [];
    for (let i = 0; i < UPLOAD_CAP * 3; i++) {
      statuses.push((await uploadText('held', `file ${i}`, key)).status);
      // A refused upload (415: a PNG declared, text sent) gives its slot back too.
      statuses.push(
        (
          await readResponse(
            await fetch(`${t.url}/gw/api/rest/_files/held?name=p.png`, {
              method: 'POST',
              headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}`, 'content-type': 'image/png' },
              body: 'not a png',
            }),
          )
        ).status,
      );
    }
    expect(statuses).toEqual(Array.from({ length: UPLOAD_CAP * 6 }, (_, i) => (i % 2 === 0 ? 201 : 415)));
  });
});

describe('downloads in progress per caller', { timeout: 60_000 }, () => {
  let id: string;
  let key: string;
  beforeAll(async () => {
    key = (await t.createKey(['admin'])).key;
    const res = await uploadText('shown', 'd'.repeat(BIG), key);
    expect(res.status, res.text).toBe(201);
    id = res.body.data.id;
  });

  it("a caller's downloads that are not read hold its cap: one more → 429; another caller, and the same caller's signed URL (counted per address), are served", async () => {
    const content = `/gw/api/rest/_files/shown/${id}/content`;
    const stalled = [await stalledDownload(content, key), await stalledDownload(content, key)];
    const refused = await get(content, key);
    expect(refused.status, refused.text.slice(0, 300)).toBe(429);
    expect(refused.body).toEqual(downloadsCapped(content));
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.headers.get('ratelimit-limit')).toBe(String(DOWNLOAD_CAP));
    expect(refused.headers.get('ratelimit-remaining')).toBe('0');

    const other = (await t.createKey(['admin'])).key;
    const served = await get(content, other);
    expect(served.status).toBe(200);
    expect(served.text.length).toBe(BIG);
    const signed = await readResponse(
      await fetch(`${t.url}${content.replace(/\/content$/, '/signed-url')}`, {
        method: 'POST',
        headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}` },
      }),
    );
    expect(signed.status, signed.text).toBe(200);
    const bySignedUrl = await get(signed.body.data.url);
    expect(bySignedUrl.status).toBe(200);
    expect(bySignedUrl.text.length).toBe(BIG);

    for (const s of stalled) s.socket.destroy();
    await until(
      () => get(content, key),
      (res) => res.status === 200,
      10_000,
      "the caller's download slots given back",
    );
  });

  it('downloads without credentials count against the client address: signed URL and public bucket together; past the cap → 429', async () => {
    const content = `/gw/api/rest/_files/shown/${id}/content`;
    const signed = await readResponse(
      await fetch(`${t.url}/gw/api/rest/_files/shown/${id}/signed-url`, {
        method: 'POST',
        headers: { 'x-project-id': 'shop', authorization: `Bearer ${key}` },
      }),
    );
    const url = signed.body.data.url as string;
    const stalled = [await stalledDownload(url), await stalledDownload(`${content}?project_id=shop`)];
    const bySignedUrl = await get(url);
    expect(bySignedUrl.status, bySignedUrl.text.slice(0, 300)).toBe(429);
    expect(bySignedUrl.body).toEqual(downloadsCapped(url.slice(0, url.indexOf('?'))));
    const byPublic = await get(`${content}?project_id=shop`);
    expect(byPublic.status).toBe(429);
    // The key that signed the URL is not what the anonymous downloads count against.
    const byKey = await get(content, key);
    expect(byKey.status).toBe(200);

    for (const s of stalled) s.socket.destroy();
    await until(
      () => get(url),
      (res) => res.status === 200,
      10_000,
      "the address's download slots given back",
    );
  });
});
