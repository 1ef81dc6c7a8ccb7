import { afterAll, beforeAll, expect, it } from 'vitest';
import { startAuthServer, type AuthTestServer } from '../support/auth.ts';

let t: AuthTestServer;
beforeAll(async () => {
  t = await startAuthServer();
});
afterAll(() => t?.close());

it('signup → code by mail → confirm → data request with the access token', async () => {
  const session = await t.signupConfirmed('smoke@example.com');
  expect(session.user.email).toBe('smoke@example.com');
  const res = await t.asUser(session.accessToken, 'GET', '/gw/api/rest/City');
  expect(res.status, res.text).toBe(200);
});
