// Over HTTP: creates of one shape decide their write once per caller (runtime/query/write-decisions.ts
// writeRules, createPresets); a caller with another grant decides its own, and each create still
// answers as before.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';

const decisions = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../runtime/query/policy.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../runtime/query/policy.ts')>();
  return {
    ...real,
    writeDecision: (...args: Parameters<typeof real.writeDecision>) => {
      decisions.count++;
      return real.writeDecision(...args);
    },
  };
});

const BASE = '/gw/api/rest';
let t: TestServer;

beforeAll(async () => {
  t = await startTestServer({
    configPatch: (raw) => {
      raw.roles.cityWriter = { tables: { City: { read: true, create: { fields: ['name', 'country'] } } } };
    },
  });
});
afterAll(() => t?.close());

async function createCity(name: string, key?: string) {
  const res = await t.request('POST', `${BASE}/City`, { key, body: { country: 'FR', name } });
  expect(res.status, res.text).toBe(201);
  expect(res.body.data).toMatchObject({ name, country: 'FR' });
}

describe('create decisions kept per caller and field set', () => {
  it('several creates of one shape decide once; a caller with another grant decides its own', async () => {
    decisions.count = 0;
    for (const name of ['Lyon', 'Nice', 'Metz']) await createCity(name);
    expect(decisions.count).toBe(1);
    const writer = await t.createKey(['cityWriter']);
    for (const name of ['Brest', 'Caen']) await createCity(name, writer.key);
    expect(decisions.count).toBe(2);
    // That grant does not list `id`: refused each time, never from a kept decision.
    for (let i = 0; i < 2; i++) {
      const res = await t.request('POST', `${BASE}/City`, {
        key: writer.key,
        body: { id: 990 + i, name: 'Pau', country: 'FR' },
      });
      expect(res.status, res.text).toBe(403);
      expect(res.body).toEqual({
        type: '/errors/forbidden',
        title: 'Forbidden',
        status: 403,
        detail: 'your role may not write id of City',
        instance: `${BASE}/City`,
        errors: [{ field: 'id', rule: 'forbidden_field', message: 'id may not be written by your role' }],
      });
    }
  });
});
