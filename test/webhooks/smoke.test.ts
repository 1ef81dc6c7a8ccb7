/** The whole webhook path once: subscribe, write, receive a signed event, see it delivered. */
import { verify } from '@octokit/webhooks-methods';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import { MANAGEMENT_TOKEN, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestServer({
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0, 100, 100], timeoutMs: 1000 };
    },
  });
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

const manage = (method: string, path: string, body?: unknown) =>
  t.request(method, `/gw/api/rest/_webhooks${path}`, { body, key: MANAGEMENT_TOKEN, environment: 'master' });

describe('webhooks end to end', () => {
  it('delivers a signed INSERT event and lists the delivery', async () => {
    const created = await manage('POST', '', {
      projectId: 'shop',
      environment: 'master',
      table: 'Customer',
      events: ['INSERT', 'UPDATE', 'DELETE'],
      url: `${receiver.url}/smoke`,
      secret: 's3cret',
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.id).toMatch(/^wh_/);
    expect(created.body).not.toHaveProperty('secret');
    const customer = await t.request('POST', '/gw/api/rest/Customer', {
      body: { email: 'smoke@example.com', name: 'Smoke' },
    });
    expect(customer.status, customer.text).toBe(201);
    const [got] = await receiver.waitFor('/smoke', 1);
    expect(got!.headers['x-service-event']).toBe('INSERT');
    expect(got!.body.id).toMatch(/^evt_/);
    expect(got!.headers['x-service-delivery']).toBe(got!.body.id);
    expect(await verify('s3cret', got!.raw, got!.headers['x-service-signature'] as string)).toBe(true);
    expect(got!.body.record.email).toBe('smoke@example.com');
    const patched = await t.request('PATCH', `/gw/api/rest/Customer/${customer.body.data.id}`, {
      body: { name: 'Smoky' },
    });
    expect(patched.status).toBe(200);
    const [, update] = await receiver.waitFor('/smoke', 2);
    expect(update!.body.changed_fields).toEqual(['name']);
    const detail = await manage('GET', `/${created.body.id}`);
    expect(detail.status).toBe(200);
    await expect
      .poll(async () => (await manage('GET', `/${created.body.id}`)).body.deliveries.map((d: any) => d.status))
      .toEqual(['delivered', 'delivered']);
  });
});
