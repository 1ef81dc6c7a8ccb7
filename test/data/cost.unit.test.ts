// Which reads are expensive (runtime/data/cost.ts; docs/config.md `database.expensiveRead*`): the
// rule that sends a read through the expensive-read budget, on the shop example's tables, without
// a database. The budget under load: test/rest/fairness.test.ts. One row per case.
import { beforeAll, describe, expect, it } from 'vitest';
import { describeModel } from '../../generator/model/describe-model.ts';
import { readDmmf } from '../../generator/prisma/index.ts';
import type { TableModule } from '../../runtime/model/index.ts';
import { Catalog, type Condition, type OrderTerm, type SelectItem } from '../../runtime/query/index.ts';
import {
  AGGREGATE_COST,
  indexedFields,
  LARGE_OFFSET,
  LARGE_PAGE,
  listCost,
  readOneCost,
  type ListShape,
} from '../../runtime/data/cost.ts';
import { catalog, cmp, table, TRUE } from '../support/query-unit.ts';

const and = (...items: Condition[]): Condition => ({ kind: 'and', items });
const or = (...items: Condition[]): Condition => ({ kind: 'or', items });
const not = (item: Condition): Condition => ({ kind: 'not', item });
const sort = (field: string, direction: 'asc' | 'desc' = 'asc'): OrderTerm[] => [{ field, direction }];
/** `sorts('status', '-total')`: several sort terms as the API's `sort=status,-total` spells them. */
const sorts = (...terms: string[]): OrderTerm[] =>
  terms.flatMap((t) => (t.startsWith('-') ? sort(t.slice(1), 'desc') : sort(t)));
const embed = (relation: string, items: SelectItem[] = []): SelectItem => ({
  kind: 'embed',
  relation,
  alias: relation,
  items,
});
const list = (shape: Partial<ListShape>): ListShape => ({
  where: TRUE,
  orderBy: [],
  select: null,
  limit: 100,
  offset: 0,
  count: false,
  ...shape,
});

describe('listCost', () => {
  it.each<[string, string, ListShape, string | undefined]>([
    ['the default page in key order', 'Order', list({}), undefined],
    ['a page of 100 at offset 1000', 'Order', list({ limit: 100, offset: 1000 }), undefined],
    ['a page of 101', 'Order', list({ limit: 101 }), 'a page of 101 (more than 100)'],
    ['an offset of 1001', 'Order', list({ offset: 1001 }), 'an offset of 1001 (more than 1000)'],
    ['count=exact', 'Order', list({ count: true }), 'Prefer: count=exact'],
    // the first reason found is given: count, then page, then offset
    ['count=exact on a large page', 'Order', list({ count: true, limit: 500 }), 'Prefer: count=exact'],
    ['a large page at a large offset', 'Order', list({ limit: 500, offset: 5000 }), 'a page of 500 (more than 100)'],
    ['a sort on the primary key', 'Order', list({ orderBy: sort('id', 'desc') }), undefined],
    ['a sort on a unique field', 'Customer', list({ orderBy: sort('email') }), undefined],
    [
      'a sort on an unindexed field',
      'Order',
      list({ orderBy: sort('total') }),
      'a sort on total, which no index covers',
    ],
    ['an unindexed second sort key', 'Order', list({ orderBy: [...sort('id'), ...sort('total')] }), undefined],
    [
      'an unindexed sort behind an equality on the key',
      'Order',
      list({ where: cmp('id', 'in', [1, 2, 3]), orderBy: sort('total') }),
      undefined,
    ],
    [
      'an unindexed sort behind a range on the key',
      'Order',
      list({ where: cmp('id', 'gt', 5), orderBy: sort('total') }),
      'a sort on total, which no index covers',
    ],
    ['a range on the key', 'Order', list({ where: cmp('id', 'gt', 5) }), undefined],
    ['a between on the key', 'Order', list({ where: cmp('id', 'between', [1, 9]) }), undefined],
    [
      'a filter on an unindexed field',
      'Order',
      list({ where: cmp('status', 'equals', 'paid') }),
      'a filter on status (equals) that no index serves',
    ],
    [
      'an unindexed filter ANDed with an equality on a unique field',
      'Customer',
      list({ where: and(cmp('email', 'equals', 'a@b.c'), cmp('name', 'equals', 'A')) }),
      undefined,
    ],
    [
      'an unindexed filter ANDed with a range on the key',
      'Order',
      list({ where: and(cmp('id', 'gt', 5), cmp('status', 'equals', 'paid')) }),
      'a filter on status (equals) that no index serves',
    ],
    [
      'an unindexed filter ORed with an indexed one',
      'Customer',
      list({ where: or(cmp('email', 'equals', 'a@b.c'), cmp('name', 'equals', 'A')) }),
      'a filter on name (equals) that no index serves',
    ],
    [
      'an equality on the key inside an OR is not selective',
      'Order',
      list({ where: or(cmp('id', 'equals', 1), cmp('id', 'equals', 2)), orderBy: sort('total') }),
      'a sort on total, which no index covers',
    ],
    [
      'a negated unindexed filter',
      'Order',
      list({ where: not(cmp('status', 'equals', 'paid')) }),
      'a filter on status (equals) that no index serves',
    ],
    [
      'a non-equality on an indexed field',
      'Customer',
      list({ where: cmp('email', 'contains', 'x') }),
      'a filter on email (contains) that no index serves',
    ],
    [
      'a filter through a relation',
      'Order',
      list({ where: cmp('customer.email', 'equals', 'a@b.c') }),
      'a filter on customer.email (equals) that no index serves',
    ],
    [
      'the leading field of a composite key',
      'OrderItem',
      list({ where: cmp('orderId', 'equals', 7), orderBy: sort('orderId') }),
      undefined,
    ],
    [
      'the second field of a composite key',
      'OrderItem',
      list({ where: cmp('productId', 'equals', 7) }),
      'a filter on productId (equals) that no index serves',
    ],
    ['an embed found by the target key', 'Order', list({ select: [embed('customer')] }), undefined],
    ['an embed found by a composite key', 'Order', list({ select: [embed('items')] }), undefined],
    [
      'an embed through an unindexed foreign key',
      'Customer',
      list({ select: [embed('orders')] }),
      'an embed of orders, whose Order.customerId no index covers',
    ],
    [
      'a nested embed through an unindexed foreign key',
      'Order',
      list({ select: [embed('customer', [embed('orders')])] }),
      'an embed of orders, whose Order.customerId no index covers',
    ],
    // a cheap filter does not make up for an expensive embed
    [
      'an embed after an equality on the key',
      'Customer',
      list({ where: cmp('email', 'equals', 'a@b.c'), select: [embed('orders')] }),
      'an embed of orders, whose Order.customerId no index covers',
    ],
  ])('%s', (_name, tableName, shape, want) => {
    expect(listCost(catalog, table(tableName), shape)).toBe(want);
  });

  it('draws the lines at the default page and an offset of 1000', () => {
    expect([LARGE_PAGE, LARGE_OFFSET]).toEqual([100, 1000]);
    expect(AGGREGATE_COST).toBe('an aggregate');
  });
});

