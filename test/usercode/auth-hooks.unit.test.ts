/** The checks of what auth.claims and auth.mail answer (docs/own-code.md "Auth hooks"). */
import { describe, expect, it } from 'vitest';
import { checkExtraClaims, checkMailAnswer, MAX_EXTRA_CLAIMS_BYTES } from '../../runtime/usercode/index.ts';

const problem = (value: unknown) => {
  const checked = checkExtraClaims(value);
  return checked.ok ? undefined : checked.problem;
};

describe('checkExtraClaims', () => {
  it('takes plain JSON and nothing', () => {
    expect(checkExtraClaims({ plan: 'gold', tags: ['a', 1, true, null], nested: { n: 1.5 } })).toEqual({
      ok: true,
      claims: { plan: 'gold', tags: ['a', 1, true, null], nested: { n: 1.5 } },
    });
    expect(checkExtraClaims(undefined)).toEqual({ ok: true, claims: {} });
    expect(checkExtraClaims(Object.assign(Object.create(null), { a: 1 })).ok).toBe(true);
  });

  it('refuses reserved names and the svcgen prefix', () => {
    for (const name of ['iss', 'sub', 'aud', 'exp', 'nbf', 'iat', 'jti', 'sid', 'email', 'roles', 'svcgen', 'svcgenX'])
      expect(problem({ [name]: 1 })).toContain(`the claims "${name}" are reserved`);
  });

  it('refuses what JSON cannot carry as is, naming where', () => {
    expect(problem('plan')).toBe('auth.claims of your code: must return an object of claims (or nothing)');
    expect(problem([1])).toBe('auth.claims of your code: must return an object of claims (or nothing)');
    expect(problem({ a: { b: [Number.NaN] } })).toContain('claims.a.b[0] (NaN is not a JSON number)');
    expect(problem({ when: new Date(0) })).toContain('claims.when (a Date object)');
    expect(problem({ n: 1n })).toContain('claims.n (a bigint)');
    expect(problem({ f: () => 1 })).toContain('claims.f (a function)');
    expect(problem({ u: undefined })).toContain('claims.u (undefined)');
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = [deep];
    expect(problem({ deep })).toContain('nested deeper than 32 levels');
  });

  it('counts UTF-8 bytes of the JSON against MAX_EXTRA_CLAIMS_BYTES', () => {
    // {"a":"…"} is 8 bytes around the value.
    expect(checkExtraClaims({ a: 'x'.repeat(MAX_EXTRA_CLAIMS_BYTES - 8) }).ok).toBe(true);
    expect(problem({ a: 'x'.repeat(MAX_EXTRA_CLAIMS_BYTES - 7) })).toContain(
      `the claims take ${MAX_EXTRA_CLAIMS_BYTES + 1} bytes as JSON, more than the ${MAX_EXTRA_CLAIMS_BYTES} allowed`,
    );
    // é is 2 bytes in UTF-8.
    expect(problem({ a: 'é'.repeat(MAX_EXTRA_CLAIMS_BYTES / 2) })).toContain('more than the');
  });
});

describe('checkMailAnswer', () => {
  it("takes a rendered mail, 'sent' and undefined", () => {
    expect(checkMailAnswer({ subject: 'Hi', text: 't', html: '<p>t</p>', extra: 1 })).toEqual({
      ok: true,
      answer: { subject: 'Hi', text: 't', html: '<p>t</p>' },
    });
    expect(checkMailAnswer('sent')).toEqual({ ok: true, answer: 'sent' });
    expect(checkMailAnswer(undefined)).toEqual({ ok: true, answer: undefined });
  });

  it.each([
    [null, 'it returned a null'],
    ['send', 'it returned a string'],
    [{ subject: ' ', text: 't' }, 'subject must be a non-empty string'],
    [{ subject: 'a\r\nBcc: x@y', text: 't' }, 'subject must be one line'],
    [{ subject: 'a', text: 1 }, 'text must be a string'],
    [{ subject: 'a', text: 't', html: 1 }, 'html must be a string when given'],
  ])('refuses %j: %s', (answer, message) => {
    expect(checkMailAnswer(answer)).toEqual({
      ok: false,
      problem: `auth.mail of your code: ${message}; return { subject, text, html? }, 'sent' or undefined`,
    });
  });
});
