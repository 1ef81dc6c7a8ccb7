/**
 * The webhook management endpoints (/gw/api/rest/_webhooks) through real HTTP on real PostgreSQL:
 * the subscription shape, environment scoping, PATCH/DELETE, every error kind with its field
 * errors, the target (SSRF) policy at creation, and that a refused request changes nothing.
 */
import { verify } from '@octokit/webhooks-methods';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../support/receiver.ts';
import {
  expectProblem,
  MANAGEMENT_TOKEN,
  startTestServer,
  type TestResponse,
  type TestServer,
} from '../support/server.ts';

/** allowHttp and allowPrivateTargets on: subscriptions point at the loopback receiver. */
let t: TestServer;
/** The product defaults: https only, public targets only. */
let strict: TestServer;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  [t, strict] = await Promise.all([
    startTestServer({
      configPatch: (raw) => {
        raw.webhooks = { allowHttp: true, allowPrivateTargets: true, retryDelaysMs: [0, 100, 100], timeoutMs: 1000 };
      },
    }),
    startTestServer({
      configPatch: (raw) => {
        raw.webhooks = { allowHttp: false, allowPrivateTargets: false };
      },
    }),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), strict?.close()]);
  await receiver?.close();
});

const BASE = '/gw/api/rest/_webhooks';
const SECRET = 'plain-secret-7d41c9e2b0';
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const WEBHOOK_ID = /^wh_[0-9a-f]{24}$/;

interface ManageOptions {
  body?: unknown;
  raw?: string;
  environment?: string;
  headers?: Record<string, string | undefined>;
  key?: string | false;
  project?: string | false;
}

function manage(server: TestServer, method: string, path: string, o: ManageOptions = {}): Promise<TestResponse> {
  return server.request(method, `${BASE}${path}`, {
    body: o.body,
    raw: o.raw,
    environment: 'environment' in o ? o.environment : 'master',
    headers: o.headers,
    key: o.key ?? MANAGEMENT_TOKEN,
    project: o.project,
  });
}

let paths = 0;
/** A receiver URL of its own for every subscription of the permissive server. */
const hookUrl = () => `${receiver.url}/mgmt-${++paths}`;

function validBody(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    projectId: 'shop',
    environment: 'master',
    table: 'Order',
    events: ['INSERT'],
    url: hookUrl(),
    secret: SECRET,
    ...over,
  };
}

async function create(server: TestServer, over: Record<string, unknown> = {}, environment = 'master'): Promise<any> {
  const res = await manage(server, 'POST', '', { body: validBody({ environment, ...over }), environment });
  expect(res.status, res.text).toBe(201);
  expect(res.text).not.toContain(SECRET);
  return res.body;
}

/** A 4xx Problem with exactly these field errors (messages are free text). */
function expectRejected(
  res: TestResponse,
  status: number,
  kind: string,
  errors: Array<{ field: string; rule: string }>,
): void {
  expectProblem(res, status, kind);
  expect(res.body.errors, res.text).toEqual(errors.map((e) => ({ ...e, message: expect.any(String) })));
}

/** Every stored subscription row, and what the API lists in both environments. */
async function state(server: TestServer) {
  const rows = await server.db.query('SELECT * FROM svcgen.webhooks ORDER BY id');
  const master = await manage(server, 'GET', '');
  const staging = await manage(server, 'GET', '', { environment: 'staging' });
  expect(master.status).toBe(200);
  expect(staging.status).toBe(200);
  return { rows, master: master.body, staging: staging.body };
}

/** Runs a refused request and checks that neither the table nor the lists moved. */
async function unchanged(server: TestServer, run: () => Promise<void>): Promise<void> {
  const before = await state(server);
  await run();
  expect(await state(server)).toEqual(before);
}

async function storedSecret(server: TestServer, id: string): Promise<string> {
  const rows = await server.db.query<{ secret: string }>('SELECT secret FROM svcgen.webhooks WHERE id = $1', [id]);
  expect(rows).toHaveLength(1);
  return rows[0]!.secret;
}

