/**
 * Every PostgreSQL connection svcgen opens comes from here, pooled or alone, so that none can end
 * the process (docs/deployment.md "What survives what"). pg emits 'error' on a client whose socket
 * breaks (a network cut, a PgBouncer restart, a failover, PostgreSQL stopping), and an 'error'
 * event nobody listens to is thrown: the process exits. pg-pool listens only while a client is
 * idle in the pool (it removes its listener at checkout), so a client checked out for a
 * transaction, a migration, graphile-worker's jobs or a LISTEN had none. Here every client has a
 * listener from its creation on, and a checked-out one also reports the break to the code that
 * holds it, which then gives it back broken (the pool drops it instead of handing it on).
 */
import pg from 'pg';

/** Errors pg raised while a connection was being opened (not on an open session). */
const connectionStartErrors = new WeakSet<object>();

/**
 * Whether `error` was raised while a connection was being opened: PostgreSQL refused the session
 * (e.g. 55000 "database … is not currently accepting connections", docs/deployment.md
 * "What survives what"), or the socket failed before the session began.
 */
export function raisedAtConnectionStart(error: unknown): boolean {
  return typeof error === 'object' && error !== null && connectionStartErrors.has(error);
}

function markConnectionStart(error: Error): Error {
  if (typeof error === 'object' && error !== null) connectionStartErrors.add(error);
  return error;
}

/** A pg client that never throws an 'error' event, and marks the errors of its connection start. */
export class GuardedClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // The error also fails the statement in flight, and the next one ("not queryable"); the pool
    // drops a client in that state when it comes back. Nothing else is to be done with it here.
    this.on('error', () => {});
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error) => void): void;
  override connect(callback?: (err: Error) => void): Promise<pg.Client> | undefined {
    if (callback) {
      super.connect((error: Error) => callback(error && markConnectionStart(error)));
      return undefined;
    }
    return super.connect().catch((error: Error) => {
      throw markConnectionStart(error);
    });
  }
}

/** A client of its own (LISTEN, a lock, a probe): call connect(), and end() when done. */
export function newClient(config: pg.ClientConfig): pg.Client {
  return new GuardedClient(config);
}

/**
 * A pool whose clients are GuardedClients, including those a library checks out itself
 * (graphile-worker); an idle client's error is the pool's to handle (it replaces the client).
 */
export function newPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool({ ...config, Client: GuardedClient as unknown as pg.PoolConfig['Client'] });
  pool.on('error', () => {});
  // graphile-worker warns about a pool without a 'connect' listener, its sign that clients get an
  // 'error' listener at connect; a GuardedClient has had one since its creation.
  pool.on('connect', () => {});
  return pool;
}

/**
 * Runs `work` on a connection checked out of `pool` (a session: SET, advisory locks, a
 * transaction), and gives it back after. The connection broke meanwhile (its 'error', heard for as
 * long as it is checked out), or `work` called `discard`: it is not given back for reuse but
 * closed, so the next request gets a new one.
 */
export async function withConnection<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient, discard: (reason: Error) => void) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => {
    broken ??= error;
  };
  client.on('error', onError);
  try {
    return await work(client, (reason) => {
      broken ??= reason;
    });
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}
