/**
 * What a bench run must undo (children, databases), undone in reverse order at the end, or at
 * once on Ctrl-C (then the process exits 130).
 */
export function cleanupOnExit(log: (message: string) => void) {
  const steps: (() => Promise<void>)[] = [];
  let interrupted = false;
  const cleanup = async () => {
    while (steps.length) await steps.pop()!().catch((error: unknown) => log(`cleanup: ${(error as Error).message}`));
  };
  process.once('SIGINT', () => {
    interrupted = true;
    log('interrupted; cleaning up');
    void cleanup().finally(() => process.exit(130));
  });
  return {
    add: (step: () => Promise<void>) => void steps.push(step),
    /** Runs the steps unless Ctrl-C already does. */
    finish: () => (interrupted ? Promise.resolve() : cleanup()),
  };
}
