/**
 * Deterministic shop data for the query-language tests (test/query-*.test.ts), written with plain
 * SQL, plus the JS copies of every row so each test computes its expectations on its own.
 *
 * Dates are relative to the moment of seeding (UTC): today's midnight, a minute ago, yesterday's last
 * millisecond, a few days/weeks/months back, tomorrow, and some fixed 2023/2024 instants. Tests that
 * depend on "now" read the clock right before the request and derive the expected rows from the
 * stored instants, so they also hold when a day boundary passes between seeding and asserting.
 */
import type { Database } from '../../runtime/db/index.ts';

export const DAY = 86_400_000;
export const STATUSES = ['open', 'paid', 'shipped', 'cancelled'] as const;
export type Status = (typeof STATUSES)[number];

export interface City {
  id: number;
  name: string;
  country: string;
}
export interface Customer {
  id: string;
  email: string;
  name: string;
  vip: boolean;
  cityId: number | null;
}
export interface Product {
  id: number;
  sku: string;
  title: string;
  price: string;
  tags: string[];
}
export interface Order {
  id: number;
  status: Status;
  total: number;
  note: string | null;
  placedAt: string | null;
  customerId: string;
}
export interface OrderItem {
  orderId: number;
  productId: number;
  quantity: number;
}

export interface Seed {
  /** Date.now() at seeding. */
  seededAt: number;
  cities: City[];
  customers: Customer[];
  products: Product[];
  orders: Order[];
  items: OrderItem[];
}

export const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

/** Midnight UTC of the day holding `ms`. */
export function startOfUtcDay(ms: number): number {
  return ms - (((ms % DAY) + DAY) % DAY);
}

const NOTES: Record<number, string> = {
  3: 'Fragile, handle with care.',
  4: 'see (box 2)',
  6: 'Gift',
  8: 'gift wrap',
  9: 'a.b,c',
  11: '50%_off',
  12: 'say "hi"',
};
const FIXED_DATES = [
  '2024-01-15T10:00:00.000Z',
  '2024-06-30T23:59:59.999Z',
  '2024-07-01T00:00:00.000Z',
  '2023-12-31T12:00:00.000Z',
];

export function buildSeed(now = Date.now()): Seed {
  const today = startOfUtcDay(now);
  const cities: City[] = [
    { id: 1, name: 'Paris', country: 'FR' },
    { id: 2, name: 'Lyon', country: 'FR' },
    { id: 3, name: 'Berlin', country: 'DE' },
  ];
  const people: [string, boolean, number | null][] = [
    ['Alice Martin', true, 1],
    ['alice Cooper', false, 2],
    ['Bob Smith', false, 1],
    ['Carol, Jr.', true, 3],
    ['Dave (Admin)', false, null],
    ['Eve Martin', false, 2],
    ['Frank.Ocean', true, 3],
    ['Grace Hopper', false, 1],
    ['Heidi Klum', false, 3], // no orders
    ['Ivan Petrov', true, null], // no orders
  ];
  const customers = people.map(
    ([name, vip, cityId], i): Customer => ({ id: uuid(i + 1), email: `c${i + 1}@example.com`, name, vip, cityId }),
  );
  const products: Product[] = [
    { id: 1, sku: 'MUG-1', title: 'Mug', price: '9.90', tags: ['kitchen', 'gift'] },
    { id: 2, sku: 'TEE-1', title: 'T-shirt', price: '19.00', tags: ['clothes'] },
    { id: 3, sku: 'PEN-1', title: 'Pen', price: '1.50', tags: [] },
    { id: 4, sku: 'BAG-1', title: 'Bag', price: '35.00', tags: ['clothes', 'gift'] },
  ];
  const orders: Order[] = [];
  for (let i = 1; i <= 60; i++) {
    const r = i % 10;
    const status: Status = r <= 3 ? 'open' : r <= 6 ? 'paid' : r <= 8 ? 'shipped' : 'cancelled';
    const total = i === 42 ? 1234.56 : ((i * 7) % 13) * 2.5;
    const note = NOTES[i] ?? (i % 5 === 0 ? null : i % 7 === 0 ? '' : `note ${i}`);
    const c = i % 15;
    const placed: (number | string | null)[] = [
      null,
      today,
      now - 60_000,
      today - 1,
      today - DAY,
      now - 2 * DAY,
      now - 3 * DAY,
      now - 6 * DAY,
      now - 8 * DAY,
      now - 13 * DAY,
      now - 20 * DAY,
      now - 35 * DAY,
      now - 70 * DAY,
      now + DAY,
      FIXED_DATES[Math.floor(i / 15) % 4]!,
    ];
    const p = placed[c]!;
    const placedAt = p === null ? null : typeof p === 'string' ? p : new Date(p).toISOString();
    orders.push({ id: i, status, total, note, placedAt, customerId: customers[(i * 3) % 8]!.id });
  }
  const items: OrderItem[] = [];
  for (const o of orders) {
    if (o.id % 3 === 0) continue;
    items.push({ orderId: o.id, productId: (o.id % 4) + 1, quantity: (o.id % 5) + 1 });
    if (o.id % 2 === 0) items.push({ orderId: o.id, productId: ((o.id + 1) % 4) + 1, quantity: 2 });
  }
  return { seededAt: now, cities, customers, products, orders, items };
}

async function insert(db: Database, table: string, rows: Record<string, unknown>[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = Object.keys(rows[0]!);
  const values: unknown[] = [];
  const tuples = rows.map(
    (row) => `(${columns.map((c) => (values.push(row[c]), `$${values.length}`)).join(', ')}, now())`,
  );
  await db.query(
    `insert into env_master."${table}" (${columns.map((c) => `"${c}"`).join(', ')}, "updatedAt") values ${tuples.join(', ')}`,
    values,
  );
}

/** Writes the seed into env_master and moves the id sequences past the explicit ids. */
export async function writeSeed(db: Database, seed: Seed): Promise<void> {
  await insert(
    db,
    'City',
    seed.cities.map((c) => ({ ...c })),
  );
  await insert(
    db,
    'Customer',
    seed.customers.map((c) => ({ ...c })),
  );
  await insert(
    db,
    'Product',
    seed.products.map((p) => ({ ...p })),
  );
  await insert(
    db,
    'Order',
    seed.orders.map((o) => ({ ...o })),
  );
  await insert(
    db,
    'OrderItem',
    seed.items.map((i) => ({ ...i })),
  );
  for (const table of ['City', 'Product', 'Order']) {
    await db.query(`select setval(pg_get_serial_sequence('env_master."${table}"', 'id'), 1000)`);
  }
}

/** Query string from readable `a=b&c=d` text: every name and value percent-encoded. */
export function qs(text: string): string {
  if (text === '') return '';
  return text
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      return eq === -1
        ? encodeURIComponent(pair)
        : `${encodeURIComponent(pair.slice(0, eq))}=${encodeURIComponent(pair.slice(eq + 1))}`;
    })
    .join('&');
}

export const byId = <T extends { id: number | string }>(a: T, b: T) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
export const ids = (rows: { id: number | string }[]) => rows.map((r) => r.id);
