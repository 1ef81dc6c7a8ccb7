/**
 * How fresh the caches that the LISTEN channel keeps correct are (docs/deployment.md "Caches and
 * revocation"). A writer that announces a change (a revoked key, a logout, a new webhook) returns to
 * its caller only ANNOUNCEMENT_SETTLE_MS after its commit, and a reader trusts its cache while it
 * holds a proof that it heard everything committed up to FRESHNESS_MS ago: a completed round trip
 * on the LISTEN connection sent since then (./notifications.ts). So whatever a caller was told is
 * done before it sent its next request is known to every process that answers that request, and
 * under load one round trip every FRESHNESS_MS / 2 proves it for all requests, instead of one round
 * trip per request. A change written straight into the database by another tool (an UPDATE in psql)
 * takes effect within FRESHNESS_MS.
 */
import type { Queryable } from './pool.ts';

/** How old a reader's proof of having heard everything may be. */
export const FRESHNESS_MS = 20;
/**
 * How long an announcing writer waits after its commit before it returns: longer than the window,
 * so a proof a reader accepts was sent after the commit, whatever the two machines' clocks say
 * (only their rates matter, and they differ by parts per million).
 */
export const ANNOUNCEMENT_SETTLE_MS = FRESHNESS_MS + 5;

/** The statements of transactions open now (Database.transaction in ./pool.ts). */
export const openTransactions = new WeakSet<Queryable>();
/** A database bound to a transaction (transactionDatabase in ./pool.ts) → that transaction's statements. */
export const enclosingTransaction = new WeakMap<Queryable, Queryable>();
/** Transactions that announced a change (notify in ./notifications.ts): their commit waits for it to settle. */
const announcing = new WeakSet<Queryable>();

/** The transaction `db` runs in (itself or one it is bound to), if any. */
function transactionOf(db: Queryable): Queryable | undefined {
  let tx = db;
  for (let outer = enclosingTransaction.get(tx); outer; outer = enclosingTransaction.get(tx)) tx = outer;
  return openTransactions.has(tx) ? tx : undefined;
}

/** Whether `db`'s statements run inside a transaction (false: each commits by itself). */
export function insideTransaction(db: Queryable): boolean {
  return transactionOf(db) !== undefined;
}

/**
 * Marks `db`'s transaction as announcing and says whether it has one: true when the change is
 * committed later, by a transaction that then waits before it returns; false when `db` commits
 * each statement itself, so the caller must wait.
 */
export function settlesOnCommit(db: Queryable): boolean {
  const tx = transactionOf(db);
  if (!tx) return false;
  announcing.add(tx);
  return true;
}

/** Whether the transaction `tx` announced a change (it must wait for announcementSettled after its commit). */
export function transactionAnnounced(tx: Queryable): boolean {
  return announcing.has(tx);
}

/** Resolves once an announcement committed before the call is known to every process that answers a request sent after it. */
export function announcementSettled(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ANNOUNCEMENT_SETTLE_MS));
}

/** Per open transaction, what runs once it has committed (onCommit); dropped when it rolls back. */
const commitCallbacks = new WeakMap<Queryable, (() => void)[]>();

/**
 * Runs `callback` once `db`'s changes are committed: after the commit of the transaction `db` runs
 * in (never when it rolls back, nor when the savepoint it was registered under rolls back:
 * commitMark, dropCommitCallbacks), or on the next turn of the event loop when `db` commits each
 * statement itself. The callback runs detached (setImmediate): it must catch its own errors.
 */
export function onCommit(db: Queryable, callback: () => void): void {
  const tx = transactionOf(db);
  if (!tx) {
    setImmediate(callback);
    return;
  }
  let list = commitCallbacks.get(tx);
  if (!list) commitCallbacks.set(tx, (list = []));
  list.push(callback);
}

/** How many callbacks `db`'s transaction holds now: a savepoint rolled back drops those after it. */
export function commitMark(db: Queryable): number {
  const tx = transactionOf(db);
  return tx ? (commitCallbacks.get(tx)?.length ?? 0) : 0;
}

/** Drops the callbacks registered since `mark` (a savepoint rolled back). */
export function dropCommitCallbacks(db: Queryable, mark: number): void {
  const tx = transactionOf(db);
  const list = tx ? commitCallbacks.get(tx) : undefined;
  if (list) list.length = Math.min(list.length, mark);
}

/** Called by the transaction's owner (Database.transaction in ./pool.ts) once it committed or rolled back. */
export function transactionEnded(tx: Queryable, committed: boolean): void {
  const list = commitCallbacks.get(tx);
  if (!list) return;
  commitCallbacks.delete(tx);
  if (committed) for (const callback of list) setImmediate(callback);
}
