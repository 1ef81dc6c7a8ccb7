// Typed operands (runtime/query/operands.ts) and encrypted cursors (cursor.ts), without a database.
// docs/api.md "Operators"; docs/permissions.md "Reading" (cursors are encrypted). One row per case.
import { describe, expect, it } from 'vitest';
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import type { FieldSpec } from '../../runtime/model/index.ts';
import {
  CursorError,
  cursorCodec,
  cursorOwner,
  FilterValueError,
  MAX_IN_LIST,
  operandValue,
  queryFingerprint,
  roleOperand,
  scalarValue,
  type Operator,
} from '../../runtime/query/index.ts';
import { catalog, table, USER_ID } from '../support/query-unit.ts';

const of = (t: string, name: string): FieldSpec => table(t).fields.get(name)!;
const synthetic = (type: FieldSpec['type']): FieldSpec => ({
  name: `a${type}`,
  column: `a${type}`,
  type,
  list: false,
  nullable: true,
  id: false,
  unique: false,
  dbDefault: false,
  managed: false,
});
const F = {
  int: of('Order', 'id'),
  float: of('Order', 'total'),
  enum: of('Order', 'status'),
  text: of('Order', 'note'),
  date: of('Order', 'placedAt'),
  uuid: of('Order', 'customerId'),
  decimal: of('Product', 'price'),
  tags: of('Product', 'tags'),
  bool: of('Customer', 'vip'),
  varchar: of('City', 'country'),
  bigint: synthetic('BigInt'),
  json: synthetic('Json'),
  bytes: synthetic('Bytes'),
};

interface OperandCase {
  given: { field: keyof typeof F; op?: Operator; raw?: unknown; list?: unknown[] };
  /** The bound value, or a RegExp the FilterValueError message must match. */
  want: unknown;
}

const many = (n: number) => Array.from({ length: n }, (_, i) => String(i));

