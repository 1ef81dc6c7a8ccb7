/** compactJson (runtime/query/json-text.ts): PostgreSQL's spaced jsonb text made compact, strings and numbers untouched. */
import { describe, expect, it } from 'vitest';
import { compactJson } from '../../runtime/query/json-text.ts';

describe('compactJson', () => {
  it('drops the spaces jsonb writes after , and : but none inside strings, escaped quotes and backslashes included', () => {
    expect(compactJson('{"a": 1, "b": [1, 2, {"c": "x, y: z"}]}')).toBe('{"a":1,"b":[1,2,{"c":"x, y: z"}]}');
    expect(compactJson('{"q\\"uote, ": "a \\\\", "n": "\\", still: in"}')).toBe(
      '{"q\\"uote, ":"a \\\\","n":"\\", still: in"}',
    );
    expect(compactJson('[1, \n {"a": null}]')).toBe('[1,{"a":null}]');
  });

  it('keeps number text as written (no rounding through JSON.parse) and returns compact text unchanged', () => {
    expect(compactJson('{"d": 12345678901234567890.000100, "e": 1.0E+2}')).toBe(
      '{"d":12345678901234567890.000100,"e":1.0E+2}',
    );
    const compact = '{"a":"b c","d":[1,2]}';
    expect(compactJson(compact)).toBe(compact);
  });
});
