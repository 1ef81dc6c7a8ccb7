/**
 * Idempotency-Key survives a crash (docs/api.md §5.16): the key's record commits with the write, so
 * after `kill -9` a retry replays a write that committed and runs one that did not, exactly once;
 * never 409 for a request that is no longer running, never a second row.
 *
 * A real `svcgen serve` takes 10 keyed creates and is killed while all of them wait inside the
 * database, at one of two points, held there by an advisory lock of this test:
 *   - "at-commit": a deferred constraint trigger waits when the transaction commits. The server has
 *     sent COMMIT, so once released the transaction commits although its client is gone: a write
 *     that committed without its client ever hearing of it.
 *   - "in-statement": a BEFORE INSERT trigger waits inside the insert. No COMMIT was ever sent, so
 *     the transaction rolls back when PostgreSQL notices the client is gone.
 * Then a second server takes a retry of every key.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../runtime/db/index.ts';
import { IDEMPOTENCY_LOCK_NAMESPACE } from '../../runtime/idempotency/index.ts';
import { createApiKey } from '../../runtime/keys/index.ts';
import { cleanupCli, copyExample, freshDatabase, startCli, type RunningCli } from '../support/cli.ts';
import { readResponse, type TestResponse } from '../support/server.ts';
import { until } from '../support/until.ts';

const REST = '/gw/api/rest';
/** The advisory lock (two int keys) the test holds to stop the requests inside PostgreSQL. */
const HOLD: [number, number] = [4242, 1];
const KEYS = 10;

