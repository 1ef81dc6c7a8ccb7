// Which reads are expensive (runtime/rest/cost.ts; docs/config.md `database.expensiveRead*`): the
// rule that sends a read through the expensive-read budget, on the shop example's tables, without
// a database. The budget under load: test/rest/fairness.test.ts. One row per case.
import { describe, expect, it } from 'vitest';
import type { Condition, OrderTerm, SelectItem } from '../../runtime/query/index.ts';
import { AGGREGATE_COST, indexedFields, LARGE_OFFSET, LARGE_PAGE, listCost, readOneCost, type ListShape } from '../../runtime/rest/cost.ts';
import { catalog, cmp, table, TRUE } from '../support/query-unit.ts';

const and = (...items: Condition[]): Condition => ({ kind: 'and', items });
const or = (...items: Condition[]): Condition => ({ kind: 'or', items });
const not = (item: Condition): Condition => ({ kind: 'not', item });
const sort = (field: string, direction: 'asc' | 'desc' = 'asc'): OrderTerm[] => [{ field, direction }];
const embed = (relation: string, items: SelectItem[] = []): SelectItem => ({ kind: 'embed', relation, alias: relation, items });
const list = (shape: Partial<ListShape>): ListShape => ({ where: TRUE, orderBy: [], select: null, limit: 100, offset: 0, count: false, ...shape });

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
    ['a sort on an unindexed field', 'Order', list({ orderBy: sort('total') }), 'a sort on total, which no index covers'],
    ['an unindexed second sort key', 'Order', list({ orderBy: [...sort('id'), ...sort('total')] }), undefined],
    ['an unindexed sort behind an equality on the key', 'Order', list({ where: cmp('id', 'in', [1, 2, 3]), orderBy: sort('total') }), undefined],
    ['an unindexed sort behind a range on the key', 'Order', list({ where: cmp('id', 'gt', 5), orderBy: sort('total') }), 'a sort on total, which no index covers'],
    ['a range on the key', 'Order', list({ where: cmp('id', 'gt', 5) }), undefined],
    ['a between on the key', 'Order', list({ where: cmp('id', 'between', [1, 9]) }), undefined],
    ['a filter on an unindexed field', 'Order', list({ where: cmp('status', 'equals', 'paid') }), 'a filter on status (equals) that no index serves'],
    ['an unindexed filter ANDed with an equality on a unique field', 'Customer', list({ where: and(cmp('email', 'equals', 'a@b.c'), cmp('name', 'equals', 'A')) }), undefined],
    ['an unindexed filter ANDed with a range on the key', 'Order', list({ where: and(cmp('id', 'gt', 5), cmp('status', 'equals', 'paid')) }), 'a filter on status (equals) that no index serves'],
    ['an unindexed filter ORed with an indexed one', 'Customer', list({ where: or(cmp('email', 'equals', 'a@b.c'), cmp('name', 'equals', 'A')) }), 'a filter on name (equals) that no index serves'],
    ['an equality on the key inside an OR is not selective', 'Order', list({ where: or(cmp('id', 'equals', 1), cmp('id', 'equals', 2)), orderBy: sort('total') }), 'a sort on total, which no index covers'],
    ['a negated unindexed filter', 'Order', list({ where: not(cmp('status', 'equals', 'paid')) }), 'a filter on status (equals) that no index serves'],
    ['a non-equality on an indexed field', 'Customer', list({ where: cmp('email', 'contains', 'x') }), 'a filter on email (contains) that no index serves'],
    ['a filter through a relation', 'Order', list({ where: cmp('customer.email', 'equals', 'a@b.c') }), 'a filter on customer.email (equals) that no index serves'],
    ['the leading field of a composite key', 'OrderItem', list({ where: cmp('orderId', 'equals', 7), orderBy: sort('orderId') }), undefined],
    ['the second field of a composite key', 'OrderItem', list({ where: cmp('productId', 'equals', 7) }), 'a filter on productId (equals) that no index serves'],
    ['an embed found by the target key', 'Order', list({ select: [embed('customer')] }), undefined],
    ['an embed found by a composite key', 'Order', list({ select: [embed('items')] }), undefined],
    ['an embed through an unindexed foreign key', 'Customer', list({ select: [embed('orders')] }), 'an embed of orders, whose Order.customerId no index covers'],
    ['a nested embed through an unindexed foreign key', 'Order', list({ select: [embed('customer', [embed('orders')])] }), 'an embed of orders, whose Order.customerId no index covers'],
    // a cheap filter does not make up for an expensive embed
    ['an embed after an equality on the key', 'Customer', list({ where: cmp('email', 'equals', 'a@b.c'), select: [embed('orders')] }), 'an embed of orders, whose Order.customerId no index covers'],
  ])('%s', (_name, tableName, shape, want) => {
    expect(listCost(catalog, table(tableName), shape)).toBe(want);
  });

  it('draws the lines at the default page and an offset of 1000', () => {
    expect([LARGE_PAGE, LARGE_OFFSET]).toEqual([100, 1000]);
    expect(AGGREGATE_COST).toBe('an aggregate');
  });
});

describe('readOneCost', () => {
  it.each<[string, string, SelectItem[] | null, string | undefined]>([
    ['a GET by id', 'Order', null, undefined],
    ['a GET by id embedding by the target key', 'Order', [embed('customer')], undefined],
    ['a GET by id embedding through an unindexed foreign key', 'Customer', [embed('orders')], 'an embed of orders, whose Order.customerId no index covers'],
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
