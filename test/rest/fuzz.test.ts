// Hostile-input fuzzing of the data API (docs/api.md §6: bad input of any kind gets a 4xx with a
// clear body, never a 500, and changes nothing). A seeded PRNG makes 4,000 malformed requests: list,
// _aggregate and _query reads with wild parameters, and writes that are invalid by construction
// (every write carries a "poison" that no valid request has; bulk/single deletes only name keys
// that do not exist), so that any row change is itself a bug.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../support/server.ts';
import { OPERATORS } from '../../runtime/model/index.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20240611);
const COUNT = 4000;
const CONCURRENCY = 20;
const BASE = '/gw/api/rest';
let t: TestServer;
const logs: string[] = [];
let cursor = '';

const TABLES = ['City', 'Customer', 'Product', 'Order', 'OrderItem'] as const;
type Table = (typeof TABLES)[number];
const FIELDS: Record<Table, Record<string, string>> = {
  City: { id: 'Int', name: 'String', country: 'String', createdAt: 'DateTime', updatedAt: 'DateTime' },
  Customer: {
    id: 'Uuid',
    email: 'String',
    name: 'String',
    vip: 'Boolean',
    cityId: 'Int',
    createdAt: 'DateTime',
    updatedAt: 'DateTime',
  },
  Product: {
    id: 'Int',
    sku: 'String',
    title: 'String',
    price: 'Decimal',
    tags: 'List',
    createdAt: 'DateTime',
    updatedAt: 'DateTime',
  },
  Order: {
    id: 'Int',
    status: 'Enum',
    total: 'Float',
    note: 'String',
    placedAt: 'DateTime',
    customerId: 'Uuid',
    createdAt: 'DateTime',
    updatedAt: 'DateTime',
  },
  OrderItem: { orderId: 'Int', productId: 'Int', quantity: 'Int', createdAt: 'DateTime', updatedAt: 'DateTime' },
};
const TARGETS: Record<Table, Record<string, Table>> = {
  City: { customers: 'Customer' },
  Customer: { city: 'City', orders: 'Order' },
  Product: { items: 'OrderItem' },
  Order: { customer: 'Customer', items: 'OrderItem' },
  OrderItem: { order: 'Order', product: 'Product' },
};
const RELATIONS = Object.fromEntries(TABLES.map((n) => [n, Object.keys(TARGETS[n])])) as Record<Table, string[]>;
// Every operator of the query language (docs/api.md §5.5), valid or not for the field it lands on.
const OPS: readonly string[] = OPERATORS;
const HOSTILE = [
  `'; drop table "Order"; --`,
  `" or 1=1 --`,
  `1); delete from env_master."City"; --`,
  `pg_sleep(5)`,
  `$1`,
  `\\`,
  `%`,
  `_`,
  `*`,
  `'`,
  `"`,
  `;`,
  `--`,
  `/*`,
  `(`,
  `)`,
  `()`,
  `,`,
  `.`,
  `..`,
  `:`,
  `::text`,
  `a\u0000b`,
  `\u0000`,
  `x\u0000`,
  `'\u0000; drop table "City"; --`,
  `😀`,
  `👩‍👩‍👧`,
  `𝕏`,
  `\u202e`,
  `ß`,
  `İ`,
  `null`,
  `NaN`,
  `Infinity`,
  `-0`,
  `1e309`,
  `0x10`,
  `true`,
  `[]`,
  `{}`,
  `__proto__`,
  `constructor`,
  `toString`,
  `$user.id`,
  `$context.x`,
  `col.`,
  `env_master."Order"`,
  `information_schema.tables`,
  ` `,
  ``,
  `\t\n`,
  `\r\n`,
  `é`,
  `ﾟ`,
  `<script>`,
  `${'{'}x}`,
  `id.equals.1`,
  `or(`,
  `and()`,
  `not.`,
  `-`,
  `+`,
  `!`,
  `~`,
  `&`,
  `=`,
  `#`,
  `?`,
];
const RAW_NUMBERS = [
  '1e309',
  '-1e309',
  `1${'0'.repeat(400)}`,
  `0.${'0'.repeat(400)}1`,
  '-0',
  '1E+2',
  '9007199254740993',
  '2147483648',
  '-2147483649',
  '1.5e-400',
];
/** Integers no seeded row has (seeded ids are 7,000,001 and up). */
const ABSENT_INTS = [-1, 0, 1, 2, 3, 42, 999, 2147483647, 1.5, -2147483648];
const CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'application/jsonx',
  'json',
  '*/*',
  'application/merge-patch+json',
  'application/json, text/plain',
  'application/problem+json',
  'application/json; charset=latin1',
];

