/**
 * Sending a file's bytes (docs/storage.md "Downloading"): a strong ETag from its sha256
 * (If-None-Match → 304), one byte range (Range → 206, outside the file → 416; several ranges or a
 * malformed header get the whole file), and headers that keep a browser from running it: `attachment` with an RFC 6266
 * filename (quotes escaped, non-ASCII as filename*=UTF-8''…, stored names hold no control
 * characters), nosniff and a sandboxing CSP.
 */
import type { ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import parseRange from 'range-parser';
import { header, Problem, type ApiRequest, type Reply } from '../http/index.ts';
import { ObjectMissing, objectKey, type ByteRange } from './backend.ts';
import type { StorageDeps } from './deps.ts';
import { watchDownloadStall } from './download-stall.ts';

export interface FileRecord {
  readonly id: string;
  readonly bucket: string;
  readonly name: string;
  readonly contentType: string;
  readonly size: number;
  readonly sha256: string;
  readonly ownerId: string | null;
  readonly createdAt: string;
}

/**
 * `attachment` with both filename forms of RFC 6266: an ASCII fallback in which quotes,
 * backslashes, % and anything outside printable ASCII become `_` (nothing to escape, nothing to
 * misparse), and the exact name as filename*=UTF-8''<RFC 8187 percent-encoding>.
 */
export function attachmentDisposition(name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const exact = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${exact}`;
}

/** Whether an If-None-Match list names `etag` (weak comparison, RFC 9110 §13.1.2). */
function matches(ifNoneMatch: string, etag: string): boolean {
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}

/** A suffix range (`-<length>`) with a length above 0: it selects at least the file's last byte. */
const SUFFIX = /^\s*-\s*0*[1-9]\d*\s*$/;

/**
 * What a Range header asks of a file of `size` (> 0) bytes (docs/storage.md "Downloading"): one
 * byte range; the whole file when the header is malformed, of another unit, or names several
 * ranges (even overlapping ones: no multipart/byteranges answers, RFC 9110 §14.2 lets a server
 * ignore Range); or unsatisfiable (416) when none of its ranges has a byte in the file.
 * range-parser answers -2 for malformed and -1 for unsatisfiable; it drops a suffix range longer
 * than the file, which RFC 9110 §14.1.2 says selects the whole file, so that case is handled here.
 */
export function requestedRange(size: number, rangeHeader: string): ByteRange | 'whole' | 'unsatisfiable' {
  // Without `combine`: `bytes=0-0,0-0` stays two ranges, not one merged range.
  const ranges = parseRange(size, rangeHeader);
  if (ranges === -2) return 'whole';
  // range-parser splits the header the same way: the unit before the first `=`, ranges between commas.
  const equals = rangeHeader.indexOf('=');
  if (rangeHeader.slice(0, equals) !== 'bytes') return 'whole';
  const specs = rangeHeader.slice(equals + 1).split(',');
  if (ranges === -1) {
    if (!specs.some((spec) => SUFFIX.test(spec))) return 'unsatisfiable';
    return specs.length === 1 ? { start: 0, end: size - 1 } : 'whole';
  }
  return specs.length === 1 ? ranges[0]! : 'whole';
}

/**
 * Answers a download: a Reply for what has no body to stream (304, 416), else streams the bytes
 * to `res` itself and returns undefined.
 */
export async function sendContent(
  deps: StorageDeps,
  req: ApiRequest,
  res: ServerResponse,
  environment: string,
  file: FileRecord,
  extraHeaders: Record<string, string>,
): Promise<Reply | undefined> {
  const etag = `"${file.sha256}"`;
  const common: Record<string, string> = {
    ...extraHeaders,
    etag,
    'accept-ranges': 'bytes',
    'cache-control': 'private, no-cache',
    'x-content-type-options': 'nosniff',
  };
  const ifNoneMatch = header(req, 'if-none-match');
  if (ifNoneMatch !== undefined && matches(ifNoneMatch, etag)) return { status: 304, headers: common };
  const rangeHeader = header(req, 'range');
  const wanted = rangeHeader === undefined || file.size === 0 ? 'whole' : requestedRange(file.size, rangeHeader);
  if (wanted === 'unsatisfiable')
    throw new Problem('range-not-satisfiable', `the file has ${file.size} bytes; ask for a range within them`, [], {
      ...common,
      'content-range': `bytes */${file.size}`,
    });
  const range = wanted === 'whole' ? undefined : wanted;
  const key = objectKey(environment, file.bucket, file.id);
  let stream: Awaited<ReturnType<typeof deps.backend.get>>;
  try {
    stream = await deps.backend.get(key, range, file.size);
  } catch (error) {
    if (error instanceof ObjectMissing) throw new Problem('not-found', `the bytes of file ${file.id} are gone`);
    throw error;
  }
  const length = range ? range.end - range.start + 1 : file.size;
  res.writeHead(range ? 206 : 200, {
    ...common,
    'content-type': file.contentType,
    'content-length': String(length),
    'content-disposition': attachmentDisposition(file.name),
    'content-security-policy': "default-src 'none'; sandbox",
    ...(range ? { 'content-range': `bytes ${range.start}-${range.end}/${file.size}` } : {}),
  });
  if (req.method === 'HEAD') {
    stream.destroy();
    res.end();
    return undefined;
  }
  // A client that goes away (or a stall cut) ends the pipeline with an error: nothing more to answer.
  const sent = pipeline(stream, res).catch(() => {});
  const stallMs = deps.config.storage.downloadStallTimeoutMs;
  if (stallMs !== null) {
    // Watched once piped: a 'data' listener of its own must not start the bytes flowing first.
    const stopWatching = watchDownloadStall(stream, res, stallMs, (side) =>
      deps.log(
        `download of file ${file.id} (bucket ${file.bucket}) cut: ${side === 'client' ? 'its client read' : 'the file store sent'} nothing for ${stallMs} ms (storage.downloadStallTimeoutMs); connection closed, download slot freed`,
      ),
    );
    await sent.finally(stopWatching);
  } else await sent;
  return undefined;
}
