// The pooled random bytes behind cursor nonces and client-side ids (runtime/secrets/random.ts):
// slices never overlap, survive the pool's refill, and look random.
import { describe, expect, it } from 'vitest';
import { pooledRandomBytes } from '../../runtime/secrets/index.ts';

describe('pooledRandomBytes', () => {
  it('hands out distinct slices across refills and keeps earlier ones intact', () => {
    const slices = Array.from({ length: 2_000 }, () => pooledRandomBytes(12)); // ~6 refills of the pool
    const copies = slices.map((s) => Buffer.from(s).toString('hex'));
    expect(new Set(copies).size).toBe(slices.length);
    for (let i = 0; i < 5; i++) pooledRandomBytes(1_000); // more refills
    expect(slices.map((s) => s.toString('hex'))).toEqual(copies);
    expect(slices.every((s) => s.length === 12)).toBe(true);
  });

  it('a caller changing its slice changes nobody else’s', () => {
    const a = pooledRandomBytes(16);
    const b = pooledRandomBytes(16);
    const before = b.toString('hex');
    a.fill(0);
    expect(b.toString('hex')).toBe(before);
  });

  it('gives large requests their own bytes, and every byte value turns up', () => {
    expect(pooledRandomBytes(5_000)).toHaveLength(5_000);
    const counts = new Array(256).fill(0);
    for (let i = 0; i < 400; i++) for (const byte of pooledRandomBytes(64)) counts[byte]++;
    expect(counts.every((c) => c > 0)).toBe(true);
  });
});
