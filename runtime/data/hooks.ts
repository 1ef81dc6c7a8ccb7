/**
 * Table hooks (docs/own-code.md "Hooks") in the one write layer: every path that writes a table
 * (./write.ts, ./bulk.ts) asks hooksOf once; a table without hooks goes on as before, with no
 * transaction and no statement added (docs/own-code.md "Cost"). A table with hooks is written in a
 * transaction (hookedWrite), row by row: the rows an update or delete reaches are first locked and
 * read whole (compileLockTargets), so a hook's `previous` is the row the write replaces.
 */
import {
  againOnConflict,
  databaseFault,
  gatedTransaction,
  onCommit,
  transactionDatabase,
  type Database,
} from '../db/index.ts';
import { Problem, requestIdOf } from '../http/index.ts';
import {
  codeContext,
  type CodeContext,
  type CodeRegistry,
  type CodeScope,
  type CodeServices,
} from '../usercode/index.ts';
import { onDatabase, type DataContext } from './context.ts';

/** What hooks need from the running server (runtime/server/features/code.ts builds it). */
export interface WriteHooks {
  readonly registry: CodeRegistry;
  readonly services: CodeServices;
  /** code.hookTimeoutMs (docs/config.md). */
  readonly timeoutMs: number;
  /** The server's database, outside any request's transaction: afterCommit hooks run on it. */
  readonly db: Database;
}

export type Hooks = NonNullable<ReturnType<CodeRegistry['hooksOf']>>;
type HookName = 'beforeCreate' | 'beforeUpdate' | 'beforeDelete' | 'afterWrite' | 'afterCommit';

/** A write as afterWrite and afterCommit see it (records with every field). */
export interface WriteEvent {
  readonly action: 'create' | 'update' | 'delete';
  readonly record: Record<string, unknown> | null;
  readonly previous: Record<string, unknown> | null;
}

/** The hooks of the context's table; undefined (one map lookup) when it has none. */
export function hooksOf(ctx: DataContext): Hooks | undefined {
  return ctx.writeHooks?.registry.hooksOf(ctx.table.spec.name);
}

/** Work queued to run once the write has committed (afterCommit hooks). */
export type AfterCommits = (() => void)[];

/**
 * Runs `work` in a transaction of its own (a savepoint when ctx.db is one already, e.g. under an
 * Idempotency-Key), on a context whose db is that transaction; once it has committed, the
 * afterCommit work it queued runs (onCommit: after the enclosing transaction's commit, if any).
 * Rolled back for a concurrent write, the whole runs again, hooks included.
 */
export async function hookedWrite<T>(
  ctx: DataContext,
  work: (tx: DataContext, later: AfterCommits) => Promise<T>,
): Promise<T> {
  const later: AfterCommits = [];
  const result = await againOnConflict(ctx.db, () =>
    ctx.db.transaction((tx) => {
      later.length = 0;
      return work(onDatabase(ctx, transactionDatabase(ctx.db.pool, tx)), later);
    }),
  );
  queueAfterCommits(ctx, later);
  return result;
}

/** Hands `later` to ctx.db's transaction: run after its commit (at once when ctx.db has none). */
export function queueAfterCommits(ctx: DataContext, later: AfterCommits): void {
  for (const task of later) onCommit(ctx.db, task);
}

class HookTimeout extends Error {}

function origin(ctx: DataContext, name: HookName): string {
  return `hook ${ctx.table.spec.name}.${name}`;
}

function scopeOf(ctx: DataContext, name: HookName, db: Database): CodeScope {
  return {
    environment: ctx.tenant.environment,
    principal: ctx.principal,
    access: ctx.access,
    db,
    requestId: requestIdOf(ctx.req) ?? '',
    origin: origin(ctx, name),
  };
}

