/**
 * Record fields that reference files (docs/storage.md "Records that reference files"), over real
 * HTTP and PostgreSQL: the shop's Order.invoiceId names a file of bucket `attachments`. A write
 * must name a file of that bucket and environment the caller may read; anything else is the same
 * 422 (no existence leak), and a refused write changes nothing.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthServer, type AuthTestServer, type Session } from '../support/auth.ts';
import { LocalDiskBackend } from '../../runtime/storage/index.ts';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, readResponse, type TestResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

const BUCKET = '/gw/api/rest/_files/attachments';
const MISSING = '00000000-0000-4000-8000-000000000000';

let t: AuthTestServer;
let receiver: Receiver;
let root: string;
let alice: Session;
let bob: Session;
let adminFile: string;
let aliceFile: string;
let bobFile: string;
let otherBucketFile: string;
let stagingFile: string;

async function upload(
  text: string,
  o: { token?: string; bucket?: string; environment?: string; key?: string } = {},
): Promise<string> {
  const res = await readResponse(
    await fetch(`${t.url}${o.bucket ?? BUCKET}?name=f.txt`, {
      method: 'POST',
      headers: {
        'x-project-id': 'shop',
        environment: o.environment ?? 'master',
        authorization: `Bearer ${o.token ?? o.key ?? t.adminKey}`,
        'content-type': 'text/plain',
      },
      body: text,
    }),
  );
  expect(res.status, res.text).toBe(201);
  return res.body.data.id as string;
}

const problem = (field = 'invoiceId') => ({
  type: '/errors/validation',
  title: 'Validation failed',
  status: 422,
  detail: `${field} must be the id of a file in bucket attachments that you may read; nothing was changed`,
  instance: expect.any(String),
  errors: [
    {
      field,
      rule: 'file_reference',
      message: 'must be the id of a file in bucket attachments that you may read',
    },
  ],
});

function expectRefused(res: TestResponse, field = 'invoiceId'): void {
  expect(res.status, res.text).toBe(422);
  expect(res.body).toEqual(problem(field));
}

async function customer(session: Session): Promise<void> {
  const res = await t.request('POST', '/gw/api/rest/Customer', {
    body: { id: session.user.id, email: session.user.email, name: session.user.email },
  });
  expect(res.status, res.text).toBe(201);
}

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'svcgen-file-refs-'));
  receiver = await startReceiver();
  t = await startAuthServer({
    log: (m) => process.env.FILE_REFS_LOG && console.log(m),
    configPatch: (raw) => {
      raw.storage.root = root;
      raw.storage.buckets.other = { roles: { admin: { read: true, create: true, delete: true } } };
      const order = raw.roles.customer.tables.Order;
      order.read.fields.push('invoiceId');
      order.create.fields.push('invoiceId');
      order.update.fields.push('invoiceId');
      // Catalog keys may read every attachment but delete none, and create orders.
      raw.storage.buckets.attachments.roles.catalog = { read: true };
      raw.roles.catalog.tables.Order = { read: true, create: true };
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0] };
    },
  });
  alice = await t.signupConfirmed('alice@example.com');
  bob = await t.signupConfirmed('bob@example.com');
  await customer(alice);
  await customer(bob);
  adminFile = await upload('admin');
  aliceFile = await upload('alice', { token: alice.accessToken });
  bobFile = await upload('bob', { token: bob.accessToken });
  otherBucketFile = await upload('other', { bucket: '/gw/api/rest/_files/other' });
  stagingFile = await upload('staging', {
    environment: 'staging',
    key: (await t.createKey(['admin'], { environment: 'staging' })).key,
  });
}, 60_000);
afterAll(async () => {
  await t?.close();
  await receiver?.close();
  await rm(root, { recursive: true, force: true });
});

async function orderCount(): Promise<number> {
  const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM env_master."Order"');
  return row!.n;
}

describe('creating a record that references a file', () => {
  it('takes the id of a file the caller may read: 201 with the id', async () => {
    const admin = await t.request('POST', '/gw/api/rest/Order', {
      body: { total: 1, customerId: alice.user.id, invoiceId: adminFile },
    });
    expect(admin.status, admin.text).toBe(201);
    expect(admin.body.data.invoiceId).toBe(adminFile);
    const own = await t.asUser(alice.accessToken, 'POST', '/gw/api/rest/Order', {
      body: { total: 2, customerId: alice.user.id, invoiceId: aliceFile },
    });
    expect(own.status, own.text).toBe(201);
    expect(own.body.data.invoiceId).toBe(aliceFile);
    const none = await t.asUser(alice.accessToken, 'POST', '/gw/api/rest/Order', {
      body: { total: 3, customerId: alice.user.id, invoiceId: null },
    });
    expect(none.status, none.text).toBe(201);
  });

  it('answers the same 422 for a missing file, another customer’s file, another bucket and another environment', async () => {
    const before = await orderCount();
    for (const invoiceId of [MISSING, bobFile, adminFile]) {
      expectRefused(
        await t.asUser(alice.accessToken, 'POST', '/gw/api/rest/Order', {
          body: { total: 1, customerId: alice.user.id, invoiceId },
        }),
      );
    }
    for (const invoiceId of [MISSING, otherBucketFile, stagingFile]) {
      expectRefused(
        await t.request('POST', '/gw/api/rest/Order', { body: { total: 1, customerId: alice.user.id, invoiceId } }),
      );
    }
    expect(await orderCount()).toBe(before);
  });
});

describe('updating a reference', () => {
  it('to a bad id: 422 and nothing changed; to a readable file: 200', async () => {
    const created = await t.asUser(alice.accessToken, 'POST', '/gw/api/rest/Order', {
      body: { total: 5, customerId: alice.user.id, invoiceId: aliceFile },
    });
    const url = `/gw/api/rest/Order/${created.body.data.id}`;
    const before = await t.request('GET', url);
    expectRefused(await t.asUser(alice.accessToken, 'PATCH', url, { body: { total: 6, invoiceId: bobFile } }));
    expectRefused(await t.request('PATCH', url, { body: { invoiceId: otherBucketFile } }));
    expect((await t.request('GET', url)).body).toEqual(before.body);
    const changed = await t.request('PATCH', url, { body: { invoiceId: adminFile } });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body.data.invoiceId).toBe(adminFile);
    const cleared = await t.asUser(alice.accessToken, 'PATCH', url, { body: { invoiceId: null } });
    expect(cleared.status, cleared.text).toBe(200);
  });

  it('by filter: 422 and no row changed', async () => {
    const before = await t.db.query('SELECT id, "invoiceId" FROM env_master."Order" ORDER BY id');
    expectRefused(await t.request('PATCH', `/gw/api/rest/Order?total=gte.0`, { body: { invoiceId: otherBucketFile } }));
    expect(await t.db.query('SELECT id, "invoiceId" FROM env_master."Order" ORDER BY id')).toEqual(before);
  });
});

describe('bulk creates', () => {
  const items = () => [
    { total: 7, customerId: alice.user.id, invoiceId: aliceFile },
    { total: 8, customerId: alice.user.id, invoiceId: bobFile },
  ];

  it('ALL_OR_NOTHING: the bad item is reported and nothing is created', async () => {
    const before = await orderCount();
    const res = await t.asUser(alice.accessToken, 'POST', '/gw/api/rest/Order/_bulk', {
      body: { items: items(), transactionMode: 'ALL_OR_NOTHING' },
    });
    expect(res.status, res.text).toBe(422);
    expect(res.body).toEqual({
      type: '/errors/validation',
      title: 'Validation failed',
      status: 422,
      detail: '1 of 2 items failed; nothing was changed',
      instance: '/gw/api/rest/Order/_bulk',
      errors: [{ field: 'items[1]', rule: 'item', message: problem().detail }],
      data: {
        success: false,
        transactionMode: 'ALL_OR_NOTHING',
        totalRequested: 2,
        totalSucceeded: 0,
        totalFailed: 2,
        items: [],
        errors: [{ index: 1, message: problem().detail }],
      },
    });
    expect(await orderCount()).toBe(before);
  });

  it('BEST_EFFORT: the good item is created, the bad one reported', async () => {
    const before = await orderCount();
    const res = await t.asUser(alice.accessToken, 'POST', '/gw/api/rest/Order/_bulk', {
      body: { items: items(), transactionMode: 'BEST_EFFORT' },
    });
    expect(res.status, res.text).toBe(207);
    expect(res.body).toEqual({
      data: {
        success: false,
        transactionMode: 'BEST_EFFORT',
        totalRequested: 2,
        totalSucceeded: 1,
        totalFailed: 1,
        items: [{ id: expect.any(Number) }],
        errors: [{ index: 1, message: problem().detail }],
      },
    });
    expect(await orderCount()).toBe(before + 1);
  });
});

describe('GraphQL', () => {
  it('createOrder with another customer’s file: an error with the Problem as extensions', async () => {
    const res = await readResponse(
      await fetch(`${t.url}/gw/api/graphql`, {
        method: 'POST',
        headers: {
          'x-project-id': 'shop',
          environment: 'master',
          authorization: `Bearer ${alice.accessToken}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({
          query: 'mutation ($d: OrderCreateInput!) { createOrder(data: $d) { id } }',
          variables: { d: { total: 1, customerId: alice.user.id, invoiceId: bobFile } },
        }),
      }),
    );
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0].extensions).toMatchObject({
      type: '/errors/validation',
      status: 422,
      errors: problem().errors,
    });
  });
});

describe('deleting the file', () => {
  it('leaves the reference as it is (dangling): reads show the id, the file answers 404', async () => {
    const file = await upload('short-lived');
    const created = await t.request('POST', '/gw/api/rest/Order', {
      body: { total: 9, customerId: alice.user.id, invoiceId: file },
    });
    expect(created.status, created.text).toBe(201);
    expect((await t.request('DELETE', `${BUCKET}/${file}`)).status).toBe(204);
    const read = await t.request('GET', `/gw/api/rest/Order/${created.body.data.id}`);
    expect(read.body.data.invoiceId).toBe(file);
    expect((await t.request('GET', `${BUCKET}/${file}`)).status).toBe(404);
    expectRefused(
      await t.request('PATCH', `/gw/api/rest/Order/${created.body.data.id}`, { body: { invoiceId: file } }),
    );
  });
});

async function storedObjects(): Promise<string[]> {
  const found: string[] = [];
  for await (const o of new LocalDiskBackend(root).list()) found.push(o.key);
  return found;
}

async function fileRow(id: string): Promise<number> {
  const [row] = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM svcgen.files WHERE id = $1', [id]);
  return row!.n;
}

describe('deleting a record', () => {
  it('with onDelete: delete (receiptId) deletes its file: row, _files DELETE event, then the bytes', async () => {
    const hook = await t.request('POST', '/gw/api/rest/_webhooks', {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: '_files',
        events: ['DELETE'],
        url: `${receiver.url}/files`,
        secret: 's3cret',
      },
    });
    expect(hook.status, hook.text).toBe(201);
    // The record's own DELETE event is captured in the same statement as the file's.
    const orderHook = await t.request('POST', '/gw/api/rest/_webhooks', {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Order',
        events: ['DELETE'],
        url: `${receiver.url}/orders`,
        secret: 's3cret',
      },
    });
    expect(orderHook.status, orderHook.text).toBe(201);
    const receipt = await upload('receipt');
    const invoice = await upload('invoice');
    const created = await t.request('POST', '/gw/api/rest/Order', {
      body: { total: 10, customerId: alice.user.id, invoiceId: invoice, receiptId: receipt },
    });
    expect(created.status, created.text).toBe(201);
    expect(await storedObjects()).toContain(`master/attachments/${receipt}`);
    expect((await t.request('DELETE', `/gw/api/rest/Order/${created.body.data.id}`)).status).toBe(204);
    expect(await fileRow(receipt)).toBe(0);
    expect((await t.request('GET', `${BUCKET}/${receipt}`)).status).toBe(404);
    const [event] = await receiver.waitFor('/files', 1);
    expect(event!.headers['x-service-event']).toBe('DELETE');
    expect(event!.body.record).toMatchObject({ id: receipt, bucket: 'attachments', name: 'f.txt' });
    const [orderEvent] = await receiver.waitFor('/orders', 1);
    expect(orderEvent!.body.record).toMatchObject({ id: created.body.data.id, receiptId: receipt });
    await until(
      storedObjects,
      (keys) => !keys.includes(`master/attachments/${receipt}`),
      10_000,
      'the removal job removes the bytes',
    );
    // invoiceId keeps its file (the default).
    expect(await fileRow(invoice)).toBe(1);
    expect((await t.request('GET', `${BUCKET}/${invoice}`)).status).toBe(200);
    expect(await storedObjects()).toContain(`master/attachments/${invoice}`);
  });

  it('a file deleted with the record must be one the writer may delete, not only read', async () => {
    const { key } = await t.createKey(['catalog']);
    const before = await orderCount();
    const refused = await t.request('POST', '/gw/api/rest/Order', {
      key,
      body: { total: 1, customerId: alice.user.id, receiptId: adminFile },
    });
    expectRefused(refused, 'receiptId');
    expect(await orderCount()).toBe(before);
    const kept = await t.request('POST', '/gw/api/rest/Order', {
      key,
      body: { total: 1, customerId: alice.user.id, invoiceId: adminFile },
    });
    expect(kept.status, kept.text).toBe(201);
  });
});

describe('a file deleted while a write names it', () => {
  it('the write waits for the delete and then refuses (422), creating nothing', async () => {
    const file = await upload('racing');
    const before = await orderCount();
    const client = await t.db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('DELETE FROM svcgen.files WHERE id = $1', [file]);
      const pending = t.request('POST', '/gw/api/rest/Order', {
        body: { total: 11, customerId: alice.user.id, invoiceId: file },
      });
      await until(
        () =>
          t.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND query LIKE '%file_reference_check%' AND pid <> pg_backend_pid()`,
          ),
        (rows) => rows[0]!.n > 0,
        10_000,
        'the write waits for the file row',
      );
      await client.query('COMMIT');
      expectRefused(await pending);
    } finally {
      client.release();
    }
    expect(await orderCount()).toBe(before);
  });
});
