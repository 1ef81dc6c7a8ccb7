/**
 * `svcgen serve` on the S3 backend, killed (SIGKILL) in the middle of an upload whose first part
 * already reached the store (docs/storage.md "Backends"): nothing becomes visible, and the
 * multipart upload it left pending is aborted by the sweep of the next start once it is older than
 * storage.orphanGraceSeconds. The SDK's Node version warning never reaches the server's output.
 */
import fs from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cleanupCli, copyExample, freshDatabase, startCli, type ProjectCopy } from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { S3_BUCKET, S3_CREDENTIALS, startS3, type TestS3 } from '../support/s3.ts';
import { readResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m;
const MANAGEMENT_TOKEN = 'storage-s3-crash-management-token-8c1d';

let project: ProjectCopy;
let database: TestDatabase;
let s3: TestS3;

beforeAll(async () => {
  s3 = await startS3();
  project = await copyExample('storage-s3-crash');
  database = await freshDatabase();
  const file = path.join(project.dir, 'svcgen.config.json');
  const config = JSON.parse(await fs.readFile(file, 'utf8'));
  config.storage.backend = {
    type: 's3',
    bucket: S3_BUCKET,
    endpoint: s3.endpoint,
    forcePathStyle: true,
    accessKeyIdEnv: 'SHOP_S3_KEY',
    secretAccessKeyEnv: 'SHOP_S3_SECRET',
  };
  config.storage.buckets.attachments.maxBytes = 64 * 1024 * 1024;
  await fs.writeFile(file, JSON.stringify(config, null, 2));
});
afterAll(async () => {
  await cleanupCli();
  await s3?.close();
});

function serve() {
  const proc = startCli(['serve', '--port', '0', '--project', project.dir, '--database-url', database.url], {
    env: {
      SVCGEN_MANAGEMENT_TOKEN: MANAGEMENT_TOKEN,
      SHOP_S3_KEY: S3_CREDENTIALS.accessKeyId,
      SHOP_S3_SECRET: S3_CREDENTIALS.secretAccessKey,
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: undefined,
    },
  });
  return proc.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 30_000 }).then((m) => ({ proc, url: m[1]! }));
}

it('a server killed mid-upload leaves nothing visible; the next start aborts the pending upload', async () => {
  const first = await serve();
  const keyRes = await readResponse(
    await fetch(`${first.url}/gw/api/rest/_apikeys`, {
      method: 'POST',
      headers: {
        'x-project-id': 'shop',
        authorization: `Bearer ${MANAGEMENT_TOKEN}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ name: 'crash', prefix: 'ApiKey', roles: ['admin'], environment: 'master' }),
    }),
  );
  expect(keyRes.status, keyRes.text).toBe(201);
  const headers = { 'x-project-id': 'shop', authorization: `Bearer ${keyRes.body.data.key}` };

  const req = httpRequest(new URL(`${first.url}/gw/api/rest/_files/attachments?name=cut.txt`), {
    method: 'POST',
    headers: { ...headers, 'content-type': 'text/plain', 'content-length': String(20 * 1024 * 1024) },
  });
  req.on('error', () => {});
  req.write(Buffer.alloc(6 * 1024 * 1024, 0x61));
  await until(s3.pendingUploads, (keys) => keys.length === 1, 30_000, 'a multipart upload');
  const killed = await first.proc.stop('SIGKILL');
  expect(killed.signal).toBe('SIGKILL');
  req.destroy();
  expect(`${killed.stdout}${killed.stderr}`).not.toContain('NodeVersionSupportWarning');
  expect(await s3.objects()).toEqual([]);

  // An hour on: the pending upload is older than storage.orphanGraceSeconds when the next server starts.
  await s3.ageUploads(3600 + 60);
  const second = await serve();
  const list = await readResponse(await fetch(`${second.url}/gw/api/rest/_files/attachments`, { headers }));
  expect(list.status).toBe(200);
  expect(list.body.data).toEqual([]);
  await until(s3.pendingUploads, (keys) => keys.length === 0, 30_000, 'the sweep to abort the pending upload');
  expect(await s3.objects()).toEqual([]);
  const stopped = await second.proc.stop('SIGTERM');
  expect(`${stopped.stdout}${stopped.stderr}`).not.toContain('NodeVersionSupportWarning');
}, 90_000);
