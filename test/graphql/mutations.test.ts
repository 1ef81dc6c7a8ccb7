// GraphQL mutations (docs/graphql.md "Mutations") against their REST twins, through real HTTP: the
// same answers, the same errors (as extensions), the same permissions, webhook events and
// Idempotency-Key behaviour, for the shop's admin and a customer user.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { MANAGEMENT_TOKEN } from '../support/server.ts';

const BASE = '/gw/api/rest';
const ORDER_FIELDS = 'id status total note placedAt customerId invoiceId receiptId createdAt updatedAt';
const CUSTOMER_ORDER_FIELDS = 'id status total customerId createdAt updatedAt';

let t: AuthTestServer;
let me: { id: string; token: string };
let otherCustomer: string;
let paidReaderKey: string;
let readerKey: string;
let prunerKey: string;

const unique = (tag: string) => `${tag}-${randomUUID()}`;

beforeAll(async () => {
  t = await startAuthServer({
    // Events are recorded for a subscription; its deliveries (to a closed port) are not what this file checks.
    configPatch: (raw) => {
      raw.webhooks = { allowHttp: true, allowPrivateTargets: true };
      // Writes whose result the role cannot read, and a role that writes nothing.
      raw.roles.paidReader = {
        tables: { Order: { read: { filter: { status: 'paid' } }, create: true }, City: { create: true } },
      };
      raw.roles.reader = { tables: { Order: { read: true } } };
      // Deletes by condition, only where both its read and delete filters hold.
      raw.roles.pruner = {
        tables: { Order: { read: { filter: { status: 'cancelled' } }, delete: { filter: { total: 1 } } } },
      };
    },
  });
  const email = `${unique('gql')}@example.com`;
  const session = await t.signupConfirmed(email, { roleId: 'customer' });
  me = { id: session.user.id, token: session.accessToken };
  expect((await rest('POST', 'Customer', { id: me.id, email, name: 'Me' })).status).toBe(201);
  paidReaderKey = (await t.createKey(['paidReader'])).key;
  readerKey = (await t.createKey(['reader'])).key;
  prunerKey = (await t.createKey(['pruner'])).key;
  otherCustomer = (await rest('POST', 'Customer', { email: `${unique('other')}@example.com`, name: 'Other' })).body.data
    .id;
});
afterAll(() => t?.close());

