/**
 * The one way a request body becomes a JSON value (data API, _query, bulk, auth, keys, webhooks,
 * storage, the SSE subscription body). Everything that could cost more than the body's length is
 * refused first, in linear scans: bytes that are not UTF-8, nesting deeper than
 * LIMITS.maxJsonDepth, and afterwards strings that hold an unpaired surrogate (`"\ud800"`), which
 * no UTF-8 column can store faithfully. The nesting bound (boundJsonDepth) is also what the GraphQL
 * endpoint and the subscription socket check before anything parses their JSON (docs/api.md
 * §7 "Limits", docs/realtime.md "Lifecycle and limits").
 */
import { LIMITS } from '../model/index.ts';

export type JsonBodyRule = 'json' | 'utf8' | 'max_depth' | 'unicode';

export class JsonBodyError extends Error {
  constructor(
    readonly rule: JsonBodyRule,
    message: string,
    /** Where in the body: `body`, or the path of the string (`items[0].name`). */
    readonly field = 'body',
  ) {
    super(message);
    this.name = 'JsonBodyError';
  }
}

export const MAX_JSON_DEPTH = LIMITS.maxJsonDepth;

// ignoreBOM keeps a leading BOM in the text, so it stays the JSON error it always was.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Whether arrays/objects nest deeper than `max`, skipping strings; unbalanced text is left to JSON.parse. */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Jump to the closing quote: the first one after an even run of backslashes.
      for (;;) {
        const close = text.indexOf('"', i + 1);
        if (close === -1) return false;
        let k = close - 1;
        while (text.charCodeAt(k) === 0x5c) k--;
        i = close;
        if ((close - 1 - k) % 2 === 0) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      if (--depth < 0) return false;
    }
  }
  return false;
}

/**
 * The nesting bound of every JSON input, on every transport: throws JsonBodyError `max_depth`
 * when `text` nests arrays and objects more than MAX_JSON_DEPTH levels deep, before JSON.parse or
 * any walker sees it. `what` names the input in the message; `envelope` is the levels a wrapper
 * adds around it (a graphql-ws message's `{"type":…,"payload":…}`), which do not count.
 */
export function boundJsonDepth(text: string, what = 'the body', envelope = 0): void {
  if (nestsDeeperThan(text, MAX_JSON_DEPTH + envelope))
    throw new JsonBodyError(
      'max_depth',
      `${what} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep (the limit is ${MAX_JSON_DEPTH})`,
    );
}

// In a `u` regex a well-formed pair is one code point, so \p{Cs} only matches a lone surrogate.
const LONE_SURROGATE = /\p{Cs}/u;
// A decoded UTF-8 text cannot hold a surrogate, so one can only come from a \uD800–\uDFFF escape.
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

function loneSurrogateAt(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return LONE_SURROGATE.test(value) ? path : undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = loneSurrogateAt(value[i], `${path}[${i}]`);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      // A bad key is reported at its object, so the answer does not echo it.
      if (LONE_SURROGATE.test(key)) return path;
      const at = path ? `${path}.${key}` : key;
      const found = loneSurrogateAt(item, at);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** Decodes and parses a JSON body; every refusal is a JsonBodyError naming its rule. */
export function parseJsonBody(body: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new JsonBodyError('utf8', 'the body is not valid UTF-8; send JSON encoded as UTF-8');
  }
  boundJsonDepth(text);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new JsonBodyError('json', `the body is not valid JSON: ${(error as Error).message}`);
  }
  if (SURROGATE_ESCAPE.test(text)) {
    const at = loneSurrogateAt(value, '');
    if (at !== undefined) {
      throw new JsonBodyError(
        'unicode',
        `${at || 'body'}: a string holds an unpaired surrogate escape (such as \\ud800), which is not valid Unicode`,
        at || 'body',
      );
    }
  }
  return value;
}