let prng = SEED >>> 0; // mulberry32
function rnd(): number {
  prng = (prng + 0x6d2b79f5) >>> 0;
  let x = Math.imul(prng ^ (prng >>> 15), 1 | prng);
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
}
const int = (n: number) => Math.floor(rnd() * n);
const chance = (p: number) => rnd() < p;
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
const times = <T>(n: number, f: (i: number) => T) => Array.from({ length: n }, (_, i) => f(i));
const uuid = () =>
  times(32, () => '0123456789abcdef'[int(16)])
    .join('')
    .replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-');

/** While set, no overlong strings or lists (deeply nested groups should reach the parser, not hit the URL limit). */
let small = false;
function str(): string {
  const r = rnd();
  if (r < 0.35 || (small && r < 0.38)) return pick(HOSTILE);
  if (r < 0.38) return pick(HOSTILE).repeat(1 + int(3)) + 'x'.repeat(chance(0.3) ? 100_000 : int(300));
  if (r < 0.6) return String(pick([...ABSENT_INTS, ...RAW_NUMBERS, int(1e6), -int(1e6), rnd()]));
  return times(1 + int(12), () =>
    chance(0.8)
      ? String.fromCharCode(32 + int(95))
      : String.fromCodePoint(pick([0x80 + int(0x700), 0x4e00 + int(500), 0x1f600 + int(80), 0xe000 + int(100)])),
  ).join('');
}
/** Query-string text: percent-encoded, keeping the punctuation the syntax uses; sometimes raw junk. */
const enc = (s: string) => encodeURIComponent(s).replace(/%2C/g, ',').replace(/%3A/g, ':').replace(/%2E/g, '.');
const junk = () => pick(['%zz', '%', '%E0%A4%A', '%C0%80', '%FF%FE', '%25', '%0A', '%00', '&', '=', '==', '%%']);
/** Half of the requests are "near-valid": real fields, operators and relations, hostile values. */
let near = false;
const fieldName = (table: Table): string => {
  if (near && chance(0.92)) {
    if (chance(0.8)) return pick(Object.keys(FIELDS[table]));
    const rel = pick(RELATIONS[table]);
    return `${rel}.${pick(Object.keys(FIELDS[TARGETS[table][rel]!]))}`;
  }
  const r = rnd();
  if (r < 0.55) return pick(Object.keys(FIELDS[table]));
  if (r < 0.7) {
    const rel = pick(RELATIONS[table]);
    return `${rel}.${chance(0.7) ? pick(['id', 'name', 'email', 'status', 'total', 'sku', 'quantity', 'orderId']) : str()}`;
  }
  if (r < 0.75) return `col.${pick(Object.keys(FIELDS[table]))}`;
  return str();
};
const op = () => (chance(near ? 0.97 : 0.8) ? pick(OPS) : str());
/** Values that fit a field's type but sit on its edges (reach the database instead of the validator). */
const TYPED: Record<string, () => string> = {
  Int: () => String(pick([...ABSENT_INTS, ...RAW_NUMBERS, '007', '+1', '1_000', ' 1'])),
  Float: () => String(pick([...RAW_NUMBERS, 'NaN', '-Infinity', '1e-400', '0.1', '.5', '5.', '1e2'])),
  Decimal: () => String(pick([...RAW_NUMBERS, '99999999.999', '0.001', '-0.00'])),
  DateTime: () =>
    pick([
      '2024-01-01',
      '0000-01-01',
      '9999-12-31T23:59:59.999Z',
      '2024-02-30',
      '2024-13-01T00:00:00Z',
      '2024-01-01T25:61:61Z',
      '2024-01-01T00:00:00+99:00',
      '+275760-09-13T00:00:00Z',
      '-000001-01-01T00:00:00Z',
      '1970-01-01T00:00:00.123456789Z',
      '2024-01-01T00:00:00\u0000',
    ]),
  Uuid: () =>
    pick([
      uuid(),
      uuid().toUpperCase(),
      `{${uuid()}}`,
      uuid().replace(/-/g, ''),
      '00000000-0000-0000-0000-000000000000',
      `${uuid()}\u0000`,
    ]),
  Enum: () => pick(['open', 'paid', 'OPEN', 'open\u0000', 'cancelled ']),
  Boolean: () => pick(['true', 'false', 'TRUE', '1', 't', 'yes']),
  String: str,
  List: str,
};
function typeOf(table: Table, name: string): string | undefined {
  const [head, rest] = name.split('.', 2) as [string, string?];
  if (rest !== undefined && Object.hasOwn(TARGETS[table], head))
    return Object.hasOwn(FIELDS[TARGETS[table][head]!], rest) ? FIELDS[TARGETS[table][head]!][rest] : undefined;
  return Object.hasOwn(FIELDS[table], name) ? FIELDS[table][name] : undefined;
}
function value(o: string, type?: string): string {
  const scalar = () => (near && type && chance(0.7) ? TYPED[type]!() : str());
  if ((o === 'in' || o === 'not_in') && chance(0.8))
    return `(${times(chance(0.05) && !small ? 1000 + int(4001) : int(8), scalar)
      .map(enc)
      .join(',')}${chance(0.1) ? '' : ')'}`;
  if (o === 'between') return `${enc(scalar())},${enc(scalar())}`;
  return chance(near ? 0.01 : 0.05) ? junk() : enc(scalar());
}
const CMP = ['equals', 'not_equals', 'gt', 'gte', 'lt', 'lte', 'in', 'not_in', 'between', 'is_empty', 'is_not_empty'];
const OPS_FOR: Record<string, string[]> = {
  String: [...CMP, 'contains', 'starts_with', 'ends_with'],
  Int: CMP,
  Float: CMP,
  Decimal: CMP,
  DateTime: [...CMP, 'today', 'yesterday', 'this_week', 'this_month', 'last_days', 'last_weeks', 'last_months'],
  Uuid: ['equals', 'not_equals', 'in', 'not_in', 'is_empty', 'is_not_empty'],
  Enum: ['equals', 'not_equals', 'in', 'not_in', 'is_empty', 'is_not_empty'],
  Boolean: ['equals', 'not_equals', 'is_empty'],
  List: ['contains', 'is_empty', 'is_not_empty'],
};
function condition(table: Table, sep = '.'): string {
  const f = fieldName(table);
  const type = typeOf(table, f);
  const o = near && type && chance(0.95) ? pick(OPS_FOR[type]!) : op();
  if (near && /^(is_|today|yesterday|this_)/.test(o) && chance(0.7))
    return `${enc(f)}${sep}${o}.${pick(['true', 'false', 'TRUE', '1', ''])}`;
  if (near && o.startsWith('last_') && chance(0.7))
    return `${enc(f)}${sep}${o}.${pick(['0', '-1', '1', '2147483647', '99999999', '1e309', '1.5'])}`;
  return `${enc(f)}${sep}${enc(o)}.${value(chance(0.9) ? o : op(), type)}`;
}
/** One chain of nested groups (so 50 levels stay a short URL), each with a few conditions beside it. */
function group(table: Table, depth: number): string {
  const items = times(int(depth > 0 ? 2 : 3) + (depth > 0 ? 0 : 1), () => condition(table));
  if (depth > 0) items.splice(int(items.length + 1), 0, group(table, depth - 1));
  return `${pick(['or', 'and', 'not', 'or', chance(0.5) ? str() : ''])}(${items.join(',')})`;
}
const logicParam = (table: Table) => {
  const depth = chance(0.15) ? 50 : int(6);
  small = depth > 6;
  const inner = group(table, depth);
  small = false;
  return `${pick(['or', 'and', 'not'])}=${chance(0.9) ? inner.slice(inner.indexOf('(')) : inner}`;
};
function select(table: Table, depth: number): string {
  return times(1 + int(4), () => {
    const r = rnd();
    if (r < 0.3 && depth > 0) return `${enc(pick([...RELATIONS[table], str()]))}(${select(table, depth - 1)})`;
    if (r < 0.5) return `${enc(fieldName(table))}:${enc(str())}`;
    if (r < 0.6) return pick(['(', ')', '((', '))', ':', '::', ',', '*', '']);
    return enc(fieldName(table));
  }).join(',');
}
function after(): string {
  const r = rnd();
  const i = int(cursor.length);
  if (r < 0.3 && cursor) return enc(cursor.slice(0, i) + pick(['A', '_', '-', '=', '', 'zz']) + cursor.slice(i + 1));
  if (r < 0.6) return enc(Buffer.from(JSON.stringify(json(2))).toString(pick(['base64', 'base64url'])));
  return enc(str());
}
function listQuery(table: Table): string {
  const params = times(1 + int(near ? 2 : 6), () => {
    switch (near ? pick([0, 0, 0, 0, 0, 0, 3, 4, 5, 6, 7, 10]) : int(11)) {
      case 0:
      case 1:
      case 2:
        return condition(table, '=');
      case 3:
        return logicParam(table);
      case 4:
        return `sort=${times(1 + int(3), () => `${pick(['', '-', '+', '--'])}${enc(fieldName(table))}${pick(['', '', '.asc', '.desc', `.${enc(str())}`])}`).join(',')}`;
      case 5:
        return `select=${select(table, chance(0.1) ? 8 : 3)}`;
      case 6:
        return `${pick(['limit', 'first', 'offset', 'skip'])}=${enc(String(near ? pick([1, 2, 1000, 0, 99_999_999]) : pick([...RAW_NUMBERS, ...ABSENT_INTS, 1001, -5, 'abc', '', '1 or 1=1', 1e21])))}`;
      case 7:
        return `after=${after()}`;
      case 8:
        return `${enc(str())}=${enc(str())}`;
      case 9:
        return junk();
      default:
        return `${enc(fieldName(table))}=${value('equals')}`;
    }
  });
  return params.join('&');
}
function aggregateQuery(table: Table): string {
  const fns = ['count', 'sum', 'avg', 'min', 'max', 'count_distinct'];
  const fn = near
    ? times(1 + int(3), () => (chance(0.3) ? 'count' : `${pick(fns.slice(1))}:${enc(fieldName(table))}`)).join(',')
    : times(1 + int(4), () =>
        chance(0.2) ? enc(str()) : `${pick([...fns, str()])}${chance(0.8) ? `:${enc(fieldName(table))}` : ''}`,
      ).join(',');
  const parts = [`fn=${fn}`];
  if (chance(0.6)) parts.push(`groupBy=${times(1 + int(3), () => enc(fieldName(table))).join(',')}`);
  if (chance(0.5))
    parts.push(
      `having=${enc(pick(['count', 'sum_total', 'avg_price', str()]))}.${enc(op())}.${value('equals', pick(['Int', 'Float', 'String']))}`,
    );
  if (chance(0.4)) parts.push(`sort=${pick(['-', ''])}${enc(pick(['count', 'sum_total', str()]))}`);
  if (chance(0.5)) parts.push(listQuery(table));
  return parts.join('&');
}

