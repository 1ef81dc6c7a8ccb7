// timeouts and sizes of the embedded server
export const START_TIMEOUT_MS = 60_000;
export const STOP_TIMEOUT_MS = 60_000;
export const LOCK_TIMEOUT_MS = 120_000;
export const LOCK_STALE_MS = 5 * 60_000; // a lock older than this is stale even if its pid is alive (pid reuse)
export const LOG_ROTATE_BYTES = 10 * 1024 * 1024;
