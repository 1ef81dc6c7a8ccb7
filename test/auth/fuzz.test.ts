// Hostile input to every /auth endpoint: wrong types, huge values, odd encodings, broken tokens.
// Every answer is a 4xx with an `{ error }` body (or a success where the input is valid), never a 5xx.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startAuthServer, type AuthTestServer } from '../support/auth.ts';

let t: AuthTestServer;
beforeAll(async () => {
  t = await startAuthServer({ passwordCost: 4 });
});
afterAll(() => t?.close());

const VALUES: unknown[] = [
  null,
  true,
  0,
  -1,
  1e308,
  '',
  ' ',
  'a'.repeat(10_000),
  '\u0000',
  '\ud800',
  '<script>',
  "' OR 1=1 --",
  '000000',
  '12345',
  'x@y',
  'ann@example.com',
  [],
  ['a'],
  {},
  { $ne: null },
  'eyJhbGciOiJub25lIn0.e30.',
  'eyJ.eyJ.eyJ.eyJ.eyJ',
];
/** What fetch lets through as a header value. */
const HEADER_SAFE = VALUES.filter(
  (v): v is string => typeof v === 'string' && /^[\x21-\x7e][\x20-\x7e]*$/.test(v) && v.length < 8000,
);
const FIELDS = ['email', 'password', 'firstName', 'lastName', 'roleId', 'code', 'newPassword', 'refreshToken'];
const POSTS = ['signup', 'confirm-signup', 'login', 'recover-password', 'reset-password', 'refresh-token', 'logout'];

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number) {
  return () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x7fffffff;
  };
}

it('600 hostile /auth requests: no 5xx, every error is { error } JSON', async () => {
  const next = random(20261123);
  const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!;
  const statuses: Record<number, number> = {};
  for (let i = 0; i < 600; i++) {
    const body: Record<string, unknown> = {};
    for (const field of FIELDS) if (next() < 0.5) body[field] = pick(VALUES);
    const kind = next();
    const raw = kind < 0.1 ? '{"email":' : kind < 0.15 ? '[]' : kind < 0.2 ? 'null' : JSON.stringify(body);
    const endpoint = pick(POSTS);
    const res = await t.request('POST', `/auth/${endpoint}`, {
      key: false,
      raw,
      headers: {
        'content-type': next() < 0.9 ? 'application/json' : 'text/plain',
        ...(next() < 0.3 ? { authorization: `Bearer ${pick(HEADER_SAFE)}` } : {}),
        ...(next() < 0.05 ? { 'x-project-id': undefined } : {}),
      },
    });
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    expect(res.status, `${endpoint} ${raw.slice(0, 200)} → ${res.text}`).toBeLessThan(500);
    if (res.status >= 400)
      expect(typeof res.body?.error, `${endpoint} ${raw.slice(0, 200)} → ${res.text}`).toBe('string');
  }
  console.log('statuses', JSON.stringify(statuses));
  expect((await t.request('GET', '/readyz', { key: false })).status).toBe(200);
});
