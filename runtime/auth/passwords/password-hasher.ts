/**
 * bcrypt off the main thread. bcryptjs is pure JS: even its async API runs the key schedule on the
 * event loop (~50–100 ms per cost-10 hash), so a burst of logins would stall every other request.
 * The hashing runs in a small pool of worker threads instead.
 */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import os from 'node:os';
import { Worker } from 'node:worker_threads';

export interface PasswordHasher {
  /** bcrypt hash with the configured cost */
  hash(password: string): Promise<string>;
  /** false (not a throw) for a malformed hash; rejects only if the worker dies or the hasher is closed */
  verify(password: string, hash: string): Promise<boolean>;
  /**
   * Verifies against a fixed dummy hash of the same cost and returns false: equal time for unknown users.
   * The dummy is hashed on the first call, which therefore takes one extra hash.
   */
  verifyDummy(password: string): Promise<false>;
  /** terminates the workers; pending and later calls reject */
  close(): Promise<void>;
}

export interface PasswordHasherOptions {
  /** bcrypt cost (log2 rounds); default 10. At least 10, except 4 (bcrypt's minimum) for fast tests. */
  cost?: number;
  /** maximum number of worker threads; default os.availableParallelism() */
  size?: number;
  /**
   * Called as each bcrypt job is queued: tests count the comparisons a login makes (one for an
   * unknown e-mail as for a wrong password), which no clock on a shared machine can show reliably.
   */
  onJob?: (op: 'hash' | 'verify') => void;
}

export const DEFAULT_PASSWORD_COST = 10;

/** Niceness of hashing threads: low enough that data requests win the CPU, not so low that logins starve. */
const WORKER_NICE = 10;

