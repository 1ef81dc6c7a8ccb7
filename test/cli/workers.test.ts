/**
 * `svcgen serve --workers 2` as a real process tree (docs/deployment.md "One machine:
 * --workers"): one port, two worker processes that both serve; revocation, the rate limit and
 * idempotency hold across them; a worker killed with SIGKILL is replaced; SIGTERM to the primary
 * drains everything and exits 0.
 *
 * Which worker answers is read from the kernel, not from the server: `ss -p` names the process that
 * holds the accepted end of each connection, so keep-alive connections can be pinned to a worker.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cleanupCli,
  copyExample,
  freshDatabase,
  portIsOpen,
  runCli,
  show,
  startCli,
  type RunningCli,
} from '../support/cli.ts';
import type { TestDatabase } from '../support/database.ts';
import { SHOP } from '../support/server.ts';

const LISTENING = /^listening on (http:\/\/127\.0\.0\.1:(\d+))$/m;
const WORKERS_LINE = /^ {2}workers {4}2 processes on one port \(pids (\d+), (\d+)\); worker 1 also delivers webhooks$/m;
const MANAGEMENT_TOKEN = 'workers-test-management-token-8d1e4a';
const CITY = '/gw/api/rest/City';

afterAll(cleanupCli);

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  /** the client's end of the connection, to find the worker that holds the other end */
  localPort: number;
}

/** One HTTP request; with no agent, on a connection of its own (the primary hands each new one to the next worker). */
function request(
  port: number,
  method: string,
  p: string,
  o: { headers?: Record<string, string>; body?: unknown; agent?: http.Agent } = {},
): Promise<Reply> {
  const body = o.body === undefined ? undefined : JSON.stringify(o.body);
  const headers: Record<string, string> = { 'x-project-id': 'shop', ...o.headers };
  if (body !== undefined) headers['content-type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers, agent: o.agent ?? false }, (res) => {
      const localPort = res.socket.localPort!;
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text, localPort }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** For each connection to `port`: the pid of the process holding its server end, by the client's port. */
async function connectionOwners(port: number): Promise<Map<number, number>> {
  const { stdout } = await promisify(execFile)('ss', ['-tnpH', 'state', 'established', `( sport = :${port} )`]);
  const owners = new Map<number, number>();
  for (const line of stdout.split('\n')) {
    const peer = line.match(/127\.0\.0\.1:(\d+)\s+users:/);
    const pid = line.match(/pid=(\d+)/);
    if (peer && pid) owners.set(Number(peer[1]), Number(pid[1]));
  }
  return owners;
}

interface Pinned {
  agent: http.Agent;
  pid: number;
}

/**
 * Opens `count` keep-alive connections and says which worker holds each. Each agent keeps exactly one
 * connection, so a request through it reaches that worker.
 */
async function pinnedConnections(port: number, count: number): Promise<Pinned[]> {
  const opened = await Promise.all(
    Array.from({ length: count }, async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const res = await request(port, 'GET', '/healthz', { agent });
      expect(res.status, res.text).toBe(200);
      return { agent, localPort: res.localPort };
    }),
  );
  const owners = await connectionOwners(port);
  return opened.map(({ agent, localPort }) => {
    const pid = owners.get(localPort);
    if (pid === undefined) throw new Error(`ss shows no server end for the connection from port ${localPort}`);
    return { agent, pid };
  });
}

