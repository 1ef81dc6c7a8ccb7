import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblem, startTestServer, type TestServer } from '../support/server.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t?.close());

describe('smoke', () => {
  it('creates and reads a city', async () => {
    const created = await t.request('POST', '/gw/api/rest/City', { body: { name: 'Paris', country: 'FR' } });
    expect(created.status).toBe(201);
    const read = await t.request('GET', `/gw/api/rest/City/${created.body.data.id}`);
    expect(read.body.data.name).toBe('Paris');
    expectProblem(await t.request('GET', '/gw/api/rest/City/999'), 404, 'not-found');
  });
});