describe('Idempotency-Key after the server is killed (kill -9) mid-request', { timeout: 120_000 }, () => {
  let databaseUrl: string;
  let projectDir: string;
  let direct: Database;
  let holder: pg.Client;
  let apiKey: string;
  let holderPid = 0;

  const serve = async (): Promise<{ cli: RunningCli; base: string }> => {
    const cli = startCli(['serve', '--project', projectDir, '--database-url', databaseUrl, '--port', '0']);
    const base = (
      await cli.waitFor(/^listening on (http:\/\/127\.0\.0\.1:\d+)$/m, { stream: 'stdout', timeoutMs: 60_000 })
    )[1]!;
    return { cli, base };
  };
  const post = async (base: string, key: string, body: unknown): Promise<TestResponse> =>
    readResponse(
      await fetch(`${base}${REST}/Customer`, {
        method: 'POST',
        headers: {
          'x-project-id': 'shop',
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/json',
          'idempotency-key': key,
        },
        body: JSON.stringify(body),
      }),
    );
  /** Advisory locks of a namespace: held (granted) and waited for. */
  const advisory = async (namespace: number) =>
    (
      await direct.query<{ held: number; waiting: number }>(
        `select count(*) filter (where granted)::int as held, count(*) filter (where not granted)::int as waiting
         from pg_locks where locktype = 'advisory' and classid = $1 and objsubid = 2 and pid <> $2`,
        [namespace, holderPid],
      )
    )[0]!;

  beforeAll(async () => {
    databaseUrl = (await freshDatabase()).url;
    // Ten requests held in the database at once, each with its connection, and room to spare.
    const copy = await copyExample('idempotency-crash');
    projectDir = copy.dir;
    const configPath = path.join(projectDir, 'svcgen.config.json');
    const config = JSON.parse(await fs.readFile(configPath, 'utf8'));
    config.database = { ...config.database, poolSize: 30 };
    await fs.writeFile(configPath, JSON.stringify(config, null, 2));
    direct = openDatabase(databaseUrl, { max: 2 });
    holder = new pg.Client({ connectionString: databaseUrl });
    await holder.connect();
    holderPid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  }, 60_000);

  afterAll(async () => {
    await holder?.end().catch(() => {});
    await direct?.close().catch(() => {});
    await cleanupCli();
  });

  it('each retry answers 201 once: the replay of the writes that committed, a first run of the others; one row per key', async () => {
    const first = await serve();
    apiKey = (
      await createApiKey(direct, {
        projectId: 'shop',
        environment: 'master',
        name: 'crash',
        prefix: 'ApiKey',
        roles: ['admin'],
        context: {},
      })
    ).key;
    // PostgreSQL 14+ can poll for vanished clients while a statement waits; this test relies on the
    // default (off), under which a COMMIT already received completes.
    const [check] = await direct.query<{ setting: string | null }>(
      `select current_setting('client_connection_check_interval', true) as setting`,
    );
    if (check!.setting !== null)
      await direct.query(
        `alter database ${new URL(databaseUrl).pathname.slice(1)} set client_connection_check_interval = 0`,
      );
    await direct.exec(`
      CREATE FUNCTION public.crash_test_wait() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_advisory_xact_lock_shared(${HOLD[0]}, ${HOLD[1]});
        RETURN NEW;
      END $$;
      CREATE CONSTRAINT TRIGGER crash_test_at_commit AFTER INSERT ON env_master."Customer"
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.name = 'at-commit') EXECUTE FUNCTION public.crash_test_wait();
      CREATE TRIGGER crash_test_in_statement BEFORE INSERT ON env_master."Customer"
        FOR EACH ROW WHEN (NEW.name = 'in-statement') EXECUTE FUNCTION public.crash_test_wait();`);
    await holder.query('select pg_advisory_lock($1, $2)', HOLD);

    const run = `${Date.now().toString(36)}`;
    const calls = Array.from({ length: KEYS }, (_, i) => ({
      key: `crash-${run}-${i}`,
      body: { email: `crash-${run}-${i}@example.com`, name: i % 2 === 0 ? 'at-commit' : 'in-statement' },
    }));
    const sent = calls.map((c) =>
      post(first.base, c.key, c.body).then(
        (res) => `answered ${res.status}`,
        () => 'no answer',
      ),
    );
    await until(
      () => advisory(HOLD[0]),
      (l) => l.waiting === KEYS,
      30_000,
      'every request waits inside PostgreSQL',
    );
    expect(await advisory(IDEMPOTENCY_LOCK_NAMESPACE)).toEqual({ held: KEYS, waiting: 0 });

    first.cli.child.kill('SIGKILL');
    expect((await first.cli.exited).signal).toBe('SIGKILL');
    expect(await Promise.all(sent)).toEqual(Array(KEYS).fill('no answer'));
    await holder.query('select pg_advisory_unlock($1, $2)', HOLD);
    // The dead server's transactions end (commit or roll back) and take their key locks with them.
    await until(
      async () => [await advisory(HOLD[0]), await advisory(IDEMPOTENCY_LOCK_NAMESPACE)],
      (locks) => locks.every((l) => l.held === 0 && l.waiting === 0),
      30_000,
      "the killed server's transactions end",
    );
    const committed = await direct.query<{ email: string }>(
      `select email from env_master."Customer" where email like $1 order by email`,
      [`crash-${run}-%`],
    );
    const atCommit = calls.filter((c) => c.body.name === 'at-commit');
    expect(committed.map((r) => r.email)).toEqual(atCommit.map((c) => c.body.email).sort());
    const records = await direct.query<{ key: string; status: number }>(
      `select key, status from svcgen.idempotency where key like $1 order by key`,
      [`crash-${run}-%`],
    );
    expect(records).toEqual(
      atCommit.map((c) => ({ key: c.key, status: 201 })).sort((a, b) => (a.key < b.key ? -1 : 1)),
    );

    const second = await serve();
    const retries = await Promise.all(calls.map((c) => post(second.base, c.key, c.body)));
    const outcome = (res: TestResponse) =>
      `${res.status} ${res.headers.get('idempotency-replayed') === 'true' ? 'replay' : 'first run'}`;
    expect(retries.map(outcome)).toEqual(
      calls.map((c) => (c.body.name === 'at-commit' ? '201 replay' : '201 first run')),
    );
    for (const [i, res] of retries.entries()) {
      expect(res.body.data.email, res.text).toBe(calls[i]!.body.email);
      expect(res.headers.get('location')).toBe(`${REST}/Customer/${res.body.data.id}`);
    }
    // And again: every key now replays its one answer.
    for (const [i, c] of calls.entries()) {
      const again = await post(second.base, c.key, c.body);
      expect(outcome(again), again.text).toBe('201 replay');
      expect(again.text).toBe(retries[i]!.text);
    }
    const rows = await direct.query<{ email: string; n: number }>(
      `select email, count(*)::int as n from env_master."Customer" where email like $1 group by email order by email`,
      [`crash-${run}-%`],
    );
    expect(rows).toEqual(
      calls.map((c) => ({ email: c.body.email, n: 1 })).sort((a, b) => (a.email < b.email ? -1 : 1)),
    );
    expect(await second.cli.stop('SIGTERM')).toMatchObject({ code: 0 });
  });
});