describe('create', () => {
  it('answers 201 with the whole subscription, a Location, defaults, and no secret', async () => {
    const url = hookUrl();
    const started = Date.now();
    const res = await manage(t, 'POST', '', {
      body: {
        projectId: 'shop',
        environment: 'master',
        table: 'Order',
        events: ['INSERT', 'UPDATE'],
        url,
        secret: SECRET,
      },
    });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body).toEqual({
      id: expect.stringMatching(WEBHOOK_ID),
      projectId: 'shop',
      environment: 'master',
      table: 'Order',
      events: ['INSERT', 'UPDATE'],
      url,
      active: true,
      filter: null,
      select: null,
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    expect(res.text).not.toContain(SECRET);
    expect(res.text).not.toContain('secret');
    expect(res.body.updatedAt).toBe(res.body.createdAt);
    expect(Math.abs(Date.parse(res.body.createdAt) - started)).toBeLessThan(10_000);
    expect(res.headers.get('location')).toBe(`${BASE}/${res.body.id}`);

    const viaLocation = await t.request('GET', res.headers.get('location')!, {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
    });
    expect(viaLocation.status, viaLocation.text).toBe(200);
    expect(viaLocation.body).toEqual({ webhook: res.body, deliveries: [] });
    expect(viaLocation.text).not.toContain(SECRET);

    const list = await manage(t, 'GET', '');
    expect(list.status).toBe(200);
    expect(list.body.data).toContainEqual(res.body);
    expect(list.text).not.toContain(SECRET);

    const sealed = await storedSecret(t, res.body.id);
    expect(sealed).not.toContain(SECRET);
    expect(sealed).not.toContain(Buffer.from(SECRET).toString('base64'));
    expect(sealed.length).toBeGreaterThan(0);
  });

  it('takes active, filter (normalised to the stored form) and select', async () => {
    const url = hookUrl();
    const res = await manage(t, 'POST', '', {
      body: validBody({
        url,
        events: ['DELETE', 'INSERT'],
        active: false,
        filter: { status: 'paid', total: 10, note: null, placedAt: '2024-01-01T02:00:00+02:00' },
        select: ['id', 'status'],
      }),
    });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(WEBHOOK_ID),
      projectId: 'shop',
      environment: 'master',
      table: 'Order',
      events: ['DELETE', 'INSERT'],
      url,
      active: false,
      filter: { status: 'paid', total: 10, note: null, placedAt: '2024-01-01T00:00:00.000Z' },
      select: ['id', 'status'],
      createdAt: expect.stringMatching(ISO),
      updatedAt: expect.stringMatching(ISO),
    });
    const got = await manage(t, 'GET', `/${res.body.id}`);
    expect(got.body).toEqual({ webhook: res.body, deliveries: [] });
  });

  it('gives every subscription its own id', async () => {
    const a = await create(t);
    const b = await create(t);
    expect(a.id).not.toBe(b.id);
  });
});

describe('environment scoping', () => {
  it('lists only the header environment, oldest first; other environments answer 404 and keep the subscription', async () => {
    const s1 = await create(t, { table: 'Customer' }, 'staging');
    const s2 = await create(t, { table: 'City', events: ['UPDATE'] }, 'staging');
    const m1 = await create(t, {}, 'master');
    expect(s1.environment).toBe('staging');

    const staging = await manage(t, 'GET', '', { environment: 'staging' });
    expect(staging.status).toBe(200);
    expect(staging.body).toEqual({ data: [s1, s2] });
    expect(staging.text).not.toContain(SECRET);

    const master = await manage(t, 'GET', '');
    expect(master.status).toBe(200);
    const masterIds = master.body.data.map((w: { id: string }) => w.id);
    expect(masterIds).toContain(m1.id);
    expect(masterIds).not.toContain(s1.id);
    expect(masterIds).not.toContain(s2.id);
    expect(master.body.data.every((w: { environment: string }) => w.environment === 'master')).toBe(true);
    // oldest first
    const created = master.body.data.map((w: { createdAt: string }) => w.createdAt);
    expect([...created].sort()).toEqual(created);

    await unchanged(t, async () => {
      expectRejected(await manage(t, 'GET', `/${s1.id}`), 404, 'not-found', []);
      expectRejected(await manage(t, 'PATCH', `/${s1.id}`, { body: { active: false } }), 404, 'not-found', []);
      expectRejected(await manage(t, 'DELETE', `/${s1.id}`), 404, 'not-found', []);
      expectRejected(await manage(t, 'GET', `/${m1.id}`, { environment: 'staging' }), 404, 'not-found', []);
    });
    const still = await manage(t, 'GET', `/${s1.id}`, { environment: 'staging' });
    expect(still.status).toBe(200);
    expect(still.body).toEqual({ webhook: s1, deliveries: [] });
  });
});

