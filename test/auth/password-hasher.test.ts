// Password hashing in worker threads (runtime/auth/passwords): correctness, the event loop staying
// responsive while bcrypt runs, parallelism, crash recovery, and an idle pool not keeping the
// process alive.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createPasswordHasher, type PasswordHasher } from '../../runtime/auth/passwords/index.ts';

// Records every worker the pool creates, so a test can kill one mid-job like a crash would.
const workers = vi.hoisted(() => [] as import('node:worker_threads').Worker[]);
vi.mock('node:worker_threads', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:worker_threads')>();
  class RecordedWorker extends original.Worker {
    constructor(...args: ConstructorParameters<typeof original.Worker>) {
      super(...args);
      workers.push(this);
    }
  }
  return { ...original, Worker: RecordedWorker };
});

const MODULE_URL = new URL('../../runtime/auth/passwords/index.ts', import.meta.url).href;

const hashers: PasswordHasher[] = [];
function hasher(options?: Parameters<typeof createPasswordHasher>[0]): PasswordHasher {
  const h = createPasswordHasher(options);
  hashers.push(h);
  return h;
}
afterEach(async () => {
  await Promise.all(hashers.splice(0).map((h) => h.close()));
});

describe('hash and verify', () => {
  it('hashes with the default cost 10 and verifies', async () => {
    const h = hasher({ size: 2 });
    const hash = await h.hash('correct horse battery staple');
    expect(hash).toMatch(/^\$2b\$10\$[./A-Za-z0-9]{53}$/);
    await expect(h.verify('correct horse battery staple', hash)).resolves.toBe(true);
    await expect(h.verify('correct horse battery stapler', hash)).resolves.toBe(false);
    await expect(h.verifyDummy('correct horse battery staple')).resolves.toBe(false);
  });

  it('uses the configured cost; salts differ', async () => {
    const h = hasher({ cost: 4, size: 1 });
    const [a, b] = await Promise.all([h.hash('pw'), h.hash('pw')]);
    expect(a.startsWith('$2b$04$')).toBe(true);
    expect(a).not.toBe(b);
    await expect(h.verify('pw', b)).resolves.toBe(true);
  });

  it('resolves false for malformed hashes', async () => {
    const h = hasher({ cost: 4, size: 1 });
    const valid = await h.hash('pw');
    const garbage = [
      '',
      'not a hash',
      `$2b$04$${'!'.repeat(53)}`, // right length, invalid salt characters
      `$9z$04$${valid.slice(7)}`, // unknown version
      `$2b$xx$${valid.slice(7)}`, // rounds not a number
      valid.slice(0, -1), // truncated
      null as unknown as string,
    ];
    for (const hash of garbage) await expect(h.verify('pw', hash), String(hash)).resolves.toBe(false);
    // and the worker is still fine afterwards
    await expect(h.verify('pw', valid)).resolves.toBe(true);
  });

  it('handles passwords past bcrypt’s 72-byte limit and non-ASCII input', async () => {
    const h = hasher({ cost: 4, size: 1 });
    const long = 'ü'.repeat(10_000);
    await expect(h.verify(long, await h.hash(long))).resolves.toBe(true);
    const emoji = 'pässwörd 🔑';
    const hash = await h.hash(emoji);
    await expect(h.verify(emoji, hash)).resolves.toBe(true);
    await expect(h.verify('passwort 🔑', hash)).resolves.toBe(false);
  });

  it('matches results to their jobs when requests queue up', async () => {
    const h = hasher({ cost: 4, size: 1 });
    const passwords = Array.from({ length: 6 }, (_, i) => `password-${i}`);
    const hashes = await Promise.all(passwords.map((p) => h.hash(p)));
    const checks = await Promise.all(
      passwords.flatMap((p, i) => [h.verify(p, hashes[i]), h.verify(p, hashes[(i + 1) % hashes.length])]),
    );
    expect(checks).toEqual(passwords.flatMap(() => [true, false]));
  });

  it('rejects invalid options', () => {
    expect(() => createPasswordHasher({ cost: 9 })).toThrow(RangeError);
    expect(() => createPasswordHasher({ cost: 5 })).toThrow(RangeError);
    expect(() => createPasswordHasher({ cost: 32 })).toThrow(RangeError);
    expect(() => createPasswordHasher({ cost: 10.5 })).toThrow(RangeError);
    expect(() => createPasswordHasher({ size: 0 })).toThrow(RangeError);
  });
});