/** `token` is a user's access token or an API key (both are Bearer credentials). */
function rest(method: string, path: string, body?: unknown, token?: string, headers: Record<string, string> = {}) {
  return t.request(method, `${BASE}/${path}`, {
    body,
    headers: { ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
    ...(token ? { key: false as const } : {}),
  });
}

function gql(query: string, variables?: Record<string, unknown>, token?: string, headers: Record<string, string> = {}) {
  return t.request('POST', '/gw/api/graphql', {
    body: { query, variables },
    headers: {
      accept: 'application/graphql-response+json',
      ...headers,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    ...(token ? { key: false as const } : {}),
  });
}

/** The GraphQL error of a refused mutation field: extensions carrying the REST Problem's code, type, status and errors. */
function expectFieldError(res: { status: number; body: any; text: string }, field: string, problem: any) {
  expect(res.status, res.text).toBe(200);
  expect(res.body.data).toEqual({ [field]: null });
  expect(res.body.errors).toHaveLength(1);
  expect(res.body.errors[0].path).toEqual([field]);
  expect(res.body.errors[0].message).toBe(problem.detail);
  const code = problem.type.replace('/errors/', '').toUpperCase().replace(/-/g, '_');
  expect(res.body.errors[0].extensions).toEqual({
    code,
    type: problem.type,
    status: problem.status,
    ...(problem.errors?.length ? { errors: problem.errors } : {}),
  });
}

const omit = (record: Record<string, unknown>, ...keys: string[]) =>
  Object.fromEntries(Object.entries(record).filter(([k]) => !keys.includes(k)));

describe('admin mutations answer as their REST twins', () => {
  it('createOrder answers the record REST POST answers', async () => {
    const data = { total: 12.5, note: 'gql', customerId: otherCustomer, status: 'paid' };
    const g = await gql(`mutation($d: OrderCreateInput!) { createOrder(data: $d) { ${ORDER_FIELDS} } }`, { d: data });
    expect(g.status, g.text).toBe(200);
    expect(g.body.errors).toBeUndefined();
    const r = await rest('POST', 'Order', data);
    expect(r.status).toBe(201);
    expect(Object.keys(g.body.data.createOrder).sort()).toEqual(Object.keys(r.body.data).sort());
    expect(omit(g.body.data.createOrder, 'id', 'createdAt', 'updatedAt')).toEqual(
      omit(r.body.data, 'id', 'createdAt', 'updatedAt'),
    );
    // What was written reads back as answered.
    const read = await rest('GET', `Order/${g.body.data.createOrder.id}`);
    expect(read.body.data).toEqual(g.body.data.createOrder);
  });

  it('aliases and fragments pick the answered fields', async () => {
    const g = await gql(
      `mutation { o: createOrder(data: { total: 3, customerId: "${otherCustomer}" }) { theTotal: total ...F __typename } }
       fragment F on Order { status }`,
    );
    expect(g.body).toEqual({ data: { o: { theTotal: 3, status: 'open', __typename: 'Order' } } });
  });

  it('a relation in the answer is refused before anything is written', async () => {
    const note = unique('rel');
    const g = await gql(
      `mutation { createOrder(data: { total: 3, note: "${note}", customerId: "${otherCustomer}" }) { id customer { id } } }`,
    );
    expect(g.body.data).toEqual({ createOrder: null });
    expect(g.body.errors[0].extensions).toMatchObject({ code: 'INVALID_PARAMETER', status: 400 });
    expect((await rest('GET', `Order?note=equals.${note}`)).body.data).toEqual([]);
  });

  it('updateOrder and deleteOrder answer as PATCH and DELETE /Order/<id>', async () => {
    const a = (await rest('POST', 'Order', { total: 1, customerId: otherCustomer })).body.data;
    const b = (await rest('POST', 'Order', { total: 1, customerId: otherCustomer })).body.data;
    const patch = { total: 7.25, note: null, status: 'shipped' };
    const g = await gql(`mutation($d: OrderUpdateInput!) { updateOrder(id: ${a.id}, data: $d) { ${ORDER_FIELDS} } }`, {
      d: patch,
    });
    const r = await rest('PATCH', `Order/${b.id}`, patch);
    expect(r.status).toBe(200);
    expect(omit(g.body.data.updateOrder, 'id', 'createdAt', 'updatedAt')).toEqual(
      omit(r.body.data, 'id', 'createdAt', 'updatedAt'),
    );
    expect(g.body.data.updateOrder.id).toBe(a.id);

    const del = await gql(`mutation { deleteOrder(id: ${a.id}) }`);
    expect(del.body).toEqual({ data: { deleteOrder: true } });
    expect((await rest('GET', `Order/${a.id}`)).status).toBe(404);
    // Gone: the second delete is REST's 404.
    const again = await gql(`mutation { deleteOrder(id: ${a.id}) }`);
    const restAgain = await rest('DELETE', `Order/${a.id}`);
    expect(restAgain.status).toBe(404);
    expect(again.body.data).toBeNull(); // deleteOrder is Boolean!: the null reaches the root
    expect(again.body.errors[0].extensions).toEqual({ code: 'NOT_FOUND', type: '/errors/not-found', status: 404 });
    expect(again.body.errors[0].message).toBe(restAgain.body.detail);
    const missing = await gql(`mutation { updateOrder(id: 999999999, data: { total: 1 }) { id } }`);
    expectFieldError(missing, 'updateOrder', (await rest('PATCH', 'Order/999999999', { total: 1 })).body);
  });

  it('updateOrderWhere is PATCH /Order?<filters>, and refuses an empty where as REST refuses no filter', async () => {
    const note = unique('many');
    for (let i = 0; i < 3; i++) await rest('POST', 'Order', { total: 1, note, customerId: otherCustomer });
    const g = await gql(
      `mutation { updateOrderWhere(where: { note: { equals: "${note}" } }, data: { total: 9 }) { count } }`,
    );
    expect(g.body).toEqual({ data: { updateOrderWhere: { count: 3 } } });
    const r = await rest('PATCH', `Order?note=equals.${note}`, { total: 9 });
    expect(r.body.data).toEqual(g.body.data.updateOrderWhere);
    const empty = await gql('mutation { updateOrderWhere(where: {}, data: { total: 9 }) { count } }');
    expect(empty.body.data).toBeNull();
    expect(empty.body.errors[0].extensions).toEqual({
      code: 'VALIDATION',
      type: '/errors/validation',
      status: 422,
      errors: [{ field: 'where', rule: 'required', message: 'at least one condition is required' }],
    });
  });

  it('deleteOrderWhere deletes every matching record, captures a DELETE event each, and refuses an empty where', async () => {
    const note = unique('gone');
    const ids: number[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await rest('POST', 'Order', { total: 1, note, customerId: otherCustomer })).body.data.id);
    const kept = (await rest('POST', 'Order', { total: 1, note: unique('kept'), customerId: otherCustomer })).body.data;
    const sub = await t.request('POST', `${BASE}/_webhooks`, {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Order',
        events: ['DELETE'],
        url: 'http://127.0.0.1:9/hook',
        secret: 'gql-delete-where-secret',
      },
    });
    expect(sub.status, sub.text).toBe(201);
    try {
      const g = await gql(`mutation { deleteOrderWhere(where: { note: { equals: "${note}" } }) { count } }`);
      expect(g.body).toEqual({ data: { deleteOrderWhere: { count: 3 } } });
      for (const id of ids) expect((await rest('GET', `Order/${id}`)).status).toBe(404);
      expect((await rest('GET', `Order/${kept.id}`)).status).toBe(200);
      const events = await t.db.query<{ id: string }>(
        `SELECT record->>'id' AS id FROM svcgen.webhook_events WHERE table_name = 'Order' AND operation = 'DELETE' AND record->>'note' = $1`,
        [note],
      );
      expect(events.map((e) => Number(e.id)).sort((a, b) => a - b)).toEqual(ids);
    } finally {
      await t.request('DELETE', `${BASE}/_webhooks/${sub.body.id}`, { key: MANAGEMENT_TOKEN, environment: 'master' });
    }
    const again = await gql(`mutation { deleteOrderWhere(where: { note: { equals: "${note}" } }) { count } }`);
    expect(again.body).toEqual({ data: { deleteOrderWhere: { count: 0 } } });
    const empty = await gql('mutation { deleteOrderWhere(where: {}) { count } }');
    expect(empty.body.data).toBeNull();
    expect(empty.body.errors[0].extensions).toEqual({
      code: 'VALIDATION',
      type: '/errors/validation',
      status: 422,
      errors: [{ field: 'where', rule: 'required', message: 'at least one condition is required' }],
    });
    expect((await rest('GET', `Order/${kept.id}`)).status).toBe(200);
  });

  it('createOrderMany answers REST bulk data; an ALL_OR_NOTHING failure is its 422 with per-item errors', async () => {
    const items = [
      { total: 1, customerId: otherCustomer },
      { total: 2, customerId: otherCustomer },
    ];
    const g = await gql(
      `mutation($d: [OrderCreateInput!]!) { createOrderMany(data: $d) { success transactionMode totalRequested totalSucceeded totalFailed items errors { index message } } }`,
      { d: items },
    );
    const r = await rest('POST', 'Order/_bulk', { items });
    expect(r.status).toBe(201);
    expect(g.body.data.createOrderMany).toEqual({ ...r.body.data, items: expect.any(Array) });
    expect(g.body.data.createOrderMany.items).toEqual([{ id: expect.any(Number) }, { id: expect.any(Number) }]);

    const bad = [{ total: 1, customerId: otherCustomer }, { customerId: otherCustomer }];
    const failed = await gql('mutation($d: [OrderCreateInput!]!) { createOrderMany(data: $d) { success } }', {
      d: bad,
    });
    const restFailed = await rest('POST', 'Order/_bulk', { items: bad });
    expect(restFailed.status).toBe(422);
    expect(failed.body.data).toBeNull();
    expect(failed.body.errors[0].message).toBe(restFailed.body.detail);
    expect(failed.body.errors[0].extensions).toEqual({
      code: 'VALIDATION',
      type: '/errors/validation',
      status: 422,
      errors: restFailed.body.errors,
    });
    const best = await gql(
      'mutation($d: [OrderCreateInput!]!) { createOrderMany(data: $d, mode: BEST_EFFORT) { success totalSucceeded totalFailed errors { index message } } }',
      { d: bad },
    );
    const restBest = await rest('POST', 'Order/_bulk', { items: bad, transactionMode: 'BEST_EFFORT' });
    expect(restBest.status).toBe(207);
    expect(best.body.data.createOrderMany).toEqual({
      success: false,
      totalSucceeded: 1,
      totalFailed: 1,
      errors: restBest.body.data.errors,
    });
  });

  it('validation (422) and conflict (409) are the REST Problems as extensions', async () => {
    const invalid = { total: 'lots', customerId: otherCustomer };
    const g = await gql('mutation { createOrder(data: { customerId: "x", note: "n" }) { id } }');
    const r = await rest('POST', 'Order', { customerId: 'x', note: 'n' });
    expect(r.status).toBe(422);
    expectFieldError(g, 'createOrder', r.body);
    // A value GraphQL cannot coerce is GraphQL's own refusal (its Float), as documented.
    const coerced = await gql('mutation($d: OrderCreateInput!) { createOrder(data: $d) { id } }', { d: invalid });
    expect(coerced.status).toBe(400);
    expect(coerced.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');

    const email = `${unique('dup')}@example.com`;
    expect((await rest('POST', 'Customer', { email, name: 'A' })).status).toBe(201);
    const dup = await gql(`mutation { createCustomer(data: { email: "${email}", name: "B" }) { id } }`);
    const restDup = await rest('POST', 'Customer', { email, name: 'B' });
    expect(restDup.status).toBe(409);
    expectFieldError(dup, 'createCustomer', restDup.body);
  });

  it('root fields run in order, each its own write: a failed one leaves the others written', async () => {
    const note = unique('serial');
    const g = await gql(
      `mutation { a: createOrder(data: { total: 1, note: "${note}", customerId: "${otherCustomer}" }) { note }
        b: createOrder(data: { note: "${note}", customerId: "${otherCustomer}" }) { note }
        c: updateOrderWhere(where: { note: { equals: "${note}" } }, data: { total: 5 }) { count } }`,
    );
    expect(g.body.data).toEqual({ a: { note }, b: null, c: { count: 1 } });
    expect(g.body.errors.map((e: any) => e.path)).toEqual([['b']]);
  });
});

describe('a customer user', () => {
  it('has only the mutations and input fields its grants allow', async () => {
    const g = await gql(
      `{ m: __type(name: "Mutation") { fields { name } }
         c: __type(name: "OrderCreateInput") { inputFields { name } }
         u: __type(name: "OrderUpdateInput") { inputFields { name } } }`,
      undefined,
      me.token,
    );
    expect(g.body.data.m.fields.map((f: any) => f.name).sort()).toEqual([
      'createOrder',
      'createOrderMany',
      'updateOrder',
      'updateOrderWhere',
    ]);
    expect(g.body.data.c.inputFields.map((f: any) => f.name).sort()).toEqual(['customerId', 'total']);
    expect(g.body.data.u.inputFields.map((f: any) => f.name)).toEqual(['total']);
    const del = await gql('mutation { deleteOrder(id: 1) }', undefined, me.token);
    expect(del.status).toBe(400);
    expect(del.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });

  it('creates its own orders, answered with the fields it reads; not another customer’s (403 row_filter)', async () => {
    const mine = await gql(
      `mutation { createOrder(data: { total: 4, customerId: "${me.id}" }) { ${CUSTOMER_ORDER_FIELDS} } }`,
      undefined,
      me.token,
    );
    const restMine = await rest('POST', 'Order', { total: 4, customerId: me.id }, me.token);
    expect(restMine.status).toBe(201);
    expect(Object.keys(restMine.body.data).sort()).toEqual(CUSTOMER_ORDER_FIELDS.split(' ').sort());
    expect(omit(mine.body.data.createOrder, 'id', 'createdAt', 'updatedAt')).toEqual(
      omit(restMine.body.data, 'id', 'createdAt', 'updatedAt'),
    );
    const note = await gql(
      `mutation { createOrder(data: { total: 4, customerId: "${me.id}" }) { id note } }`,
      undefined,
      me.token,
    );
    expect(note.status).toBe(400);
    expect(note.body.errors[0].message).toMatch(/Cannot query field "note"/);

    const theirs = await gql(
      `mutation { createOrder(data: { total: 4, customerId: "${otherCustomer}" }) { id } }`,
      undefined,
      me.token,
    );
    const restTheirs = await rest('POST', 'Order', { total: 4, customerId: otherCustomer }, me.token);
    expect(restTheirs.status).toBe(403);
    expect(restTheirs.body.errors).toEqual([
      { field: 'customerId', rule: 'row_filter', message: "customerId must match your role's filter" },
    ]);
    expectFieldError(theirs, 'createOrder', restTheirs.body);
  });

  it('updates only its open orders (another’s is 404, as REST answers)', async () => {
    const mine = (await rest('POST', 'Order', { total: 1, customerId: me.id }, me.token)).body.data;
    const ok = await gql(
      `mutation { updateOrder(id: ${mine.id}, data: { total: 2 }) { id total } }`,
      undefined,
      me.token,
    );
    expect(ok.body).toEqual({ data: { updateOrder: { id: mine.id, total: 2 } } });
    const theirs = (await rest('POST', 'Order', { total: 1, customerId: otherCustomer })).body.data;
    const g = await gql(`mutation { updateOrder(id: ${theirs.id}, data: { total: 2 }) { id } }`, undefined, me.token);
    const r = await rest('PATCH', `Order/${theirs.id}`, { total: 2 }, me.token);
    expect(r.status).toBe(404);
    expectFieldError(g, 'updateOrder', r.body);
    expect((await rest('GET', `Order/${theirs.id}`)).body.data.total).toBe(1);
  });
});

describe('delete by condition under row filters', () => {
  it('deletes only rows the role may both read and delete; the others stay, uncounted', async () => {
    const note = unique('prune');
    const make = async (status: string, total: number) =>
      (await rest('POST', 'Order', { total, note, status, customerId: otherCustomer })).body.data.id as number;
    const gone = await make('cancelled', 1);
    const unreadable = await make('open', 1); // delete filter holds, read filter does not
    const undeletable = await make('cancelled', 2); // read filter holds, delete filter does not
    const g = await gql(
      `mutation { deleteOrderWhere(where: { note: { equals: "${note}" } }) { count } }`,
      undefined,
      prunerKey,
    );
    expect(g.body).toEqual({ data: { deleteOrderWhere: { count: 1 } } });
    expect((await rest('GET', `Order/${gone}`)).status).toBe(404);
    expect((await rest('GET', `Order/${unreadable}`)).status).toBe(200);
    expect((await rest('GET', `Order/${undeletable}`)).status).toBe(200);
  });

  it('a role without a delete grant has no deleteOrderWhere', async () => {
    const g = await gql('mutation { deleteOrderWhere(where: { id: { equals: 1 } }) { count } }', undefined, me.token);
    expect(g.status).toBe(400);
    expect(g.body.errors[0].extensions.code).toBe('GRAPHQL_VALIDATION_FAILED');
  });
});

describe('answers the caller cannot read', () => {
  it('a written row outside the read filter answers as REST’s {} (every field null)', async () => {
    const query = `mutation { createOrder(data: { total: 1, customerId: "${otherCustomer}" }) { id status } }`;
    const g = await gql(query, undefined, paidReaderKey);
    expect(g.body).toEqual({ data: { createOrder: { id: null, status: null } } });
    const r = await rest('POST', 'Order', { total: 1, customerId: otherCustomer }, paidReaderKey);
    expect(r.status).toBe(201);
    expect(r.body.data).toEqual({});
  });

  it('a table the role writes but does not read answers true, and has no update/delete', async () => {
    const name = unique('city');
    const g = await gql(`mutation { createCity(data: { name: "${name}", country: "FR" }) }`, undefined, paidReaderKey);
    expect(g.body).toEqual({ data: { createCity: true } });
    expect((await rest('GET', `City?name=equals.${name}`)).body.data).toHaveLength(1);
    const fields = await gql('{ __type(name: "Mutation") { fields { name } } }', undefined, paidReaderKey);
    expect(fields.body.data.__type.fields.map((f: any) => f.name).sort()).toEqual([
      'createCity',
      'createCityMany',
      'createOrder',
      'createOrderMany',
    ]);
  });

  it('a role that writes nothing has no Mutation type; subscriptions are refused over HTTP', async () => {
    const m = await gql('mutation { createOrder(data: { total: 1 }) { id } }', undefined, readerKey);
    expect(m.status).toBe(400);
    expect(m.body.errors.map((e: any) => e.message)).toContain(
      'your roles may write no table, so this API has no mutations for you',
    );
    // A valid subscription, refused over HTTP only (docs/realtime.md: WebSocket).
    const s = await gql('subscription { orderChanged { id } }');
    expect(s.status).toBe(400);
    expect(s.body.errors).toHaveLength(1);
    expect(s.body.errors[0]).toMatchObject({
      message:
        'over HTTP this API answers queries and mutations; subscribe over WebSocket at the same path (graphql-transport-ws)',
      extensions: { code: 'GRAPHQL_VALIDATION_FAILED', type: '/errors/invalid-parameter', status: 400 },
    });
  });
});

describe('webhook events', () => {
  it('a GraphQL create records the same event as its REST twin', async () => {
    const sub = await t.request('POST', `${BASE}/_webhooks`, {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Customer',
        events: ['INSERT'],
        url: 'http://127.0.0.1:9/hook',
        secret: 'gql-events-secret',
      },
    });
    expect(sub.status, sub.text).toBe(201);
    const g = await gql(
      `mutation { createCustomer(data: { email: "${unique('ev')}@example.com", name: "G" }) { id } }`,
    );
    const r = await rest('POST', 'Customer', { email: `${unique('ev')}@example.com`, name: 'G' });
    const events = async (id: string) =>
      t.db.query<{ operation: string; changed_fields: string[] | null; record: Record<string, unknown> }>(
        `SELECT operation, changed_fields, record FROM svcgen.webhook_events WHERE table_name = 'Customer' AND record->>'id' = $1`,
        [id],
      );
    const [ge] = await events(g.body.data.createCustomer.id);
    const [re] = await events(r.body.data.id);
    expect(ge).toBeDefined();
    expect(omit(ge!, 'record')).toEqual(omit(re!, 'record'));
    expect(Object.keys(ge!.record).sort()).toEqual(Object.keys(re!.record).sort());
    expect(omit(ge!.record, 'id', 'email', 'createdAt', 'updatedAt')).toEqual(
      omit(re!.record, 'id', 'email', 'createdAt', 'updatedAt'),
    );
    await t.request('DELETE', `${BASE}/_webhooks/${sub.body.id}`, { key: MANAGEMENT_TOKEN, environment: 'master' });
  });
});

describe('Idempotency-Key and GET', () => {
  it('a replay answers the stored answer and writes once; another body with the key is REST’s 422', async () => {
    const key = unique('idem');
    const note = unique('idem-note');
    const query = `mutation { createOrder(data: { total: 1, note: "${note}", customerId: "${otherCustomer}" }) { id note } }`;
    const first = await gql(query, undefined, undefined, { 'idempotency-key': key });
    expect(first.body.errors).toBeUndefined();
    const replay = await gql(query, undefined, undefined, { 'idempotency-key': key });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect((await rest('GET', `Order?note=equals.${note}`)).body.data).toHaveLength(1);

    const other = await gql(`${query} `, undefined, undefined, { 'idempotency-key': key });
    const restKey = unique('idem-rest');
    await rest('POST', 'Order', { total: 1, customerId: otherCustomer }, undefined, { 'idempotency-key': restKey });
    const restOther = await rest('POST', 'Order', { total: 2, customerId: otherCustomer }, undefined, {
      'idempotency-key': restKey,
    });
    expect(restOther.status).toBe(422);
    expect(other.status).toBe(422);
    // The same Problem; only `instance` names the path asked.
    expect(other.body).toEqual({ ...restOther.body, instance: '/gw/api/graphql' });
  });

  it('a mutation whose keyword is written with JSON escapes is still keyed (replayed, written once)', async () => {
    const key = unique('idem-escaped');
    const note = unique('idem-escaped-note');
    const query = `mutation { createOrder(data: { total: 1, note: "${note}", customerId: "${otherCustomer}" }) { id } }`;
    // "\u006d" is "m": the body never spells the word mutation.
    const raw = JSON.stringify({ query }).replace('mutation', '\\u006dutation');
    expect(raw).not.toContain('mutation');
    const send = () =>
      t.request('POST', '/gw/api/graphql', {
        raw,
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json',
          'idempotency-key': key,
        },
      });
    const first = await send();
    expect(first.body.errors, first.text).toBeUndefined();
    const replay = await send();
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect((await rest('GET', `Order?note=equals.${note}`)).body.data).toHaveLength(1);
  });

  it('a keyed mutation with an error is not kept: nothing written, the key free again', async () => {
    const key = unique('idem-err');
    const note = unique('idem-err-note');
    const bad = `mutation { a: createOrder(data: { total: 1, note: "${note}", customerId: "${otherCustomer}" }) { id }
      b: createOrder(data: { note: "${note}", customerId: "${otherCustomer}" }) { id } }`;
    const failed = await gql(bad, undefined, undefined, { 'idempotency-key': key });
    expect(failed.body.errors).toHaveLength(1);
    expect((await rest('GET', `Order?note=equals.${note}`)).body.data).toEqual([]);
    const good = await gql(
      `mutation { createOrder(data: { total: 1, note: "${note}", customerId: "${otherCustomer}" }) { note } }`,
      undefined,
      undefined,
      { 'idempotency-key': key },
    );
    expect(good.body).toEqual({ data: { createOrder: { note } } });
  });

  it('in a keyed request, the mutations after a failed one are not run (their transaction is lost)', async () => {
    const email = `${unique('dup-key')}@example.com`;
    expect((await rest('POST', 'Customer', { email, name: 'A' })).status).toBe(201);
    const note = unique('after-dup');
    const g = await gql(
      `mutation { a: createCustomer(data: { email: "${email}", name: "B" }) { id }
        b: createOrder(data: { total: 1, note: "${note}", customerId: "${otherCustomer}" }) { id } }`,
      undefined,
      undefined,
      { 'idempotency-key': unique('key') },
    );
    expect(g.body.data).toEqual({ a: null, b: null });
    expect(g.body.errors.map((e: any) => e.extensions.code)).toEqual(['CONFLICT', 'CONFLICT']);
    expect(g.body.errors[1].message).toMatch(/^not run: an earlier mutation of this request failed/);
    expect((await rest('GET', `Order?note=equals.${note}`)).body.data).toEqual([]);
  });

  it('a mutation over GET is refused (405)', async () => {
    const res = await t.request(
      'GET',
      `/gw/api/graphql?query=${encodeURIComponent(`mutation { createCustomer(data: { name: "x", email: "get@example.com" }) { id } }`)}`,
      { headers: { accept: 'application/graphql-response+json' } },
    );
    expect(res.status).toBe(405);
    expect((await rest('GET', 'Customer?email=equals.get@example.com')).body.data).toEqual([]);
  });
});