describe('GET one', () => {
  it('answers { webhook, deliveries: [] } for a new subscription', async () => {
    const w = await create(t, { table: 'Product', events: ['UPDATE', 'DELETE'] });
    const res = await manage(t, 'GET', `/${w.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ webhook: w, deliveries: [] });
    expect(res.text).not.toContain(SECRET);
  });

  it('answers 404 for an unknown id', async () => {
    const res = await manage(t, 'GET', '/wh_000000000000000000000000');
    expectRejected(res, 404, 'not-found', []);
    expect(res.body.instance).toBe(`${BASE}/wh_000000000000000000000000`);
  });
});

describe('PATCH', () => {
  it('changes events, url, active, filter and select, one at a time, and keeps the rest', async () => {
    const w = await create(t);
    let current = w;
    const step = async (patch: Record<string, unknown>, expected: Record<string, unknown>) => {
      const res = await manage(t, 'PATCH', `/${w.id}`, { body: patch });
      expect(res.status, res.text).toBe(200);
      expect(res.text).not.toContain(SECRET);
      expect(res.body).toEqual({ ...current, ...expected, updatedAt: expect.stringMatching(ISO) });
      expect(Date.parse(res.body.updatedAt)).toBeGreaterThanOrEqual(Date.parse(current.updatedAt));
      current = res.body;
      const got = await manage(t, 'GET', `/${w.id}`);
      expect(got.body).toEqual({ webhook: current, deliveries: [] });
    };
    await step({ events: ['UPDATE', 'DELETE'] }, { events: ['UPDATE', 'DELETE'] });
    const url = hookUrl();
    await step({ url }, { url });
    await step({ active: false }, { active: false });
    await step({ active: true }, { active: true });
    await step(
      { filter: { status: 'shipped', placedAt: '2024-06-01T12:00:00Z' } },
      { filter: { status: 'shipped', placedAt: '2024-06-01T12:00:00.000Z' } },
    );
    await step({ select: ['id', 'total'] }, { select: ['id', 'total'] });
    await step({ filter: null, select: null }, { filter: null, select: null });
    expect(current.createdAt).toBe(w.createdAt);
    const [row] = await t.db.query<{ endpoint: string; table_name: string }>(
      'SELECT endpoint, table_name FROM svcgen.webhooks WHERE id = $1',
      [w.id],
    );
    expect(row).toEqual({ endpoint: new URL(url).origin, table_name: 'Order' });
  });

  it('replaces the secret: never answered, stored sealed anew, and used to sign', async () => {
    const path = `/mgmt-secret-${++paths}`;
    const w = await create(t, { table: 'Customer', url: `${receiver.url}${path}` });
    const sealedBefore = await storedSecret(t, w.id);
    const newSecret = 'second-plain-secret-93ab';

    const same = await manage(t, 'PATCH', `/${w.id}`, { body: { active: true } });
    expect(same.status).toBe(200);
    expect(await storedSecret(t, w.id)).toBe(sealedBefore);

    const res = await manage(t, 'PATCH', `/${w.id}`, { body: { secret: newSecret } });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ ...w, updatedAt: expect.stringMatching(ISO) });
    expect(res.text).not.toContain(newSecret);
    expect(res.text).not.toContain(SECRET);
    const sealedAfter = await storedSecret(t, w.id);
    expect(sealedAfter).not.toBe(sealedBefore);
    expect(sealedAfter).not.toContain(newSecret);

    for (const [method, p] of [
      ['GET', ''],
      ['GET', `/${w.id}`],
    ] as const) {
      const r = await manage(t, method, p);
      expect(r.status).toBe(200);
      expect(r.text).not.toContain(newSecret);
      expect(r.text).not.toContain(SECRET);
    }

    const customer = await t.request('POST', '/gw/api/rest/Customer', {
      body: { email: 'secret-rotation@example.com', name: 'Rot' },
    });
    expect(customer.status, customer.text).toBe(201);
    const [got] = await receiver.waitFor(path, 1);
    const signature = got!.headers['x-service-signature'] as string;
    expect(await verify(newSecret, got!.raw, signature)).toBe(true);
    expect(await verify(SECRET, got!.raw, signature)).toBe(false);
  });

  it('revalidates filter and select against a new table', async () => {
    const w = await create(t, { filter: { status: 'paid' } });
    await unchanged(t, async () => {
      expectRejected(await manage(t, 'PATCH', `/${w.id}`, { body: { table: 'Customer' } }), 422, 'validation', [
        { field: 'filter.status', rule: 'exists' },
      ]);
    });
    const s = await create(t, { select: ['id', 'total'] });
    await unchanged(t, async () => {
      expectRejected(await manage(t, 'PATCH', `/${s.id}`, { body: { table: 'Customer' } }), 422, 'validation', [
        { field: 'select[1]', rule: 'exists' },
      ]);
    });
    // With a filter that fits the new table, the change goes through.
    const moved = await manage(t, 'PATCH', `/${w.id}`, { body: { table: 'Customer', filter: { vip: true } } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body).toEqual({
      ...w,
      table: 'Customer',
      filter: { vip: true },
      updatedAt: expect.stringMatching(ISO),
    });
  });

  it('takes a body environment equal to the header, refuses a different one with 400', async () => {
    const w = await create(t, {}, 'staging');
    const ok = await manage(t, 'PATCH', `/${w.id}`, {
      body: { environment: 'staging', active: false },
      environment: 'staging',
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.body).toEqual({ ...w, active: false, updatedAt: expect.stringMatching(ISO) });
    await unchanged(t, async () => {
      const res = await manage(t, 'PATCH', `/${w.id}`, {
        body: { environment: 'master', active: true },
        environment: 'staging',
      });
      expectRejected(res, 400, 'bad-request', [{ field: 'environment', rule: 'equals_header' }]);
    });
  });

  it('refuses invalid values like create does, and changes nothing', async () => {
    const w = await create(t);
    const cases: Array<[Record<string, unknown>, Array<{ field: string; rule: string }>]> = [
      [{ events: [] }, [{ field: 'events', rule: 'too_small' }]],
      [{ secret: '' }, [{ field: 'secret', rule: 'too_small' }]],
      [{ url: 'not a url' }, [{ field: 'url', rule: 'target' }]],
      [{ table: 'Nope' }, [{ field: 'table', rule: 'exists' }]],
      [{ projectId: 'other' }, [{ field: 'projectId', rule: 'equals' }]],
      [{ id: 'wh_000000000000000000000000' }, [{ field: 'id', rule: 'unknown_field' }]],
    ];
    await unchanged(t, async () => {
      for (const [body, errors] of cases)
        expectRejected(await manage(t, 'PATCH', `/${w.id}`, { body }), 422, 'validation', errors);
    });
  });

  it('answers 404 for an unknown id', async () => {
    await unchanged(t, async () => {
      expectRejected(
        await manage(t, 'PATCH', '/wh_000000000000000000000000', { body: { active: false } }),
        404,
        'not-found',
        [],
      );
    });
  });
});

describe('DELETE', () => {
  it('answers 204, then GET and a second DELETE answer 404', async () => {
    const w = await create(t);
    const other = await create(t);
    const res = await manage(t, 'DELETE', `/${w.id}`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expectRejected(await manage(t, 'GET', `/${w.id}`), 404, 'not-found', []);
    expectRejected(await manage(t, 'DELETE', `/${w.id}`), 404, 'not-found', []);
    expect(await t.db.query('SELECT id FROM svcgen.webhooks WHERE id = $1', [w.id])).toEqual([]);
    const list = await manage(t, 'GET', '');
    const ids = list.body.data.map((x: { id: string }) => x.id);
    expect(ids).not.toContain(w.id);
    expect(ids).toContain(other.id);
  });
});

describe('redeliver', () => {
  it('answers 404 for an unknown delivery and for an unknown webhook', async () => {
    const w = await create(t);
    await unchanged(t, async () => {
      expectRejected(
        await manage(t, 'POST', `/${w.id}/deliveries/del_000000000000000000000000/redeliver`),
        404,
        'not-found',
        [],
      );
      expectRejected(
        await manage(t, 'POST', '/wh_000000000000000000000000/deliveries/del_000000000000000000000000/redeliver'),
        404,
        'not-found',
        [],
      );
    });
  });
});

describe('request errors', () => {
  it('missing X-Project-Id → 400 missing-project', async () => {
    await unchanged(t, async () => {
      expectRejected(await manage(t, 'POST', '', { body: validBody(), project: false }), 400, 'missing-project', [
        { field: 'X-Project-Id', rule: 'required' },
      ]);
    });
  });

  it('missing X-Project-Id is reported before missing credentials (tenancy first)', async () => {
    expectRejected(await manage(t, 'GET', '', { project: false, key: false }), 400, 'missing-project', [
      { field: 'X-Project-Id', rule: 'required' },
    ]);
  });

  it('unknown project → 404 unknown-project', async () => {
    await unchanged(t, async () => {
      expectRejected(
        await manage(t, 'POST', '', { body: validBody({ projectId: 'other' }), project: 'other' }),
        404,
        'unknown-project',
        [],
      );
    });
  });

  it('missing environment header → 400 bad-request naming environment', async () => {
    await unchanged(t, async () => {
      expectRejected(await manage(t, 'POST', '', { body: validBody(), environment: undefined }), 400, 'bad-request', [
        { field: 'environment', rule: 'required' },
      ]);
      expectRejected(await manage(t, 'GET', '', { environment: undefined }), 400, 'bad-request', [
        { field: 'environment', rule: 'required' },
      ]);
    });
  });

  it('unknown environment → 404 unknown-environment', async () => {
    await unchanged(t, async () => {
      expectRejected(
        await manage(t, 'POST', '', { body: validBody({ environment: 'prod' }), environment: 'prod' }),
        404,
        'unknown-environment',
        [],
      );
    });
  });

  it('body environment other than the header → 400 bad-request equals_header', async () => {
    await unchanged(t, async () => {
      expectRejected(await manage(t, 'POST', '', { body: validBody({ environment: 'staging' }) }), 400, 'bad-request', [
        { field: 'environment', rule: 'equals_header' },
      ]);
    });
  });

  it('no Authorization → 401 unauthorized', async () => {
    await unchanged(t, async () => {
      expectRejected(await manage(t, 'POST', '', { body: validBody(), key: false }), 401, 'unauthorized', []);
      expectRejected(await manage(t, 'GET', '', { key: false }), 401, 'unauthorized', []);
    });
  });

  it('wrong management token → 401 unauthorized', async () => {
    await unchanged(t, async () => {
      expectRejected(
        await manage(t, 'POST', '', { body: validBody(), key: `${MANAGEMENT_TOKEN}x` }),
        401,
        'unauthorized',
        [],
      );
    });
  });

  it('an admin API key → 403 forbidden', async () => {
    await unchanged(t, async () => {
      expectRejected(await manage(t, 'POST', '', { body: validBody(), key: t.adminKey }), 403, 'forbidden', []);
      expectRejected(await manage(t, 'GET', '', { key: t.adminKey }), 403, 'forbidden', []);
    });
  });

  it('malformed JSON → 400 invalid-json', async () => {
    const w = await create(t);
    await unchanged(t, async () => {
      const headers = { 'content-type': 'application/json' };
      expectRejected(await manage(t, 'POST', '', { raw: '{"projectId": "shop",', headers }), 400, 'invalid-json', []);
      expectRejected(
        await manage(t, 'PATCH', `/${w.id}`, { raw: '{active: false}', headers }),
        400,
        'invalid-json',
        [],
      );
      expectRejected(await manage(t, 'POST', '', { headers }), 400, 'invalid-json', []);
    });
  });
});

describe('body validation (422)', () => {
  const rejects = (body: Record<string, unknown>, errors: Array<{ field: string; rule: string }>) =>
    unchanged(t, async () => {
      const res = await manage(t, 'POST', '', { body });
      expectRejected(res, 422, 'validation', errors);
      expect(res.text).not.toContain(SECRET);
    });

  it('unknown field', () => rejects(validBody({ colour: 'red' }), [{ field: 'colour', rule: 'unknown_field' }]));

  for (const field of ['projectId', 'environment', 'table', 'events', 'url', 'secret']) {
    it(`missing ${field}`, () => {
      const body = validBody();
      delete body[field];
      return rejects(body, [{ field, rule: 'required' }]);
    });
  }

  it('events []', () => rejects(validBody({ events: [] }), [{ field: 'events', rule: 'too_small' }]));
  it("events ['UPSERT']", () =>
    rejects(validBody({ events: ['UPSERT'] }), [{ field: 'events[0]', rule: 'invalid_value' }]));
  it("events ['INSERT', 'INSERT']", () =>
    rejects(validBody({ events: ['INSERT', 'INSERT'] }), [{ field: 'events', rule: 'custom' }]));
  it('projectId other than X-Project-Id', () =>
    rejects(validBody({ projectId: 'other' }), [{ field: 'projectId', rule: 'equals' }]));
  it('unknown table', () => rejects(validBody({ table: 'Invoice' }), [{ field: 'table', rule: 'exists' }]));
  it('filter on an unknown field', () =>
    rejects(validBody({ filter: { colour: 'red' } }), [{ field: 'filter.colour', rule: 'exists' }]));
  it('filter Order.total "abc"', () =>
    rejects(validBody({ filter: { total: 'abc' } }), [{ field: 'filter.total', rule: 'type' }]));
  it('filter Customer.vip "yes"', () =>
    rejects(validBody({ table: 'Customer', filter: { vip: 'yes' } }), [{ field: 'filter.vip', rule: 'type' }]));
  it('filter Order.status not an enum value', () =>
    rejects(validBody({ filter: { status: 'nonexistent-enum-value' } }), [{ field: 'filter.status', rule: 'type' }]));
  it('filter null on a required field', () =>
    rejects(validBody({ filter: { total: null } }), [{ field: 'filter.total', rule: 'type' }]));
  it('select names an unknown field', () =>
    rejects(validBody({ select: ['id', 'colour'] }), [{ field: 'select[1]', rule: 'exists' }]));
  it('secret ""', () => rejects(validBody({ secret: '' }), [{ field: 'secret', rule: 'too_small' }]));
  it('url "not a url"', () => rejects(validBody({ url: 'not a url' }), [{ field: 'url', rule: 'target' }]));
  it('select repeating a field', () =>
    rejects(validBody({ select: ['id', 'id'] }), [{ field: 'select', rule: 'custom' }]));
  it('filter on a DateTime with a non-ISO date', () =>
    rejects(validBody({ filter: { placedAt: 'March 7, 2024' } }), [{ field: 'filter.placedAt', rule: 'type' }]));
  it('filter on a DateTime with a time but no zone', () =>
    rejects(validBody({ filter: { placedAt: '2024-03-07T10:00:00' } }), [{ field: 'filter.placedAt', rule: 'type' }]));
  it('events of the wrong type', () =>
    rejects(validBody({ events: 'INSERT' }), [{ field: 'events', rule: 'invalid_type' }]));

  it('several problems are reported together', () =>
    rejects(validBody({ projectId: 'other', filter: { colour: 'red', total: 'abc' }, select: ['nope'] }), [
      { field: 'projectId', rule: 'equals' },
      { field: 'filter.colour', rule: 'exists' },
      { field: 'filter.total', rule: 'type' },
      { field: 'select[0]', rule: 'exists' },
    ]));
});

describe('targets with the default policy (https only, public addresses only)', () => {
  const strictBody = (url: string) => validBody({ url });
  const refused = (url: string) =>
    unchanged(strict, async () => {
      expectRejected(await manage(strict, 'POST', '', { body: strictBody(url) }), 422, 'validation', [
        { field: 'url', rule: 'target' },
      ]);
    });

  it('http:// is refused when allowHttp is false', () => refused('http://93.184.215.14/hook'));

  for (const url of [
    'https://127.0.0.1/x',
    'https://10.1.2.3/x',
    'https://169.254.169.254/latest/meta-data',
    'https://[::ffff:127.0.0.1]/x',
    'https://[::1]/x',
    'https://[::7f00:1]/x',
    'https://localhost/x',
    'https://192.168.1.10/',
    'https://100.64.0.1/',
    'https://172.16.0.1/',
    'https://[fc00::1]/',
    'https://0.0.0.0/',
    'https://[::]/',
    'https://[fe80::1]/',
    'https://[::ffff:a9fe:a9fe]/latest/meta-data',
    // other spellings of 127.0.0.1 (the URL parser normalises them)
    'https://2130706433/x',
    'https://0x7f.0.0.1/x',
    'https://127.1/x',
    // credentials in the URL
    'https://user:pw@93.184.215.14/hook',
  ]) {
    it(`refuses ${url}`, () => refused(url));
  }

  it('refuses a private target on PATCH too', async () => {
    const w = await create(strict, { url: 'https://93.184.215.14/hook' });
    await unchanged(strict, async () => {
      expectRejected(
        await manage(strict, 'PATCH', `/${w.id}`, { body: { url: 'https://10.0.0.1/x' } }),
        422,
        'validation',
        [{ field: 'url', rule: 'target' }],
      );
      expectRejected(
        await manage(strict, 'PATCH', `/${w.id}`, { body: { url: 'http://93.184.215.14/hook' } }),
        422,
        'validation',
        [{ field: 'url', rule: 'target' }],
      );
    });
  });

  it('accepts a public IP literal over https', async () => {
    const res = await manage(strict, 'POST', '', { body: strictBody('https://93.184.215.14/hook') });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ url: 'https://93.184.215.14/hook', active: true, filter: null, select: null });
    expect(res.body.id).toMatch(WEBHOOK_ID);
  });

  it('the permissive server takes http and loopback', async () => {
    const w = await create(t, { url: 'http://127.0.0.1:9/x' });
    expect(w.url).toBe('http://127.0.0.1:9/x');
    expect((await manage(t, 'DELETE', `/${w.id}`)).status).toBe(204);
  });
});

describe('request paths', () => {
  it('a create at /_webhooks/ (trailing slash) answers a Location that serves the subscription', async () => {
    const res = await t.request('POST', `${BASE}/`, {
      body: validBody(),
      key: MANAGEMENT_TOKEN,
      environment: 'master',
    });
    expect(res.status, res.text).toBe(201);
    expect(res.headers.get('location')).toBe(`${BASE}/${res.body.id}`);
    const followed = await t.request('GET', res.headers.get('location')!, {
      key: MANAGEMENT_TOKEN,
      environment: 'master',
    });
    expect(followed.status).toBe(200);
    expect(followed.body.webhook.id).toBe(res.body.id);
  });

  it('an id that is not valid percent-encoding is a 400 Problem, not an HTML page', async () => {
    for (const path of [`${BASE}/%E0%A4%A`, '/gw/api/rest/_apikeys/%E0%A4%A']) {
      const res = await t.request(path.includes('_apikeys') ? 'DELETE' : 'GET', path, {
        key: MANAGEMENT_TOKEN,
        environment: 'master',
      });
      expect(res.status, path).toBe(400);
      expect(res.headers.get('content-type'), path).toContain('application/problem+json');
      expect(res.body).toMatchObject({ type: '/errors/bad-request', status: 400, instance: path });
    }
  });
});
