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
