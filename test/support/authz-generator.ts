/**
 * Generators of test/query/authorization-differential.test.ts: the roles under test, the principals
 * (API keys with roles and contexts, user tokens), seeded datasets, and changes to data a principal
 * cannot see (for the non-interference check).
 */
import {
  clone,
  DEFAULTS,
  FOREIGN_KEYS,
  keyOf,
  type Rng,
  SCHEMA,
  sortDb,
  STATUSES,
  TABLES,
  type Db,
  type Row,
  type Table,
  type Value,
} from './authz-schema.ts';
import { viewOf, type Principal, type RolesConfig } from './reference-policy.ts';

const ORDER_SHOPPER = ['id', 'total', 'status', 'customerId', 'createdAt', 'updatedAt'];

/**
 * The roles under test. Together they use literal filters, operator objects, `$user.*` and
 * `$context.*` variables, relation paths inside role filters, partial field lists, tables a role
 * cannot read, create filters with presets, update filters narrower and wider than read, delete
 * filters, and a `*` rule.
 */
export const ROLES: RolesConfig = {
  admin: { tables: { '*': { read: true, create: true, update: true, delete: true } } },
  shopper: {
    signup: true,
    tables: {
      Order: {
        read: { filter: { customerId: '$user.id' }, fields: ORDER_SHOPPER },
        create: { filter: { customerId: '$user.id' }, fields: ['total', 'customerId'] },
        update: { filter: { customerId: '$user.id', status: 'open' }, fields: ['total'] },
        delete: false,
      },
      City: { read: true },
      Product: { read: true },
      Customer: { read: { filter: { email: '$user.email' }, fields: ['id', 'email', 'name', 'vip', 'cityId'] } },
      OrderItem: { read: { filter: { 'order.customerId': '$user.id' }, fields: ['orderId', 'productId', 'quantity'] } },
    },
  },
  auditor: {
    tables: {
      Order: {
        read: {
          filter: { status: { in: ['paid', 'shipped'] } },
          fields: ['id', 'status', 'total', 'note', 'customerId'],
        },
      },
      Customer: { read: { fields: ['id', 'name', 'vip'] } },
      Product: { read: { fields: ['id', 'sku', 'price'] } },
    },
  },
  bigspender: {
    tables: {
      Order: {
        read: { filter: { total: { gte: 100 } }, fields: ['id', 'total', 'placedAt', 'customerId', 'createdAt'] },
      },
      Customer: { read: { filter: { vip: true }, fields: ['id', 'name', 'email', 'cityId'] } },
      City: { read: { fields: ['id', 'name'] } },
    },
  },
  support: {
    tables: {
      Order: {
        read: { filter: { customerId: '$context.customer' } },
        create: { filter: { customerId: '$context.customer' }, fields: ['total', 'note', 'status', 'customerId'] },
        update: {
          filter: { customerId: '$context.customer', status: { in: ['open', 'paid'] } },
          fields: ['note', 'status', 'placedAt', 'total'],
        },
        delete: { filter: { customerId: '$context.customer', status: 'cancelled' } },
      },
      OrderItem: {
        read: { filter: { 'order.customerId': '$context.customer' } },
        create: { filter: { 'order.customerId': '$context.customer' }, fields: ['orderId', 'productId', 'quantity'] },
        update: { filter: { 'order.customerId': '$context.customer', quantity: { lte: 5 } }, fields: ['quantity'] },
        delete: { filter: { 'order.customerId': '$context.customer' } },
      },
      Customer: { read: { filter: { id: { equals: '$context.customer' } }, fields: ['id', 'name', 'email', 'vip'] } },
      Product: { read: { fields: ['id', 'sku', 'title', 'price'] } },
    },
  },
  region: {
    tables: {
      City: { read: { filter: { country: '$context.country' } } },
      Customer: {
        read: {
          filter: { 'city.country': '$context.country' },
          fields: ['id', 'name', 'vip', 'cityId', 'createdAt', 'updatedAt'],
        },
      },
      Order: {
        read: {
          filter: { 'customer.city.country': '$context.country' },
          fields: ['id', 'status', 'total', 'customerId', 'placedAt'],
        },
        update: { filter: { status: 'open' }, fields: ['status'] },
      },
    },
  },
  clerk: {
    tables: {
      Order: {
        read: { filter: { status: 'open' } },
        update: { filter: { total: { lt: 100 } }, fields: ['note', 'status'] },
        delete: { filter: { note: null } },
      },
      Customer: { read: true },
      OrderItem: { read: { filter: { quantity: { gte: 3 } } } },
    },
  },
  catalog: {
    tables: {
      City: {
        read: true,
        create: { filter: { country: { in: ['fr', 'de', 'it'] } }, fields: ['name', 'country'] },
        update: { fields: ['name'] },
        delete: { filter: { country: 'it' } },
      },
      Product: {
        read: true,
        create: { filter: { price: { gte: 1 } }, fields: ['sku', 'title', 'price', 'tags'] },
        update: { filter: { price: { lt: 100 } }, fields: ['title', 'price', 'tags'] },
        delete: { filter: { price: { lt: 5 } } },
      },
    },
  },
  tagger: {
    tables: {
      Product: {
        read: { filter: { price: { lt: 50 } }, fields: ['id', 'sku', 'tags'] },
        create: { fields: ['sku', 'title', 'tags'] },
        update: { filter: { sku: { gte: 'skuf' } }, fields: ['tags'] },
      },
    },
  },
  delegate: {
    tables: {
      Order: {
        read: { filter: { customerId: '$context.delegate' }, fields: ['id', 'total', 'customerId'] },
        create: { filter: { customerId: { equals: '$context.delegate' } }, fields: ['total', 'note'] },
      },
    },
  },
  // CONTRACT §5 "Several roles" with [shipper, cashier]: `status` is writable on open and paid
  // orders only, `total` on shipped ones too; on create `note` needs a total of 100 or more and
  // `status` an open order, which no single role lists together.
  shipper: {
    tables: {
      Order: {
        read: { filter: { status: { in: ['paid', 'shipped'] } } },
        create: { filter: { total: { gte: 100 } }, fields: ['note', 'total', 'customerId'] },
        update: { filter: { status: 'shipped' }, fields: ['total'] },
      },
    },
  },
  cashier: {
    tables: {
      Order: {
        read: {
          filter: { status: { in: ['open', 'paid', 'cancelled'] } },
          fields: ['id', 'status', 'total', 'customerId'],
        },
        create: { filter: { status: 'open' }, fields: ['status', 'total', 'customerId'] },
        update: { filter: { status: { in: ['open', 'paid'] } }, fields: ['total', 'status'] },
      },
    },
  },
  browser: {
    tables: {
      '*': { read: true },
      Order: { read: { filter: { status: 'open' }, fields: ['id', 'status', 'total', 'customerId'] } },
      Customer: {},
    },
  },
};

