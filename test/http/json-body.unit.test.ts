// The one reader of request bodies (runtime/http/json-body.ts, request.ts), without a server: the
// size limit (413), the media type (415), and what JSON is refused with which rule (400,
// docs/api.md §7 "Limits"). One row per case.
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  bodyReader,
  JsonBodyError,
  MAX_JSON_DEPTH,
  parseJsonBody,
  Problem,
  readJson,
  type ApiRequest,
} from '../../runtime/http/index.ts';
import { boundJsonDepth, nestsDeeperThan } from '../../runtime/http/json-body.ts';

const bytes = (text: string) => new TextEncoder().encode(text);

/** What parseJsonBody gave, or the rule, field and message it refused with. */
function outcome(body: Uint8Array): unknown {
  try {
    return { value: parseJsonBody(body) };
  } catch (error) {
    if (!(error instanceof JsonBodyError)) throw error;
    return { rule: error.rule, field: error.field, message: error.message };
  }
}

/** JSON.parse's own message for `text`, which the 400 passes on (it differs between Node versions). */
function parseMessage(text: string): string {
  try {
    JSON.parse(text);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error(`${text} parses`);
}

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const SURROGATE = (at: string) =>
  `${at}: a string holds an unpaired surrogate escape (such as \\ud800), which is not valid Unicode`;

describe('parseJsonBody', () => {
  it.each<[string, Uint8Array, unknown]>([
    [
      'an object',
      bytes('{"name":"Lyon","n":1.5,"ok":true,"none":null}'),
      { value: { name: 'Lyon', n: 1.5, ok: true, none: null } },
    ],
    ['a bare scalar (the caller checks the shape)', bytes('42'), { value: 42 }],
    ['a well-formed surrogate pair escape', bytes('"\\ud83d\\ude00"'), { value: '😀' }],
    ['UTF-8 text', bytes('{"city":"Zürich"}'), { value: { city: 'Zürich' } }],
    [
      `${MAX_JSON_DEPTH} levels, the limit`,
      bytes(nested(MAX_JSON_DEPTH)),
      { value: JSON.parse(nested(MAX_JSON_DEPTH)) },
    ],
    ['brackets inside strings do not count', bytes(`["${'['.repeat(100)}"]`), { value: ['['.repeat(100)] }],
    // JSON.parse keeps the last of repeated keys; so does the body reader (nothing merges them).
    ['a repeated key: the last wins', bytes('{"a":1,"a":2}'), { value: { a: 2 } }],
    [
      `${MAX_JSON_DEPTH + 1} levels`,
      bytes(nested(MAX_JSON_DEPTH + 1)),
      {
        rule: 'max_depth',
        field: 'body',
        message: `the body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep (the limit is ${MAX_JSON_DEPTH})`,
      },
    ],
    [
      'bytes that are not UTF-8',
      new Uint8Array([0x7b, 0xff, 0x7d]),
      { rule: 'utf8', field: 'body', message: 'the body is not valid UTF-8; send JSON encoded as UTF-8' },
    ],
    [
      'a lone surrogate in a nested string',
      bytes('{"a":[{"b":"x\\ud800"}]}'),
      { rule: 'unicode', field: 'a[0].b', message: SURROGATE('a[0].b') },
    ],
    [
      'a lone low surrogate at the top',
      bytes('"\\udc00"'),
      { rule: 'unicode', field: 'body', message: SURROGATE('body') },
    ],
    // A bad key is reported at its object, so the answer does not echo it.
    [
      'a lone surrogate in a top-level key',
      bytes('{"\\ud800":1}'),
      { rule: 'unicode', field: 'body', message: SURROGATE('body') },
    ],
    [
      'a lone surrogate in a nested key',
      bytes('{"a":{"\\udc00x":1}}'),
      { rule: 'unicode', field: 'a', message: SURROGATE('a') },
    ],
  ])('%s', (_name, body, want) => {
    expect(outcome(body)).toEqual(want);
  });

  it.each(['{"a":1,}', '', '{"a":', "{'a':1}", '\ufeff{}', 'NaN', '[1]]'])(
    "refuses %j with JSON.parse's message (rule json)",
    (text) => {
      expect(outcome(bytes(text))).toEqual({
        rule: 'json',
        field: 'body',
        message: `the body is not valid JSON: ${parseMessage(text)}`,
      });
    },
  );

  it('checks the depth before parsing: 100,000 levels are refused as max_depth, not a stack overflow', () => {
    expect(outcome(bytes(nested(100_000)))).toMatchObject({ rule: 'max_depth' });
  });

  it('keeps "__proto__" an own key: the value gets no new prototype', () => {
    const value = parseJsonBody(bytes('{"__proto__":{"admin":true}}')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, '__proto__')).toBe(true);
    expect(value.admin).toBeUndefined();
    expect(Object.keys(value)).toEqual(['__proto__']);
  });
});

