// readCredential (runtime/principal/authenticate.ts) reads `<scheme> <credential>` exactly as the
// pattern /^([A-Za-z][A-Za-z0-9_.+-]*) +(\S+)$/ on the trimmed header value does.
import { describe, expect, it } from 'vitest';
import type { ApiRequest } from '../../runtime/http/index.ts';
import { readCredential } from '../../runtime/principal/authenticate.ts';

function read(authorization: string): unknown {
  try {
    return readCredential({ headers: { authorization } } as unknown as ApiRequest);
  } catch (error) {
    return { status: (error as { status?: number }).status ?? 'thrown', kind: (error as { kind?: string }).kind };
  }
}

function byPattern(value: string): unknown {
  const match = /^([A-Za-z][A-Za-z0-9_.+-]*) +(\S+)$/.exec(value.trim());
  if (!match) return { status: 401, kind: 'unauthorized' };
  return { scheme: match[1], token: match[2], bearer: match[1]!.toLowerCase() === 'bearer' };
}

describe('readCredential', () => {
  it('reads the scheme, the credential and whether it is Bearer', () => {
    expect(read('Bearer abc')).toEqual({ scheme: 'Bearer', token: 'abc', bearer: true });
    expect(read('  bEaReR   a.b-c_d=  ')).toEqual({ scheme: 'bEaReR', token: 'a.b-c_d=', bearer: true });
    expect(read('sk_live x')).toEqual({ scheme: 'sk_live', token: 'x', bearer: false });
    expect(read('Bearers x')).toEqual({ scheme: 'Bearers', token: 'x', bearer: false });
  });

  it('refuses what the pattern refuses, with a 401', () => {
    for (const value of [
      'Bearer',
      'Bearer a b',
      'Bearer\tabc',
      '1abc x',
      ' x',
      '-a x',
      'Bea\nrer x',
      'Bearer a\u00a0b',
    ]) {
      expect(read(value)).toEqual({ status: 401, kind: 'unauthorized' });
    }
  });

  it('agrees with the pattern on 50,000 generated values', () => {
    const pieces = [
      'a',
      'B',
      'e',
      'r',
      'E',
      ' ',
      ' ',
      '\t',
      '\n',
      '\u00a0',
      '1',
      '_',
      '.',
      '+',
      '-',
      '=',
      '/',
      'é',
      '\u2028',
      'bearer',
      'Bearer',
    ];
    let seed = 20;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed;
    };
    for (let i = 0; i < 50_000; i++) {
      let value = '';
      for (let n = next() % 9; n > 0; n--) value += pieces[next() % pieces.length];
      if (value === '') continue; // no header: no credential
      expect(read(value), JSON.stringify(value)).toEqual(byPattern(value));
    }
  });
});
