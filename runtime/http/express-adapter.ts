/** Express is only the transport: it routes, then hands a framework-free request to a handler. */
import type { Request, Response } from 'express';
import type { ErrorLogger } from './reply.ts';
import { nodeRequest, run, runStream, type Handler, type StreamHandler } from './node-adapter.ts';
import type { ApiRequest } from './request.ts';

export type { Handler } from './node-adapter.ts';

type Options = { bodyLimit: number; log: ErrorLogger };

/** The framework-free request of an Express one: the target as received and the parameters Express matched. */
function apiRequest(req: Request, res: Response, bodyLimit: number): ApiRequest {
  return nodeRequest(req, res, req.originalUrl, (req.params ?? {}) as Record<string, string>, bodyLimit);
}

export function adapt(handler: Handler, options: Options) {
  return (req: Request, res: Response): void => run(handler, apiRequest(req, res, options.bodyLimit), res, options.log);
}

/** adapt() for a StreamHandler. */
export function adaptStream(handler: StreamHandler, options: Options) {
  return (req: Request, res: Response): void =>
    runStream(handler, apiRequest(req, res, options.bodyLimit), req, res, options.log);
}