describe('nestsDeeperThan', () => {
  it.each<[string, number, boolean]>([
    ['[[]]', 2, false],
    ['[[[]]]', 2, true],
    ['{"a":{"b":[1]}}', 2, true],
    ['{"a":{"b":[1]}}', 3, false],
    ['"[[["', 1, false],
    // an escaped quote does not end the string; an escaped backslash before a quote does
    ['["\\"[[[["]', 1, false],
    ['["\\\\"[[', 1, true],
    // unbalanced text is left to JSON.parse
    [']][[[[', 1, false],
    ['"unterminated [[[[', 1, false],
  ])('%s deeper than %i: %s', (text, max, want) => {
    expect(nestsDeeperThan(text, max)).toBe(want);
  });
});

describe('boundJsonDepth: the one bound of every JSON input', () => {
  const refusal = (text: string, what?: string, envelope?: number) => {
    try {
      boundJsonDepth(text, what, envelope);
      return 'within';
    } catch (error) {
      if (!(error instanceof JsonBodyError)) throw error;
      return { rule: error.rule, field: error.field, message: error.message };
    }
  };
  const deep = (what: string) =>
    `${what} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep (the limit is ${MAX_JSON_DEPTH})`;

  it.each<[string, { given: [string, string?, number?]; want: unknown }]>([
    ['the limit', { given: [nested(MAX_JSON_DEPTH)], want: 'within' }],
    [
      'one more, named as the body',
      { given: [nested(MAX_JSON_DEPTH + 1)], want: { rule: 'max_depth', field: 'body', message: deep('the body') } },
    ],
    // A graphql-ws message: its envelope's level does not count, its payload's do.
    [
      'a payload at the limit in an envelope',
      { given: [`{"payload":${nested(MAX_JSON_DEPTH)}}`, 'x', 1], want: 'within' },
    ],
    [
      'a payload one level over in an envelope',
      {
        given: [`{"payload":${nested(MAX_JSON_DEPTH + 1)}}`, 'the message payload', 1],
        want: { rule: 'max_depth', field: 'body', message: deep('the message payload') },
      },
    ],
    ['20,000 levels', { given: [nested(20_000), 'the body'], want: expect.objectContaining({ rule: 'max_depth' }) }],
  ])('%s', (_name, { given, want }) => {
    expect(refusal(...given)).toEqual(want);
  });
});

/** A request stream as node:http hands it over: chunks, and the headers the client sent. */
function incoming(chunks: string[], headers: Record<string, string> = {}): IncomingMessage {
  return Object.assign(Readable.from(chunks.map((c) => Buffer.from(c))), { headers }) as unknown as IncomingMessage;
}