describe('operandValue', () => {
  it.each<[string, OperandCase]>([
    ['Int from text', { given: { field: 'int', raw: '42' }, want: 42 }],
    ['Int from JSON', { given: { field: 'int', raw: 7 }, want: 7 }],
    ['Int lowest', { given: { field: 'int', raw: '-2147483648' }, want: -2147483648 }],
    ['Int highest', { given: { field: 'int', raw: '2147483647' }, want: 2147483647 }],
    ['Int above the range', { given: { field: 'int', raw: '2147483648' }, want: /32-bit integer/ }],
    ['Int below the range', { given: { field: 'int', raw: '-2147483649' }, want: /32-bit integer/ }],
    ['Int with a fraction', { given: { field: 'int', raw: '1.5' }, want: /32-bit integer/ }],
    ['Int, JSON fraction', { given: { field: 'int', raw: 3.5 }, want: /32-bit integer/ }],
    ['Int, not a number', { given: { field: 'int', raw: '0x10' }, want: /32-bit integer/ }],
    [
      'BigInt highest stays text',
      { given: { field: 'bigint', raw: '9223372036854775807' }, want: '9223372036854775807' },
    ],
    ['BigInt lowest', { given: { field: 'bigint', raw: '-9223372036854775808' }, want: '-9223372036854775808' }],
    ['BigInt above the range', { given: { field: 'bigint', raw: '9223372036854775808' }, want: /64-bit integer/ }],
    ['BigInt from JSON', { given: { field: 'bigint', raw: 12 }, want: '12' }],
    ['Float with an exponent', { given: { field: 'float', raw: '1e3' }, want: 1000 }],
    ['Float without a leading digit', { given: { field: 'float', raw: '.5' }, want: 0.5 }],
    ['Float: Infinity', { given: { field: 'float', raw: 'Infinity' }, want: /takes a number/ }],
    ['Float: overflow', { given: { field: 'float', raw: '1e999' }, want: /takes a number/ }],
    ['Float: NaN', { given: { field: 'float', raw: 'NaN' }, want: /takes a number/ }],
    ['Decimal text stays text', { given: { field: 'decimal', raw: '10.25' }, want: '10.25' }],
    ['Decimal from JSON', { given: { field: 'decimal', raw: 10.25 }, want: 10.25 }],
    ['Boolean', { given: { field: 'bool', raw: 'false' }, want: false }],
    ['Boolean: yes', { given: { field: 'bool', raw: 'yes' }, want: /true or false/ }],
    ['String', { given: { field: 'text', raw: 'abc' }, want: 'abc' }],
    ['String from a JSON number', { given: { field: 'text', raw: 5 }, want: /takes text/ }],
    ['String with NUL', { given: { field: 'text', raw: 'a\u0000b' }, want: /NUL/ }],
    ['String of 10001 characters', { given: { field: 'text', raw: 'x'.repeat(10_001) }, want: /longer than 10000/ }],
    ['UUID', { given: { field: 'uuid', raw: USER_ID.toUpperCase() }, want: USER_ID.toUpperCase() }],
    ['not a UUID', { given: { field: 'uuid', raw: '8d5e2c1a-3b4f-4c6d-9e7f' }, want: /takes a UUID/ }],
    [
      'a UUID takes no text operators',
      {
        given: { field: 'uuid', op: 'contains', raw: '8d5e' },
        want: /contains needs a text field; customerId is Uuid/,
      },
    ],
    ['VarChar is text', { given: { field: 'varchar', op: 'starts_with', raw: 'N' }, want: 'N' }],
    ['enum', { given: { field: 'enum', raw: 'paid' }, want: 'paid' }],
    ['enum: not a value', { given: { field: 'enum', raw: 'closed' }, want: /one of open, paid, shipped, cancelled/ }],
    ['enum: case matters', { given: { field: 'enum', raw: 'OPEN' }, want: /one of/ }],
    ['date', { given: { field: 'date', raw: '2024-02-29' }, want: '2024-02-29T00:00:00.000Z' }],
    [
      'date-time with an offset',
      { given: { field: 'date', raw: '2024-01-01T10:00:00+02:00' }, want: '2024-01-01T08:00:00.000Z' },
    ],
    ['date-time, Z', { given: { field: 'date', raw: '2024-01-01 10:00:00.5Z' }, want: '2024-01-01T10:00:00.500Z' }],
    ['2024-02-30 does not exist', { given: { field: 'date', raw: '2024-02-30' }, want: /ISO 8601/ }],
    ['2023-02-29 does not exist', { given: { field: 'date', raw: '2023-02-29' }, want: /ISO 8601/ }],
    ['month 13', { given: { field: 'date', raw: '2024-13-01' }, want: /ISO 8601/ }],
    ['year 0000', { given: { field: 'date', raw: '0000-06-01' }, want: /years 0001 to 9999/ }],
    ['year 9999', { given: { field: 'date', raw: '9999-12-31' }, want: '9999-12-31T00:00:00.000Z' }],
    ['a word', { given: { field: 'date', raw: 'yesterday' }, want: /ISO 8601/ }],
    ['a number for a date', { given: { field: 'date', raw: 1700000000 }, want: /ISO 8601/ }],
    ['equals null', { given: { field: 'int', raw: null }, want: null }],
    ['not_equals null', { given: { field: 'date', op: 'not_equals', raw: null }, want: null }],
    ['gt null', { given: { field: 'int', op: 'gt', raw: null }, want: /32-bit integer/ }],
    [
      'gt on a Boolean',
      { given: { field: 'bool', op: 'gt', raw: 'true' }, want: /gt needs a number, date or text field/ },
    ],
    [
      'Json only takes is_empty',
      { given: { field: 'json', op: 'equals', raw: '{}' }, want: /Json fields only take is_empty and is_not_empty/ },
    ],
    ['Json is_empty', { given: { field: 'json', op: 'is_empty', raw: 'true' }, want: true }],
    ['Bytes is_not_empty.false', { given: { field: 'bytes', op: 'is_not_empty', raw: 'false' }, want: false }],
    [
      'is_empty takes a flag',
      { given: { field: 'text', op: 'is_empty', raw: 'maybe' }, want: /is_empty takes true or false/ },
    ],
    ['a list contains an element', { given: { field: 'tags', op: 'contains', raw: 'red' }, want: 'red' }],
    [
      'a list takes no equals',
      { given: { field: 'tags', op: 'equals', raw: 'red' }, want: /list fields take contains/ },
    ],
    ['in', { given: { field: 'int', op: 'in', list: ['1', 2] }, want: [1, 2] }],
    ['in without a list', { given: { field: 'int', op: 'in', raw: '1' }, want: /in takes a list/ }],
    ['in with no values', { given: { field: 'int', op: 'not_in', list: [] }, want: /at least one value/ }],
    [
      `in with ${MAX_IN_LIST} values`,
      { given: { field: 'int', op: 'in', list: many(MAX_IN_LIST) }, want: expect.arrayContaining([999]) },
    ],
    [
      `in with ${MAX_IN_LIST + 1} values`,
      { given: { field: 'int', op: 'in', list: many(MAX_IN_LIST + 1) }, want: /at most 1000 values/ },
    ],
    ['in checks every value', { given: { field: 'enum', op: 'in', list: ['open', 'nope'] }, want: /one of/ }],
    [
      'between',
      {
        given: { field: 'date', op: 'between', list: ['2024-01-01', '2024-12-31'] },
        want: ['2024-01-01T00:00:00.000Z', '2024-12-31T00:00:00.000Z'],
      },
    ],
    [
      'between three values',
      { given: { field: 'int', op: 'between', list: ['1', '2', '3'] }, want: /between takes two values/ },
    ],
    ['today.true', { given: { field: 'date', op: 'today', raw: 'true' }, want: true }],
    ['today.false', { given: { field: 'date', op: 'today', raw: 'false' }, want: /today takes the value true/ }],
    [
      'this_month on an Int',
      { given: { field: 'int', op: 'this_month', raw: 'true' }, want: /this_month needs a DateTime field/ },
    ],
    ['last_days 700000', { given: { field: 'date', op: 'last_days', raw: '700000' }, want: 700000 }],
    ['last_days 700001', { given: { field: 'date', op: 'last_days', raw: '700001' }, want: /from 1 to 700000/ }],
    ['last_weeks 100000', { given: { field: 'date', op: 'last_weeks', raw: 100000 }, want: 100000 }],
    ['last_weeks 100001', { given: { field: 'date', op: 'last_weeks', raw: '100001' }, want: /from 1 to 100000/ }],
    ['last_months 23000', { given: { field: 'date', op: 'last_months', raw: '23000' }, want: 23000 }],
    ['last_months 23001', { given: { field: 'date', op: 'last_months', raw: 23001 }, want: /from 1 to 23000/ }],
    ['last_days 0', { given: { field: 'date', op: 'last_days', raw: '0' }, want: /from 1 to/ }],
    ['last_days 1.5', { given: { field: 'date', op: 'last_days', raw: '1.5' }, want: /from 1 to/ }],
    ['last_days, eight digits', { given: { field: 'date', op: 'last_days', raw: '00000007' }, want: /from 1 to/ }],
  ])('%s', (_name, { given, want }) => {
    let got: unknown;
    try {
      got = operandValue(F[given.field], given.op ?? 'equals', given.raw, given.list);
    } catch (error) {
      if (!(error instanceof FilterValueError)) throw error;
      got = error;
    }
    if (want instanceof RegExp) {
      expect(got).toBeInstanceOf(FilterValueError);
      expect((got as Error).message).toMatch(want);
    } else expect(got).toEqual(want);
  });

  // BUG (operands.ts scalarValue, DateTime): a date-time without a zone passes the pattern and is read
  // by `new Date()` in the server process's local time zone, so the same filter selects other rows
  // depending on TZ. Bodies refuse it (docs/api.md: "date-time with offset, or a date").
  it('a date-time without a zone does not depend on the server time zone', () => {
    const saved = process.env.TZ;
    const read = (raw: string) => {
      try {
        return scalarValue(F.date, raw);
      } catch (error) {
        if (error instanceof FilterValueError) return 'refused';
        throw error;
      }
    };
    try {
      process.env.TZ = 'America/New_York';
      for (const raw of ['2024-01-01T10:00', '2024-01-01 10:00:00'])
        expect(['refused', '2024-01-01T10:00:00.000Z']).toContain(read(raw));
    } finally {
      if (saved === undefined) delete process.env.TZ;
      else process.env.TZ = saved;
    }
  });
});

