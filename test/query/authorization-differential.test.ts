// Differential authorization test of docs/permissions.md: seeded datasets, principals (API keys with
// roles and contexts, user tokens) and requests (reads, aggregates, `_query`, cursor walks, writes,
// bulk) are sent to a real server and compared with a reference model written here without the
// server's code (test/support/reference-*.ts); a case that differs is shrunk and reported with its
// seed. A non-interference check asks the same questions before and after changing, through SQL,
// only data the principal cannot see: every answer must stay the same.
//
//   SVCGEN_AUTHZ_CASES=<n>   read cases per seed (default 1200; writes are a fifth of it)
//   SVCGEN_AUTHZ_SEED=<n>    run that one seed (replay a reported failure); differing reads are then
//                            also shrunk to a smaller dataset
//   SVCGEN_AUTHZ_SHRINKS=<n> failures shrunk per phase (default 8; the first of each kind)
//   SVCGEN_AUTHZ_DUMP=<file> also write every differing case (JSON lines) to that file
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, startAuthServer, type AuthTestServer } from '../support/auth.ts';
import { MANAGEMENT_TOKEN } from '../support/server.ts';
import { dataset, principals, ROLES, USERS, type User } from '../support/authz-generator.ts';
import { report, runNonInterference, runReads, runWrite, type Ctx } from '../support/authz-harness.ts';
import { loadDb, writeDb, type Send } from '../support/authz-http.ts';
import { RequestGen } from '../support/authz-requests.ts';
import { Rng } from '../support/authz-schema.ts';
import { viewOf, type Principal } from '../support/reference-policy.ts';

const SEEDS = process.env.SVCGEN_AUTHZ_SEED ? [Number(process.env.SVCGEN_AUTHZ_SEED)] : [1, 2, 3];
const READS = Number(process.env.SVCGEN_AUTHZ_CASES ?? 1200);
const WRITES = Math.max(20, Math.round(READS / 5));
const NI_BATCH = 24;
const TIMEOUT = 600_000;

let t: AuthTestServer;
const users: Record<string, User> = {};
const credentials = new Map<Principal, string>();

const send: Send = (p, call) =>
  t.request(call.method, call.path, {
    key: false,
    body: call.body,
    headers: { ...call.headers, authorization: `Bearer ${credentials.get(p)}` },
  });

beforeAll(async () => {
  t = await startAuthServer({
    passwordCost: 4,
    configPatch: (raw) => {
      raw.roles = ROLES;
      // The model's roles replace the example's; the example's file bucket names those (files are not modelled here).
      delete raw.storage;
      raw.auth = { ...raw.auth, defaultRole: 'shopper', accessTokenTtl: 86_400 };
      raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: 1_000_000, dataPerMinutePerCaller: 1_000_000 };
      raw.database = { ...raw.database, poolWaitTimeoutMs: 20_000, statementTimeoutMs: 20_000 };
    },
  });
  for (const [name, roles] of Object.entries(USERS)) {
    const email = `authz-${name}-${Date.now().toString(36)}@example.com`;
    const session = await t.signupConfirmed(email, { roleId: 'shopper' });
    let token = session.accessToken;
    if (roles.join() !== 'shopper') {
      await t.db.query(`update svcgen.users set roles = $2::text[] where id = $1`, [session.user.id, roles]);
      const login = await t.auth('POST', '/auth/login', { body: { email, password: PASSWORD } });
      expect(login.status, login.text).toBe(200);
      token = login.body.accessToken;
    }
    users[name] = { id: session.user.id, email, token, roles };
  }
}, 120_000);
afterAll(() => t?.close());

describe.each(SEEDS)('seed %i', (seed) => {
  const rng = new Rng(seed);
  const gen = new RequestGen(rng, ROLES);
  let ctx: Ctx;
  let ps: Principal[];
  const started = Date.now();
  const viewFor = (p: Principal) => viewOf(ctx.roles, p, ctx.db);

  beforeAll(async () => {
    const db = dataset(rng, users, Date.now());
    await writeDb(t.db, db);
    const loaded = await loadDb(t.db);
    expect(loaded).toEqual(db);
    ps = principals(loaded, users, rng);
    for (const p of ps) {
      if (p.management) credentials.set(p, MANAGEMENT_TOKEN);
      else if (p.user) credentials.set(p, Object.values(users).find((u) => u.id === p.user!.id)!.token);
      else credentials.set(p, (await t.createKey(p.roles, { context: p.context })).key);
    }
    ctx = {
      seed,
      roles: ROLES,
      send,
      sql: t.db,
      db: loaded,
      failures: [],
      shrunk: new Map(),
      counts: {},
      thorough: SEEDS.length === 1 && !!process.env.SVCGEN_AUTHZ_SEED,
    };
  });

  afterAll(() => {
    const dump = process.env.SVCGEN_AUTHZ_DUMP;
    if (dump) for (const f of ctx?.failures ?? []) fs.appendFileSync(dump, `${JSON.stringify({ seed, ...f })}\n`);
    console.log(
      `authorization differential, seed ${seed}: ${JSON.stringify(ctx?.counts)} cases, ${ctx?.failures.length} differ, ${((Date.now() - started) / 1000).toFixed(1)} s`,
    );
  });

  it(
    'reads: lists, single reads, _query, cursor walks and aggregates answer as the model says',
    async () => {
      const views = new Map(ps.map((p) => [p, viewFor(p)]));
      const cases = Array.from({ length: READS }, () => {
        const p = rng.pick(ps);
        return { p, req: gen.read(views.get(p)!) };
      });
      await runReads(ctx, 'reads', cases);
      if (ctx.failures.some((f) => f.phase === 'reads')) throw new Error(report(ctx, 'reads'));
    },
    TIMEOUT,
  );

  it(
    'writes: creates, updates, deletes and bulk requests answer and change the database as the model says',
    async () => {
      for (let i = 0; i < WRITES; i++) {
        const p = rng.pick(ps);
        await runWrite(ctx, 'writes', p, gen.write(viewFor(p)));
        const q = rng.pick(ps);
        await runReads(ctx, 'writes', [{ p: q, req: gen.read(viewFor(q)) }], 1);
      }
      if (ctx.failures.some((f) => f.phase === 'writes')) throw new Error(report(ctx, 'writes'));
    },
    TIMEOUT,
  );

  it(
    'non-interference: changing only data a principal cannot see changes none of its answers',
    async () => {
      for (const p of ps) await runNonInterference(ctx, 'non-interference', p, gen, rng, NI_BATCH);
      if (ctx.failures.some((f) => f.phase === 'non-interference')) throw new Error(report(ctx, 'non-interference'));
    },
    TIMEOUT,
  );
});
