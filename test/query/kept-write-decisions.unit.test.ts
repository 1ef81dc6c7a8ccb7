// A create's policy work (runtime/query/write-decisions.ts writeRules, createPresets) is done once
// per caller, table and set of written fields: repeated creates of one shape reuse it, and a
// caller with another grant (other roles, or other values of its variables) gets its own.
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { createPresets, writeRules, WriteRefused } from '../../runtime/query/index.ts';
import { apiKey, policyOf, scopeOf, SHOP_ROLES, table, user, USER_ID } from '../support/query-unit.ts';

const calls = vi.hoisted(() => ({ writeDecision: 0, presetsOf: 0 }));
vi.mock('../../runtime/query/policy.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../runtime/query/policy.ts')>();
  return {
    ...real,
    writeDecision: (...args: Parameters<typeof real.writeDecision>) => {
      calls.writeDecision++;
      return real.writeDecision(...args);
    },
    presetsOf: (...args: Parameters<typeof real.presetsOf>) => {
      calls.presetsOf++;
      return real.presetsOf(...args);
    },
  };
});

const policy = policyOf(SHOP_ROLES);
const OTHER_USER_ID = '1c2d3e4f-5a6b-4c7d-8e9f-a0b1c2d3e4f5';

beforeEach(() => {
  calls.writeDecision = 0;
  calls.presetsOf = 0;
});

describe('create policy work kept per caller and field set', () => {
  it('several creates of one shape decide once, whatever the order of the fields', () => {
    // One principal, as the server keeps it while its credential is cached; a scope per request.
    const principal = user(['customer']);
    const scope = () => scopeOf(policy.access(principal));
    for (const fields of [['total'], ['total'], ['total']]) {
      expect(createPresets(scope(), table('Order'), fields)).toEqual({ customerId: USER_ID });
      writeRules(scope(), table('Order'), 'create', fields);
    }
    for (const fields of [
      ['total', 'customerId'],
      ['customerId', 'total'],
    ])
      expect(createPresets(scope(), table('Order'), fields)).toEqual({});
    expect(calls).toEqual({ writeDecision: 2, presetsOf: 2 });
  });

  it('a caller with another grant gets its own presets', () => {
    const mine = scopeOf(policy.access(user(['customer'])));
    const other = scopeOf(policy.access(user(['customer'], OTHER_USER_ID)));
    const key = scopeOf(policy.access(apiKey(['customer'])));
    expect(createPresets(mine, table('Order'), ['total'])).toEqual({ customerId: USER_ID });
    expect(createPresets(other, table('Order'), ['total'])).toEqual({ customerId: OTHER_USER_ID });
    // An API key has no $user.id: its rule matches no row and presets nothing.
    expect(createPresets(key, table('Order'), ['total'])).toEqual({});
    expect(createPresets(mine, table('Order'), ['total'])).toEqual({ customerId: USER_ID });
    expect(calls).toEqual({ writeDecision: 3, presetsOf: 3 });
  });

  it('a refusal is not kept: the same fields are refused each time', () => {
    const scope = scopeOf(policy.access(user(['customer'])));
    for (let i = 0; i < 2; i++) {
      expect(() => createPresets(scope, table('Order'), ['total', 'note'])).toThrow(
        new WriteRefused('your role may not write note of Order', ['note']),
      );
    }
    expect(() => writeRules(scope, table('Order'), 'delete', [])).toThrow('your role may not delete Order records');
    expect(calls.writeDecision).toBe(0);
  });
});
