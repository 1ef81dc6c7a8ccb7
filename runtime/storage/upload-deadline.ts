/**
 * How long an upload may take (docs/storage.md "Long uploads"): not http.requestTimeoutMs, which
 * would cut off a large file on a slow link, but its progress: no byte received for
 * storage.uploadIdleTimeoutMs → 408; fewer than storage.limits.minUploadBytesPerSecond over a
 * window of storage.limits.uploadRateWindowMs (the first window is a grace period) → 408; and
 * still arriving after storage.uploadTimeoutMs → 408. Each way the upload is cut like a refused one
 * (nothing kept) and the answer closes the connection, since the rest of the body is never read.
 *
 * Idleness is the socket's (node:http refreshes its timer with every chunk it parses), so a client
 * that stalls mid-multipart-header or after a refusal is caught too. The idle and rate checks run
 * until the body has all arrived (after a refusal too: a client trickling the rest of a refused
 * body holds its connection as much as an upload); from then on only the server is working.
 */
import type { IncomingMessage } from 'node:http';
import type { Config } from '../config/index.ts';
import { Problem, releaseRequestDeadline } from '../http/index.ts';
import { watchUploadRate } from './upload-rate.ts';

export interface UploadDeadline {
  /** Whether the deadline cut the upload. */
  readonly expired: boolean;
  /** Rejects with the 408 when the deadline passes: race it against waiting for the body. */
  readonly expiry: Promise<never>;
  /** `cut` gets the 408 when the deadline passes (at once if it already has). */
  onExpire(cut: (problem: Problem) => void): void;
  /** The upload is answered: timers off. */
  done(): void;
}

export function uploadDeadline(raw: IncomingMessage, storage: Config['storage']): UploadDeadline {
  releaseRequestDeadline(raw);
  const socket = raw.socket;
  let problem: Problem | undefined;
  let cut: ((problem: Problem) => void) | undefined;
  let overall: NodeJS.Timeout | undefined;
  let stopRate = () => {};
  let answered = false;
  let reject: (problem: Problem) => void = () => {};
  const expiry = new Promise<never>((_, no) => {
    reject = no;
  });
  expiry.catch(() => {}); // raced only while a body is awaited
  const expire = (detail: string) => {
    if (problem || raw.complete) return;
    // Answered already (a refusal while the rest was still arriving): nothing more to say, just close.
    if (answered) {
      socket.destroy();
      return;
    }
    problem = new Problem('request-timeout', `${detail}; nothing was kept, send the file again`, [], {
      connection: 'close',
    });
    reject(problem);
    cut?.(problem);
  };
  const onTimeout = () =>
    expire(`no byte of the upload arrived for ${storage.uploadIdleTimeoutMs} ms (storage.uploadIdleTimeoutMs)`);
  const stopIdle = () => {
    stopRate();
    raw.off('timeout', onTimeout);
    // Once answered, node:http owns the socket's timer (the keep-alive timeout).
    if (!answered && !socket.destroyed) socket.setTimeout(0);
  };
  if (!raw.complete) {
    // node:http emits 'timeout' on the request still arriving on a socket that timed out; a
    // listener there keeps it from destroying the socket before the 408 is written.
    raw.on('timeout', onTimeout);
    socket.setTimeout(storage.uploadIdleTimeoutMs);
    raw.once('end', stopIdle);
    const { minUploadBytesPerSecond, uploadRateWindowMs } = storage.limits;
    if (minUploadBytesPerSecond !== null)
      stopRate = watchUploadRate(raw, minUploadBytesPerSecond, uploadRateWindowMs, () =>
        expire(
          `the upload arrived slower than ${minUploadBytesPerSecond} bytes a second over ${uploadRateWindowMs} ms (storage.limits.minUploadBytesPerSecond)`,
        ),
      );
    if (storage.uploadTimeoutMs !== null) {
      overall = setTimeout(
        () => expire(`the upload took longer than ${storage.uploadTimeoutMs} ms (storage.uploadTimeoutMs)`),
        storage.uploadTimeoutMs,
      );
      overall.unref();
    }
  }
  return {
    expiry,
    get expired() {
      return problem !== undefined;
    },
    onExpire(handler) {
      cut = handler;
      if (problem) handler(problem);
    },
    done() {
      clearTimeout(overall);
      cut = undefined;
      if (raw.complete) stopIdle();
      answered = true;
    },
  };
}
