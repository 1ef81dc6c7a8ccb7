/** A job's payload checked against its schema, at enqueue and again when it runs (docs/own-code.md "Jobs"). */
import type { z } from 'zod';

/** A payload that does not match the job's schema (docs/own-code.md "Jobs"): thrown by `enqueue`. */
export class JobPayloadError extends Error {
  constructor(
    readonly job: string,
    readonly issues: string,
  ) {
    super(`job ${job}: the payload does not match the job's payload schema: ${issues}`);
    this.name = 'JobPayloadError';
  }
}

/** Zod's issues as `path: message; ...`, the path dotted (`items.0.sku`), `(payload)` for the whole. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => `${issue.path.length ? issue.path.map(String).join('.') : '(payload)'}: ${issue.message}`)
    .join('; ');
}
