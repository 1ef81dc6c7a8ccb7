// PerCallerCache (runtime/query/per-caller.ts): what list statements and resolved selects are
// kept in. Entries of one caller never answer another; the total is bounded.
import { describe, expect, it } from 'vitest';
import { PerCallerCache } from '../../runtime/query/index.ts';

describe('PerCallerCache', () => {
  it('keeps values per caller object: the same key of another caller is a miss', () => {
    const cache = new PerCallerCache<string>(10);
    const alice = {};
    const bob = {};
    cache.set(alice, 'Order\nsort=total', 'alice statement');
    expect(cache.get(alice, 'Order\nsort=total')).toBe('alice statement');
    expect(cache.get(bob, 'Order\nsort=total')).toBeUndefined();
    cache.set(bob, 'Order\nsort=total', 'bob statement');
    expect(cache.get(alice, 'Order\nsort=total')).toBe('alice statement');
    expect(cache.get(bob, 'Order\nsort=total')).toBe('bob statement');
  });

  it('a key that looks like another caller id plus key cannot reach that entry', () => {
    const cache = new PerCallerCache<string>(10);
    const first = {};
    const second = {};
    cache.set(first, 'x', 'first');
    // second gets id 1; a key "0\nx" under it is "1\n0\nx", not "0\nx"
    cache.set(second, 'y', 'second');
    expect(cache.get(second, '0\nx')).toBeUndefined();
  });

  it('holds at most max entries across callers, dropping the oldest first', () => {
    const cache = new PerCallerCache<number>(3);
    const callers = [{}, {}, {}, {}];
    callers.forEach((c, i) => cache.set(c, 'k', i));
    expect(cache.get(callers[0]!, 'k')).toBeUndefined();
    expect(callers.slice(1).map((c) => cache.get(c, 'k'))).toEqual([1, 2, 3]);
  });
});
