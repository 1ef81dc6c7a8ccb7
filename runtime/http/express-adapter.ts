/** Express is only the transport: it routes, then hands a framework-free request to a handler. */
import type { Request, Response } from 'express';
import type { ErrorLogger } from './reply.ts';
import { nodeRequest, run, runStream, type Handler, type StreamHandler } from './node-adapter.ts';

export type { Handler } from './node-adapter.ts';

export function adapt(handler: Handler, options: { bodyLimit: number; log: ErrorLogger }) {
  return (req: Request, res: Response): void => {
    run(
      handler,
      nodeRequest(req, res, req.originalUrl, (req.params ?? {}) as Record<string, string>, options.bodyLimit),
      res,
      options.log,
    );
  };
}

/** adapt() for a StreamHandler. */
export function adaptStream(handler: StreamHandler, options: { bodyLimit: number; log: ErrorLogger }) {
  return (req: Request, res: Response): void => {
    runStream(
      handler,
      nodeRequest(req, res, req.originalUrl, (req.params ?? {}) as Record<string, string>, options.bodyLimit),
      req,
      res,
      options.log,
    );
  };
}
