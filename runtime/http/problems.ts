import { AUTH_ERRORS, type AuthErrorCode } from '../model/index.ts';

/**
 * The one error type of the runtime and its closed table of kinds. Handlers throw; only
 * `toReply` (reply.ts) turns an error into a response, so no handler formats errors itself.
 */

/** Problem Details kinds of the data and webhook API (interface "Data API errors", CONTRACT §6/§7). */
export const PROBLEM_KINDS = {
  'bad-request': { status: 400, title: 'Bad Request' },
  'invalid-json': { status: 400, title: 'Malformed JSON body' },
  'invalid-parameter': { status: 400, title: 'Invalid query parameter' },
  'missing-project': { status: 400, title: 'Missing project' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  'not-found': { status: 404, title: 'Not Found' },
  'unknown-project': { status: 404, title: 'Unknown project' },
  'unknown-environment': { status: 404, title: 'Unknown environment' },
  'unknown-table': { status: 404, title: 'Unknown table' },
  'method-not-allowed': { status: 405, title: 'Method Not Allowed' },
  conflict: { status: 409, title: 'Conflict' },
  'payload-too-large': { status: 413, title: 'Payload Too Large' },
  'unsupported-media-type': { status: 415, title: 'Unsupported Media Type' },
  validation: { status: 422, title: 'Validation failed' },
  'rate-limited': { status: 429, title: 'Too Many Requests' },
  internal: { status: 500, title: 'Internal Server Error' },
  unavailable: { status: 503, title: 'Service Unavailable' },
  // Database faults (runtime/db/faults.ts): 503 with Retry-After, since each passes by itself.
  'database-unavailable': { status: 503, title: 'Database unavailable' },
  'database-busy': { status: 503, title: 'Database busy' },
  'statement-timeout': { status: 503, title: 'Database statement timeout' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemKind = keyof typeof PROBLEM_KINDS;

export interface FieldError {
  field: string;
  rule: string;
  message: string;
}

export class Problem extends Error {
  readonly status: number;
  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    readonly errors: FieldError[] = [],
    readonly headers: Record<string, string> = {},
    /** Extension members (RFC 9457 §3.2), e.g. the bulk envelope as `data`. */
    readonly extensions: Record<string, unknown> = {},
  ) {
    super(detail);
    this.name = 'Problem';
    this.status = PROBLEM_KINDS[kind].status;
  }

  body(instance: string): Record<string, unknown> {
    return {
      type: `/errors/${this.kind}`,
      title: PROBLEM_KINDS[this.kind].title,
      status: this.status,
      detail: this.detail,
      instance,
      errors: this.errors,
      ...this.extensions,
    };
  }
}

export { AUTH_ERRORS, type AuthErrorCode };

export class AuthError extends Error {
  readonly status: number;
  constructor(
    readonly code: AuthErrorCode,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(code);
    this.name = 'AuthError';
    this.status = AUTH_ERRORS[code];
  }
}