// Indexes beyond @id and @unique, read from a schema by the generator's own describe-model.
const INDEXED = `datasource db {
  provider = "postgresql"
}
model Ticket {
  id        Int      @id
  status    String
  total     Float
  placedAt  DateTime
  shopId    Int
  code      String
  region    String
  note      String
  lines     Line[]
  tags      Tag[]
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt

  @@index([status, total])
  @@index([placedAt(sort: Desc), total])
  @@unique([shopId, code])
  @@index([region], type: Hash)
}
model Line {
  id        Int      @id
  ticketId  Int
  ticket    Ticket   @relation(fields: [ticketId], references: [id])
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt

  @@index([ticketId, id])
}
model Tag {
  id        Int      @id
  ticketId  Int
  label     String
  ticket    Ticket   @relation(fields: [ticketId], references: [id])
  createdAt DateTime @default(now())
  updatedAt DateTime @updatedAt

  @@index([label, ticketId])
}
`;

describe('listCost with composite indexes (@@index, @@unique, descending fields)', () => {
  let indexed: Catalog;
  beforeAll(async () => {
    const tables = describeModel(await readDmmf(INDEXED));
    indexed = new Catalog(
      Object.fromEntries(tables.map((spec) => [spec.name, { spec, validators: {} } as unknown as TableModule])),
    );
  });

  it('carries the indexes in the model description, primary key first, Hash left out', () => {
    expect(indexed.require('Ticket').spec.indexes).toEqual([
      { fields: ['id'], unique: true },
      { fields: ['status', 'total'], unique: false },
      { fields: ['-placedAt', 'total'], unique: false },
      { fields: ['shopId', 'code'], unique: true },
    ]);
    expect(indexedFields(indexed.require('Ticket'))).toEqual(['id', 'status', 'placedAt', 'shopId']);
  });

  it.each<[string, ListShape, string | undefined]>([
    ['equality on the leading field', list({ where: cmp('status', 'equals', 'open') }), undefined],
    ['an in on the leading field', list({ where: cmp('status', 'in', ['open', 'paid']) }), undefined],
    [
      'equality on the leading field and a range on the next',
      list({ where: and(cmp('status', 'equals', 'open'), cmp('total', 'gt', 10)) }),
      undefined,
    ],
    [
      'equality on the leading field sifted by an unindexed term',
      list({ where: and(cmp('status', 'equals', 'open'), cmp('note', 'contains', 'x')) }),
      undefined,
    ],
    [
      'equality on the second field only',
      list({ where: cmp('total', 'equals', 10) }),
      'a filter on total (equals) that no index serves',
    ],
    ['a range on the leading field', list({ where: cmp('placedAt', 'gte', '2026-01-01') }), undefined],
    [
      'a Hash index does not count',
      list({ where: cmp('region', 'equals', 'eu') }),
      'a filter on region (equals) that no index serves',
    ],
    [
      'status=equals.open&sort=-total',
      list({ where: cmp('status', 'equals', 'open'), orderBy: sorts('-total') }),
      undefined,
    ],
    [
      'status=equals.open&sort=total',
      list({ where: cmp('status', 'equals', 'open'), orderBy: sorts('total') }),
      undefined,
    ],
    [
      'status=equals.open&sort=status,-total',
      list({ where: cmp('status', 'equals', 'open'), orderBy: sorts('status', '-total') }),
      undefined,
    ],
    ['sort=status,total', list({ orderBy: sorts('status', 'total') }), undefined],
    ['sort=-status,-total', list({ orderBy: sorts('-status', '-total') }), undefined],
    ['sort=status alone', list({ orderBy: sorts('status') }), undefined],
    [
      'wrong order: sort=total,status',
      list({ orderBy: sorts('total', 'status') }),
      'a sort on total,status, which no index covers',
    ],
    [
      'mixed directions: sort=status,-total',
      list({ orderBy: sorts('status', '-total') }),
      'a sort on status,-total, which no index covers',
    ],
    [
      'the sort skips a field of the index',
      list({ where: cmp('total', 'equals', 1), orderBy: sorts('status') }),
      'a filter on total (equals) that no index serves',
    ],
    [
      'a sort past the index',
      list({ orderBy: sorts('status', 'total', 'note') }),
      'a sort on status,total,note, which no index covers',
    ],
    [
      'an in does not fix the order',
      list({ where: cmp('status', 'in', ['open', 'paid']), orderBy: sorts('total') }),
      'a sort on total, which no index covers',
    ],
    [
      'a range does not fix the order',
      list({ where: cmp('status', 'gt', 'a'), orderBy: sorts('total') }),
      'a sort on total, which no index covers',
    ],
    [
      'a sort on an unrelated field behind an equality prefix',
      list({ where: cmp('status', 'equals', 'open'), orderBy: sorts('note') }),
      'a sort on note, which no index covers',
    ],
    [
      'a descending index field read forwards: sort=-placedAt,total',
      list({ orderBy: sorts('-placedAt', 'total') }),
      undefined,
    ],
    [
      'a descending index field read backwards: sort=placedAt,-total',
      list({ orderBy: sorts('placedAt', '-total') }),
      undefined,
    ],
    [
      'a descending index field, mixed: sort=placedAt,total',
      list({ orderBy: sorts('placedAt', 'total') }),
      'a sort on placedAt,total, which no index covers',
    ],
    [
      'every field of a composite unique: any sort',
      list({
        where: and(cmp('shopId', 'equals', 1), cmp('code', 'equals', 'A'), cmp('note', 'contains', 'x')),
        orderBy: sorts('note'),
      }),
      undefined,
    ],
    [
      'part of a composite unique: the sort must be covered',
      list({ where: cmp('shopId', 'equals', 1), orderBy: sorts('note') }),
      'a sort on note, which no index covers',
    ],
    [
      'part of a composite unique, sorted by the rest',
      list({ where: cmp('shopId', 'equals', 1), orderBy: sorts('-code', 'note') }),
      undefined,
    ],
    ['an embed through a foreign key leading an index', list({ select: [embed('lines')] }), undefined],
    [
      'an embed through a foreign key second in an index',
      list({ select: [embed('tags')] }),
      'an embed of tags, whose Tag.ticketId no index covers',
    ],
  ])('%s', (_name, shape, want) => {
    expect(listCost(indexed, indexed.require('Ticket'), shape)).toBe(want);
  });
});

describe('readOneCost', () => {
  it.each<[string, string, SelectItem[] | null, string | undefined]>([
    ['a GET by id', 'Order', null, undefined],
    ['a GET by id embedding by the target key', 'Order', [embed('customer')], undefined],
    [
      'a GET by id embedding through an unindexed foreign key',
      'Customer',
      [embed('orders')],
      'an embed of orders, whose Order.customerId no index covers',
    ],
  ])('%s', (_name, tableName, select, want) => {
    expect(readOneCost(catalog, table(tableName), select)).toBe(want);
  });
});

describe('indexedFields (what a refused caller is told to filter or sort on)', () => {
  it.each([
    ['Order', ['id']],
    ['Customer', ['id', 'email']],
    ['OrderItem', ['orderId']],
  ])('%s: %j', (tableName, want) => {
    expect(indexedFields(table(tableName))).toEqual(want);
  });
});