/** Random JSON: wrong types, hostile keys, huge numbers (as raw text markers), nesting. */
function json(depth: number): unknown {
  const r = rnd();
  if (r < 0.15 && depth > 0) return times(int(5), () => json(depth - 1));
  if (r < 0.3 && depth > 0)
    return Object.fromEntries(
      times(int(5), () => [
        chance(0.5) ? str() : pick(['field', 'operator', 'value', 'first', 'skip', 'children', 'id', 'name', 'total']),
        json(depth - 1),
      ]),
    );
  if (r < 0.45) return rawNumber();
  if (r < 0.55) return pick([null, true, false, 0, -1, 1.5, 2 ** 53 + 2, -1e308, 1e308]);
  return str();
}
const rawNumber = () => `\u0001RAW${int(RAW_NUMBERS.length)}\u0001`;
const serialize = (v: unknown) =>
  JSON.stringify(v).replace(/"\\u0001RAW(\d+)\\u0001"/g, (_, i) => RAW_NUMBERS[Number(i)]!);

/** Values the validator must refuse for a field of each type. */
const WRONG: Record<string, unknown[]> = {
  Int: ['abc', {}, [], true, 1.5, 'x1'],
  Uuid: ['not-a-uuid', 12, {}, [], `${'0'.repeat(35)}' or 1=1`],
  String: [123, {}, [], true, 1.5],
  Boolean: ['yes', 1, {}, []],
  Float: ['ten', {}, [], true],
  Enum: ['lost', 1, {}, []],
  List: [123, {}, [1, 2], true],
};
/** Certainly invalid for any role on a create or a patch. */
function poison(table: Table, mode: 'create' | 'update'): [string, unknown] {
  const fields = Object.entries(FIELDS[table]).filter(([, type]) => type !== 'DateTime' && type !== 'Decimal');
  switch (int(mode === 'update' ? 4 : 3)) {
    case 0:
      return [`zz${str()}`, json(2)];
    case 1:
      return [pick(['createdAt', 'updatedAt']), chance(0.5) ? new Date().toISOString() : json(1)];
    case 2: {
      const [name, type] = pick(fields);
      return [name, pick(WRONG[type]!)];
    }
    default:
      return [pick(table === 'OrderItem' ? ['orderId', 'productId'] : ['id']), table === 'OrderItem' ? 'x' : 1];
  }
}
function record(table: Table, mode: 'create' | 'update'): Record<string, unknown> {
  const [k, v] = poison(table, mode);
  return { ...Object.fromEntries(times(int(5), () => [fieldName(table), json(2)])), [k]: v };
}
const absentId = (table: Table): unknown =>
  FIELDS[table].id === 'Uuid' && chance(0.3) ? uuid() : chance(0.5) ? pick(ABSENT_INTS) : chance(0.5) ? str() : json(1);

