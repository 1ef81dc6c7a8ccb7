import { afterEach, beforeEach } from 'vitest';

/**
 * Errors no handler caught in this process while each test of the file runs (a server started in
 * the test process): each would end `svcgen serve`. Call at the top level of a test file; the array
 * is emptied before every test.
 */
export function collectUnhandled(): unknown[] {
  const unhandled: unknown[] = [];
  const onUnhandled = (error: unknown) => void unhandled.push(error);
  beforeEach(() => {
    unhandled.length = 0;
    process.on('uncaughtException', onUnhandled);
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('uncaughtException', onUnhandled);
    process.off('unhandledRejection', onUnhandled);
  });
  return unhandled;
}
