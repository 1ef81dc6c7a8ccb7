/**
 * A graphile-worker runner kept running: graphile-worker gives up when the database goes away
 * under it, and the API must not go with it, so the runner is started again (with backoff) until
 * it is stopped. Used by the webhook delivery worker and the file removal worker.
 */
import type { Runner } from 'graphile-worker';

const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 15_000;

export interface RunnerEvents {
  /** The runner ended (with its error, or an Error saying it ended); a restart follows. */
  ended(error: unknown): void;
  /** A restart failed; another follows after a longer wait. */
  restartFailed?(error: unknown): void;
  /** A restart succeeded. */
  restarted?(): void;
}

export interface SupervisedRunner {
  /** Stops the runner and any restart under way. */
  stop(): Promise<void>;
}

/** Starts the runner (a failure of this first start is thrown) and keeps it running until stop(). */
export async function superviseRunner(start: () => Promise<Runner>, events: RunnerEvents): Promise<SupervisedRunner> {
  let runner: Runner | undefined;
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let backoffMs = FIRST_BACKOFF_MS;
  const supervise = (current: Runner) => {
    const ended = (error: unknown) => {
      if (stopping) return;
      events.ended(error ?? new Error('it ended'));
      runner = undefined;
      const restart = () => {
        timer = undefined;
        if (stopping) return;
        start().then(
          (next) => {
            backoffMs = FIRST_BACKOFF_MS;
            if (stopping) return void next.stop().catch(() => {});
            runner = next;
            supervise(next);
            events.restarted?.();
          },
          (error: unknown) => {
            events.restartFailed?.(error);
            backoffMs = Math.min(backoffMs * 2, MAX_BACKOFF_MS);
            timer = setTimeout(restart, backoffMs);
          },
        );
      };
      timer = setTimeout(restart, backoffMs);
    };
    current.promise.then(() => ended(undefined), ended);
  };
  runner = await start();
  supervise(runner);
  return {
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      await runner?.stop();
    },
  };
}
