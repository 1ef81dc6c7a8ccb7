/**
 * `svcgen files ls|rm` (README "Command line", docs/storage.md "Operators") against a running test
 * server's database: ls lists what the API stored; rm removes rows through the HTTP delete's path
 * (the `_files` DELETE event is delivered, the server's job removes the bytes), and exits 1 naming
 * ids it did not find.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalDiskBackend } from '../../runtime/storage/index.ts';
import { runCli, show } from '../support/cli.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, SHOP, readResponse, startTestServer, type TestServer } from '../support/server.ts';
import { until } from '../support/until.ts';

let t: TestServer;
let root: string;
let receiver: Receiver;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-files-cli-'));
  receiver = await startReceiver();
  t = await startTestServer({
    configPatch: (raw) => {
      raw.storage.root = root;
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0] };
    },
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await receiver?.close();
  await rm(root, { recursive: true, force: true });
});

async function upload(name: string, bytes: string): Promise<string> {
  const res = await readResponse(
    await fetch(`${t.url}/gw/api/rest/_files/attachments?name=${name}`, {
      method: 'POST',
      headers: { 'x-project-id': 'shop', authorization: `Bearer ${t.adminKey}`, 'content-type': 'text/plain' },
      body: bytes,
    }),
  );
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

async function objects(): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of new LocalDiskBackend(root).list()) keys.push(o.key);
  return keys;
}

describe('svcgen files', { timeout: 60_000 }, () => {
  it('ls lists the files of an environment (and bucket) as JSON and as lines; rm removes them with their event and bytes', async () => {
    const created = await t.request('POST', '/gw/api/rest/_webhooks', {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: '_files',
        events: ['DELETE'],
        url: `${receiver.url}/cli`,
        secret: 's3cret',
      },
    });
    expect(created.status, created.text).toBe(201);
    const a = await upload('a.txt', 'aaa');
    const b = await upload('b.txt', 'bbbb');
    const db = ['--project', SHOP, '--database-url', t.database.url];

    const listed = await runCli(['files', 'ls', ...db, '--env', 'master', '--bucket', 'attachments', '--json']);
    expect(listed.code, show(listed)).toBe(0);
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ id: a, environment: 'master', bucket: 'attachments', name: 'a.txt', size: 3 }),
      expect.objectContaining({ id: b, name: 'b.txt', size: 4, contentType: 'text/plain' }),
    ]);
    const lines = await runCli(['files', 'ls', ...db]);
    expect(lines.code, show(lines)).toBe(0);
    expect(lines.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^${a}\\tattachments\\t3\\ttext/plain\\t.+\\towner -\\t"a\\.txt"$`)),
      expect.stringMatching(new RegExp(`^${b}\\tattachments\\t4\\t`)),
    ]);
    const staging = await runCli(['files', 'ls', ...db, '--env', 'staging']);
    expect(staging.stdout).toBe('no files in staging\n');

    const missing = '00000000-0000-4000-8000-000000000000';
    const removed = await runCli(['files', 'rm', a, missing, ...db]);
    expect(removed.code, show(removed)).toBe(1);
    expect(removed.stdout).toBe(`removed ${a} (attachments)\n`);
    expect(removed.stderr).toBe(`no file with id ${missing} in master\n`);

    const gone = await readResponse(
      await fetch(`${t.url}/gw/api/rest/_files/attachments/${a}`, {
        headers: { 'x-project-id': 'shop', authorization: `Bearer ${t.adminKey}` },
      }),
    );
    expect(gone.status).toBe(404);
    const [event] = await receiver.waitFor('/cli', 1);
    expect(event!.headers['x-service-event']).toBe('DELETE');
    expect(event!.body.record).toMatchObject({ id: a, name: 'a.txt', bucket: 'attachments' });
    await until(
      objects,
      (keys) => !keys.includes(`master/attachments/${a}`),
      20_000,
      "the server's job removes the bytes",
    );
    expect(await objects()).toContain(`master/attachments/${b}`);
  });

  it('bad arguments are usage errors (exit 2) that change nothing', async () => {
    const db = ['--project', SHOP, '--database-url', t.database.url];
    const env = await runCli(['files', 'ls', ...db, '--env', 'prod']);
    expect([env.code, env.stderr]).toEqual([2, 'svcgen: --env must be one of master, staging\n']);
    const bucket = await runCli(['files', 'ls', ...db, '--bucket', 'nope']);
    expect(bucket.code, show(bucket)).toBe(2);
    expect(bucket.stderr).toContain('no bucket "nope" in svcgen.config.json (buckets: attachments)');
    const none = await runCli(['files', 'rm', ...db]);
    expect(none.code, show(none)).toBe(2);
  });
});
