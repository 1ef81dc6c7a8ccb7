/**
 * The framework-free request and reply of the pipeline. Express is only the adapter around them
 * (express-adapter.ts), so every stage can be called and tested without a socket.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { JsonBodyError, parseJsonBody } from './json-body.ts';
import { Problem } from './problems.ts';

export interface ApiRequest {
  readonly method: string;
  /** The path as received, without the query string (Problem `instance`). */
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly params: Readonly<Record<string, string>>;
  readonly ip: string;
  /** performance.now() when the request arrived (what "committed before this request" is measured against). */
  readonly receivedAt: number;
  /** Reads the whole body once, enforcing the size limit (413). Undefined when there is none. */
  readBody(): Promise<Buffer | undefined>;
  /**
   * Calls `listener` if the client goes away before it is answered (work still waiting for it can
   * be dropped); returns a function that stops listening.
   */
  onClientGone(listener: () => void): () => void;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  /** A string is sent as is (already JSON); undefined sends no body. */
  body?: string;
}

export function jsonReply(status: number, value: unknown, headers: Record<string, string> = {}): Reply {
  return {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
    body: JSON.stringify(value),
  };
}

/** Reply from JSON text the database already produced. */
export function rawJsonReply(status: number, json: string, headers: Record<string, string> = {}): Reply {
  return { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers }, body: json };
}

export function header(req: ApiRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function bodyReader(stream: IncomingMessage, limit: number): () => Promise<Buffer | undefined> {
  let read: Promise<Buffer | undefined> | undefined;
  return () => (read ??= readWholeBody(stream, limit));
}

/** The whole body of `stream` (call once), 413 past `limit` bytes; undefined when it is empty. */
export function readWholeBody(stream: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise<Buffer | undefined>((resolve, reject) => {
    const declared = Number(stream.headers['content-length']);
    if (Number.isFinite(declared) && declared > limit) {
      stream.resume();
      reject(new Problem('payload-too-large', `the request body is ${declared} bytes; the limit is ${limit} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stream.removeAllListeners('data');
        stream.resume();
        reject(new Problem('payload-too-large', `the request body is larger than the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    stream.on('end', () => resolve(size === 0 ? undefined : Buffer.concat(chunks, size)));
    stream.on('error', reject);
  });
}

/**
 * Parses a JSON body after checking its media type. `types` are the accepted media types
 * (application/json always; merge-patch+json for PATCH).
 */
export async function readJson(req: ApiRequest, types: readonly string[] = ['application/json']): Promise<unknown> {
  const body = await req.readBody();
  if (body === undefined) throw new Problem('invalid-json', 'the request needs a JSON body');
  const contentType = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (!types.includes(contentType)) {
    throw new Problem(
      'unsupported-media-type',
      contentType
        ? `Content-Type ${contentType} is not accepted here; send ${types.join(' or ')}`
        : `send the body with Content-Type ${types.join(' or ')}`,
    );
  }
  try {
    return parseJsonBody(body);
  } catch (error) {
    throw jsonBodyProblem(error);
  }
}

/** A JsonBodyError as the 400 `invalid-json` Problem of every route (docs/api.md §6.2); anything else as it is. */
export function jsonBodyProblem(error: unknown): unknown {
  if (!(error instanceof JsonBodyError)) return error;
  return new Problem(
    'invalid-json',
    error.message,
    error.rule === 'json' ? [] : [{ field: error.field, rule: error.rule, message: error.message }],
  );
}
