/**
 * A server killed (SIGKILL) in the middle of an upload (docs/storage.md "Streaming and integrity"):
 * nothing becomes visible, and the bytes it left behind are removed by the sweep of the next start.
 */
import fs from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { cleanupCli, copyExample, freshDatabase, startCli, type ProjectCopy } from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { readResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:\d+)$/m;
const MANAGEMENT_TOKEN = 'storage-crash-management-token-5e2b71';

let project: ProjectCopy;
let database: TestDatabase;

beforeAll(async () => {
  project = await copyExample('storage-crash');
  database = await freshDatabase();
});
afterAll(async () => {
  await cleanupCli();
});

function serve() {
  const proc = startCli(['serve', '--port', '0', '--project', project.dir, '--database-url', database.url], {
    env: { SVCGEN_MANAGEMENT_TOKEN: MANAGEMENT_TOKEN },
  });
  return proc.waitFor(LISTENING, { stream: 'stdout', timeoutMs: 30_000 }).then((m) => ({ proc, url: m[1]! }));
}

/** Files below the project's storage root, relative to it. */
async function stored(): Promise<string[]> {
  const root = path.join(project.dir, '.svcgen/files');
  const found: string[] = [];
  for (const entry of await fs.readdir(root, { recursive: true, withFileTypes: true }).catch(() => [])) {
    if (entry.isFile()) found.push(path.relative(root, path.join(entry.parentPath, entry.name)));
  }
  return found;
}

it('a server killed mid-upload leaves nothing visible, and the next start sweeps its bytes', async () => {
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
    headers: { ...headers, 'content-type': 'text/plain', 'content-length': '1000000' },
  });
  req.on('error', () => {});
  req.write(Buffer.alloc(100_000, 0x61));
  await until(stored, (files) => files.some((f) => f.startsWith('.incoming')), 10_000, 'an incoming file');
  const killed = await first.proc.stop('SIGKILL');
  expect(killed.signal).toBe('SIGKILL');
  req.destroy();
  const [left] = await stored();
  expect(left).toMatch(/^\.incoming\//);

  // An hour on: the leftover is older than storage.orphanGraceSeconds when the next server starts.
  const anHourAgo = new Date(Date.now() - 3_600_000 - 60_000);
  await fs.utimes(path.join(project.dir, '.svcgen/files', left!), anHourAgo, anHourAgo);
  const second = await serve();
  const list = await readResponse(await fetch(`${second.url}/gw/api/rest/_files/attachments`, { headers }));
  expect(list.status).toBe(200);
  expect(list.body.data).toEqual([]);
  await until(stored, (files) => files.length === 0, 10_000, 'the sweep to remove the leftover');
  await second.proc.stop('SIGTERM');
}, 90_000);
