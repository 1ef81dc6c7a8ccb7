// Bad input on the data API: exact status and Problem Details body for each, never a 5xx, and
// nothing written (docs/api.md §6).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblemAt, snapshot } from '../support/expect.ts';
import { startTestServer, type RequestOptions, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest';
const JSON_TYPE = { 'content-type': 'application/json' };
let t: TestServer;
let customer: { id: string; email: string };
let other: { id: string; email: string };
let order: { id: number };
let product: { id: number };

beforeAll(async () => {
  t = await startTestServer();
  const make = async (name: string) => {
    const res = await t.request('POST', `${BASE}/Customer`, {
      body: { email: `${name}-${randomUUID()}@example.com`, name },
    });
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  };
  customer = await make('Referenced');
  other = await make('Other');
  const created = await t.request('POST', `${BASE}/Order`, { body: { total: 5, customerId: customer.id } });
  expect(created.status, created.text).toBe(201);
  order = created.body.data;
  const madeProduct = await t.request('POST', `${BASE}/Product`, {
    body: { sku: `REF-${randomUUID()}`, title: 'Referenced', price: 1, tags: [] },
  });
  expect(madeProduct.status, madeProduct.text).toBe(201);
  product = madeProduct.body.data;
  const item = await t.request('POST', `${BASE}/OrderItem`, { body: { orderId: order.id, productId: product.id } });
  expect(item.status, item.text).toBe(201);
});
afterAll(() => t?.close());

interface Case {
  name: string;
  method: string;
  path: () => string;
  options: () => RequestOptions;
  status: number;
  kind?: string;
  field?: string;
  rule?: string;
}

const validOrder = () => ({ total: 1, customerId: customer.id });
const cases: Case[] = [
  {
    name: 'invalid JSON',
    method: 'POST',
    path: () => '/City',
    options: () => ({ raw: '{"name": "x",', headers: JSON_TYPE }),
    status: 400,
    kind: 'invalid-json',
  },
  {
    name: 'invalid JSON on PATCH',
    method: 'PATCH',
    path: () => `/Order/${order.id}`,
    options: () => ({ raw: "{'total': 1}", headers: JSON_TYPE }),
    status: 400,
    kind: 'invalid-json',
  },
  {
    name: 'JSON with trailing garbage',
    method: 'POST',
    path: () => '/City',
    options: () => ({ raw: '{"name":"x","country":"XX"} x', headers: JSON_TYPE }),
    status: 400,
    kind: 'invalid-json',
  },
  {
    name: 'empty body on POST',
    method: 'POST',
    path: () => '/City',
    options: () => ({ raw: '', headers: JSON_TYPE }),
    status: 400,
  },
  {
    name: 'no body at all on POST',
    method: 'POST',
    path: () => '/City',
    options: () => ({ headers: JSON_TYPE }),
    status: 400,
  },
  {
    name: 'text/plain on POST',
    method: 'POST',
    path: () => '/City',
    options: () => ({ raw: '{"name":"x","country":"XX"}', headers: { 'content-type': 'text/plain' } }),
    status: 415,
    kind: 'unsupported-media-type',
  },
  {
    name: 'text/plain on PATCH',
    method: 'PATCH',
    path: () => `/Order/${order.id}`,
    options: () => ({ raw: '{"total":2}', headers: { 'content-type': 'text/plain' } }),
    status: 415,
    kind: 'unsupported-media-type',
  },
  {
    name: 'merge-patch+json on POST',
    method: 'POST',
    path: () => '/City',
    options: () => ({
      raw: '{"name":"x","country":"XX"}',
      headers: { 'content-type': 'application/merge-patch+json' },
    }),
    status: 415,
    kind: 'unsupported-media-type',
  },
  {
    name: 'body over 1 MiB',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: { name: 'x'.repeat(1_100_000), country: 'XX' } }),
    status: 413,
    kind: 'payload-too-large',
  },
  {
    name: 'JSON array body',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: [{ name: 'x', country: 'XX' }] }),
    status: 422,
    kind: 'validation',
  },
  {
    name: 'JSON string body',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: 'hello' }),
    status: 422,
    kind: 'validation',
  },
  {
    name: 'JSON number body',
    method: 'POST',
    path: () => '/City',
    options: () => ({ raw: '42', headers: JSON_TYPE }),
    status: 422,
    kind: 'validation',
  },
  {
    name: 'JSON null body',
    method: 'POST',
    path: () => '/City',
    options: () => ({ raw: 'null', headers: JSON_TYPE }),
    status: 422,
    kind: 'validation',
  },
  {
    name: 'JSON array on PATCH',
    method: 'PATCH',
    path: () => `/Order/${order.id}`,
    options: () => ({ body: [] }),
    status: 422,
    kind: 'validation',
  },
  {
    name: 'unknown field',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: { name: 'x', country: 'XX', population: 3 } }),
    status: 422,
    kind: 'validation',
    field: 'population',
    rule: 'unknown_field',
  },
  {
    name: 'unknown field with SQL in its name',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: { name: 'x', country: 'XX', 'x"; drop table "City': 1 } }),
    status: 422,
    kind: 'validation',
    field: 'x"; drop table "City',
  },
  {
    name: 'wrong type (total: "abc")',
    method: 'POST',
    path: () => '/Order',
    options: () => ({ body: { ...validOrder(), total: 'abc' } }),
    status: 422,
    kind: 'validation',
    field: 'total',
  },
  {
    name: 'wrong type on PATCH (total: "abc")',
    method: 'PATCH',
    path: () => `/Order/${order.id}`,
    options: () => ({ body: { total: 'abc' } }),
    status: 422,
    kind: 'validation',
    field: 'total',
  },
  {
    name: 'null for a required field on PATCH',
    method: 'PATCH',
    path: () => `/Order/${order.id}`,
    options: () => ({ body: { total: null } }),
    status: 422,
    kind: 'validation',
    field: 'total',
  },
  {
    name: 'missing required (Order without total)',
    method: 'POST',
    path: () => '/Order',
    options: () => ({ body: { customerId: customer.id } }),
    status: 422,
    kind: 'validation',
    field: 'total',
    rule: 'required',
  },
  {
    name: 'bad enum',
    method: 'POST',
    path: () => '/Order',
    options: () => ({ body: { ...validOrder(), status: 'lost' } }),
    status: 422,
    kind: 'validation',
    field: 'status',
  },
  {
    name: 'bad enum on PATCH',
    method: 'PATCH',
    path: () => `/Order/${order.id}`,
    options: () => ({ body: { status: 'OPEN' } }),
    status: 422,
    kind: 'validation',
    field: 'status',
  },
  {
    name: 'bad uuid',
    method: 'POST',
    path: () => '/Order',
    options: () => ({ body: { ...validOrder(), customerId: 'not-a-uuid' } }),
    status: 422,
    kind: 'validation',
    field: 'customerId',
  },
  {
    name: 'bad uuid as a client id',
    method: 'POST',
    path: () => '/Customer',
    options: () => ({ body: { id: '123', email: 'bad-id@example.com', name: 'x' } }),
    status: 422,
    kind: 'validation',
    field: 'id',
  },
  {
    name: 'bad date-time',
    method: 'POST',
    path: () => '/Order',
    options: () => ({ body: { ...validOrder(), placedAt: 'yesterday' } }),
    status: 422,
    kind: 'validation',
    field: 'placedAt',
  },
  {
    name: 'Int out of range',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: { id: 2147483648, name: 'x', country: 'XX' } }),
    status: 422,
    kind: 'validation',
    field: 'id',
  },
  {
    name: 'string over VarChar(2)',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: { name: 'x', country: 'FRA' } }),
    status: 422,
    kind: 'validation',
    field: 'country',
  },
  {
    name: 'NUL character in a string',
    method: 'POST',
    path: () => '/City',
    options: () => ({ body: { name: 'a\u0000b', country: 'XX' } }),
    status: 422,
    kind: 'validation',
  },
  {
    name: 'Decimal that is not a number',
    method: 'POST',
    path: () => '/Product',
    options: () => ({ body: { sku: 'bad-dec', title: 'x', price: '1e5; drop', tags: [] } }),
    status: 422,
    kind: 'validation',
    field: 'price',
  },
  {
    name: 'tags not an array',
    method: 'POST',
    path: () => '/Product',
    options: () => ({ body: { sku: 'bad-tags', title: 'x', price: 1, tags: 'a,b' } }),
    status: 422,
    kind: 'validation',
    field: 'tags',
  },
  {
    name: 'unique violation (Customer.email)',
    method: 'POST',
    path: () => '/Customer',
    options: () => ({ body: { email: customer.email, name: 'Dup' } }),
    status: 409,
    kind: 'conflict',
    field: 'email',
    rule: 'unique',
  },
  {
    name: 'unique violation on PATCH',
    method: 'PATCH',
    path: () => `/Customer/${other.id}`,
    options: () => ({ body: { email: customer.email } }),
    status: 409,
    kind: 'conflict',
    field: 'email',
    rule: 'unique',
  },
  {
    name: 'duplicate client-supplied id',
    method: 'POST',
    path: () => '/Customer',
    options: () => ({ body: { id: customer.id, email: `dup-${randomUUID()}@example.com`, name: 'Dup' } }),
    status: 409,
    kind: 'conflict',
    field: 'id',
  },
  {
    name: 'FK violation (random customerId)',
    method: 'POST',
    path: () => '/Order',
    options: () => ({ body: { total: 1, customerId: randomUUID() } }),
    status: 422,
    kind: 'validation',
    field: 'customerId',
  },
  {
    name: 'FK violation on PATCH',
    method: 'PATCH',
    path: () => `/Order/${order.id}`,
    options: () => ({ body: { customerId: randomUUID() } }),
    status: 422,
    kind: 'validation',
    field: 'customerId',
  },
  {
    name: 'FK violation (cityId)',
    method: 'POST',
    path: () => '/Customer',
    options: () => ({ body: { email: `fk-${randomUUID()}@example.com`, name: 'x', cityId: 2000000000 } }),
    status: 422,
    kind: 'validation',
    field: 'cityId',
  },
  {
    name: 'deleting a referenced Customer',
    method: 'DELETE',
    path: () => `/Customer/${customer.id}`,
    options: () => ({}),
    status: 409,
    kind: 'conflict',
  },
  {
    name: 'deleting a referenced Product (OrderItem)',
    method: 'DELETE',
    path: () => `/Product/${product.id}`,
    options: () => ({}),
    status: 409,
    kind: 'conflict',
  },
  {
    name: 'unknown table (GET)',
    method: 'GET',
    path: () => '/Invoice',
    options: () => ({}),
    status: 404,
    kind: 'unknown-table',
  },
  {
    name: 'unknown table (POST)',
    method: 'POST',
    path: () => '/Invoice',
    options: () => ({ body: { total: 1 } }),
    status: 404,
    kind: 'unknown-table',
  },
  {
    name: 'unknown table (GET one)',
    method: 'GET',
    path: () => '/Invoice/1',
    options: () => ({}),
    status: 404,
    kind: 'unknown-table',
  },
];