interface Req {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}
function generate(): Req {
  const table: Table = pick(TABLES);
  const tp = `${BASE}/${enc(chance(0.04) ? pick(['Nope', 'order', '_bulk', str()]) : table)}`;
  const headers: Record<string, string> = {};
  const write = (body: string, ct = 'application/json') => {
    headers['content-type'] = chance(0.85) ? ct : pick(CONTENT_TYPES);
    if (chance(0.3))
      headers['idempotency-key'] = chance(0.7)
        ? `k-${int(1e9)}`
        : times(1 + int(chance(0.1) ? 300 : 40), () =>
            String.fromCharCode(chance(0.95) ? 33 + int(94) : 0xa0 + int(90)),
          ).join('');
    return body;
  };
  if (chance(0.03)) headers.environment = pick(['staging', 'nope', str().replace(/[^\x20-\x7e]/g, '') || 'x']);
  if (chance(0.05))
    headers.prefer = pick([
      'count=exact',
      'return=minimal',
      'count=exact, return=minimal',
      str().replace(/[^\x20-\x7e]/g, ''),
    ]);
  near = chance(0.5);
  const k = rnd();
  if (k < 0.33) return { method: 'GET', path: `${tp}?${listQuery(table)}`, headers };
  if (k < 0.45) return { method: 'GET', path: `${tp}/_aggregate?${aggregateQuery(table)}`, headers };
  if (k < 0.57) {
    const q = near
      ? {
          filter: times(1 + int(3), () => ({
            field: fieldName(table),
            operator: op(),
            value: chance(0.3) ? times(int(4), () => json(0)) : json(1),
          })),
          ...(chance(0.3) ? { sort: [{ field: fieldName(table), direction: pick(['DESC', 'asc']) }] } : {}),
          ...(chance(0.3)
            ? {
                pagination: pick([{ first: 1 + int(1000) }, { skip: int(10) }, { after: decodeURIComponent(after()) }]),
              }
            : {}),
          ...(chance(0.4)
            ? {
                select: [
                  { field: fieldName(table), ...(chance(0.5) ? { alias: str().slice(0, 63) } : {}) },
                  { field: pick(RELATIONS[table]), children: [{ field: 'createdAt', alias: str().slice(0, 63) }] },
                ],
              }
            : {}),
        }
      : chance(0.7)
        ? {
            filter: chance(0.7)
              ? times(int(5), () => ({
                  field: chance(0.7) ? fieldName(table) : json(1),
                  operator: chance(0.7) ? op() : json(1),
                  value: json(2),
                }))
              : json(2),
            sort: chance(0.5)
              ? times(int(3), () => ({
                  field: fieldName(table),
                  direction: pick(['DESC', 'asc', 'sideways', json(0)]),
                }))
              : undefined,
            pagination: chance(0.5)
              ? { first: json(0), skip: json(0), after: chance(0.5) ? after() : json(0) }
              : undefined,
            select: chance(0.5)
              ? times(int(4), () => ({
                  field: fieldName(table),
                  children: chance(0.4) ? [{ field: str(), children: json(3) }] : undefined,
                }))
              : undefined,
            ...(chance(0.2) ? { [str()]: json(1) } : {}),
          }
        : json(4);
    return { method: 'POST', path: `${tp}/_query`, headers, body: write(chance(0.05) ? '{"filter": [' : serialize(q)) };
  }
  const n = chance(0.05) ? 20_000 + int(80_000) : 0;
  const deep = () => pick([`${'['.repeat(n)}${']'.repeat(n)}`, `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`]);
  if (k < 0.67)
    return {
      method: 'POST',
      path: tp,
      headers,
      body: write(n ? deep() : chance(0.1) ? serialize(json(3)) : serialize(record(table, 'create'))),
    };
  if (k < 0.74)
    return {
      method: 'PATCH',
      path: `${tp}/${enc(String(pick([7_000_001, 7_100_001, 7_200_001, ...ABSENT_INTS, str()])))}`,
      headers,
      body: write(
        n ? deep() : serialize(record(table, 'update')),
        pick(['application/json', 'application/merge-patch+json']),
      ),
    };
  if (k < 0.81)
    return {
      method: 'PATCH',
      path: `${tp}${chance(0.85) ? `?${listQuery(table)}` : ''}`,
      headers,
      body: write(serialize(record(table, 'update')), 'application/merge-patch+json'),
    };
  if (k < 0.9) {
    const queryMode = chance(0.3) ? `?mode=${enc(pick(['BEST_EFFORT', 'ALL_OR_NOTHING', str()]))}` : '';
    const bodyMode = chance(0.4) ? { transactionMode: pick(['BEST_EFFORT', 'ALL_OR_NOTHING', json(0)]) } : {};
    const lenient = queryMode.includes('BEST_EFFORT') || JSON.stringify(bodyMode).includes('BEST_EFFORT');
    const count = chance(0.05) ? 101 + int(50) : 1 + int(6);
    const poisoned = lenient ? -1 : int(count);
    const items = times(count, (i) =>
      lenient || i === poisoned ? record(table, 'create') : chance(0.5) ? json(2) : record(table, 'create'),
    );
    const body = chance(0.1)
      ? json(3)
      : { items: chance(0.1) ? json(2) : items, ...bodyMode, ...(chance(0.05) ? { [str()]: 1 } : {}) };
    return { method: 'POST', path: `${tp}/_bulk${queryMode}`, headers, body: write(serialize(body)) };
  }
  if (k < 0.97) {
    const list = times(chance(0.05) ? 101 + int(20) : 1 + int(6), () =>
      chance(0.5)
        ? absentId(table)
        : {
            ...(chance(0.8) ? { id: absentId(table) } : {}),
            orderId: absentId('City'),
            productId: pick(ABSENT_INTS),
            ...(chance(0.2) ? { [str()]: json(0) } : {}),
          },
    );
    const body = chance(0.1)
      ? json(3)
      : {
          [pick(['ids', 'filters', 'ids', 'filters', str()])]: chance(0.1) ? json(1) : list,
          ...(chance(0.3) ? { transactionMode: pick(['BEST_EFFORT', json(0)]) } : {}),
          ...(chance(0.05) ? { ids: [], filters: [] } : {}),
        };
    return {
      method: 'DELETE',
      path: `${tp}/_bulk${chance(0.2) ? '?mode=BEST_EFFORT' : ''}`,
      headers,
      body: write(serialize(body)),
    };
  }
  return { method: 'DELETE', path: `${tp}/${enc(String(absentId(table)))}`, headers };
}

