/** The one place that turns anything thrown by a handler into a response. */
import { AuthError, Problem } from './problems.ts';
import type { ApiRequest, Reply } from './request.ts';

export type ErrorLogger = (error: unknown, req: ApiRequest) => void;

export function errorReply(error: unknown, req: ApiRequest, log: ErrorLogger): Reply {
  if (error instanceof AuthError) {
    return {
      status: error.status,
      headers: { 'content-type': 'application/json; charset=utf-8', ...error.headers },
      body: JSON.stringify({ error: error.code, ...error.extra }),
    };
  }
  const problem = error instanceof Problem ? error : new Problem('internal', 'the server could not complete the request');
  if (!(error instanceof Problem)) log(error, req);
  return {
    status: problem.status,
    headers: { 'content-type': 'application/problem+json', ...problem.headers },
    body: JSON.stringify(problem.body(req.path)),
  };
}
