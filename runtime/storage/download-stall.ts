/**
 * storage.downloadStallTimeoutMs (docs/storage.md "Downloading"): a download that hands no byte to
 * its connection for this long is cut, its connection closed, so that a client that stopped reading
 * gives back what it holds: its connection, its download slot (storage.limits.
 * concurrentDownloadsPerCaller) and the open file or store request. Without it such a download holds
 * them for as long as the client keeps the connection open.
 *
 * Progress is a chunk moving from the file to the response: the pipe stops taking chunks while the
 * response's buffers are full, which is what a client that reads nothing causes. A store that sends
 * nothing (an S3 request hanging) stops the chunks too; the same bound cuts it, and the log says
 * which side was waiting.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';

/** Who stopped the bytes: the client (its connection's buffers full) or the store. */
export type StallSide = 'client' | 'store';

/**
 * Watches `source` piped into `res`: after `timeoutMs` without a chunk, destroys both and calls
 * `onStall` once. Returns the function that stops watching (call it when the pipe settles).
 */
export function watchDownloadStall(
  source: Readable,
  res: ServerResponse,
  timeoutMs: number,
  onStall: (side: StallSide) => void,
): () => void {
  const timer = setTimeout(() => {
    stop();
    onStall(res.writableNeedDrain ? 'client' : 'store');
    source.destroy();
    res.destroy();
  }, timeoutMs);
  // Never keeps a process alive on its own (the connection does, as long as it lasts).
  timer.unref();
  const progress = () => timer.refresh();
  source.on('data', progress);
  const stop = () => {
    clearTimeout(timer);
    source.off('data', progress);
  };
  return stop;
}