/** Hand-picked hostile requests sent first, whatever the seed (edges of types that reach the database). */
function corpus(): Req[] {
  const nest = (d: number): string => (d ? `or(and(${nest(d - 1)}),note.equals.x)` : 'id.equals.1');
  const list: [string, string, string?][] = [
    ['GET', '/City?name=equals.a%00b'],
    ['GET', '/Customer?email=in.(a%00,b)'],
    ['GET', '/Order?note=contains.%00'],
    ['GET', '/Order?status=equals.open%00'],
    ['GET', '/Order?createdAt=gte.0000-01-01'],
    ['GET', '/Order?placedAt=between.0000-01-01,2024-01-01'],
    ['GET', '/Order?createdAt=equals.%2B275760-09-13T00:00:00Z'],
    ['GET', '/Order?total=gt.1e309'],
    ['GET', '/Order?total=in.(1e308,-1e308,1e-400)'],
    ['GET', `/Order?id=in.(${times(5000, (i) => i).join(',')})`],
    ['GET', `/Order?or=(${nest(50)})`],
    ['GET', '/Order?select=id:%22x%22%3B%20drop,customer(name:%27)'],
    ['GET', `/City?after=${enc(cursor.slice(0, -2))}`],
    ['GET', '/Customer/_aggregate?fn=max:id'],
    ['GET', '/Customer/_aggregate?fn=sum:email'],
    ['GET', '/Order/_aggregate?fn=avg:status'],
    ['GET', '/Product/_aggregate?fn=sum:tags'],
    ['GET', '/Customer/_aggregate?fn=min:vip'],
    ['GET', '/Order/_aggregate?fn=count&groupBy=customer.name'],
    ['GET', '/Order/_aggregate?fn=count&having=count.gt.1e309'],
    ['POST', '/Order/_query', '{"filter":[{"field":"note","operator":"contains","value":"\\u0000"}]}'],
    [
      'POST',
      '/Order/_query',
      '{"filter":[{"field":"createdAt","operator":"between","value":["0000-01-01","9999-12-31"]}]}',
    ],
    [
      'POST',
      '/Order/_query',
      '{"filter":[{"field":"total","operator":"gt","value":1e309}],"pagination":{"first":1e309}}',
    ],
    ['PATCH', '/Order/7200001', '{"note":"a\\u0000b"}'],
    ['PATCH', '/Order/7200001', '{"total":1e309}'],
    ['PATCH', '/Order?note=equals.%00', '{"total":1}'],
    ['POST', '/Customer/_bulk', '{"items":[{"email":"nul\\u0000@example.com","name":"x"}]}'],
    ['DELETE', '/Customer/_bulk', '{"ids":["\\u0000"]}'],
    ['GET', '/Customer/%00'],
  ];
  return list.map(
    ([method, path, body]): Req => ({
      method,
      path: `${BASE}${path}`,
      headers: body ? { 'content-type': 'application/json' } : {},
      body,
    }),
  );
}