// Plain CommonJS evaluated by the worker: workers do not reliably inherit the tsx loader, and an
// inline script needs no extra file to ship, so this works the same from .ts source and compiled JS.
// Synchronous bcryptjs is the fastest variant, and blocking is the point of a worker.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const bcrypt = require(workerData.bcryptjs);
// On Linux a thread's nice value is its own: hashing yields the CPU to the event loop (and to
// PostgreSQL) whenever they need it, and still uses every idle core. Elsewhere this may affect
// the whole process or be refused; then it is skipped.
if (process.platform === 'linux') { try { require('node:os').setPriority(${WORKER_NICE}); } catch {} }
parentPort.on('message', (job) => {
  let result;
  if (job.op === 'hash') {
    try { result = { ok: true, value: bcrypt.hashSync(job.password, job.cost) }; }
    catch (error) { result = { ok: false, error: String((error && error.message) || error) }; }
  } else {
    // bcryptjs throws on a malformed hash (bad salt, version, rounds): for the caller it just does not match
    try { result = { ok: true, value: bcrypt.compareSync(job.password, job.hash) }; }
    catch { result = { ok: true, value: false }; }
  }
  parentPort.postMessage(result);
});
`;

type Message = { op: 'hash'; password: string; cost: number } | { op: 'verify'; password: string; hash: string };
type Result = { ok: true; value: string | boolean } | { ok: false; error: string };
interface Job {
  message: Message;
  resolve(value: string | boolean): void;
  reject(error: Error): void;
}
/** A worker runs one job at a time (it is synchronous inside), so "free" is simply `job === null`. */
interface Slot {
  worker: Worker;
  job: Job | null;
  error?: Error;
}

let bcryptjsEntry: string | undefined;
/** bcryptjs 3 is ESM-first; its `require` condition points at the UMD build, which CommonJS can load. */
function bcryptjsPath(): string {
  return (bcryptjsEntry ??= createRequire(import.meta.url).resolve('bcryptjs'));
}

function closedError(): Error {
  return new Error('the password hasher is closed');
}

export function createPasswordHasher(options: PasswordHasherOptions = {}): PasswordHasher {
  const cost = options.cost ?? DEFAULT_PASSWORD_COST;
  if (!Number.isInteger(cost) || !(cost === 4 || (cost >= 10 && cost <= 31))) {
    throw new RangeError(`password hash cost must be an integer from 10 to 31 (4 only in tests), got ${cost}`);
  }
  const size = options.size ?? os.availableParallelism();
  if (!Number.isInteger(size) || size < 1)
    throw new RangeError(`password hasher size must be a positive integer, got ${size}`);

  const slots: Slot[] = [];
  const queue: Job[] = [];
  let closing: Promise<void> | null = null;
  let dummy: Promise<string> | null = null;

  function run(message: Message): Promise<string | boolean> {
    if (closing) return Promise.reject(closedError());
    options.onJob?.(message.op);
    return new Promise((resolve, reject) => {
      queue.push({ message, resolve, reject });
      pump();
    });
  }

  function pump(): void {
    while (queue.length > 0 && !closing) {
      let slot = slots.find((s) => s.job === null);
      if (!slot && slots.length < size) {
        // Workers start lazily, so a server that never hashes never pays for a thread.
        try {
          slot = spawn();
        } catch (error) {
          // pump() also runs from worker events, where a throw would crash the process: if thread
          // creation fails, the queue waits for the workers left, or fails when there are none
          if (slots.length === 0) for (const job of queue.splice(0)) job.reject(error as Error);
          return;
        }
      }
      if (!slot) return;
      const job = queue.shift()!;
      slot.job = job;
      // held only while busy: a caller awaiting a result must keep the process alive, an idle pool must not
      slot.worker.ref();
      slot.worker.postMessage(job.message);
    }
  }

  function spawn(): Slot {
    // execArgv: [] so a parent started with `--import tsx` (or other loaders) does not load them again
    // in each worker: the script is plain CommonJS and should behave the same however the server runs.
    const worker = new Worker(WORKER_SOURCE, { eval: true, execArgv: [], workerData: { bcryptjs: bcryptjsPath() } });
    const slot: Slot = { worker, job: null };
    worker.on('message', (result: Result) => {
      const job = slot.job;
      slot.job = null;
      worker.unref();
      if (job && result.ok) job.resolve(result.value);
      else if (job && !result.ok) job.reject(new Error(result.error));
      pump();
    });
    // without a listener an uncaught error in the worker would be rethrown in the main thread
    worker.on('error', (error) => {
      slot.error = error;
    });
    worker.on('exit', (code) => {
      const index = slots.indexOf(slot);
      if (index >= 0) slots.splice(index, 1);
      const job = slot.job;
      slot.job = null;
      if (job) {
        job.reject(
          closing
            ? closedError()
            : new Error(`the password hashing worker stopped (exit code ${code})`, { cause: slot.error }),
        );
      }
      // the replacement is spawned on demand, like the first worker
      pump();
    });
    slots.push(slot);
    return slot;
  }

  async function verify(password: string, hash: string): Promise<boolean> {
    if (typeof password !== 'string') throw new TypeError('password must be a string');
    if (typeof hash !== 'string') return false;
    return (await run({ op: 'verify', password, hash })) as boolean;
  }

  function dummyHash(): Promise<string> {
    // A real hash of a random password: well-formed for bcryptjs and of exactly the configured cost.
    dummy ??= (run({ op: 'hash', password: randomBytes(18).toString('base64'), cost }) as Promise<string>).catch(
      (error: unknown) => {
        dummy = null; // a crash or close must not poison every later unknown-user login
        throw error;
      },
    );
    return dummy;
  }

  return {
    async hash(password) {
      if (typeof password !== 'string') throw new TypeError('password must be a string');
      return (await run({ op: 'hash', password, cost })) as string;
    },
    verify,
    async verifyDummy(password) {
      await verify(password, await dummyHash());
      return false;
    },
    close() {
      closing ??= (async () => {
        const error = closedError();
        for (const job of queue.splice(0)) job.reject(error);
        for (const slot of slots) {
          slot.job?.reject(error);
          slot.job = null;
        }
        await Promise.all(slots.map((slot) => slot.worker.terminate()));
      })();
      return closing;
    },
  };
}