/** One connection to each of two different workers. */
async function oneConnectionPerWorker(port: number): Promise<[Pinned, Pinned]> {
  const pinned = await pinnedConnections(port, 6);
  const pids = [...new Set(pinned.map((p) => p.pid))];
  expect(pids.length, 'six new connections reach both workers').toBe(2);
  return [pinned.find((p) => p.pid === pids[0])!, pinned.find((p) => p.pid === pids[1])!];
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function startWorkers(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ serve: RunningCli; port: number; pids: number[] }> {
  const serve = startCli(['serve', '--workers', '2', '--port', '0', ...args], { env });
  const [, , port] = await serve.waitFor(LISTENING, { stream: 'stdout' });
  const [, a, b] = await serve.waitFor(WORKERS_LINE, { stream: 'stderr' });
  return { serve, port: Number(port), pids: [Number(a), Number(b)] };
}

describe('serve --workers 2', { timeout: 120_000 }, () => {
  let database: TestDatabase;
  let admin: pg.Pool;
  let serve: RunningCli;
  let port: number;
  let pids: number[];
  let apiKey: { id: string; key: string };
  const auth = () => ({ authorization: `ApiKey ${apiKey.key}` });

  beforeAll(async () => {
    database = await freshDatabase();
    admin = new pg.Pool({ connectionString: database.url, max: 2 });
    ({ serve, port, pids } = await startWorkers(['--project', SHOP, '--database-url', database.url], {
      SVCGEN_MANAGEMENT_TOKEN: MANAGEMENT_TOKEN,
    }));
    const r = await runCli([
      'keys',
      'create',
      '--env',
      'master',
      '--name',
      'workers',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
      '--json',
      '--project',
      SHOP,
      '--database-url',
      database.url,
    ]);
    expect(r.code, show(r)).toBe(0);
    apiKey = JSON.parse(r.stdout);
  });
  afterAll(async () => {
    await admin?.end();
  });

  it('prints "listening on" once, after migrating once; two worker processes, children of the primary, serve the one port', async () => {
    expect(serve.stdout.match(/^listening on /gm)).toHaveLength(1);
    expect(serve.stderr.match(/^applying migration \d+_init to master$/gm), serve.stderr).toHaveLength(1);
    expect(serve.stderr).toMatch(/^migrations: 8 applied, all up to date$/m);
    expect(new Set(pids).size).toBe(2);
    for (const pid of pids) {
      const parent = (await fs.readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ')[1];
      expect(Number(parent), `parent of worker ${pid}`).toBe(serve.child.pid);
    }
    const pinned = await pinnedConnections(port, 6);
    expect(new Set(pinned.map((p) => p.pid))).toEqual(new Set(pids));
    // each pinned connection keeps being served by its worker
    for (const p of pinned) {
      const res = await request(port, 'GET', CITY, { headers: auth(), agent: p.agent });
      expect(res.status, res.text).toBe(200);
      p.agent.destroy();
    }
  });

  it('an API key revoked through one worker gets 401 at once on every worker', async () => {
    const revocable = JSON.parse(
      (
        await runCli([
          'keys',
          'create',
          '--env',
          'master',
          '--name',
          'revoked',
          '--prefix',
          'ApiKey',
          '--role',
          'admin',
          '--json',
          '--project',
          SHOP,
          '--database-url',
          database.url,
        ])
      ).stdout,
    ) as { id: string; key: string };
    const headers = { authorization: `ApiKey ${revocable.key}` };
    const [here, there] = await oneConnectionPerWorker(port);
    // both workers have looked the key up (the cached case)
    for (const p of [here, there, here, there])
      expect((await request(port, 'GET', CITY, { headers, agent: p.agent })).status).toBe(200);

    const revoked = await request(port, 'DELETE', `/gw/api/rest/_apikeys/${revocable.id}`, {
      headers: { authorization: `Bearer ${MANAGEMENT_TOKEN}`, environment: 'master' },
      agent: here.agent,
    });
    expect(revoked.status, revoked.text).toBe(204);

    // no retry: the very next request on the other worker is refused
    const other = await request(port, 'GET', CITY, { headers, agent: there.agent });
    expect(other.status, other.text).toBe(401);
    expect(JSON.parse(other.text).type).toBe('/errors/unauthorized');
    expect((await request(port, 'GET', CITY, { headers, agent: here.agent })).status).toBe(401);
    const fresh = await Promise.all(Array.from({ length: 20 }, () => request(port, 'GET', CITY, { headers })));
    expect(fresh.map((r) => r.status)).toEqual(Array(20).fill(401));
    // the other key is untouched
    expect((await request(port, 'GET', CITY, { headers: auth(), agent: there.agent })).status).toBe(200);
    here.agent.destroy();
    there.agent.destroy();
  });

  it('the same Idempotency-Key sent at once to both workers creates one record', async () => {
    const name = `Idem-${Date.now().toString(36)}`;
    const pinned = await pinnedConnections(port, 8);
    expect(new Set(pinned.map((p) => p.pid)).size).toBe(2);
    const headers = { ...auth(), 'idempotency-key': `workers-${name}` };
    const replies = await Promise.all(
      pinned.map((p) => request(port, 'POST', CITY, { headers, body: { name, country: 'ID' }, agent: p.agent })),
    );
    for (const p of pinned) p.agent.destroy();

    const statuses = replies.map((r) => r.status);
    for (const r of replies) expect([201, 409], r.text).toContain(r.status);
    expect(statuses, 'the first call is answered 201').toContain(201);
    const ids = new Set(replies.filter((r) => r.status === 201).map((r) => JSON.parse(r.text).data.id as number));
    expect([...ids][0]).toEqual(expect.any(Number));
    expect(ids.size, 'every 201 is the same record').toBe(1);
    const rows = await admin.query(`select id from env_master."City" where name = $1`, [name]);
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0].id).toBe([...ids][0]);
  });

  it('a worker killed with SIGKILL is replaced, and requests keep succeeding', async () => {
    const [victim, survivor] = pids;
    const from = serve.stderr.length;
    process.kill(victim!, 'SIGKILL');
    const exited = new RegExp(
      `^worker (\\d) \\(pid ${victim}\\) exited \\(killed by SIGKILL\\); starting a replacement in 250 ms$`,
      'm',
    );
    await serve.waitFor(exited, { stream: 'stderr' });
    // between the exit and the replacement the survivor takes every new connection
    const meanwhile = await Promise.all(
      Array.from({ length: 10 }, () => request(port, 'GET', CITY, { headers: auth() })),
    );
    expect(meanwhile.map((r) => r.status)).toEqual(Array(10).fill(200));

    const [, replacement] = await serve.waitFor(/^worker \d replaced: pid (\d+) listening$/m, { stream: 'stderr' });
    expect(serve.stderr.slice(from).match(exited)?.[0]).toBeDefined();
    const newPid = Number(replacement);
    expect(isAlive(victim!)).toBe(false);
    const pinned = await pinnedConnections(port, 6);
    expect(new Set(pinned.map((p) => p.pid))).toEqual(new Set([survivor, newPid]));
    for (const p of pinned) {
      expect((await request(port, 'GET', CITY, { headers: auth(), agent: p.agent })).status).toBe(200);
      p.agent.destroy();
    }
    pids = [survivor!, newPid];
  });

  it('SIGTERM to the primary drains every worker, exits 0, leaves no process and closes the port', async () => {
    const from = serve.stderr.length;
    const result = await serve.stop('SIGTERM');
    expect(result.signal, show(result)).toBeNull();
    expect(result.code, show(result)).toBe(0);
    expect(result.stderr.slice(from), show(result)).toMatch(
      /^SIGTERM: finishing in-flight requests in 2 worker\(s\) and stopping\n(.*\n)*stopped\n$/,
    );
    for (const pid of pids) expect(isAlive(pid), `worker ${pid}`).toBe(false);
    expect(await portIsOpen(port)).toBe(false);
  });
});