describe('roleOperand', () => {
  it.each<
    [
      string,
      { given: { table: string; path: string; op: Operator; value: unknown }; want: { value: unknown } | undefined },
    ]
  >([
    [
      'a direct field',
      { given: { table: 'Order', path: 'customerId', op: 'equals', value: USER_ID }, want: { value: USER_ID } },
    ],
    [
      'through a relation the caller need not read',
      {
        given: { table: 'OrderItem', path: 'order.customerId', op: 'equals', value: USER_ID },
        want: { value: USER_ID },
      },
    ],
    [
      'a text into an Int',
      { given: { table: 'Customer', path: 'cityId', op: 'equals', value: '3' }, want: { value: 3 } },
    ],
    ['a UUID into an Int', { given: { table: 'Order', path: 'id', op: 'equals', value: USER_ID }, want: undefined }],
    [
      'an email into a UUID',
      { given: { table: 'Order', path: 'customerId', op: 'equals', value: 'a@b.c' }, want: undefined },
    ],
    [
      'an operator list',
      {
        given: { table: 'Order', path: 'status', op: 'in', value: ['open', 'paid'] },
        want: { value: ['open', 'paid'] },
      },
    ],
    ['an unknown field', { given: { table: 'Order', path: 'nope', op: 'equals', value: 1 }, want: undefined }],
    ['an unknown relation', { given: { table: 'Order', path: 'nope.id', op: 'equals', value: 1 }, want: undefined }],
    ['an unknown table', { given: { table: 'Nope', path: 'id', op: 'equals', value: 1 }, want: undefined }],
  ])('%s', (_name, { given, want }) => {
    expect(roleOperand(catalog, given.table, given.path.split('.'), given.op, given.value)).toEqual(want);
  });
});

