/**
 * User access tokens through real HTTP: the RS256 JWS and its claims (checked by an independent
 * verifier fetching the JWKS), the JWE mode, keys shared by processes and restarts on one
 * database, and every way a token is refused (data API: 401 Problem; /auth/logout: { error }).
 * Sessions (refresh, logout, password reset) are in test/auth/sessions.test.ts.
 */
import { randomUUID } from 'node:crypto';
import {
  CompactEncrypt,
  SignJWT,
  UnsecuredJWT,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  generateKeyPair,
  importJWK,
  jwtVerify,
  type JWK,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../runtime/secrets/index.ts';
import { expectAuthError, PASSWORD, startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { expectProblemAt, UUID } from '../support/expect.ts';

const DATA = '/gw/api/rest/City';
const JWKS_PATH = '/auth/.well-known/jwks.json';
const CLAIMS = ['aud', 'email', 'exp', 'iat', 'iss', 'jti', 'roles', 'sid', 'sub'];

let counter = 0;
const newEmail = (tag: string) => `tokens-${tag}-${++counter}@example.com`;

const b64json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

async function jwksOf(s: AuthTestServer, environment?: string): Promise<{ keys: JWK[] }> {
  const res = await s.auth('GET', JWKS_PATH, { environment });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

function remoteJwks(s: AuthTestServer) {
  return createRemoteJWKSet(new URL(`${s.url}${JWKS_PATH}?project_id=shop`));
}

/** The token is refused on a data route (401 Problem) and on /auth/logout (401 { error: code }). */
async function expectRefused(
  s: AuthTestServer,
  token: string,
  code = 'AUTH_TOKEN_INVALID',
  environment?: string,
): Promise<void> {
  expectProblemAt(await s.asUser(token, 'GET', DATA, { environment }), 401, DATA, 'unauthorized');
  expectAuthError(await s.auth('POST', '/auth/logout', { token, environment }), 401, code);
}

async function expectAccepted(s: AuthTestServer, token: string, environment?: string): Promise<void> {
  const res = await s.asUser(token, 'GET', DATA, { environment });
  expect(res.status, res.text).toBe(200);
}

/** The environment's real signing key, unsealed from svcgen.signing_keys (to forge tokens the server would sign). */
async function realSigningKey(s: AuthTestServer, environment = 'master') {
  const [row] = await s.db.query<{ kid: string; private_jwk: string }>(
    `select kid, private_jwk from svcgen.signing_keys where project_id = 'shop' and environment = $1 and use = 'sig'`,
    [environment],
  );
  const box = await SecretBox.open(s.db, undefined);
  return { kid: row!.kid, key: await importJWK(JSON.parse(box.unseal(row!.private_jwk)) as JWK, 'RS256') };
}

describe('JWS access tokens and the JWKS', () => {
  let t: AuthTestServer;
  beforeAll(async () => {
    t = await startAuthServer({ passwordCost: 4 });
  });
  afterAll(() => t?.close());

  it('the access token is an RS256 JWS: header {alg, kid, typ} and exactly the documented claims', async () => {
    const email = newEmail('claims');
    const session = await t.signupConfirmed(email);
    const token = session.accessToken;
    expect(token.split('.')).toHaveLength(3);
    const { keys } = await jwksOf(t);
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'RS256', kid: keys[0]!.kid, typ: 'JWT' });
    const claims = decodeJwt(token);
    expect(Object.keys(claims).sort()).toEqual(CLAIMS);
    expect(claims).toEqual({
      sub: session.user.id,
      sid: expect.stringMatching(UUID),
      jti: expect.any(String),
      iat: expect.any(Number),
      exp: claims.iat! + 900,
      iss: 'svcgen',
      aud: 'shop/master',
      email,
      roles: ['customer'],
    });
    expect((claims.jti as string).length).toBeGreaterThan(0);
    expect(Math.abs(claims.iat! - Date.now() / 1000)).toBeLessThan(60);
    // A login opens another session: new sid and jti.
    const login = await t.auth('POST', '/auth/login', { body: { email, password: PASSWORD } });
    expect(login.status, login.text).toBe(200);
    const again = decodeJwt(login.body.accessToken);
    expect(again.sid).toMatch(UUID);
    expect(again.sid).not.toBe(claims.sid);
    expect(again.jti).not.toBe(claims.jti);
  });

  it('an independent verifier (jose createRemoteJWKSet + jwtVerify) accepts it', async () => {
    const session = await t.signupConfirmed(newEmail('remote'));
    const { payload, protectedHeader } = await jwtVerify(session.accessToken, remoteJwks(t), {
      issuer: 'svcgen',
      audience: 'shop/master',
    });
    expect(payload.sub).toBe(session.user.id);
    expect(protectedHeader.alg).toBe('RS256');
    // ... and it checks what it is told to: another audience is refused.
    await expect(
      jwtVerify(session.accessToken, remoteJwks(t), { issuer: 'svcgen', audience: 'shop/staging' }),
    ).rejects.toThrow();
  });

  it('JWKS: 200, Cache-Control max-age=300, exactly one signing key {kty, kid, use, alg, n, e}', async () => {
    const res = await t.auth('GET', JWKS_PATH);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('cache-control')).toContain('max-age=300');
    expect(Object.keys(res.body)).toEqual(['keys']);
    expect(res.body.keys).toHaveLength(1);
    const [key] = res.body.keys;
    expect(Object.keys(key).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
    expect(key).toEqual({
      kty: 'RSA',
      kid: expect.any(String),
      use: 'sig',
      alg: 'RS256',
      n: expect.any(String),
      e: 'AQAB',
    });
    expect(key.kid.length).toBeGreaterThan(0);
    expect(Buffer.from(key.n, 'base64url').length).toBeGreaterThanOrEqual(256); // RSA-2048 or more
  });

  it('JWKS: the same document by headers or by ?project_id=&environment=; staging has its own key', async () => {
    const byHeader = await t.auth('GET', JWKS_PATH, { environment: 'master' });
    const byQuery = await t.auth('GET', `${JWKS_PATH}?project_id=shop&environment=master`, { project: false });
    const byProjectOnly = await t.auth('GET', `${JWKS_PATH}?project_id=shop`, { project: false });
    for (const res of [byHeader, byQuery, byProjectOnly]) {
      expect(res.status, res.text).toBe(200);
      expect(res.headers.get('cache-control')).toContain('max-age=300');
    }
    expect(byQuery.body).toEqual(byHeader.body);
    expect(byProjectOnly.body).toEqual(byHeader.body);

    const staging = await t.auth('GET', JWKS_PATH, { environment: 'staging' });
    const stagingByQuery = await t.auth('GET', `${JWKS_PATH}?project_id=shop&environment=staging`, { project: false });
    expect(staging.status, staging.text).toBe(200);
    expect(stagingByQuery.body).toEqual(staging.body);
    expect(staging.body.keys).toHaveLength(1);
    expect(staging.body.keys[0].kid).not.toBe(byHeader.body.keys[0].kid);
    expect(staging.body.keys[0].n).not.toBe(byHeader.body.keys[0].n);
    // A staging token names the staging key.
    const session = await t.signupConfirmed(newEmail('staging-kid'), { environment: 'staging' });
    expect(decodeProtectedHeader(session.accessToken).kid).toBe(staging.body.keys[0].kid);
    expect(decodeJwt(session.accessToken).aud).toBe('shop/staging');
  });
});

describe('JWE mode (auth.jwe = true)', () => {
  let j: AuthTestServer;
  let jws: AuthTestServer;
  beforeAll(async () => {
    j = await startAuthServer({ passwordCost: 4, configPatch: (raw) => (raw.auth = { ...raw.auth, jwe: true }) });
    // A second process on the same database without JWE: it issues plain JWS with the same signing key.
    jws = await startAuthServer({ passwordCost: 4, databaseUrl: j.database.url, mail: j.mail });
  });
  afterAll(async () => {
    await jws?.close();
    await j?.close();
  });

  it('the access token is a 5-part JWE {alg RSA-OAEP-256, enc A256GCM, kid = JWKS enc key, cty JWT}; the JWKS has sig and enc keys', async () => {
    const { keys } = await jwksOf(j);
    expect(keys).toHaveLength(2);
    const sig = keys.find((k) => k.use === 'sig')!;
    const enc = keys.find((k) => k.use === 'enc')!;
    for (const key of keys) expect(Object.keys(key).sort()).toEqual(['alg', 'e', 'kid', 'kty', 'n', 'use']);
    expect(sig).toEqual({
      kty: 'RSA',
      kid: expect.any(String),
      use: 'sig',
      alg: 'RS256',
      n: expect.any(String),
      e: 'AQAB',
    });
    expect(enc).toEqual({
      kty: 'RSA',
      kid: expect.any(String),
      use: 'enc',
      alg: 'RSA-OAEP-256',
      n: expect.any(String),
      e: 'AQAB',
    });
    expect(enc.kid).not.toBe(sig.kid);
    expect(enc.n).not.toBe(sig.n);

    const session = await j.signupConfirmed(newEmail('jwe'));
    expect(session.accessToken.split('.')).toHaveLength(5);
    expect(decodeProtectedHeader(session.accessToken)).toEqual({
      alg: 'RSA-OAEP-256',
      enc: 'A256GCM',
      kid: enc.kid,
      cty: 'JWT',
    });
    // The refresh token's pair is a JWE as well.
    const refreshed = await j.auth('POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } });
    expect(refreshed.status, refreshed.text).toBe(200);
    expect(refreshed.body.accessToken.split('.')).toHaveLength(5);
  });

  it('a JWS verifier with the public JWKS cannot verify the JWE (it needs the private key)', async () => {
    const session = await j.signupConfirmed(newEmail('jwe-opaque'));
    await expect(
      jwtVerify(session.accessToken, remoteJwks(j), { issuer: 'svcgen', audience: 'shop/master' }),
    ).rejects.toThrow();
  });

  it('the server accepts its JWE on data routes and on /auth/logout', async () => {
    const session = await j.signupConfirmed(newEmail('jwe-accepted'));
    await expectAccepted(j, session.accessToken);
    const out = await j.auth('POST', '/auth/logout', { token: session.accessToken });
    expect(out.status, out.text).toBe(200);
    expect(Object.keys(out.body)).toEqual(['message']);
    expect(out.body.message).toEqual(expect.any(String));
    await expectRefused(j, session.accessToken);
  });

  it('a tampered JWE, or a JWE around a JWS signed with a key of my own (the enc key is public): 401 / AUTH_TOKEN_INVALID', async () => {
    const session = await j.signupConfirmed(newEmail('jwe-tampered'));
    const parts = session.accessToken.split('.');
    const flip = (p: string) =>
      p.slice(0, p.length >> 1) + (p[p.length >> 1] === 'A' ? 'B' : 'A') + p.slice((p.length >> 1) + 1);
    for (const i of [1, 3, 4]) await expectRefused(j, parts.map((p, k) => (k === i ? flip(p) : p)).join('.'));
    const { keys } = await jwksOf(j);
    const enc = keys.find((k) => k.use === 'enc')!;
    const sig = keys.find((k) => k.use === 'sig')!;
    const { privateKey } = await generateKeyPair('RS256');
    const claims = {
      sub: session.user.id,
      sid: randomUUID(),
      jti: randomUUID(),
      email: 'x@example.com',
      roles: ['admin'],
    };
    const inner = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: sig.kid!, typ: 'JWT' })
      .setIssuer('svcgen')
      .setAudience('shop/master')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(privateKey);
    const forged = await new CompactEncrypt(new TextEncoder().encode(inner))
      .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM', kid: enc.kid!, cty: 'JWT' })
      .encrypt(await importJWK(enc, 'RSA-OAEP-256'));
    await expectRefused(j, forged);
    await expectAccepted(j, session.accessToken);
  });

  it('a JWS from a jwe:false server on the same database is accepted by the JWE server (both forms inbound)', async () => {
    const jweKeys = await jwksOf(j);
    const jwsKeys = await jwksOf(jws);
    expect(jwsKeys.keys).toEqual(jweKeys.keys.filter((k) => k.use === 'sig'));

    const session = await jws.signupConfirmed(newEmail('jws-into-jwe'));
    expect(session.accessToken.split('.')).toHaveLength(3);
    expect(decodeProtectedHeader(session.accessToken).kid).toBe(jwsKeys.keys[0]!.kid);
    await expectAccepted(j, session.accessToken);
    // ... and the other way round: the JWE is the JWE server's own business, the JWS server cannot open it.
    const jweSession = await j.signupConfirmed(newEmail('jwe-into-jws'));
    expectProblemAt(await jws.asUser(jweSession.accessToken, 'GET', DATA), 401, DATA, 'unauthorized');
    // The JWE server logs the JWS out.
    const out = await j.auth('POST', '/auth/logout', { token: session.accessToken });
    expect(out.status, out.text).toBe(200);
    await expectRefused(j, session.accessToken);
    await expectRefused(jws, session.accessToken);
  });
});

