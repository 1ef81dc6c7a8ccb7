/**
 * Rate-limit windows are calendar minutes. Instead of waiting for a fresh one, a test pins Date
 * (vi.setSystemTime mocks Date only; timers stay real) to 30 s into a minute no other test of the
 * file uses: its window starts empty, Retry-After is exactly 30, and no test straddles a boundary.
 */
import { vi } from 'vitest';

export function freshWindows(): () => number {
  const first = Math.ceil(Date.now() / 60_000) * 60_000 + 60_000;
  let minutes = 0;
  /** Pins Date to 30 s into the next unused minute; returns the minute's start (ms). */
  return () => {
    const start = first + 60_000 * minutes++;
    vi.setSystemTime(start + 30_000);
    return start;
  };
}
