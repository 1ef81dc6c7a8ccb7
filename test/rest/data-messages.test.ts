/**
 * Every 4xx about a body value names the field and says in words what it takes (docs/api.md
 * §6.1 "Record bodies"): Decimal digits, date formats, UUIDs, enums, lists, Json, Bytes, integers,
 * composite unique keys, and missing with unknown fields in one answer. Each case runs on create,
 * PATCH, bulk items and update-by-filter, against a fixture model (test/fixtures/messages) with the
 * types the example shop lacks. Exact status and body each time, and nothing written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectProblemAt } from '../support/expect.ts';
import { generateFixtureProject } from '../support/fixture-project.ts';
import { startTestServer, type TestResponse, type TestServer } from '../support/server.ts';

const BASE = '/gw/api/rest/Invoice';
const LINES = '/gw/api/rest/InvoiceLine';
const ZERO_UUID = '00000000-0000-0000-0000-000000000001';

let t: TestServer;
let project: Awaited<ReturnType<typeof generateFixtureProject>>;
let existing: { id: string; series: string; number: number };
let serial = 0;

beforeAll(async () => {
  project = await generateFixtureProject('messages');
  t = await startTestServer({ project: project.dir });
  existing = await create({});
}, 120_000);
afterAll(async () => {
  await t?.close();
  await project?.remove();
});

function valid(extra: Record<string, unknown> = {}): Record<string, unknown> {
  serial++;
  return {
    series: 'A',
    number: serial,
    title: `invoice ${serial}`,
    total: 12.5,
    dueDate: '2026-01-31T12:00:00Z',
    ...extra,
  };
}

async function create(extra: Record<string, unknown>) {
  const res = await t.request('POST', BASE, { body: valid(extra) });
  expect(res.status, res.text).toBe(201);
  return res.body.data;
}

async function invoiceRows(): Promise<string[]> {
  const rows = await t.db.query<{ r: string }>(
    `select row_to_json(i)::text as r from env_master."Invoice" i union all select row_to_json(l)::text from env_master."InvoiceLine" l order by 1`,
  );
  return rows.map((row) => row.r);
}

/** The exact 422 (or other) Problem: status, detail = the messages joined, the errors as given. */
function expectErrors(
  res: TestResponse,
  status: number,
  path: string,
  errors: { field: string; rule: string; message: string }[],
  detail?: string,
) {
  expectProblemAt(res, status, path, status === 409 ? 'conflict' : 'validation');
  expect(res.body.errors, res.text).toEqual(errors);
  expect(res.body.detail, res.text).toBe(detail ?? errors.map((e) => e.message).join('; '));
}

const DECIMAL_6_2 =
  'expected a decimal number such as 12.50 (a JSON number or a string) with at most 4 digits before the decimal point (stored with 2 digits after it)';
const DATE_TIME =
  'expected a date-time such as 2026-01-31T12:00:00Z (Z or an offset such as +02:00) or a date such as 2026-01-31';
const UUID_TEXT = 'expected a UUID such as 123e4567-e89b-12d3-a456-426614174000';
const STATUSES = 'expected one of open, paid, shipped';

/**
 * Sends one bad field value through create, PATCH by id, update-by-filter and a bulk item, and
 * expects the same field error from each; nothing is written.
 */