describe('cursors', () => {
  const codec = cursorCodec('unit-test-secret');
  const fingerprint = queryFingerprint({
    table: 'Order',
    order: [{ field: 'note', direction: 'asc' }],
    where: 'status=paid',
  });
  const values = ['hidden note: VIP discount 42', null, '1234567'];
  const owner = cursorOwner('key_a', 'master');

  it('round trip', () => {
    const cursor = codec.encode(owner, fingerprint, values);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(codec.decode(owner, fingerprint, cursor)).toEqual(values);
    expect(cursorCodec('unit-test-secret').decode(owner, fingerprint, cursor)).toEqual(values); // another process, same secret
    expect(codec.encode(owner, fingerprint, values)).not.toBe(cursor); // a fresh nonce each time
  });

  it('keeps the layout nonce, tag, ciphertext: a cursor sealed as before still opens', () => {
    const key = createHash('sha256').update('svcgen cursor key\nunit-test-secret').digest();
    const nonce = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, nonce);
    cipher.setAAD(Buffer.from(owner, 'utf8'));
    const sealed = Buffer.concat([
      cipher.update(JSON.stringify({ q: fingerprint, v: values }), 'utf8'),
      cipher.final(),
    ]);
    const earlier = Buffer.concat([nonce, cipher.getAuthTag(), sealed]).toString('base64url');
    expect(codec.decode(owner, fingerprint, earlier)).toEqual(values);
  });

  it('binds each cursor to its own owner when owners alternate', () => {
    const other = cursorOwner('key_b', 'master');
    const mine = codec.encode(owner, fingerprint, values);
    const theirs = codec.encode(other, fingerprint, ['x']);
    const mineAgain = codec.encode(owner, fingerprint, ['y']);
    expect(codec.decode(owner, fingerprint, mine)).toEqual(values);
    expect(codec.decode(other, fingerprint, theirs)).toEqual(['x']);
    expect(codec.decode(owner, fingerprint, mineAgain)).toEqual(['y']);
    for (const [who, cursor] of [
      [other, mine],
      [owner, theirs],
      [other, mineAgain],
    ] as const)
      expect(() => codec.decode(who, fingerprint, cursor)).toThrow('the cursor was altered or comes from elsewhere');
  });

  it('the payload is not readable in the cursor', () => {
    const cursor = codec.encode(owner, fingerprint, values);
    const bytes = Buffer.from(cursor, 'base64url');
    for (const text of [bytes.toString('utf8'), bytes.toString('latin1')]) {
      for (const visible of ['hidden note', 'VIP discount', '1234567', fingerprint, '{"q"', '"v":'])
        expect(text).not.toContain(visible);
    }
    for (const visible of [
      'hidden',
      '1234567',
      fingerprint,
      Buffer.from(values[0]!).toString('base64url').slice(0, 12),
    ])
      expect(cursor).not.toContain(visible);
  });

  it.each<[string, { given: (cursor: string) => [string, string, string]; want: RegExp }]>([
    ...[0, 12, 28, -1].map((at): [string, { given: (c: string) => [string, string, string]; want: RegExp }] => [
      `a flipped bit at byte ${at} (${at === 0 ? 'nonce' : at === 12 ? 'tag' : 'payload'})`,
      {
        given: (c) => {
          const b = Buffer.from(c, 'base64url');
          b[at < 0 ? b.length + at : at]! ^= 1;
          return [owner, fingerprint, b.toString('base64url')];
        },
        want: /altered or comes from elsewhere/,
      },
    ]),
    [
      'another query',
      { given: (c) => [owner, queryFingerprint({ table: 'Order' }), c], want: /different sort or filter/ },
    ],
    [
      'another secret',
      {
        given: () => [owner, fingerprint, cursorCodec('another-secret').encode(owner, fingerprint, values)],
        want: /altered or comes from elsewhere/,
      },
    ],
    ['not base64url', { given: (c) => [owner, fingerprint, `${c.slice(0, 10)}+/=`], want: /not a cursor/ }],
    // Another caller's cursor is refused exactly as a forged one: it says nothing of whose it is.
    [
      "another caller's (API key)",
      { given: (c) => [cursorOwner('key_b', 'master'), fingerprint, c], want: /altered or comes from elsewhere/ },
    ],
    [
      'a user with the same id as the key',
      { given: (c) => [cursorOwner('user:key_a', 'master'), fingerprint, c], want: /altered or comes from elsewhere/ },
    ],
    [
      'the same caller in another environment',
      { given: (c) => [cursorOwner('key_a', 'staging'), fingerprint, c], want: /altered or comes from elsewhere/ },
    ],
    ['too short', { given: () => [owner, fingerprint, 'AAAA'], want: /not a cursor/ }],
    ['too long', { given: (c) => [owner, fingerprint, c.repeat(200)], want: /not a cursor/ }],
    ['truncated', { given: (c) => [owner, fingerprint, c.slice(0, -4)], want: /altered or comes from elsewhere/ }],
  ])('refused: %s', (_name, { given, want }) => {
    const [by, fp, cursor] = given(codec.encode(owner, fingerprint, values));
    expect(() => codec.decode(by, fp, cursor)).toThrow(CursorError);
    expect(() => codec.decode(by, fp, cursor)).toThrow(want);
  });
});
