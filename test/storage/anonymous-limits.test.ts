/** Requests without credentials (public buckets, signed URLs) are rate limited per client address. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { readResponse, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-files-limits-'));
  t = await startTestServer({
    configPatch: (raw) => {
      raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerCaller: 3 };
      raw.storage.root = root;
      raw.storage.buckets.avatars = { public: true, roles: { admin: { read: true, create: true } } };
    },
  });
});
afterAll(async () => {
  await t?.close();
  await rm(root, { recursive: true, force: true });
});

it('answers 429 with Retry-After once an address has used a caller share without credentials', async () => {
  const up = await t.request('POST', '/gw/api/rest/_files/avatars?name=a.txt', {
    raw: 'hello',
    headers: { 'content-type': 'text/plain' },
  });
  expect(up.status, up.text).toBe(201);
  const signed = await t.request('POST', `/gw/api/rest/_files/avatars/${up.body.data.id}/signed-url`);
  expect(signed.status, signed.text).toBe(200);
  const publicUrl = `${t.url}/gw/api/rest/_files/avatars/${up.body.data.id}/content?project_id=shop`;
  const answers = [];
  for (const url of [publicUrl, publicUrl, `${t.url}${signed.body.data.url}`, publicUrl])
    answers.push(await readResponse(await fetch(url)));
  expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429]);
  expect(answers.map((a) => a.headers.get('ratelimit-remaining'))).toEqual(['2', '1', '0', '0']);
  const refused = answers[3]!;
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(refused.body.detail).toMatch(
    /^3 file requests a minute without credentials are answered from this address, and they are used up; retry in \d+ s$/,
  );
  // Callers with credentials have their own share.
  expect((await t.request('GET', `/gw/api/rest/_files/avatars/${up.body.data.id}`)).status).toBe(200);
});
