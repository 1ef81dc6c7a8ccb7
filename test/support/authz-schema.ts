/**
 * The authorization differential test's own description of examples/shop/schema.prisma (written
 * from the schema, not from svcgen's code), the JSON values of its records, value ordering as
 * PostgreSQL orders them, and a seeded PRNG.
 */

export type Table = 'City' | 'Customer' | 'Product' | 'Order' | 'OrderItem';
export const TABLES: readonly Table[] = ['City', 'Customer', 'Product', 'Order', 'OrderItem'];
export type FieldType = 'int' | 'float' | 'decimal' | 'string' | 'uuid' | 'bool' | 'enum' | 'datetime' | 'list';
export type Value = string | number | boolean | null | string[];
export type Row = Record<string, Value>;
export type Db = Record<Table, Row[]>;

export interface FieldSpec {
  type: FieldType;
  nullable?: boolean;
  /** Must be given on create (no default, not nullable). */
  required?: boolean;
  /** Written by the server (createdAt, updatedAt) or generated (serial ids). */
  readOnly?: boolean;
  unique?: boolean;
}

export interface RelationSpec {
  name: string;
  target: Table;
  many: boolean;
  /** Linking field on this table and on the target: this[from] = target[to]. */
  from: string;
  to: string;
}

export interface TableSpec {
  key: string[];
  serial: boolean;
  fields: Record<string, FieldSpec>;
  relations: RelationSpec[];
}

const stamps = {
  createdAt: { type: 'datetime', readOnly: true },
  updatedAt: { type: 'datetime', readOnly: true },
} as const;

export const SCHEMA: Record<Table, TableSpec> = {
  City: {
    key: ['id'],
    serial: true,
    fields: {
      id: { type: 'int' },
      name: { type: 'string', required: true },
      country: { type: 'string', required: true },
      ...stamps,
    },
    relations: [{ name: 'customers', target: 'Customer', many: true, from: 'id', to: 'cityId' }],
  },
  Customer: {
    key: ['id'],
    serial: false,
    fields: {
      id: { type: 'uuid' },
      email: { type: 'string', required: true, unique: true },
      name: { type: 'string', required: true },
      vip: { type: 'bool' },
      cityId: { type: 'int', nullable: true },
      ...stamps,
    },
    relations: [
      { name: 'city', target: 'City', many: false, from: 'cityId', to: 'id' },
      { name: 'orders', target: 'Order', many: true, from: 'id', to: 'customerId' },
    ],
  },
  Product: {
    key: ['id'],
    serial: true,
    fields: {
      id: { type: 'int' },
      sku: { type: 'string', required: true, unique: true },
      title: { type: 'string', required: true },
      price: { type: 'decimal', required: true },
      stock: { type: 'int' },
      tags: { type: 'list' },
      ...stamps,
    },
    relations: [{ name: 'items', target: 'OrderItem', many: true, from: 'id', to: 'productId' }],
  },
  Order: {
    key: ['id'],
    serial: true,
    fields: {
      id: { type: 'int' },
      status: { type: 'enum' },
      total: { type: 'float', required: true },
      note: { type: 'string', nullable: true },
      placedAt: { type: 'datetime', nullable: true },
      customerId: { type: 'uuid', required: true },
      // File references (docs/storage.md): the model writes them only as null (no files here).
      invoiceId: { type: 'uuid', nullable: true },
      receiptId: { type: 'uuid', nullable: true },
      ...stamps,
    },
    relations: [
      { name: 'customer', target: 'Customer', many: false, from: 'customerId', to: 'id' },
      { name: 'items', target: 'OrderItem', many: true, from: 'id', to: 'orderId' },
    ],
  },
  OrderItem: {
    key: ['orderId', 'productId'],
    serial: false,
    fields: {
      orderId: { type: 'int', required: true },
      productId: { type: 'int', required: true },
      quantity: { type: 'int' },
      ...stamps,
    },
    relations: [
      { name: 'order', target: 'Order', many: false, from: 'orderId', to: 'id' },
      { name: 'product', target: 'Product', many: false, from: 'productId', to: 'id' },
    ],
  },
};

export const STATUSES = ['open', 'paid', 'shipped', 'cancelled'] as const;
/** Values a create leaves to the database. */
export const DEFAULTS: Record<Table, Row> = {
  City: {},
  Customer: { vip: false, cityId: null },
  Product: { stock: 0, tags: [] },
  Order: { status: 'open', note: null, placedAt: null, invoiceId: null, receiptId: null },
  OrderItem: { quantity: 1 },
};
/** Foreign keys a row must satisfy, and what deleting the referenced row does. */
export const FOREIGN_KEYS: {
  table: Table;
  field: string;
  target: Table;
  onDelete: 'restrict' | 'cascade' | 'setNull';
}[] = [
  { table: 'Customer', field: 'cityId', target: 'City', onDelete: 'setNull' },
  { table: 'Order', field: 'customerId', target: 'Customer', onDelete: 'restrict' },
  { table: 'OrderItem', field: 'orderId', target: 'Order', onDelete: 'cascade' },
  { table: 'OrderItem', field: 'productId', target: 'Product', onDelete: 'restrict' },
];

export const fieldNames = (t: Table) => Object.keys(SCHEMA[t].fields);
export const fieldType = (t: Table, f: string) => SCHEMA[t].fields[f]?.type;
export const relation = (t: Table, name: string) => SCHEMA[t].relations.find((r) => r.name === name);
export const keyOf = (t: Table, row: Row) => SCHEMA[t].key.map((k) => String(row[k])).join('/');
/** Rows of every table in key order (as loadDb returns them). */
export function sortDb(db: Db): Db {
  for (const t of TABLES) db[t].sort((a, b) => (keyOf(t, a) < keyOf(t, b) ? -1 : 1));
  return db;
}
export const isNumeric = (type: FieldType | undefined) => type === 'int' || type === 'float' || type === 'decimal';

/**
 * PostgreSQL's order of two non-null values of one field: enums by declaration, text by code point
 * (the generated text is lower-case ASCII, where C and the usual ICU/glibc collations agree),
 * uuids as their lower-case text, DateTimes as ISO strings with milliseconds, booleans false < true.
 */
export function compareValues(type: FieldType | undefined, a: Value, b: Value): number {
  if (type === 'enum') return STATUSES.indexOf(a as never) - STATUSES.indexOf(b as never);
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'boolean' && typeof b === 'boolean') return Number(a) - Number(b);
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

export const clone = <T>(x: T): T => structuredClone(x);

// ------------------------------------------------------------------------------------------------
// PRNG: mulberry32, small and replayable from one 32-bit seed

export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  next(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new Error('pick from an empty list');
    return xs[Math.floor(this.next() * xs.length)]!;
  }
  /** k distinct elements, in random order. */
  sample<T>(xs: readonly T[], k: number): T[] {
    const copy = [...xs];
    const out: T[] = [];
    while (out.length < k && copy.length > 0) out.push(copy.splice(Math.floor(this.next() * copy.length), 1)[0]!);
    return out;
  }
  word(min = 2, max = 6, letters = 'abcdefghij'): string {
    let s = '';
    const n = this.int(min, max);
    for (let i = 0; i < n; i++) s += letters[Math.floor(this.next() * letters.length)];
    return s;
  }
}
