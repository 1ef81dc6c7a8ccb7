/**
 * The minimum upload rate (docs/storage.md "Long uploads"): an idle timeout alone lets a client
 * hold a connection for hours by sending one byte just before it expires, so an upload must also
 * bring at least storage.limits.minUploadBytesPerSecond in every window of
 * storage.limits.uploadRateWindowMs. The first window is a grace period (a connection starting up,
 * a client preparing the body); each later one is judged on its own.
 *
 * Arrival is measured on the socket (bytes read), so it counts what the client sent, multipart
 * framing included. A window in which the server itself held the body back (the request paused by
 * backpressure of a slow disk or store, or not yet read while the upload is checked) is not judged:
 * then the bytes waiting are the server's doing, not the client's.
 */
import type { IncomingMessage } from 'node:http';

/**
 * Watches `raw` until its body has all arrived or its connection closed; calls `tooSlow` (once) at
 * the end of a judged window that brought fewer than `bytesPerSecond` × `windowMs` / 1000 bytes.
 * Returns the function that stops watching.
 */
export function watchUploadRate(
  raw: IncomingMessage,
  bytesPerSecond: number,
  windowMs: number,
  tooSlow: () => void,
): () => void {
  const socket = raw.socket;
  const needed = (bytesPerSecond * windowMs) / 1000;
  let from = socket.bytesRead;
  // Whether this window is judged: not the grace window, nor one in which the server held back.
  let judged = false;
  const heldBack = () => {
    judged = false;
  };
  const serverHoldsBack = () => raw.readableFlowing !== true || raw.readableLength >= raw.readableHighWaterMark;
  const tick = () => {
    if (raw.complete || socket.destroyed) {
      stop();
      return;
    }
    const arrived = socket.bytesRead - from;
    from = socket.bytesRead;
    if (judged && arrived < needed) {
      stop();
      tooSlow();
      return;
    }
    judged = !serverHoldsBack();
  };
  const timer = setInterval(tick, windowMs);
  timer.unref();
  raw.on('pause', heldBack);
  raw.once('close', () => stop());
  function stop(): void {
    clearInterval(timer);
    raw.off('pause', heldBack);
  }
  return stop;
}