interface Outcome {
  req: Req;
  status: number;
  contentType: string | null;
  text: string;
  error?: string;
}
async function send(req: Req): Promise<Outcome> {
  const headers = { 'x-project-id': 'shop', authorization: `Bearer ${t.adminKey}`, ...req.headers };
  try {
    const res = await fetch(`${t.url}${req.path}`, {
      method: req.method,
      headers,
      body: req.body,
      signal: AbortSignal.timeout(20_000),
    });
    return { req, status: res.status, contentType: res.headers.get('content-type'), text: await res.text() };
  } catch (error) {
    return { req, status: 0, contentType: null, text: '', error: String((error as Error).cause ?? error) };
  }
}

async function state(): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const env of ['master', 'staging']) {
    for (const table of TABLES) {
      const [row] = await t.db.query<{ n: number; sum: string }>(
        `select count(*)::int as n, coalesce(md5(string_agg(x::text, ',' order by x::text)), '-') as sum from env_${env}."${table}" x`,
      );
      out[`${env}.${table}`] = `${row!.n} ${row!.sum}`;
    }
  }
  // a stored reply is fine only for a BEST_EFFORT bulk in which every item failed (207, nothing written)
  const [idem] = await t.db.query<{ n: number }>(
    `select count(*)::int as n from svcgen.idempotency where state <> 'done' or status <> 207`,
  );
  out.idempotencyEntriesOtherThan207 = String(idem!.n);
  return out;
}