export interface User {
  id: string;
  email: string;
  token: string;
  roles: string[];
}
/** The users the test signs up, by name, with their roles. */
export const USERS: Record<string, string[]> = { u1: ['shopper'], u2: ['shopper', 'auditor'], u3: ['support'] };

/** Principals of one dataset: keys (contexts chosen from its customers) and the users. */
export function principals(db: Db, users: Record<string, User>, rng: Rng): Principal[] {
  const plain = db.Customer.filter((c) => !Object.values(users).some((u) => u.id === c.id));
  const withOrders = plain.filter((c) => db.Order.some((o) => o.customerId === c.id));
  const [ca, cb] = rng.sample(withOrders.length >= 2 ? withOrders : plain, 2).map((c) => String(c.id));
  const countries = [...new Set(db.City.map((c) => String(c.country)))];
  const user = (n: string): Principal => ({
    name: `user ${n} [${users[n]!.roles.join(',')}]`,
    roles: users[n]!.roles,
    user: { id: users[n]!.id, email: users[n]!.email },
  });
  const key = (roles: string[], context: Record<string, string> = {}): Principal => ({
    name: `key [${roles.join(',')}] ${JSON.stringify(context)}`,
    roles,
    context,
  });
  return [
    key(['admin']),
    user('u1'),
    user('u2'),
    user('u3'),
    key(['shopper']),
    key(['support'], { customer: ca! }),
    key(['support']),
    key(['auditor', 'bigspender']),
    key(['region'], { country: rng.pick(countries) }),
    key(['region', 'support'], { country: rng.pick(countries), customer: cb ?? ca! }),
    key(['clerk']),
    key(['support', 'delegate'], { customer: ca!, delegate: ca! }),
    key(['support', 'delegate'], { customer: ca!, delegate: cb ?? ca! }),
    key(['catalog']),
    key(['catalog', 'tagger']),
    key(['browser']),
    key(['shipper', 'cashier']),
    { name: 'management token', roles: [], management: true },
  ];
}

// ------------------------------------------------------------------------------------------------
// datasets

export const DAY = 86_400_000;
const FIXED_DATES = [
  '2023-12-31T12:00:00.000Z',
  '2024-01-15T10:00:00.000Z',
  '2024-06-30T23:59:59.999Z',
  '2024-07-01T00:00:00.000Z',
];
const TOTALS = [5, 12.5, 12.5, 20, 49.99, 99.99, 100, 100, 150.25, 300];
const PRICES = [0.5, 2, 4.99, 9.9, 19, 49.5, 99.99, 120];

