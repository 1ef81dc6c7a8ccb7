/**
 * `instanceof Problem` holds for a Problem of another copy of runtime/http/problems.ts, as a
 * CommonJS project's own code makes with refuse() (runtime/http/problems.ts; docs/own-code.md).
 */
import { describe, expect, it } from 'vitest';
import { Problem } from '../../runtime/http/index.ts';

describe('Problem across module copies', () => {
  it('a Problem of another copy (the same brand, another class) is a Problem; an Error is not', () => {
    class OtherCopy extends Error {}
    Object.defineProperty(OtherCopy.prototype, Symbol.for('svcgen.Problem'), { value: true });
    expect(new OtherCopy('x')).toBeInstanceOf(Problem);
    expect(new Problem('validation', 'x')).toBeInstanceOf(Problem);
    expect(new Error('x')).not.toBeInstanceOf(Problem);
    expect(null).not.toBeInstanceOf(Problem);
    expect({ status: 422 }).not.toBeInstanceOf(Problem);
  });

  it('a subclass keeps the prototype test', () => {
    class Narrow extends Problem {}
    expect(new Narrow('validation', 'x')).toBeInstanceOf(Narrow);
    expect(new Problem('validation', 'x')).not.toBeInstanceOf(Narrow);
  });
});