describe('keys across processes and restarts (one database)', () => {
  let database: TestDatabase;
  const servers: AuthTestServer[] = [];
  const start = async () => {
    const s = await startAuthServer({ passwordCost: 4, databaseUrl: database.url });
    servers.push(s);
    return s;
  };
  beforeAll(async () => {
    database = await createTestDatabase();
  });
  afterAll(async () => {
    for (const s of servers) await s.close().catch(() => {});
    await database?.drop();
  });

  it('two servers publish the same JWKS and accept each other’s tokens; restarted servers keep the keys', async () => {
    const a = await start();
    const b = await start();
    const jwksA = await jwksOf(a);
    expect(await jwksOf(b)).toEqual(jwksA);
    const stagingA = await jwksOf(a, 'staging');
    expect(await jwksOf(b, 'staging')).toEqual(stagingA);

    const fromA = await a.signupConfirmed(newEmail('proc-a'));
    const fromB = await b.signupConfirmed(newEmail('proc-b'));
    await expectAccepted(b, fromA.accessToken);
    await expectAccepted(a, fromB.accessToken);

    // Restart: b goes away, c comes up on the same database.
    await b.close();
    const c = await start();
    expect(await jwksOf(c)).toEqual(jwksA);
    expect(await jwksOf(c, 'staging')).toEqual(stagingA);
    await expectAccepted(c, fromA.accessToken);
    await expectAccepted(c, fromB.accessToken);

    // Every process that ever issued a token is gone: a new one still knows the keys.
    await a.close();
    await c.close();
    const d = await start();
    expect(await jwksOf(d)).toEqual(jwksA);
    await expectAccepted(d, fromA.accessToken);
    await expectAccepted(d, fromB.accessToken);
    const { payload } = await jwtVerify(fromB.accessToken, remoteJwks(d), {
      issuer: 'svcgen',
      audience: 'shop/master',
    });
    expect(payload.sub).toBe(fromB.user.id);
  });

  it('private keys are not stored in clear in svcgen.signing_keys', async () => {
    const s = await start();
    const rows = await s.db.query<{
      environment: string;
      use: string;
      kid: string;
      private_jwk: string;
      public_jwk: JWK;
    }>(
      `select environment, use, kid, private_jwk, public_jwk from svcgen.signing_keys where project_id = 'shop' order by environment, use`,
    );
    expect(rows.map((r) => `${r.environment}/${r.use}`)).toEqual(['master/sig', 'staging/sig']);
    const box = await SecretBox.open(s.db, undefined);
    for (const row of rows) {
      expect(row.private_jwk).not.toMatch(/"d"\s*:/);
      expect(row.private_jwk).not.toContain(row.public_jwk.n);
      const opened = JSON.parse(box.unseal(row.private_jwk)) as JWK;
      expect(opened.d, 'the sealed value opens to the private JWK').toEqual(expect.any(String));
      expect(row.private_jwk).not.toContain(opened.d);
      expect(row.private_jwk).not.toContain(opened.p);
    }
  });

  it('two servers starting at once on a fresh database agree on the keys', async () => {
    const fresh = await createTestDatabase();
    const pair: AuthTestServer[] = [];
    try {
      pair.push(...(await Promise.all([1, 2].map(() => startAuthServer({ passwordCost: 4, databaseUrl: fresh.url })))));
      expect(await jwksOf(pair[1]!)).toEqual(await jwksOf(pair[0]!));
      const session = await pair[0]!.signupConfirmed(newEmail('race'));
      await expectAccepted(pair[1]!, session.accessToken);
    } finally {
      for (const s of pair) await s.close();
      await fresh.drop();
    }
  });
});

