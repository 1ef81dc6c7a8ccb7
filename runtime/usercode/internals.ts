/**
 * What a CodeContext carries for the runtime beside its public members: the way to its transaction
 * and services. Held under a symbol so that user code sees only the public CodeContext.
 */
import type { z } from 'zod';
import type { CodeContext, JobOptions } from './definitions.ts';
import type { Anything } from './definitions.ts';

// Symbol.for: the code of a CommonJS package holds its own copy of this module (runtime/http/problems.ts Problem).
const INTERNALS = Symbol.for('svcgen.codeContext');

export interface ContextInternals {
  /** Queues job `name` in the context's transaction after validating `payload` (runtime/usercode/jobs.ts). */
  enqueue(name: string, schema: z.ZodType, payload: unknown, options: JobOptions): Promise<void>;
}

export function withInternals<C extends CodeContext<Anything>>(ctx: C, internals: ContextInternals): C {
  Object.defineProperty(ctx, INTERNALS, { value: internals, enumerable: false });
  return ctx;
}

export function contextInternals(ctx: CodeContext<Anything>): ContextInternals {
  const internals = (ctx as unknown as Record<symbol, ContextInternals | undefined>)[INTERNALS];
  if (!internals)
    throw new TypeError('not a context svcgen gave to your code: pass the ctx your hook, endpoint or job received');
  return internals;
}
