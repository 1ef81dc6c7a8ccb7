/** Express is only the transport: it routes, then hands a framework-free request to a handler. */
import type { Request, Response } from 'express';
import { errorReply, type ErrorLogger } from './reply.ts';
import { bodyReader, type ApiRequest, type Reply } from './request.ts';

export type Handler = (req: ApiRequest) => Promise<Reply>;

export function toApiRequest(req: Request, bodyLimit: number): ApiRequest {
  const url = req.originalUrl;
  const q = url.indexOf('?');
  return {
    method: req.method,
    path: q === -1 ? url : url.slice(0, q),
    query: new URLSearchParams(q === -1 ? '' : url.slice(q + 1)),
    headers: req.headers,
    params: (req.params ?? {}) as Record<string, string>,
    ip: req.socket.remoteAddress ?? '',
    readBody: bodyReader(req, bodyLimit),
  };
}

export function send(res: Response, reply: Reply): void {
  res.writeHead(reply.status, reply.headers);
  res.end(reply.body);
}

export function adapt(handler: Handler, options: { bodyLimit: number; log: ErrorLogger }) {
  return (req: Request, res: Response): void => {
    const apiReq = toApiRequest(req, options.bodyLimit);
    handler(apiReq).then(
      (reply) => send(res, reply),
      (error: unknown) => send(res, errorReply(error, apiReq, options.log)),
    );
  };
}
