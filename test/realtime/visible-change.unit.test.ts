// What a subscriber sees of a captured change (runtime/realtime/matching.ts visibleChange): the
// role's read filter on the record, fields the role may not read removed, a field visible only on
// some rows (two roles) null elsewhere and unknown to `where`, then the subscriber's `where`.
import { describe, expect, it } from 'vitest';
import type { Condition } from '../../runtime/query/index.ts';
import type { LiveEvent } from '../../runtime/realtime/hub.ts';
import { visibleChange } from '../../runtime/realtime/matching.ts';
import { apiKey, cmp, policyOf, roles, table, TRUE, user, USER_ID } from '../support/query-unit.ts';

const order = table('Order');
const record: Record<string, unknown> = {
  id: 1,
  status: 'open',
  total: 10,
  note: 'private',
  placedAt: null,
  invoiceId: null,
  receiptId: null,
  customerId: USER_ID,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};
const event = (changes: Record<string, unknown> = {}, changedFields: string[] = []): LiveEvent => ({
  id: 'evt_1',
  operation: 'UPDATE',
  record: { ...record, ...changes },
  changedFields,
  timestamp: '2026-01-01T00:00:01.000Z',
});

const policy = policyOf(
  roles({
    own: { tables: { Order: { read: { filter: { customerId: '$user.id' }, fields: ['id', 'total', 'customerId'] } } } },
    // Every open order, with its note: a user holding both roles sees `note` on open orders only.
    openNotes: { tables: { Order: { read: { filter: { status: 'open' } } } } },
  }),
);

describe('visibleChange', () => {
  it("the role's filter decides on the record after the change: another customer's order is not seen", () => {
    const access = policy.access(user(['own']));
    expect(visibleChange(order, access, event({ customerId: 'someone-else' }), TRUE)).toBeUndefined();
    expect(visibleChange(order, access, event({}, ['total', 'note']), TRUE)).toEqual({
      id: 'evt_1',
      event: 'UPDATE',
      record: { id: 1, total: 10, customerId: USER_ID },
      changedFields: ['total'],
      timestamp: '2026-01-01T00:00:01.000Z',
    });
  });

  it('two roles: a field of one role only is shown on its rows, null elsewhere, and unknown to where there', () => {
    const access = policy.access(user(['own', 'openNotes']));
    expect(visibleChange(order, access, event(), TRUE)?.record).toEqual(record);
    // Paid: only `own` lets it be read, and `own` does not list note or status.
    const paid = visibleChange(order, access, event({ status: 'paid' }), TRUE)?.record;
    expect(paid).toEqual({ ...record, status: null, note: null, placedAt: null, createdAt: null, updatedAt: null });
    const noNote: Condition = cmp('note', 'equals', null);
    expect(visibleChange(order, access, event({ status: 'paid' }), noNote)).toBeUndefined();
    expect(visibleChange(order, access, event({ note: null }), noNote)?.record.note).toBe(null);
  });

  it("the subscriber's where applies after the role's filter", () => {
    const access = policy.access(apiKey(['openNotes']));
    expect(visibleChange(order, access, event(), cmp('total', 'gt', 10))).toBeUndefined();
    expect(visibleChange(order, access, event(), cmp('total', 'gte', 10))?.record.total).toBe(10);
    expect(visibleChange(order, access, event({ status: 'paid' }), TRUE)).toBeUndefined();
  });

  it('a role that may not read the table sees nothing', () => {
    expect(visibleChange(order, policy.access(apiKey(['nobody'])), event(), TRUE)).toBeUndefined();
  });
});
