/**
 * The functions a project's code declares itself with. generated/code.ts binds them to the
 * project's types (`codeFor<Service>()`); they check what TypeScript cannot (names, paths) at once,
 * so that a mistake fails `svcgen serve` at start, naming the definition.
 */
import type { z } from 'zod';
import { Problem } from '../http/index.ts';
import type {
  AnyService,
  CodeContext,
  CodeDefinition,
  EndpointDefinition,
  FieldMessages,
  JobDefinition,
  JobOptions,
  ServiceTypes,
} from './definitions.ts';
import { contextInternals } from './internals.ts';

/** A name of an endpoint, job or schedule: an identifier, as operationIds and GraphQL fields need. */
const NAME = /^[A-Za-z][A-Za-z0-9_]{0,62}$/;

export class CodeDefinitionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CodeDefinitionError';
  }
}

function checkName(what: string, name: string): void {
  if (!NAME.test(name))
    throw new CodeDefinitionError(
      `${what} name ${JSON.stringify(name)} must start with a letter and hold only letters, digits and _ (at most 63)`,
    );
}

/** A 422 naming fields, for hooks and endpoints: `throw refuse({ status: 'paid orders cannot reopen' })`. */
export function refuse(fields: FieldMessages, detail?: string): Problem {
  const errors = Object.entries(fields).map(([field, message]) => ({ field, rule: 'refused', message }));
  return new Problem('validation', detail ?? errors.map((e) => `${e.field}: ${e.message}`).join('; '), errors);
}

export function defineEndpoint<S extends ServiceTypes, I extends z.ZodType, O extends z.ZodType>(
  endpoint: EndpointDefinition<S, I, O>,
): EndpointDefinition<S, I, O> {
  checkName('endpoint', endpoint.name);
  return endpoint;
}

export type JobInput<S extends ServiceTypes, P extends z.ZodType> = Omit<JobDefinition<S, P>, 'enqueue'>;

export function defineJob<S extends ServiceTypes, P extends z.ZodType>(job: JobInput<S, P>): JobDefinition<S, P> {
  checkName('job', job.name);
  return {
    ...job,
    enqueue(ctx: CodeContext<S>, payload: z.input<P>, options?: JobOptions): Promise<void> {
      return contextInternals(ctx).enqueue(job.name, job.payload, payload, options ?? {});
    },
  };
}

export function defineCode<S extends ServiceTypes = AnyService>(code: CodeDefinition<S>): CodeDefinition<S> {
  return code;
}

/** The define functions bound to a project's generated types (generated/code.ts). */
export function codeFor<S extends ServiceTypes>() {
  return {
    defineCode: (code: CodeDefinition<S>) => defineCode<S>(code),
    defineEndpoint: <I extends z.ZodType, O extends z.ZodType>(endpoint: EndpointDefinition<S, I, O>) =>
      defineEndpoint<S, I, O>(endpoint),
    defineJob: <P extends z.ZodType>(job: JobInput<S, P>) => defineJob<S, P>(job),
    refuse,
  };
}
