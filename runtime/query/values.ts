/** JSON values of a validated body → PostgreSQL parameters, and request ids → typed key values. */
import { randomUUID } from 'node:crypto';
import { pooledRandomBytes } from '../secrets/index.ts';
import type { ClientDefault, FieldSpec } from '../model/index.ts';

function one(field: FieldSpec, value: unknown): unknown {
  if (value === null) return null;
  switch (field.type) {
    case 'DateTime':
      return new Date(value as string).toISOString();
    case 'Json':
      return JSON.stringify(value);
    case 'Bytes':
      return Buffer.from(value as string, 'base64');
    case 'BigInt':
    case 'Decimal':
      return String(value);
    default:
      return value;
  }
}

export function toParameter(field: FieldSpec, value: unknown): unknown {
  if (field.list && Array.isArray(value)) {
    // pg writes nested arrays as array literals; Json elements stay JSON text.
    return value.map((v) => one(field, v));
  }
  return one(field, value);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const INT = /^-?\d{1,19}$/;

/**
 * A path id as a value of the key's type, or undefined when it cannot be one: such an id names no
 * record, so the caller answers 404 (README: "Ids").
 */
export function parseKey(field: FieldSpec, raw: string): unknown {
  switch (field.type) {
    case 'Int': {
      if (!INT.test(raw)) return undefined;
      const n = Number(raw);
      return n >= -2147483648 && n <= 2147483647 ? n : undefined;
    }
    case 'BigInt':
      if (!INT.test(raw)) return undefined;
      return BigInt(raw) >= -(2n ** 63n) && BigInt(raw) < 2n ** 63n ? raw : undefined;
    case 'String':
      if (field.nativeType?.[0] === 'Uuid') return UUID.test(raw) ? raw : undefined;
      return raw.includes('\u0000') ? undefined : raw;
    case 'Float':
    case 'Decimal':
      return raw.trim() !== '' && Number.isFinite(Number(raw)) ? raw : undefined;
    case 'Boolean':
      return raw === 'true' ? true : raw === 'false' ? false : undefined;
    case 'DateTime':
      if (Number.isNaN(Date.parse(raw))) return undefined;
      return new Date(raw).getUTCFullYear() >= 1 && new Date(raw).getUTCFullYear() <= 9999
        ? new Date(raw).toISOString()
        : undefined;
    case 'Enum':
      return field.enumValues?.includes(raw) ? raw : undefined;
    default:
      return undefined;
  }
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const URL_ALPHABET = 'useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict';

function uuid7(): string {
  const bytes = pooledRandomBytes(16);
  const ms = BigInt(Date.now());
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

function ulid(): string {
  let time = Date.now();
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = CROCKFORD[time % 32] + out;
    time = Math.floor(time / 32);
  }
  for (const b of pooledRandomBytes(16)) out += CROCKFORD[b % 32];
  return out;
}

function randomString(alphabet: string, length: number): string {
  let out = '';
  for (const b of pooledRandomBytes(length)) out += alphabet[b % alphabet.length];
  return out;
}

/**
 * Values Prisma computes in its client rather than in SQL (`uuid()`, `cuid()`, ...): the runtime
 * writes through SQL, so it fills them in itself. cuid() yields a cuid2-shaped id (README).
 */
export function clientDefaultValue(kind: ClientDefault): string {
  switch (kind) {
    case 'uuid4':
      return randomUUID();
    case 'uuid7':
      return uuid7();
    case 'ulid':
      return ulid();
    case 'nanoid':
      return randomString(URL_ALPHABET, 21);
    case 'cuid':
      return `c${randomString('0123456789abcdefghijklmnopqrstuvwxyz', 24)}`;
    case 'now':
      return new Date().toISOString();
  }
}
