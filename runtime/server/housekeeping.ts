/** Periodic clean-up off the request path (expired entries, old windows); never keeps the process alive. */
const HOUSEKEEPING_INTERVAL_MS = 60_000;

/** Runs `task` every minute; returns its stop. A failed round is left to the next one. */
export function every(task: () => Promise<unknown>, intervalMs = HOUSEKEEPING_INTERVAL_MS): () => void {
  const timer = setInterval(() => void task().catch(() => {}), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