describe('pool', () => {
  it('starts workers lazily, up to size, and reuses them', async () => {
    const before = workers.length;
    const h = hasher({ cost: 4, size: 2 });
    expect(workers.length).toBe(before);
    await Promise.all(Array.from({ length: 6 }, (_, i) => h.hash(`p${i}`)));
    expect(workers.length).toBe(before + 2);
    await h.hash('again');
    expect(workers.length).toBe(before + 2);
  });

  // Event loop utilization is the share of the time the main thread spent running callbacks rather
  // than waiting for events: a ratio, not a latency, so a busy machine does not move it much. Here
  // it is about 0.02; bcryptjs on the main thread (even its async API) makes it 1.
  it('keeps the event loop free while 8 cost-10 hashes run', async () => {
    const h = hasher({ size: 2 }); // default cost 10; cold, so worker start-up is counted too
    const start = performance.eventLoopUtilization();
    const hashes = await Promise.all(Array.from({ length: 8 }, (_, i) => h.hash(`password-${i}`)));
    const { utilization } = performance.eventLoopUtilization(start);
    expect(hashes.every((hash) => hash.startsWith('$2b$10$'))).toBe(true);
    expect(utilization).toBeLessThan(0.5);
  });

  // Hashing threads run at a lower priority, so wall-clock speed-ups depend on what else the
  // machine runs; what the pool owes is that both workers hash at the same time.
  it('runs hashes in parallel with size 2', async () => {
    const h = hasher({ size: 2, cost: 4 });
    const before = workers.length;
    let busy = 0;
    let mostBusy = 0;
    const watch = (worker: import('node:worker_threads').Worker) => {
      const post = worker.postMessage.bind(worker);
      worker.postMessage = (value: unknown) => {
        mostBusy = Math.max(mostBusy, ++busy);
        post(value);
      };
      worker.prependListener('message', () => busy--); // before the pool posts its next job
    };
    await Promise.all([h.hash('warm-up-1'), h.hash('warm-up-2')]); // both workers started
    for (const worker of workers.slice(before)) watch(worker);
    await Promise.all(Array.from({ length: 8 }, (_, i) => h.hash(`parallel-${i}`)));
    expect(mostBusy).toBe(2);
  });

  it('rejects the in-flight job of a crashed worker and replaces the worker', async () => {
    const h = hasher({ cost: 4, size: 1 });
    await h.hash('start the worker');
    const crashed = workers.at(-1)!;
    const before = workers.length;
    const inFlight = h.hash('in flight');
    const queued = h.hash('queued');
    await crashed.terminate(); // from the pool's point of view an unexpected exit, like a crash
    await expect(inFlight).rejects.toThrow(/password hashing worker stopped/);
    // the queued job goes to a replacement worker
    await expect(queued).resolves.toMatch(/^\$2b\$04\$/);
    expect(workers.length).toBe(before + 1);
    await expect(h.verifyDummy('x')).resolves.toBe(false);
  });

  it('close() terminates the workers and rejects pending and later calls', async () => {
    const h = createPasswordHasher({ cost: 10, size: 1 });
    await h.hash('start the worker');
    const worker = workers.at(-1)!;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    // settled outcomes, so the rejections are handled before close() causes them
    const pending = [h.hash('a'), h.hash('b'), h.verifyDummy('c')].map((p) =>
      p.then(
        () => 'resolved',
        (error: Error) => error.message,
      ),
    );
    await h.close();
    await exited;
    expect(await Promise.all(pending)).toEqual(Array(3).fill('the password hasher is closed'));
    await expect(h.hash('late')).rejects.toThrow(/closed/);
    await expect(h.close()).resolves.toBeUndefined();
  });

  it('an idle pool does not keep the process alive (no close())', async () => {
    const code = `
      const { createPasswordHasher } = await import(${JSON.stringify(MODULE_URL)});
      const h = createPasswordHasher({ cost: 4, size: 2 });
      const hashes = await Promise.all([h.hash('a'), h.hash('b'), h.hash('c')]);
      console.log(JSON.stringify({ ok: await h.verify('a', hashes[0]), dummy: await h.verifyDummy('a') }));
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: 20_000, // a pool that keeps the process alive shows up as a killed child, not a hung test
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exitCode = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(exitCode).toBe(0);
    expect(JSON.parse(out)).toEqual({ ok: true, dummy: false });
  });
});