describe('refused tokens', () => {
  let t: AuthTestServer;
  let short: AuthTestServer;
  beforeAll(async () => {
    t = await startAuthServer({ passwordCost: 4 });
    short = await startAuthServer({
      passwordCost: 4,
      configPatch: (raw) => (raw.auth = { ...raw.auth, accessTokenTtl: 1 }),
    });
  });
  afterAll(async () => {
    await short?.close();
    await t?.close();
  });

  it('an expired token: data 401, logout 401 AUTH_TOKEN_EXPIRED', async () => {
    const session = await short.signupConfirmed(newEmail('expired'));
    const { iat, exp } = decodeJwt(session.accessToken);
    expect(exp).toBe(iat! + 1);
    while (Date.now() < exp! * 1000) await new Promise((resolve) => setTimeout(resolve, 25));
    expectProblemAt(await short.asUser(session.accessToken, 'GET', DATA), 401, DATA, 'unauthorized');
    expectAuthError(
      await short.auth('POST', '/auth/logout', { token: session.accessToken }),
      401,
      'AUTH_TOKEN_EXPIRED',
    );
    // The refresh token still gets a new (working, for a second) pair.
    const refreshed = await short.auth('POST', '/auth/refresh-token', { body: { refreshToken: session.refreshToken } });
    expect(refreshed.status, refreshed.text).toBe(200);
  });

  it('a tampered signature: 401 / AUTH_TOKEN_INVALID', async () => {
    const session = await t.signupConfirmed(newEmail('tampered-sig'));
    await expectAccepted(t, session.accessToken);
    const [header, payload, signature] = session.accessToken.split('.') as [string, string, string];
    const i = Math.floor(signature.length / 2);
    const changed = signature[i] === 'A' ? 'B' : 'A';
    await expectRefused(t, `${header}.${payload}.${signature.slice(0, i)}${changed}${signature.slice(i + 1)}`);
    await expectAccepted(t, session.accessToken);
  });

  it('a tampered payload (roles ["admin"], old signature): 401 / AUTH_TOKEN_INVALID', async () => {
    const session = await t.signupConfirmed(newEmail('tampered-payload'));
    await expectAccepted(t, session.accessToken);
    const [header, , signature] = session.accessToken.split('.');
    const forged = `${header}.${b64json({ ...decodeJwt(session.accessToken), roles: ['admin'] })}.${signature}`;
    await expectRefused(t, forged);
    // The admin-only table stays closed to it.
    const customers = await t.asUser(forged, 'GET', '/gw/api/rest/Customer');
    expect(customers.status, customers.text).toBe(401);
  });

  it('garbage "eyJhbGc.x.y": 401 / AUTH_TOKEN_INVALID', async () => {
    await expectRefused(t, 'eyJhbGc.x.y');
  });

  it('a staging token on master: 401 / AUTH_TOKEN_INVALID (and it works on staging)', async () => {
    const session = await t.signupConfirmed(newEmail('staging'), { environment: 'staging' });
    await expectAccepted(t, session.accessToken, 'staging');
    await expectRefused(t, session.accessToken);
    await expectRefused(t, session.accessToken, 'AUTH_TOKEN_INVALID', 'master');
    await expectAccepted(t, session.accessToken, 'staging');
  });

  it('a token forged with a key of my own under the real kid (another project, or this one): 401', async () => {
    const session = await t.signupConfirmed(newEmail('forged'));
    const { kid } = decodeProtectedHeader(session.accessToken);
    const claims = decodeJwt(session.accessToken);
    const { privateKey } = await generateKeyPair('RS256');
    for (const aud of ['other/master', 'shop/master']) {
      const forged = await new SignJWT({ ...claims, aud })
        .setProtectedHeader({ alg: 'RS256', kid: kid!, typ: 'JWT' })
        .sign(privateKey);
      await expectRefused(t, forged);
    }
  });

  it('a token signed with the real key but for another project or environment (audience): 401', async () => {
    const session = await t.signupConfirmed(newEmail('audience'));
    const claims = decodeJwt(session.accessToken);
    const { kid, key } = await realSigningKey(t);
    const sign = (aud: string) =>
      new SignJWT({ ...claims, aud }).setProtectedHeader({ alg: 'RS256', kid, typ: 'JWT' }).sign(key);
    // The forging is sound: with the real audience the server takes it.
    await expectAccepted(t, await sign('shop/master'));
    await expectRefused(t, await sign('other/master'));
    await expectRefused(t, await sign('shop/staging'));
    await expectRefused(t, await sign('shop'));
  });

  it('a token signed with the real key whose sid is not a uuid: 401 / AUTH_TOKEN_INVALID, not 500', async () => {
    const session = await t.signupConfirmed(newEmail('bad-sid'));
    const { kid, key } = await realSigningKey(t);
    const token = await new SignJWT({ ...decodeJwt(session.accessToken), sid: 'not-a-uuid' })
      .setProtectedHeader({ alg: 'RS256', kid, typ: 'JWT' })
      .sign(key);
    await expectRefused(t, token);
  });

  it('alg none (UnsecuredJWT): 401 / AUTH_TOKEN_INVALID', async () => {
    const session = await t.signupConfirmed(newEmail('alg-none'));
    const claims = decodeJwt(session.accessToken);
    const unsecured = new UnsecuredJWT({ ...claims }).encode();
    expect(decodeProtectedHeader(unsecured).alg).toBe('none');
    await expectRefused(t, unsecured);
    // With the real kid in the header it is still refused.
    const withKid = `${b64json({ alg: 'none', kid: decodeProtectedHeader(session.accessToken).kid, typ: 'JWT' })}.${unsecured.split('.')[1]}.`;
    await expectRefused(t, withKid);
  });

  it('no Authorization: data 401, logout 401 AUTH_TOKEN_INVALID', async () => {
    expectProblemAt(await t.request('GET', DATA, { key: false }), 401, DATA, 'unauthorized');
    expectAuthError(await t.auth('POST', '/auth/logout'), 401, 'AUTH_TOKEN_INVALID');
  });
});