describe('bad input → exact Problem, no 5xx, nothing written', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const before = await snapshot(t.db);
    const path = `${BASE}${c.path()}`;
    const res = await t.request(c.method, path, c.options());
    expect(res.status, res.text).toBeLessThan(500);
    expectProblemAt(res, c.status, path, c.kind, c.field, c.rule);
    expect(res.text).not.toMatch(/duplicate key|violates|constraint|SQLSTATE|syntax error|relation "|env_master/i);
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('a chunked body over the limit (no Content-Length) → 413, nothing written', async () => {
    const before = await snapshot(t.db);
    const chunk = new TextEncoder().encode(`"${'y'.repeat(64 * 1024)}",`);
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(new TextEncoder().encode('{"name":"x","country":"XX","pad":['));
        if (sent >= 20) {
          controller.enqueue(new TextEncoder().encode('""]}'));
          controller.close();
          return;
        }
        controller.enqueue(chunk);
        sent++;
      },
    });
    const path = `${BASE}/City`;
    const res = await fetch(`${t.url}${path}`, {
      method: 'POST',
      headers: { 'x-project-id': 'shop', authorization: `Bearer ${t.adminKey}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    const text = await res.text();
    expectProblemAt(
      { status: res.status, headers: res.headers, text, body: JSON.parse(text) },
      413,
      path,
      'payload-too-large',
    );
    expect(await snapshot(t.db)).toEqual(before);
  });

  it('the referenced Customer survives the refused delete and its Order still points at it', async () => {
    const path = `${BASE}/Customer/${customer.id}`;
    expectProblemAt(await t.request('DELETE', path), 409, path, 'conflict');
    expect((await t.request('GET', path)).status).toBe(200);
    expect((await t.request('GET', `${BASE}/Order/${order.id}`)).body.data.customerId).toBe(customer.id);
  });
});