/** A hook's outcome within `ms`, or HookTimeout; the hook itself is not stopped (see runHook). */
function withinTimeout<T>(running: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HookTimeout()), ms);
  });
  return Promise.race([running, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Runs the hook `name` of the context's table inside its write's transaction (ctx.db), as the
 * caller, bounded by code.hookTimeoutMs. Its context's statements go through a gate that closes
 * when the hook returns, throws or is abandoned, so that nothing it left running reaches the
 * transaction afterwards. What it throws becomes (docs/own-code.md "Hooks"): a Problem below 500
 * (refuse(): 422, or a refusal of the data API it called) as it is; a database fault as it is (503);
 * a timeout, or anything else, a 500 naming the request id, the detail only in the log.
 */
export async function runHook<T>(
  ctx: DataContext,
  name: Exclude<HookName, 'afterCommit'>,
  call: (code: CodeContext) => T | Promise<T>,
): Promise<T> {
  const hooks = ctx.writeHooks!;
  const where = origin(ctx, name);
  let open = true;
  const db = gatedTransaction(
    ctx.db.pool,
    ctx.db,
    () => open,
    () => new Error(`${where} has ended (returned, failed or timed out): its context takes no more statements`),
  );
  const scope = scopeOf(ctx, name, db);
  const running = Promise.resolve().then(() => call(codeContext(hooks.services, scope)));
  try {
    return await withinTimeout(running, hooks.timeoutMs);
  } catch (error) {
    throw hookProblem(ctx, hooks, where, error, running);
  } finally {
    open = false;
  }
}

/** What a failed hook's write answers (runHook), the failure logged when the caller is not told it. */
function hookProblem(
  ctx: DataContext,
  hooks: WriteHooks,
  where: string,
  error: unknown,
  running: Promise<unknown>,
): unknown {
  const requestId = requestIdOf(ctx.req) ?? '';
  const log = hooks.services.logger.child({ requestId, code: where });
  if (error instanceof HookTimeout) {
    log.error(
      { timeoutMs: hooks.timeoutMs },
      `${where} did not finish within code.hookTimeoutMs; its write was rolled back`,
    );
    running.catch((late: unknown) => log.warn({ err: late }, `${where}, abandoned at its timeout, failed later`));
    // A fault of the service's own code, not a passing condition of the server: 500, as any
    // other failure of a hook, without a Retry-After (docs/own-code.md "Hooks").
    return new Problem(
      'internal',
      `${where} did not finish within ${hooks.timeoutMs} ms (code.hookTimeoutMs), so nothing was written; the server's log has the detail under request id ${requestId}`,
      [],
      {},
      { requestId },
    );
  }
  if (error instanceof Problem && error.status < 500) return error;
  if (error instanceof Problem || databaseFault(error)) {
    log.warn({ err: error }, `${where} met a fault of the server; its write was rolled back`);
    return error;
  }
  log.error({ err: error }, `${where} threw; its write was rolled back`);
  return new Problem(
    'internal',
    `${where} failed, so nothing was written; the server's log has the detail under request id ${requestId}`,
    [],
    {},
    { requestId },
  );
}

/**
 * Runs a before hook that may return a changed input: the input it returned, else the copy it was
 * given (changed in place or not). A value that is not an object is the hook's fault (500). A
 * field set to a Date is taken as its ISO 8601 text, as the typed client sends one (docs/own-code.md
 * "Hooks"); an invalid Date throws (a fault of the hook).
 */
export function runBefore(
  ctx: DataContext,
  name: 'beforeCreate' | 'beforeUpdate',
  input: Record<string, unknown>,
  call: (input: Record<string, unknown>, code: CodeContext) => unknown,
): Promise<Record<string, unknown>> {
  const copy = { ...input };
  return runHook(ctx, name, async (code) => {
    const returned = (await call(copy, code)) ?? copy;
    if (typeof returned !== 'object' || returned === null || Array.isArray(returned))
      throw new TypeError(`${origin(ctx, name)} returned ${JSON.stringify(returned)}, not the input object`);
    const fields = returned as Record<string, unknown>;
    for (const field in fields) {
      const value = fields[field];
      if (value instanceof Date) fields[field] = value.toISOString();
    }
    return fields;
  });
}

/** afterWrite of `event` in its transaction, then its afterCommit queued on `later`. */
export async function afterWrite(ctx: DataContext, hooks: Hooks, event: WriteEvent, later: AfterCommits) {
  if (hooks.afterWrite) await runHook(ctx, 'afterWrite', (code) => hooks.afterWrite!({ ...event, ctx: code }));
  if (hooks.afterCommit) later.push(() => void afterCommit(ctx, hooks, event));
}

/**
 * An afterCommit hook, once the write has committed (docs/own-code.md "Hooks"): on the server's
 * database, outside the write's transaction, as the caller. A failure or a timeout is logged and
 * changes nothing: the write stays.
 */
async function afterCommit(ctx: DataContext, hooks: Hooks, event: WriteEvent): Promise<void> {
  const services = ctx.writeHooks!;
  const where = origin(ctx, 'afterCommit');
  const log = services.services.logger.child({ requestId: requestIdOf(ctx.req) ?? '', code: where });
  const scope = scopeOf(ctx, 'afterCommit', services.db);
  const running = Promise.resolve().then(() =>
    hooks.afterCommit!({ ...event, ctx: codeContext(services.services, scope) }),
  );
  try {
    await withinTimeout(running, services.timeoutMs);
  } catch (error) {
    if (error instanceof HookTimeout) {
      log.error(
        { timeoutMs: services.timeoutMs },
        `${where} did not finish within code.hookTimeoutMs; the write stays`,
      );
      running.catch((late: unknown) => log.warn({ err: late }, `${where}, past its timeout, failed later`));
    } else log.error({ err: error }, `${where} threw; the write stays`);
  }
}
