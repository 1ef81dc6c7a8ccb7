/**
 * Idempotency-Key on uploads (docs/storage.md "Idempotency-Key"), over real HTTP and PostgreSQL:
 * the same upload again is replayed (one file), another upload with the key is 422, an upload
 * with the key still arriving makes the same key 409; replayed and refused bytes are not kept.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalDiskBackend } from '../../runtime/storage/index.ts';
import { readResponse, startTestServer, type TestResponse, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-upload-idem-'));
  t = await startTestServer({
    configPatch: (raw) => {
      raw.storage.root = root;
      raw.storage.buckets.keyed = {
        contentTypes: ['text/plain'],
        roles: { admin: { read: true, create: true, delete: true } },
      };
    },
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await rm(root, { recursive: true, force: true });
});

async function upload(bytes: string, idempotencyKey: string, name = 'a.txt', key = t.adminKey): Promise<TestResponse> {
  return readResponse(
    await fetch(`${t.url}/gw/api/rest/_files/keyed?name=${name}`, {
      method: 'POST',
      headers: {
        'x-project-id': 'shop',
        authorization: `Bearer ${key}`,
        'content-type': 'text/plain',
        'idempotency-key': idempotencyKey,
      },
      body: bytes,
    }),
  );
}

async function kept(): Promise<{ rows: number; objects: number }> {
  const [row] = await t.db.query<{ n: number }>("SELECT count(*)::int AS n FROM svcgen.files WHERE bucket = 'keyed'");
  let objects = 0;
  for await (const o of new LocalDiskBackend(root).list()) if (o.key.split('/')[1] === 'keyed') objects++;
  return { rows: row!.n, objects };
}

describe('Idempotency-Key on uploads', () => {
  it('the same upload with the same key: the first 201 replayed with Idempotency-Replayed, one file kept', async () => {
    const before = await kept();
    const first = await upload('hello', 'k-same');
    expect(first.status, first.text).toBe(201);
    const again = await upload('hello', 'k-same');
    expect(again.status, again.text).toBe(201);
    expect(again.headers.get('idempotency-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.body).toEqual(first.body);
    expect(await kept()).toEqual({ rows: before.rows + 1, objects: before.objects + 1 });
  });

  it('the same key with other bytes, or another name: 422 rule reused, nothing kept', async () => {
    expect((await upload('one', 'k-other')).status).toBe(201);
    const before = await kept();
    const bytes = await upload('two', 'k-other');
    expect(bytes.status, bytes.text).toBe(422);
    expect(bytes.body).toEqual({
      type: '/errors/validation',
      title: 'Validation failed',
      status: 422,
      detail: 'this Idempotency-Key was already used with a different request; use a new key',
      instance: '/gw/api/rest/_files/keyed',
      errors: [{ field: 'Idempotency-Key', rule: 'reused', message: 'the key was used with a different request' }],
    });
    const renamed = await upload('one', 'k-other', 'b.txt');
    expect(renamed.status, renamed.text).toBe(422);
    expect(await kept()).toEqual(before);
  });

  it('keys are per caller: another API key with the same key uploads its own file', async () => {
    expect((await upload('mine', 'k-caller')).status).toBe(201);
    const other = await t.createKey(['admin']);
    const res = await upload('mine', 'k-caller', 'a.txt', other.key);
    expect(res.status).toBe(201);
    expect(res.headers.get('idempotency-replayed')).toBeNull();
  });

  it('a refused upload stores nothing under its key: the key can be used again', async () => {
    const refused = await readResponse(
      await fetch(`${t.url}/gw/api/rest/_files/keyed?name=x.png`, {
        method: 'POST',
        headers: {
          'x-project-id': 'shop',
          authorization: `Bearer ${t.adminKey}`,
          'content-type': 'image/png',
          'idempotency-key': 'k-refused',
        },
        body: 'not a png',
      }),
    );
    expect(refused.status).toBe(415);
    const res = await upload('now right', 'k-refused');
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('idempotency-replayed')).toBeNull();
  });

  it('while an upload with the key is still arriving, the same key gets 409; once it is done, its replay', async () => {
    const port = Number(new URL(t.url).port);
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => {
      text += c;
    });
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /gw/api/rest/_files/keyed?name=a.txt HTTP/1.1\r\nHost: test\r\nX-Project-Id: shop\r\n` +
        `Authorization: Bearer ${t.adminKey}\r\nContent-Type: text/plain\r\nIdempotency-Key: k-flight\r\n` +
        `Content-Length: 10\r\nConnection: close\r\n\r\nhello`,
    );
    // The first upload holds its claim once its row is in svcgen.idempotency.
    await until(
      async () =>
        (await t.db.query<{ state: string }>("SELECT state FROM svcgen.idempotency WHERE key = 'k-flight'"))[0],
      (row) => row?.state === 'running',
      10_000,
      'the first upload claims its key',
    );
    const during = await upload('helloworld', 'k-flight');
    expect(during.status, during.text).toBe(409);
    expect(during.body.detail).toBe('a request with this Idempotency-Key is still running; retry later');
    const closed = new Promise((resolve) => socket.on('close', resolve));
    socket.write('world');
    await closed;
    expect(text).toMatch(/^HTTP\/1\.1 201 /);
    const after = await upload('helloworld', 'k-flight');
    expect(after.status, after.text).toBe(201);
    expect(after.headers.get('idempotency-replayed')).toBe('true');
  });

  it('a malformed key → 400 before the body is read', async () => {
    const res = await upload('x', ' ');
    expect(res.status).toBe(400);
    expect(res.body.errors).toEqual([
      { field: 'Idempotency-Key', rule: 'format', message: '1 to 255 visible ASCII characters' },
    ]);
  });
});