async function expectEverywhere(
  patch: Record<string, unknown>,
  errors: { field: string; rule: string; message: string }[],
) {
  const before = await invoiceRows();
  const created = await t.request('POST', BASE, { body: valid(patch) });
  expectErrors(created, 422, BASE, errors);
  const path = `${BASE}/${existing.id}`;
  expectErrors(await t.request('PATCH', path, { body: patch }), 422, path, errors);
  const many = `${BASE}?series=equals.A`;
  expectErrors(await t.request('PATCH', many, { body: patch }), 422, many, errors);
  const bulk = await t.request('POST', `${BASE}/_bulk`, { body: { items: [valid(), valid(patch)] } });
  const message = errors.map((e) => e.message).join('; ');
  expect(bulk.status, bulk.text).toBe(422);
  expect(bulk.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(bulk.body).toEqual({
    type: '/errors/validation',
    title: 'Validation failed',
    status: 422,
    detail: '1 of 2 items failed; nothing was changed',
    instance: `${BASE}/_bulk`,
    errors: [{ field: 'items[1]', rule: 'item', message }],
    data: {
      success: false,
      transactionMode: 'ALL_OR_NOTHING',
      totalRequested: 2,
      totalSucceeded: 0,
      totalFailed: 2,
      items: [],
      errors: [{ index: 1, message }],
    },
  });
  expect(await invoiceRows()).toEqual(before);
}

describe('Decimal digits are checked before the database, in words', () => {
  it('a Decimal(6,2) with 5 digits before the point → 422 naming the field and its digits (was 422 with errors: [])', async () => {
    await expectEverywhere({ total: 12345.67 }, [{ field: 'total', rule: 'max', message: `total: ${DECIMAL_6_2}` }]);
    await expectEverywhere({ total: '-10000' }, [{ field: 'total', rule: 'max', message: `total: ${DECIMAL_6_2}` }]);
  });

  it('a value that rounds up past the digits is refused; more digits after the point are rounded, as PostgreSQL does', async () => {
    await expectEverywhere({ total: '9999.995' }, [{ field: 'total', rule: 'max', message: `total: ${DECIMAL_6_2}` }]);
    expect((await create({ total: '9999.994' })).total).toBe(9999.99);
    expect((await create({ total: -9999.99 })).total).toBe(-9999.99);
    expect((await create({ total: '12.345' })).total).toBe(12.35);
    expect((await create({ total: 1e-7 })).total).toBe(0);
  });

  it("a Decimal without @db.Decimal has PostgreSQL's DECIMAL(65,30) digits from Prisma", async () => {
    const message =
      'fee: expected a decimal number such as 12.50 (a JSON number or a string) with at most 35 digits before the decimal point (stored with 30 digits after it)';
    await expectEverywhere({ fee: 1e35 }, [{ field: 'fee', rule: 'max', message }]);
    expect((await create({ fee: `${'9'.repeat(35)}.5` })).fee).toBe(1e35);
  });

  it('a Decimal that is not a number says so without a pattern', async () => {
    await expectEverywhere({ total: '12,50' }, [{ field: 'total', rule: 'format', message: `total: ${DECIMAL_6_2}` }]);
    await expectEverywhere({ total: '1e5' }, [{ field: 'total', rule: 'format', message: `total: ${DECIMAL_6_2}` }]);
    await expectEverywhere({ total: true }, [{ field: 'total', rule: 'type', message: `total: ${DECIMAL_6_2}` }]);
  });

  it('a composite-key table (no /<id> route): create and bulk', async () => {
    const message =
      'amount: expected a decimal number such as 12.50 (a JSON number or a string) with at most 5 digits before the decimal point (stored with 3 digits after it)';
    const res = await t.request('POST', LINES, { body: { invoiceId: existing.id, position: 1, amount: 123456 } });
    expectErrors(res, 422, LINES, [{ field: 'amount', rule: 'max', message }]);
    const bulk = await t.request('POST', `${LINES}/_bulk`, {
      body: {
        transactionMode: 'BEST_EFFORT',
        items: [
          { invoiceId: existing.id, position: 1, amount: 1.5 },
          { invoiceId: existing.id, position: 2, amount: '-123456.1' },
        ],
      },
    });
    expect(bulk.status, bulk.text).toBe(207);
    expect(bulk.body.data.errors).toEqual([{ index: 1, message }]);
  });
});

describe('dates say which formats they take', () => {
  it('a date-time field: the accepted format in words (was "Invalid input")', async () => {
    await expectEverywhere({ dueDate: 'tomorrow' }, [
      { field: 'dueDate', rule: 'type', message: `dueDate: ${DATE_TIME}` },
    ]);
    await expectEverywhere({ dueDate: '2026-01-31T12:00:00' }, [
      { field: 'dueDate', rule: 'type', message: `dueDate: ${DATE_TIME}` },
    ]);
    await expectEverywhere({ dueDate: '2026-02-30' }, [
      { field: 'dueDate', rule: 'type', message: `dueDate: ${DATE_TIME}` },
    ]);
  });

  it('the formats the message names are the ones accepted', async () => {
    expect((await create({ dueDate: '2026-01-31T12:00:00Z' })).dueDate).toBe('2026-01-31T12:00:00.000Z');
    expect((await create({ dueDate: '2026-01-31T12:00:00.250+02:00' })).dueDate).toBe('2026-01-31T10:00:00.250Z');
    expect((await create({ dueDate: '2026-01-31' })).dueDate).toBe('2026-01-31T00:00:00.000Z');
  });

  it('a @db.Date field asks for a date', async () => {
    await expectEverywhere({ issuedOn: '31/01/2026' }, [
      { field: 'issuedOn', rule: 'type', message: 'issuedOn: expected a date such as 2026-01-31' },
    ]);
    expect((await create({ issuedOn: '2026-01-31' })).issuedOn).toMatch(/^2026-01-31/);
  });

  it('a year PostgreSQL cannot store → 422 naming the field (was 422 with errors: [])', async () => {
    await expectEverywhere({ dueDate: '0000-06-01' }, [
      { field: 'dueDate', rule: 'min', message: 'dueDate: expected a date-time in the years 0001 to 9999 (in UTC)' },
    ]);
    await expectEverywhere({ dueDate: '9999-12-31T23:00:00-05:00' }, [
      { field: 'dueDate', rule: 'max', message: 'dueDate: expected a date-time in the years 0001 to 9999 (in UTC)' },
    ]);
  });
});

describe('every other type is described in words, never by a pattern or a zod default', () => {
  const cases: [string, Record<string, unknown>, { field: string; rule: string; message: string }[]][] = [
    ['enum', { status: 'lost' }, [{ field: 'status', rule: 'enum', message: `status: ${STATUSES}` }]],
    [
      'enum list item',
      { flags: ['open', 'lost'] },
      [{ field: 'flags[1]', rule: 'enum', message: `flags[1]: ${STATUSES}` }],
    ],
    [
      'list that is not an array',
      { tags: 'a,b' },
      [{ field: 'tags', rule: 'type', message: 'tags: expected a JSON array, each item a string' }],
    ],
    [
      'list items of the wrong type',
      { tags: ['a', 1, 'c', false] },
      [
        { field: 'tags[1]', rule: 'type', message: 'tags[1]: expected a string' },
        { field: 'tags[3]', rule: 'type', message: 'tags[3]: expected a string' },
      ],
    ],
    ['UUID', { parentId: 'not-a-uuid' }, [{ field: 'parentId', rule: 'format', message: `parentId: ${UUID_TEXT}` }]],
    [
      'BigInt with a fraction (was a 500)',
      { weight: '12.5' },
      [
        {
          field: 'weight',
          rule: 'type',
          message:
            'weight: expected a whole number from -9223372036854775808 to 9223372036854775807 (a JSON number or a string of digits)',
        },
      ],
    ],
    [
      'BigInt past 64 bits',
      { weight: '9223372036854775808' },
      [
        {
          field: 'weight',
          rule: 'max',
          message:
            'weight: expected a whole number from -9223372036854775808 to 9223372036854775807 (a JSON number or a string of digits)',
        },
      ],
    ],
    [
      'Int with a fraction',
      { number: 1.5 },
      [{ field: 'number', rule: 'type', message: 'number: expected a whole number from -2147483648 to 2147483647' }],
    ],
    [
      'Int past 32 bits',
      { number: 2 ** 31 },
      [{ field: 'number', rule: 'max', message: 'number: expected a whole number from -2147483648 to 2147483647' }],
    ],
    [
      'SmallInt',
      { copies: 40000 },
      [{ field: 'copies', rule: 'max', message: 'copies: expected a whole number from -32768 to 32767' }],
    ],
    [
      'Bytes',
      { scan: 'not base64!' },
      [{ field: 'scan', rule: 'format', message: 'scan: expected base64 text such as aGVsbG8=' }],
    ],
    [
      'VarChar',
      { series: 'ABCDE' },
      [{ field: 'series', rule: 'max', message: 'series: expected a string of at most 4 characters' }],
    ],
    ['String', { title: 12 }, [{ field: 'title', rule: 'type', message: 'title: expected a string' }]],
    [
      'NUL in a string (was 422 with errors: [])',
      { title: 'a\u0000b' },
      [{ field: 'title', rule: 'format', message: 'title: expected a string without NUL characters (\\u0000)' }],
    ],
    [
      'NUL in a list item',
      { tags: ['ok', 'a\u0000'] },
      [{ field: 'tags[1]', rule: 'format', message: 'tags[1]: expected a string without NUL characters (\\u0000)' }],
    ],
    [
      'NUL in Json (was a 500)',
      { meta: { a: ['x\u0000'] } },
      [
        {
          field: 'meta',
          rule: 'format',
          message: 'meta: expected JSON whose strings and keys have no NUL characters (\\u0000)',
        },
      ],
    ],
    ['enum given a boolean', { status: true }, [{ field: 'status', rule: 'enum', message: `status: ${STATUSES}` }]],
    [
      'null for a required field',
      { title: null },
      [{ field: 'title', rule: 'required', message: 'title cannot be null: expected a string' }],
    ],
  ];
  it.each(cases)('%s', async (_name, patch, errors) => {
    await expectEverywhere(patch, errors);
  });
});

describe('a value only the database refuses is still named', () => {
  it('a @db.Real past a 4-byte float: PostgreSQL reports 22003 without a column; the field is found by its value', async () => {
    const errors = [
      {
        field: 'ratio',
        rule: 'max',
        message: 'ratio: expected a number that fits a 4-byte float (0, or a magnitude from about 1.2e-38 to 3.4e38)',
      },
    ];
    await expectEverywhere({ ratio: 1e39 }, errors);
    await expectEverywhere({ ratio: -1e-50 }, errors);
    expect((await create({ ratio: 0.25 })).ratio).toBe(0.25);
  });
});

describe('UUIDs of any version', () => {
  it('00000000-0000-0000-0000-000000000001 works as a key, a foreign key, in filters, in the path and in bulk (was "Invalid UUID")', async () => {
    const row = await create({ id: ZERO_UUID });
    expect(row.id).toBe(ZERO_UUID);
    const child = await create({ parentId: ZERO_UUID });
    expect(child.parentId).toBe(ZERO_UUID);
    expect((await t.request('GET', `${BASE}/${ZERO_UUID}?select=id`)).body).toEqual({ data: { id: ZERO_UUID } });
    const patched = await t.request('PATCH', `${BASE}/${ZERO_UUID}`, { body: { title: 'renamed' } });
    expect(patched.status, patched.text).toBe(200);
    const byFilter = await t.request('GET', `${BASE}?parentId=equals.${ZERO_UUID}&select=id`);
    expect(byFilter.body.data).toEqual([{ id: child.id }]);
    const many = await t.request('PATCH', `${BASE}?id=equals.${ZERO_UUID}`, { body: { parentId: null } });
    expect(many.body).toEqual({ data: { count: 1 } });
    const bulk = await t.request('POST', `${BASE}/_bulk`, {
      body: { items: [valid({ id: '00000000-0000-0000-0000-000000000002', parentId: ZERO_UUID })] },
    });
    expect(bulk.status, bulk.text).toBe(201);
    const removed = await t.request('DELETE', `${BASE}/_bulk`, {
      body: { ids: ['00000000-0000-0000-0000-000000000002'] },
    });
    expect(removed.status, removed.text).toBe(200);
  });
});

describe('composite unique keys conflict as one', () => {
  it('@@unique([series, number]) taken → 409 with one entry naming both (was two separate field errors)', async () => {
    const other = await create({});
    const before = await invoiceRows();
    const conflict = [
      { field: 'series,number', rule: 'unique', message: 'the combination of series and number is already used' },
    ];
    const detail = 'an Invoice record with the same series and number already exists';
    expectErrors(
      await t.request('POST', BASE, { body: valid({ series: existing.series, number: existing.number }) }),
      409,
      BASE,
      conflict,
      detail,
    );
    const path = `${BASE}/${other.id}`;
    expectErrors(await t.request('PATCH', path, { body: { number: existing.number } }), 409, path, conflict, detail);
    const many = `${BASE}?id=equals.${other.id}`;
    expectErrors(await t.request('PATCH', many, { body: { number: existing.number } }), 409, many, conflict, detail);
    const bulk = await t.request('POST', `${BASE}/_bulk`, { body: { items: [valid({ number: existing.number })] } });
    expect(bulk.body.data.errors).toEqual([{ index: 0, message: detail }]);
    expect(await invoiceRows()).toEqual(before);
  });

  it('a composite @@id taken → 409 naming both key fields; in a bulk item too', async () => {
    const body = { invoiceId: existing.id, position: 7, amount: 1 };
    expect((await t.request('POST', LINES, { body })).status).toBe(201);
    expectErrors(
      await t.request('POST', LINES, { body }),
      409,
      LINES,
      [
        {
          field: 'invoiceId,position',
          rule: 'unique',
          message: 'the combination of invoiceId and position is already used',
        },
      ],
      'an InvoiceLine record with the same invoiceId and position already exists',
    );
    const bulk = await t.request('POST', `${LINES}/_bulk`, { body: { items: [body] } });
    expect(bulk.body.data.errors).toEqual([
      { index: 0, message: 'an InvoiceLine record with the same invoiceId and position already exists' },
    ]);
  });

  it('a single-field key stays one field error', async () => {
    const res = await t.request('POST', BASE, { body: valid({ id: existing.id }) });
    expectErrors(
      res,
      409,
      BASE,
      [{ field: 'id', rule: 'unique', message: 'id must be unique' }],
      'an Invoice record with the same id already exists',
    );
  });
});

describe('missing and unknown fields in one answer', () => {
  const MISSING = [
    { field: 'series', rule: 'required', message: 'series is required: expected a string of at most 4 characters' },
    {
      field: 'number',
      rule: 'required',
      message: 'number is required: expected a whole number from -2147483648 to 2147483647',
    },
    { field: 'title', rule: 'required', message: 'title is required: expected a string' },
    { field: 'total', rule: 'required', message: `total is required: ${DECIMAL_6_2}` },
    { field: 'dueDate', rule: 'required', message: `dueDate is required: ${DATE_TIME}` },
  ];

  it('{"titel":"x"} → the unknown field and every missing required one (was only the unknown field)', async () => {
    const before = await invoiceRows();
    const res = await t.request('POST', BASE, { body: { titel: 'x' } });
    expectErrors(res, 422, BASE, [
      { field: 'titel', rule: 'unknown_field', message: 'Invoice has no field "titel"' },
      ...MISSING,
    ]);
    const bulk = await t.request('POST', `${BASE}/_bulk`, { body: { items: [{ titel: 'x', createdAt: 'now' }] } });
    expect(bulk.body.data.errors).toEqual([
      {
        index: 0,
        message:
          'Invoice has no field "titel"; createdAt is set by the server and cannot be written; series is required: expected a string of at most 4 characters; number is required: expected a whole number from -2147483648 to 2147483647; title is required: expected a string; … and 2 more',
      },
    ]);
    expect(await invoiceRows()).toEqual(before);
  });

  it('unknown, read-only and invalid fields of a PATCH together', async () => {
    const path = `${BASE}/${existing.id}`;
    expectErrors(await t.request('PATCH', path, { body: { id: ZERO_UUID, titel: 'x', total: 'lots' } }), 422, path, [
      { field: 'id', rule: 'read_only', message: "id is part of the record's key and cannot be changed" },
      { field: 'titel', rule: 'unknown_field', message: 'Invoice has no field "titel"' },
      { field: 'total', rule: 'format', message: `total: ${DECIMAL_6_2}` },
    ]);
  });

  it('the list is capped as every Problem is: 20 entries and errorsOmitted', async () => {
    const body = Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`extra${i}`, i]));
    const res = await t.request('POST', BASE, { body });
    expect(res.status, res.text).toBe(422);
    expect(res.body.errors).toHaveLength(20);
    expect(res.body.errorsOmitted).toBe(15);
    expect(res.body.errors[0]).toEqual({
      field: 'extra0',
      rule: 'unknown_field',
      message: 'Invoice has no field "extra0"',
    });
  });
});

