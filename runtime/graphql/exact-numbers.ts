/**
 * Decimal values digit for digit, as REST writes them (docs/api.md §5.2: `12.50`, with the
 * column's scale, never rounded). JSON.parse would turn the database's `12.50` into 12.5 (and
 * round past 15 digits), and Node 20's JSON has no raw numbers, so: records are parsed keeping the
 * text of every number that a JavaScript number would not write back the same (RawNumber); the
 * Decimal scalar answers such a number as a marker string, which the HTTP layer replaces by the
 * text itself in the finished body. Other types read the number as usual.
 */
import { randomBytes } from 'node:crypto';

export class RawNumber {
  constructor(readonly text: string) {}
}

/** A number's value where exactness is not asked for (Float, Int, Json members). */
export function plainNumber(value: unknown): unknown {
  if (value instanceof RawNumber) return Number(value.text);
  if (Array.isArray(value)) return value.map(plainNumber);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) define(out, k, plainNumber(v));
    return out;
  }
  return value;
}

// Random per process: no text a caller writes can be taken for a marker (data cannot hold U+0000 either).
const NONCE = randomBytes(9).toString('base64url');
const MARK = `\u0000decimal:${NONCE}:`;
const MARKED = new RegExp(`"\\\\u0000decimal:${NONCE}:(-?[0-9]+(?:\\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"`, 'g');

/** What the Decimal scalar answers for a number whose text must stay as it is. */
export function decimalMarker(raw: RawNumber): string {
  return `${MARK}${raw.text}`;
}

/** The finished JSON body with each Decimal marker replaced by its number text. */
export function unmarkDecimals(body: string): string {
  return body.includes(`\\u0000decimal:${NONCE}:`) ? body.replace(MARKED, '$1') : body;
}

function define(target: Record<string, unknown>, key: string, value: unknown): void {
  // A Json member may be named __proto__: an own property, as JSON.parse makes it.
  if (key === '__proto__')
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

const NUMBER = /-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?/y;

/** JSON text from PostgreSQL (well formed) → values, numbers that would not round-trip kept as RawNumber. */
export function parseKeepingNumbers(text: string): unknown {
  let i = 0;
  const space = () => {
    for (let c = text.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = text.charCodeAt(++i));
  };
  const string = (): string => {
    const start = i;
    let from = i + 1;
    for (;;) {
      const quote = text.indexOf('"', from);
      if (quote === -1) throw new SyntaxError('unterminated string in a database record');
      let backslashes = 0;
      while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++;
      from = quote + 1;
      if (backslashes % 2 === 0) break;
    }
    i = from;
    const raw = text.slice(start, i);
    return raw.includes('\\') ? (JSON.parse(raw) as string) : raw.slice(1, -1);
  };
  const value = (): unknown => {
    space();
    const c = text[i];
    if (c === '{') {
      i++;
      const out: Record<string, unknown> = {};
      space();
      if (text[i] === '}') return (i++, out);
      for (;;) {
        space();
        const key = string();
        space();
        i++; // :
        define(out, key, value());
        space();
        if (text[i++] === '}') return out;
      }
    }
    if (c === '[') {
      i++;
      const out: unknown[] = [];
      space();
      if (text[i] === ']') return (i++, out);
      for (;;) {
        out.push(value());
        space();
        if (text[i++] === ']') return out;
      }
    }
    if (c === '"') return string();
    if (text.startsWith('true', i)) return ((i += 4), true);
    if (text.startsWith('false', i)) return ((i += 5), false);
    if (text.startsWith('null', i)) return ((i += 4), null);
    NUMBER.lastIndex = i;
    const match = NUMBER.exec(text);
    if (!match) throw new SyntaxError(`unexpected ${JSON.stringify(text[i] ?? 'end')} in a database record`);
    const t = match[0];
    i += t.length;
    const n = Number(t);
    return String(n) === t ? n : new RawNumber(t);
  };
  return value();
}