beforeAll(async () => {
  t = await startTestServer({
    log: (m) => logs.push(m),
    configPatch: (raw) => {
      raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: 1_000_000 };
    },
  });
  const post = async (table: string, body: unknown) => {
    const res = await t.request('POST', `${BASE}/${table}`, { body });
    expect(res.status, res.text).toBe(201);
    return res.body.data;
  };
  for (let i = 1; i <= 3; i++) {
    const city = await post('City', { id: 7_000_000 + i, name: `Fuzz ${i}`, country: 'FZ' });
    const customer = await post('Customer', {
      email: `fuzz${i}@example.com`,
      name: `F'uzz ${i}`,
      cityId: city.id,
      vip: i === 1,
    });
    const product = await post('Product', {
      id: 7_100_000 + i,
      sku: `FZ-${i}`,
      title: 'Fuzz 😀',
      price: '12.50',
      tags: ['a', 'b'],
    });
    const order = await post('Order', {
      id: 7_200_000 + i,
      total: i * 1.5,
      note: `n${i}`,
      customerId: customer.id,
      placedAt: '2024-01-02T03:04:05Z',
    });
    await post('OrderItem', { orderId: order.id, productId: product.id, quantity: i });
  }
  const page = await t.request('GET', `${BASE}/City?limit=1`);
  cursor = page.body?.meta?.pagination?.nextCursor ?? '';
});
afterAll(() => t?.close());