describe('the _query body says in words what each member takes (was zod text and a pattern)', () => {
  it.each([
    [
      'a bad sort direction',
      { sort: [{ field: 'total', direction: 'sideways' }] },
      'sort[0].direction',
      'expected asc or desc',
    ],
    [
      'a page size out of range',
      { pagination: { first: 0 } },
      'pagination.first',
      'expected a whole number from 1 to 1000',
    ],
    [
      'a skip that is not a number',
      { pagination: { skip: 'ten' } },
      'pagination.skip',
      'expected a whole number from 0 to 100000000',
    ],
    [
      'filter not an array',
      { filter: { field: 'total' } },
      'filter',
      'expected a JSON array of at most 100 conditions',
    ],
    [
      'a filter item not an object',
      { filter: ['total=gt.1'] },
      'filter[0]',
      'expected an object { "field", "operator", "value" }',
    ],
    [
      'a select item without its field',
      { select: [{ alias: 'x' }] },
      'select[0].field',
      'expected a field name (a string of 1 to 300 characters)',
    ],
    ['an unknown member', { limit: 5 }, 'limit', 'unknown member "limit"'],
    ['not an object', [1], 'body', 'expected an object { "filter", "sort", "pagination", "select" }'],
  ])('%s → 400 naming the member', async (_name, body, field, message) => {
    const path = `${BASE}/_query`;
    const res = await t.request('POST', path, { body });
    expectProblemAt(res, 400, path, 'invalid-parameter');
    expect(res.body.detail, res.text).toBe(`${field}: ${message}`);
    expect(res.body.errors, res.text).toEqual([{ field, rule: 'invalid', message }]);
  });
});
