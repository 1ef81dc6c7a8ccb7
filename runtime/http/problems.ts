import { AUTH_ERRORS, type AuthErrorCode } from '../model/index.ts';
import { PROBLEM_KINDS, type ProblemKind } from '../model/problem-kinds.ts';

/**
 * The one error type of the runtime and its closed table of kinds. Handlers throw; only
 * `errorReply` (reply.ts) turns an error into a response, so no handler formats errors itself. The
 * kinds live in runtime/model, where the OpenAPI generator reads them too.
 */

export { PROBLEM_KINDS, type ProblemKind };

export interface FieldError {
  field: string;
  rule: string;
  message: string;
}

/** Entries of a Problem's `errors` in a response; the rest are counted in `errorsOmitted`. */
export const MAX_PROBLEM_ERRORS = 20;
/** About the longest `detail` (and `field` or `message` of an entry) in a response. */
export const MAX_DETAIL_CHARS = 1000;

/** The first `length` UTF-16 units of `text`, one fewer when that would split a surrogate pair. */
function head(text: string, length: number): string {
  const code = text.charCodeAt(length - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? length - 1 : length);
}

function clip(text: string, max = MAX_DETAIL_CHARS): string {
  return text.length <= max ? text : `${head(text, max - 1)}…`;
}

function shortFieldError(error: FieldError): FieldError {
  if (error.field.length <= MAX_DETAIL_CHARS && error.message.length <= MAX_DETAIL_CHARS) return error;
  return { ...error, field: clip(error.field), message: clip(error.message) };
}

/**
 * A detail of at most about MAX_DETAIL_CHARS. Details listing several problems are joined with
 * "; " (usually the entries' messages): whole parts are kept and the rest counted, "… and N more".
 */
function shortDetail(detail: string, errors: readonly FieldError[]): string {
  if (detail.length <= MAX_DETAIL_CHARS) return detail;
  const messages = errors.map((e) => e.message);
  const parts = errors.length > 1 && detail === messages.join('; ') ? messages : detail.split('; ');
  const room = MAX_DETAIL_CHARS - 30; // for "; … and N more"
  let kept = 0;
  let length = -2; // no "; " before the first part
  for (const part of parts) {
    if (length + 2 + part.length > room) break;
    length += 2 + part.length;
    kept++;
  }
  if (kept === 0) {
    const shown = head(detail, room);
    return `${shown}… and ${detail.length - shown.length} more characters`;
  }
  return `${parts.slice(0, kept).join('; ')}; … and ${parts.length - kept} more`;
}

/**
 * The Retry-After of a 429 whose source gave none (docs/api.md §6.2): every 429 carries one, so a
 * client always knows when to come back. Each source sets its own (a rate limit's window, a cap's
 * guess); this only keeps a forgotten one from reaching a client without it.
 */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;

/** `headers` with Retry-After when `status` is 429 and they have none. */
function withRetryAfter(status: number, headers: Record<string, string>): Record<string, string> {
  if (status !== 429 || Object.keys(headers).some((name) => name.toLowerCase() === 'retry-after')) return headers;
  return { ...headers, 'retry-after': String(DEFAULT_RETRY_AFTER_SECONDS) };
}

/** Marks a Problem whichever copy of this module made it (Symbol.for: one symbol per process). */
const PROBLEM_BRAND = Symbol.for('svcgen.Problem');

export class Problem extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(
    readonly kind: ProblemKind,
    readonly detail: string,
    readonly errors: FieldError[] = [],
    headers: Record<string, string> = {},
    /** Extension members (RFC 9457 §3.2), e.g. the bulk envelope as `data`. */
    readonly extensions: Record<string, unknown> = {},
  ) {
    super(detail);
    this.name = 'Problem';
    this.status = PROBLEM_KINDS[kind].status;
    this.headers = withRetryAfter(this.status, headers);
  }

  /**
   * The response body. Its `errors` and `detail` are capped here, for every Problem (docs/api.md
   * §6.1): at most MAX_PROBLEM_ERRORS entries plus `errorsOmitted` (how many were left out), and a
   * `detail` of at most about MAX_DETAIL_CHARS ending with "… and N more". `this.errors` and
   * `this.detail` stay complete for the code that threw them; extension members (the bulk
   * envelope's `data`) are not touched.
   */
  body(instance: string): Record<string, unknown> {
    const omitted = Math.max(0, this.errors.length - MAX_PROBLEM_ERRORS);
    return {
      type: `/errors/${this.kind}`,
      title: PROBLEM_KINDS[this.kind].title,
      status: this.status,
      detail: shortDetail(this.detail, this.errors),
      instance,
      errors: this.errors.slice(0, MAX_PROBLEM_ERRORS).map(shortFieldError),
      ...(omitted > 0 ? { errorsOmitted: omitted } : {}),
      ...this.extensions,
    };
  }
}

Object.defineProperty(Problem.prototype, PROBLEM_BRAND, { value: true });
/**
 * A project's own code in a CommonJS package loads its own copy of the `svcgen` package (its
 * `require` of generated/ goes through TypeScript's CommonJS hook), so `refuse()` there makes a
 * Problem of another class: `instanceof Problem` asks the brand, not the class (subclasses, none
 * today, keep the ordinary prototype test).
 */
Object.defineProperty(Problem, Symbol.hasInstance, {
  value(this: unknown, value: unknown): boolean {
    if (this !== Problem) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PROBLEM_BRAND] === true;
  },
});

export { AUTH_ERRORS, type AuthErrorCode };

export class AuthError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(
    readonly code: AuthErrorCode,
    readonly extra: Record<string, unknown> = {},
    headers: Record<string, string> = {},
  ) {
    super(code);
    this.name = 'AuthError';
    this.status = AUTH_ERRORS[code];
    this.headers = withRetryAfter(this.status, headers);
  }
}

/** 405 with Allow, as a Problem: thrown before the credentials are looked at, so nothing is counted. */
export function methodNotAllowed(req: { readonly method: string; readonly path: string }, allow: string): Problem {
  return new Problem('method-not-allowed', `${req.path} answers ${allow}, not ${req.method}`, [], { allow });
}