async function problemOf(
  promise: Promise<unknown>,
): Promise<{ status: number; kind: string; detail: string; errors: unknown[] }> {
  const error = await promise.then(
    () => {
      throw new Error('expected a Problem');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(Problem);
  const p = error as Problem;
  return { status: p.status, kind: p.kind, detail: p.detail, errors: p.errors };
}

describe('bodyReader: the size limit', () => {
  it('reads the chunks into one buffer, once however often it is asked', async () => {
    const read = bodyReader(incoming(['{"a":', '1}']), 10);
    const first = await read();
    expect(first?.toString()).toBe('{"a":1}');
    expect(await read()).toBe(first);
  });

  it('gives undefined for an empty body', async () => {
    expect(await bodyReader(incoming([]), 10)()).toBeUndefined();
  });

  it('takes a body of exactly the limit', async () => {
    expect((await bodyReader(incoming(['12345', '67890']), 10)())?.toString()).toBe('1234567890');
  });

  it('refuses a declared Content-Length above the limit before reading (413)', async () => {
    expect(await problemOf(bodyReader(incoming(['x'], { 'content-length': '11' }), 10)())).toEqual({
      status: 413,
      kind: 'payload-too-large',
      detail: 'the request body is 11 bytes; the limit is 10 bytes',
      errors: [],
    });
  });

  it('refuses a body that grows past the limit while it streams in (413)', async () => {
    expect(await problemOf(bodyReader(incoming(['123456', '789012']), 10)())).toEqual({
      status: 413,
      kind: 'payload-too-large',
      detail: 'the request body is larger than the limit of 10 bytes',
      errors: [],
    });
  });
});

/** An ApiRequest with only what readJson uses. */
function request(body: string | undefined, contentType?: string): ApiRequest {
  return {
    headers: contentType === undefined ? {} : { 'content-type': contentType },
    readBody: async () => (body === undefined ? undefined : Buffer.from(body)),
  } as unknown as ApiRequest;
}

describe('readJson: media types and refusals', () => {
  it.each([
    ['application/json', ['application/json']],
    ['application/json; charset=utf-8', ['application/json']],
    ['Application/JSON', ['application/json']],
    ['application/merge-patch+json', ['application/json', 'application/merge-patch+json']],
  ])('accepts %s where %j are accepted', async (type, types) => {
    expect(await readJson(request('{"a":1}', type), types)).toEqual({ a: 1 });
  });

  it.each<[string | undefined, string[], string]>([
    ['text/plain', ['application/json'], 'Content-Type text/plain is not accepted here; send application/json'],
    [
      'application/merge-patch+json',
      ['application/json'],
      'Content-Type application/merge-patch+json is not accepted here; send application/json',
    ],
    [
      'application/x-www-form-urlencoded',
      ['application/json', 'application/merge-patch+json'],
      'Content-Type application/x-www-form-urlencoded is not accepted here; send application/json or application/merge-patch+json',
    ],
    [undefined, ['application/json'], 'send the body with Content-Type application/json'],
    ['', ['application/json'], 'send the body with Content-Type application/json'],
  ])('refuses Content-Type %j (accepting %j) with 415', async (type, types, detail) => {
    expect(await problemOf(readJson(request('{}', type), types))).toEqual({
      status: 415,
      kind: 'unsupported-media-type',
      detail,
      errors: [],
    });
  });

  it('refuses a missing body with 400 invalid-json, before looking at the type', async () => {
    expect(await problemOf(readJson(request(undefined, 'text/plain')))).toEqual({
      status: 400,
      kind: 'invalid-json',
      detail: 'the request needs a JSON body',
      errors: [],
    });
  });

  it('turns malformed JSON into 400 invalid-json without field errors', async () => {
    expect(await problemOf(readJson(request('{"a":', 'application/json')))).toEqual({
      status: 400,
      kind: 'invalid-json',
      detail: `the body is not valid JSON: ${parseMessage('{"a":')}`,
      errors: [],
    });
  });

  it('turns the other refusals into 400 invalid-json with one field error naming the rule', async () => {
    const message = SURROGATE('items[1]');
    expect(await problemOf(readJson(request('{"items":["ok","\\ud800"]}', 'application/json')))).toEqual({
      status: 400,
      kind: 'invalid-json',
      detail: message,
      errors: [{ field: 'items[1]', rule: 'unicode', message }],
    });
  });
});
