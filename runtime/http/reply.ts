/** The one place that turns anything thrown by a handler into a response. */
import { databaseFault, type DatabaseFaultKind } from '../db/faults.ts';
import { AuthError, Problem, type ProblemKind } from './problems.ts';
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
  const problem =
    error instanceof Problem
      ? error
      : (databaseFaultProblem(error) ?? new Problem('internal', 'the server could not complete the request'));
  if (!(error instanceof Problem)) log(error, req);
  return {
    status: problem.status,
    headers: { 'content-type': 'application/problem+json', ...problem.headers },
    body: JSON.stringify(problem.body(req.path)),
  };
}

const FAULT_KINDS: Record<DatabaseFaultKind, ProblemKind> = {
  unavailable: 'database-unavailable',
  'pool-timeout': 'database-busy',
  'lock-conflict': 'database-busy',
  'statement-timeout': 'statement-timeout',
};

/** Seconds a client should wait before retrying a request that met a database fault. */
export const DATABASE_RETRY_AFTER_SECONDS = 1;

/**
 * The one mapping of database faults to responses, for every route (data, auth, keys, webhooks):
 * a retryable 503 instead of a 500, since nothing is wrong with the request or the server's code.
 */
export function databaseFaultProblem(error: unknown): Problem | undefined {
  const fault = databaseFault(error);
  if (!fault) return undefined;
  return new Problem(FAULT_KINDS[fault.kind], fault.detail, [], {
    'retry-after': String(DATABASE_RETRY_AFTER_SECONDS),
  });
}