export function uuidFrom(rng: Rng): string {
  const hex = () =>
    Math.floor(rng.next() * 65536)
      .toString(16)
      .padStart(4, '0');
  return `${hex()}${hex()}-${hex()}-4${hex().slice(1)}-8${hex().slice(1)}-${hex()}${hex()}${hex()}`;
}
const stamp = (i: number) => new Date(Date.UTC(2024, 4, 1) + i * 7_919_000).toISOString();

export function randomValue(rng: Rng, db: Db, table: Table, field: string, now: number): Value {
  switch (`${table}.${field}`) {
    case 'City.name':
    case 'Customer.name':
    case 'Product.title':
      return rng.word(2, 6);
    case 'City.country':
      return rng.pick(['fr', 'de', 'it']);
    case 'Customer.vip':
      return rng.chance(0.4);
    case 'Customer.cityId':
      return rng.chance(0.2) || db.City.length === 0 ? null : (rng.pick(db.City).id as number);
    case 'Product.price':
      return rng.chance(0.7) ? rng.pick(PRICES) : rng.int(50, 15000) / 100;
    case 'Product.tags':
      return rng.sample(['gift', 'red', 'sale'], rng.int(0, 2));
    case 'Product.stock':
      // Varied without drawing from rng, so that the cases of each seed stay those they were.
      return (db.Product.length * 3) % 11;
    case 'Order.status':
      return rng.pick(STATUSES);
    case 'Order.total':
      return rng.chance(0.7) ? rng.pick(TOTALS) : rng.int(50, 30000) / 100;
    case 'Order.note':
      return rng.chance(0.3) ? null : rng.chance(0.15) ? '' : rng.word(1, 5);
    case 'Order.placedAt':
      if (rng.chance(0.25)) return null;
      return rng.chance(0.4) ? rng.pick(FIXED_DATES) : new Date(now - (rng.int(0, 40) + 0.3) * DAY).toISOString();
    case 'Order.customerId':
      return rng.pick(db.Customer).id as string;
    case 'Order.invoiceId':
    case 'Order.receiptId':
      return null;
    case 'OrderItem.quantity':
      return rng.int(1, 9);
    default:
      throw new Error(`no random value for ${table}.${field}`);
  }
}

/** A dataset whose customers include the users (by id, and one by e-mail only). */
export function dataset(rng: Rng, users: Record<string, User>, now: number): Db {
  const db: Db = { City: [], Customer: [], Product: [], Order: [], OrderItem: [] };
  let n = 0;
  const stamps = () => {
    const created = stamp(n++);
    return { createdAt: created, updatedAt: new Date(Date.parse(created) + rng.int(0, 5000) * 60_000).toISOString() };
  };
  const cities = rng.int(3, 5);
  for (let i = 1; i <= cities; i++)
    db.City.push({ id: i, name: rng.word(3, 6), country: randomValue(rng, db, 'City', 'country', now), ...stamps() });
  const customer = (id: string, email: string) =>
    db.Customer.push({
      id,
      email,
      name: rng.word(3, 6),
      vip: randomValue(rng, db, 'Customer', 'vip', now),
      cityId: randomValue(rng, db, 'Customer', 'cityId', now),
      ...stamps(),
    });
  const { u1, u2, u3 } = users;
  customer(u1!.id, u1!.email);
  customer(u2!.id, `other-${u2!.email}`);
  customer(uuidFrom(rng), u2!.email);
  customer(u3!.id, u3!.email);
  for (let i = rng.int(5, 8); i > 0; i--) customer(uuidFrom(rng), `${rng.word(3, 5)}${n}@shop.test`);
  for (let i = 1, count = rng.int(4, 7); i <= count; i++) {
    db.Product.push({
      id: i,
      sku: `sku${rng.word(1, 3)}${i}`,
      title: rng.word(2, 6),
      price: randomValue(rng, db, 'Product', 'price', now),
      stock: (i * 5) % 9,
      tags: randomValue(rng, db, 'Product', 'tags', now),
      ...stamps(),
    });
  }
  for (let i = 1, count = rng.int(18, 32); i <= count; i++) {
    const row: Row = { id: i };
    for (const f of ['status', 'total', 'note', 'placedAt', 'customerId', 'invoiceId', 'receiptId'])
      row[f] = randomValue(rng, db, 'Order', f, now);
    db.Order.push({ ...row, ...stamps() });
    for (const p of rng.sample(db.Product, rng.int(0, 3)))
      db.OrderItem.push({ orderId: i, productId: p.id, quantity: rng.int(1, 9), ...stamps() });
  }
  return sortDb(db);
}

// ------------------------------------------------------------------------------------------------
// changes the principal cannot see (non-interference)

