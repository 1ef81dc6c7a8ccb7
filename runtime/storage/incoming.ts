/**
 * The file of an upload request, as a stream: the `file` part of a multipart/form-data body
 * (busboy), or the raw body with its Content-Type and `?name=`. Nothing is read before the caller
 * pipes the stream somewhere, except multipart headers up to the file part.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import busboy from 'busboy';
import { header, Problem, type ApiRequest } from '../http/index.ts';

export interface IncomingFile {
  readonly name: string | undefined;
  /** Where the name was expected, for the message when it is missing. */
  readonly nameSource: string;
  readonly declaredType: string | undefined;
  readonly stream: Readable;
  /** Reads and drops the rest of the request (after a refusal), so the client gets the answer. */
  discard(): void;
}

const FILE_PART = 'file';

export function incomingFile(raw: IncomingMessage, req: ApiRequest, maxBytes: number): Promise<IncomingFile> {
  const type = header(req, 'content-type') ?? '';
  const discard = () => {
    raw.unpipe();
    raw.resume();
  };
  if (!/^multipart\/form-data\b/i.test(type)) {
    raw.on('error', () => {}); // recorded as raw.errored; the upload reports it
    return Promise.resolve({
      name: req.query.get('name') ?? undefined,
      nameSource: 'send it as the name query parameter (?name=photo.png), or upload multipart/form-data',
      declaredType: type || undefined,
      stream: raw,
      discard,
    });
  }
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      // One byte over the limit reaches the inspector, which answers 413; preservePath keeps the name as sent.
      parser = busboy({
        headers: raw.headers,
        preservePath: true,
        limits: { files: 1, fileSize: maxBytes + 1, fields: 20, parts: 21 },
      });
    } catch (error) {
      reject(new Problem('unsupported-media-type', `the multipart body cannot be read: ${(error as Error).message}`));
      return;
    }
    let found = false;
    parser.on('file', (field, stream, info) => {
      if (field !== FILE_PART || found) {
        stream.resume();
        return;
      }
      found = true;
      // Until the upload pipes it (after its checks), an error is only recorded (stream.errored).
      stream.on('error', () => {});
      raw.once('aborted', () => stream.destroy(new Error('the client went away mid-upload')));
      resolve({
        name: info.filename,
        nameSource: 'give the file part a filename',
        declaredType: info.mimeType,
        stream,
        discard,
      });
    });
    parser.on('error', (error: Error) => {
      if (!found) reject(new Problem('bad-request', `the multipart body cannot be read: ${error.message}`));
    });
    parser.on('close', () => {
      if (!found)
        reject(
          new Problem('validation', `the multipart body has no part named "${FILE_PART}"`, [
            { field: FILE_PART, rule: 'required', message: `a part named "${FILE_PART}" holding the file` },
          ]),
        );
    });
    raw.pipe(parser);
  });
}
