/** Polls `probe` until `done` holds for its result, failing after `ms` (never a fixed sleep). */
export async function until<T>(
  probe: () => Promise<T>,
  done: (value: T) => boolean,
  ms: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`${what}: not reached within ${ms} ms (last: ${JSON.stringify(value)?.slice(0, 300)})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Waits until one statement of this database that starts with `statement` waits for a lock. */
export async function waitingForLock(
  db: { query<R>(text: string, values?: unknown[]): Promise<R[]> },
  statement: string,
  what: string,
  ms = 10_000,
): Promise<void> {
  await until(
    () =>
      db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock' AND starts_with(query, $1)`,
        [statement],
      ),
    (rows) => rows[0]!.n === 1,
    ms,
    what,
  );
}