it(`${COUNT} hostile requests (seed ${SEED}): no 5xx, every 4xx has a JSON body, nothing changes, /readyz still 200`, {
  timeout: 60_000,
}, async () => {
  const before = await state();
  const requests = [...corpus(), ...times(COUNT, generate)];
  const outcomes: Outcome[] = [];
  let next = 0;
  await Promise.all(
    times(CONCURRENCY, async () => {
      while (next < requests.length) outcomes.push(await send(requests[next++]!));
    }),
  );
  const parses = (text: string) => {
    try {
      return JSON.parse(text) !== undefined;
    } catch {
      return false;
    }
  };
  const isJson = (o: Outcome) => /^application\/(problem\+)?json\b/.test(o.contentType ?? '') && parses(o.text);
  const bad = {
    '5xx': outcomes.filter((o) => o.status >= 500),
    'no response': outcomes.filter((o) => o.status === 0),
    '4xx without a JSON body': outcomes.filter((o) => o.status >= 400 && o.status < 500 && !isJson(o)),
  };
  const histogram: Record<number, number> = {};
  for (const o of outcomes) histogram[o.status] = (histogram[o.status] ?? 0) + 1;
  const cut = (s: string | undefined, n = 240) =>
    s === undefined ? '' : s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s;
  const show = (o: Outcome) =>
    `  ${o.req.method} ${cut(o.req.path)}\n    headers ${JSON.stringify(o.req.headers)}\n    body ${cut(o.req.body)}\n    → ${o.status} ${o.contentType} ${cut(o.text)}${o.error ? ` ${o.error}` : ''}`;
  const message = [
    `statuses ${JSON.stringify(histogram)}`,
    ...Object.entries(bad)
      .filter(([, list]) => list.length)
      .map(
        ([name, list]) =>
          `${name}: ${list.length}\n${list
            .slice(0, name === '5xx' ? 20 : 6)
            .map(show)
            .join('\n')}`,
      ),
    `server errors (${logs.length} logged; distinct first lines):`,
    ...[...new Set(logs.map((l) => l.split('\n')[0]!))].slice(0, 12).map((l) => `  ${cut(l, 300)}`),
  ].join('\n');
  console.log(message.split('\n')[0]);
  expect(outcomes).toHaveLength(requests.length);
  expect
    .soft(Object.fromEntries(Object.entries(bad).map(([name, list]) => [name, list.length])), message)
    .toEqual({ '5xx': 0, 'no response': 0, '4xx without a JSON body': 0 });
  // the requests reached the handlers: most answers are validation outcomes, not auth or routing failures
  expect
    .soft((histogram[400] ?? 0) + (histogram[422] ?? 0) + (histogram[200] ?? 0), message)
    .toBeGreaterThan(COUNT * 0.6);
  expect.soft(await state(), 'row counts and checksums after the run').toEqual(before);
  const ready = await fetch(`${t.url}/readyz`);
  expect.soft(ready.status).toBe(200);
});
