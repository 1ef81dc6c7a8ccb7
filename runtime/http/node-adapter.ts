/** The same framework-free request over plain node:http, for routes that do not need Express. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorReply, type ErrorLogger } from './reply.ts';
import { readWholeBody, type ApiRequest, type Reply } from './request.ts';

export type Handler = (req: ApiRequest) => Promise<Reply>;

/**
 * A handler that reads the request body (`raw`) or writes the response (`res`) as streams itself
 * (file uploads and downloads): it answers with the Reply it returns, or has answered when it
 * returns undefined.
 */
export type StreamHandler = (req: ApiRequest, raw: IncomingMessage, res: ServerResponse) => Promise<Reply | undefined>;

/** `url` is the request target as received; `params` the route parameters already matched. */
export function nodeRequest(
  req: IncomingMessage,
  res: ServerResponse,
  url: string,
  params: Record<string, string>,
  bodyLimit: number,
): ApiRequest {
  return new NodeRequest(req, res, url, params, bodyLimit);
}

/**
 * An ApiRequest over node:http: its methods live on the prototype and the query is parsed when
 * first read, instead of closures and a URLSearchParams per request (a GET by id never reads its
 * body, most requests have no query string).
 */
class NodeRequest implements ApiRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingMessage['headers'];
  readonly ip: string;
  readonly receivedAt = performance.now();
  private readonly q: number;
  private parsedQuery: URLSearchParams | undefined = undefined;
  private body: Promise<Buffer | undefined> | undefined = undefined;

  constructor(
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly url: string,
    readonly params: Record<string, string>,
    private readonly bodyLimit: number,
  ) {
    this.method = req.method ?? 'GET';
    this.q = url.indexOf('?');
    this.path = this.q === -1 ? url : url.slice(0, this.q);
    this.headers = req.headers;
    this.ip = req.socket.remoteAddress ?? '';
  }

  get query(): URLSearchParams {
    return (this.parsedQuery ??= new URLSearchParams(this.q === -1 ? '' : this.url.slice(this.q + 1)));
  }

  readBody(): Promise<Buffer | undefined> {
    return (this.body ??= readWholeBody(this.req, this.bodyLimit));
  }

  onClientGone(listener: () => void): () => void {
    return clientGone(this.res, listener);
  }
}

/** A response closed before it was finished: the client went away (or the server force-closed it). */
function clientGone(res: ServerResponse, listener: () => void): () => void {
  const onClose = () => {
    if (!res.writableFinished) listener();
  };
  res.once('close', onClose);
  return () => res.off('close', onClose);
}

/**
 * Writes `reply`, with the request's id (X-Request-Id, request-log.ts) unless the response carries
 * it already. A response with no header set before writeHead takes node's fast path: the headers
 * object is written as is, where a header set earlier makes writeHead set each of them one by one.
 */
export function send(res: ServerResponse, reply: Reply, req?: ApiRequest): void {
  const headers = reply.headers ?? {};
  // The length up front instead of chunked framing (writeHead fixes the framing before end() sees
  // the body): fewer bytes and writes per response, and clients know the size.
  if (reply.body !== undefined) headers['content-length'] = String(Buffer.byteLength(reply.body));
  const id = req?.headers['x-request-id'];
  if (typeof id === 'string' && !res.hasHeader('x-request-id')) headers['x-request-id'] = id;
  res.writeHead(reply.status, headers);
  res.end(reply.body);
}

/** Runs a StreamHandler: an error raised after the response started cuts the connection (its status is sent). */
export function runStream(
  handler: StreamHandler,
  apiReq: ApiRequest,
  raw: IncomingMessage,
  res: ServerResponse,
  log: ErrorLogger,
): void {
  handler(apiReq, raw, res).then(
    (reply) => {
      if (reply) send(res, reply, apiReq);
    },
    (error: unknown) => {
      if (res.headersSent) res.destroy();
      else send(res, errorReply(error, apiReq, log), apiReq);
    },
  );
}

export function run(handler: Handler, apiReq: ApiRequest, res: ServerResponse, log: ErrorLogger): void {
  handler(apiReq).then(
    (reply) => send(res, reply, apiReq),
    (error: unknown) => send(res, errorReply(error, apiReq, log), apiReq),
  );
}