/** What the principal sees of a database: every visible row's visible fields, table by table. */
export function fingerprint(roles: RolesConfig, p: Principal, db: Db): string {
  const view = viewOf(roles, p, db, 0);
  return JSON.stringify(
    TABLES.map((t) =>
      view.tables[t].rows
        .map((r) => [...r.fields].sort().map((f) => [f, r.row[f]]))
        .map((x) => JSON.stringify(x))
        .sort(),
    ),
  );
}

function removeRow(db: Db, table: Table, row: Row): boolean {
  if (
    FOREIGN_KEYS.some(
      (fk) => fk.target === table && fk.onDelete === 'restrict' && db[fk.table].some((r) => r[fk.field] === row.id),
    )
  )
    return false;
  db[table] = db[table].filter((r) => r !== row);
  for (const fk of FOREIGN_KEYS.filter((f) => f.target === table)) {
    for (const child of db[fk.table].filter((r) => r[fk.field] === row.id)) {
      if (fk.onDelete === 'cascade') removeRow(db, fk.table, child);
      else child[fk.field] = null;
    }
  }
  return true;
}

/**
 * Up to `wanted` changes (inserts, deletes, updates; updatedAt left alone) after each of which the
 * principal's fingerprint is unchanged. Returns the new state and a description of each change.
 */
export function invisibleChanges(
  roles: RolesConfig,
  p: Principal,
  start: Db,
  rng: Rng,
  wanted: number,
  now: number,
): { db: Db; changes: string[] } {
  const goal = fingerprint(roles, p, start);
  let db = clone(start);
  const changes: string[] = [];
  for (let attempt = 0; attempt < wanted * 12 && changes.length < wanted; attempt++) {
    const next = clone(db);
    const table = rng.pick(TABLES);
    const kind = rng.pick(['insert', 'delete', 'update', 'update']);
    let what = '';
    if (kind === 'update' && next[table].length) {
      const row = rng.pick(next[table]);
      const fields = Object.keys(SCHEMA[table].fields).filter(
        (f) => !SCHEMA[table].key.includes(f) && f !== 'updatedAt' && f !== 'createdAt' && f !== 'email' && f !== 'sku',
      );
      if (table === 'OrderItem' || fields.length === 0) continue;
      const f = rng.pick(fields);
      const old = row[f];
      row[f] = randomValue(rng, next, table, f, now);
      if (JSON.stringify(old) === JSON.stringify(row[f])) continue;
      what = `update ${table} ${keyOf(table, row)} set ${f} = ${JSON.stringify(row[f])}`;
    } else if (kind === 'delete' && next[table].length) {
      const row = rng.pick(next[table]);
      if (!removeRow(next, table, row)) continue;
      what = `delete ${table} ${keyOf(table, row)}`;
    } else if (kind === 'insert') {
      const row = newRow(rng, next, table, now);
      if (!row) continue;
      next[table].push(row);
      what = `insert ${table} ${JSON.stringify(row)}`;
    } else continue;
    if (fingerprint(roles, p, next) !== goal) continue;
    db = next;
    changes.push(what);
  }
  return { db, changes };
}

let fresh = 0;
/** A new valid row (explicit key), or undefined when the table cannot take one now. */
export function newRow(rng: Rng, db: Db, table: Table, now: number): Row | undefined {
  const nextId = (t: Table) => Math.max(0, ...db[t].map((r) => Number(r.id))) + 1;
  const times = { createdAt: stamp(1000 + ++fresh), updatedAt: stamp(2000 + fresh) };
  const row: Row = { ...DEFAULTS[table], ...times };
  if (table === 'OrderItem') {
    const free = db.Order.flatMap((o) =>
      db.Product.filter((pr) => !db.OrderItem.some((i) => i.orderId === o.id && i.productId === pr.id)).map((pr) => [
        o.id,
        pr.id,
      ]),
    );
    if (!free.length) return undefined;
    const [orderId, productId] = rng.pick(free);
    return { ...row, orderId: orderId!, productId: productId!, quantity: randomValue(rng, db, table, 'quantity', now) };
  }
  if (table === 'Customer')
    return {
      ...row,
      id: uuidFrom(rng),
      email: `new${++fresh}${rng.word(2, 3)}@shop.test`,
      name: rng.word(3, 5),
      vip: rng.chance(0.5),
      cityId: randomValue(rng, db, table, 'cityId', now),
    };
  if (table === 'Order' && db.Customer.length === 0) return undefined;
  row.id = nextId(table);
  if (table === 'Product') row.sku = `skunew${++fresh}`;
  for (const f of Object.keys(SCHEMA[table].fields))
    if (row[f] === undefined) row[f] = randomValue(rng, db, table, f, now);
  return row;
}