/** The value of one sample of the Prometheus text, by its exact label set; undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = match[2] ? match[2].split(',') : [];
    if (have.length === wanted.length && wanted.every((w) => have.includes(w))) return Number(match[3]);
  }
  return undefined;
}

describe('serve --workers 2: /metrics answers for both workers', { timeout: 120_000 }, () => {
  const METRICS_TOKEN = 'workers-test-metrics-token-5c0f2b9e';
  const N = 24;
  let serve: RunningCli;
  let port: number;
  let pids: number[];
  let auth: Record<string, string>;
  let a: Pinned;
  let b: Pinned;
  const scrape = (agent?: http.Agent) =>
    request(port, 'GET', '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` }, agent });

  beforeAll(async () => {
    const copy = await copyExample('workers-metrics');
    const configFile = path.join(copy.dir, 'svcgen.config.json');
    const raw = JSON.parse(await fs.readFile(configFile, 'utf8'));
    await fs.writeFile(configFile, JSON.stringify({ ...raw, metrics: { enabled: true } }, null, 2));
    const database = await freshDatabase();
    const at = ['--project', copy.dir, '--database-url', database.url];
    ({ serve, port, pids } = await startWorkers(at, { SVCGEN_METRICS_TOKEN: METRICS_TOKEN }));
    const r = await runCli([
      'keys',
      'create',
      '--env',
      'master',
      '--name',
      'metrics',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
      '--json',
      ...at,
    ]);
    expect(r.code, show(r)).toBe(0);
    auth = { authorization: `ApiKey ${JSON.parse(r.stdout).key}` };
    [a, b] = await oneConnectionPerWorker(port);
  });
  afterAll(async () => {
    a?.agent.destroy();
    b?.agent.destroy();
    // Whatever a test left stopped must run again to drain.
    for (const pid of [serve?.child.pid, ...(pids ?? [])]) if (pid && isAlive(pid)) process.kill(pid, 'SIGCONT');
    if (serve) expect((await serve.stop('SIGTERM')).code).toBe(0);
  });

  it(`${N} requests served half by each worker: every scrape, through either worker, counts ${N}, and shows each worker's process metrics`, async () => {
    for (let i = 0; i < N; i++) {
      const res = await request(port, 'GET', CITY, { headers: auth, agent: (i % 2 === 0 ? a : b).agent });
      expect(res.status, res.text).toBe(200);
    }
    const scrapes = [
      await scrape(a.agent),
      await scrape(b.agent),
      await scrape(a.agent),
      await scrape(b.agent),
      await scrape(),
      await scrape(),
    ];
    for (const res of scrapes) {
      expect(res.status, res.text).toBe(200);
      expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      // Counters and histograms are summed over the workers, whichever one answers the scrape.
      expect(sample(res.text, 'http_requests_total', { route: CITY, method: 'GET', status: '200' })).toBe(N);
      expect(sample(res.text, 'http_request_duration_seconds_count', { route: CITY, method: 'GET' })).toBe(N);
      // Process metrics stay per worker.
      for (const worker of ['1', '2']) {
        expect(sample(res.text, 'process_resident_memory_bytes', { worker }), `worker ${worker}`).toBeGreaterThan(0);
        expect(sample(res.text, 'process_start_time_seconds', { worker }), `worker ${worker}`).toBeGreaterThan(0);
      }
      expect(
        sample(res.text, 'process_resident_memory_bytes', {}),
        'no process metric without its worker',
      ).toBeUndefined();
      // Each worker's API pool holds at least the connection that served these requests.
      expect(sample(res.text, 'db_pool_connections', { pool: 'api' })).toBeGreaterThanOrEqual(2);
    }
  });

  it('the token is still checked by the worker: 401 Problem without it, on both workers', async () => {
    for (const pinned of [a, b]) {
      const res = await request(port, 'GET', '/metrics', { agent: pinned.agent });
      expect(res.status, res.text).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer');
      expect(JSON.parse(res.text).type).toBe('/errors/unauthorized');
    }
  });

  it('a worker that sends no metrics (stopped with SIGSTOP): a scrape through the other answers 503 Problem within 2 s, then 200 again once it runs', async () => {
    process.kill(b.pid, 'SIGSTOP');
    try {
      const started = performance.now();
      const res = await scrape(a.agent);
      const took = performance.now() - started;
      expect(res.status, res.text).toBe(503);
      expect(res.headers['retry-after']).toBe('1');
      const body = JSON.parse(res.text);
      expect(body).toMatchObject({ type: '/errors/unavailable', status: 503 });
      expect(body.detail).toMatch(
        /^the metrics of every worker could not be gathered: worker [12] sent no metrics within 1500 ms$/,
      );
      expect(took).toBeGreaterThanOrEqual(1400);
    } finally {
      process.kill(b.pid, 'SIGCONT');
    }
    const again = await scrape(a.agent);
    expect(again.status, again.text).toBe(200);
    expect(sample(again.text, 'http_requests_total', { route: CITY, method: 'GET', status: '200' })).toBe(N);
  });

  it('the primary not answering (stopped with SIGSTOP): a scrape answers 503 Problem after 2 s instead of hanging', async () => {
    process.kill(serve.child.pid!, 'SIGSTOP');
    try {
      const started = performance.now();
      const res = await scrape(a.agent);
      const took = performance.now() - started;
      expect(res.status, res.text).toBe(503);
      expect(JSON.parse(res.text).detail).toBe(
        'the metrics of every worker could not be gathered: the primary process did not answer within 2000 ms',
      );
      expect(took).toBeGreaterThanOrEqual(1900);
    } finally {
      process.kill(serve.child.pid!, 'SIGCONT');
    }
    expect((await scrape(b.agent)).status).toBe(200);
  });
});

describe('serve --workers 2: the rate limit is shared', { timeout: 120_000 }, () => {
  const LIMIT = 10;

  it(`requests spread over both workers: exactly ${LIMIT} pass in a minute, then 429`, async () => {
    const copy = await copyExample('workers-rate');
    const configFile = path.join(copy.dir, 'svcgen.config.json');
    const raw = JSON.parse(await fs.readFile(configFile, 'utf8'));
    raw.rateLimits = { ...raw.rateLimits, dataPerMinutePerProject: LIMIT, dataPerMinutePerCaller: LIMIT };
    await fs.writeFile(configFile, JSON.stringify(raw, null, 2));
    const database = await freshDatabase();
    const at = ['--project', copy.dir, '--database-url', database.url];
    const { serve, port } = await startWorkers(at);
    const r = await runCli([
      'keys',
      'create',
      '--env',
      'master',
      '--name',
      'rate',
      '--prefix',
      'ApiKey',
      '--role',
      'admin',
      '--json',
      ...at,
    ]);
    expect(r.code, show(r)).toBe(0);
    const headers = { authorization: `ApiKey ${JSON.parse(r.stdout).key}` };

    // The window is a calendar minute: start early in one so that all the requests share it.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 100));
    const [a, b] = await oneConnectionPerWorker(port);
    const statuses: number[] = [];
    for (let i = 0; i < LIMIT + 4; i++) {
      const res = await request(port, 'GET', CITY, { headers, agent: (i % 2 === 0 ? a : b).agent });
      statuses.push(res.status);
      if (res.status === 200) expect(res.headers['ratelimit-remaining']).toBe(String(LIMIT - 1 - i));
      else expect(JSON.parse(res.text).type, res.text).toBe('/errors/rate-limited');
    }
    a.agent.destroy();
    b.agent.destroy();
    expect(statuses).toEqual([...Array(LIMIT).fill(200), ...Array(4).fill(429)]);
    expect((await serve.stop('SIGTERM')).code).toBe(0);
  });
});

describe('serve --workers: refusals', { timeout: 120_000 }, () => {
  it.each([['0'], ['1025'], ['two'], ['-1']])('--workers %s → exit 2 naming the accepted values', async (value) => {
    const r = await runCli(['serve', '--project', SHOP, '--workers', value]);
    expect(r.code, show(r)).toBe(2);
    expect(r.stderr).toBe(
      `svcgen: option '--workers <n|auto>' argument '${value}' is invalid. must be a number from 1 to 1024, or auto (see svcgen --help)\n`,
    );
  });

  it('--no-migrate with pending migrations refuses once, in the primary, before any worker starts', async () => {
    const database = await freshDatabase();
    const r = await runCli([
      'serve',
      '--workers',
      '2',
      '--port',
      '0',
      '--no-migrate',
      '--project',
      SHOP,
      '--database-url',
      database.url,
    ]);
    expect(r.code, show(r)).toBe(1);
    expect(r.stderr, show(r)).toMatch(
      /^svcgen: 8 migration\(s\) not applied \((?:\S+ in master, ){4}\S+ in staging(?:, \S+ in staging){3}\): run `npx svcgen migrate deploy`, or serve without --no-migrate$/m,
    );
    expect(r.stdout).toBe('');
  });

  it('a worker that cannot listen (the port is taken) stops the others; the primary exits 1', async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as net.AddressInfo).port;
    try {
      const database = await freshDatabase();
      const r = await runCli([
        'serve',
        '--workers',
        '2',
        '--port',
        String(takenPort),
        '--project',
        SHOP,
        '--database-url',
        database.url,
      ]);
      expect(r.code, show(r)).toBe(1);
      expect(r.stderr, show(r)).toContain(
        `svcgen: port ${takenPort} on 127.0.0.1 is already in use: pick another with --port <n> (or stop what listens there)\n`,
      );
      expect(r.stderr, show(r)).toMatch(
        /^worker \d \(pid \d+\) stopped before listening \(exit code 1\): stopping the others$/m,
      );
      expect(r.stdout).not.toMatch(/listening on/);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
