/**
 * The functions a project's code declares itself with. generated/code.ts binds them to the
 * project's types (`codeFor<Service>()`); they check what TypeScript cannot (names, paths) at once,
 * so that a mistake fails `svcgen serve` at start, naming the definition.
 */
import type { z } from 'zod';
import { Problem } from '../http/index.ts';
import type {
  Anything,
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

const METHODS: ReadonlySet<string> = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);
/** A literal segment of an endpoint's path, or a `:name` parameter. */
const SEGMENT = /^(?:[A-Za-z0-9][A-Za-z0-9_.~-]*|:[A-Za-z][A-Za-z0-9_]*)$/;

/**
 * What docs/own-code.md "Endpoints" requires of one endpoint on its own: a name, a method, a path
 * of literal and `:name` segments whose first is literal, not `_`-prefixed (the service's own
 * paths) and not `rpc` (database functions), zod input and output, and an access rule (there is
 * no default). Collisions with tables and other endpoints are the registry's (registry.ts).
 */
export function checkEndpoint(endpoint: EndpointDefinition<Anything, Anything, Anything>): void {
  checkName('endpoint', endpoint.name);
  const what = `endpoint ${JSON.stringify(endpoint.name)}`;
  if (!METHODS.has(endpoint.method))
    throw new CodeDefinitionError(`${what}: method must be one of ${[...METHODS].join(', ')}`);
  const path = endpoint.path;
  const segments = typeof path === 'string' && path.startsWith('/') ? path.slice(1).split('/') : [];
  const first = segments[0] ?? '';
  if (first.startsWith(':'))
    throw new CodeDefinitionError(`${what}: the path's first segment must be literal, not the parameter ${first}`);
  if (first.startsWith('_'))
    throw new CodeDefinitionError(
      `${what}: paths starting with _ are the service's own (_apikeys, _files, _graphql, …)`,
    );
  if (first === 'rpc') throw new CodeDefinitionError(`${what}: paths under /rpc are database functions`);
  if (segments.length === 0 || !segments.every((s) => SEGMENT.test(s)))
    throw new CodeDefinitionError(
      `${what}: path ${JSON.stringify(path)} must start with / and hold segments of letters, digits, _ . ~ - or :name parameters (e.g. /orders/:id/refund)`,
    );
  const params = segments.filter((s) => s.startsWith(':'));
  if (new Set(params).size !== params.length)
    throw new CodeDefinitionError(`${what}: path ${path} names a parameter twice`);
  for (const part of ['input', 'output'] as const) {
    const schema = endpoint[part] as { safeParse?: unknown } | undefined;
    if (typeof schema?.safeParse !== 'function') throw new CodeDefinitionError(`${what}: ${part} must be a zod schema`);
  }
  const access = endpoint.access as unknown;
  const roles = (access as { roles?: unknown } | undefined)?.roles;
  const valid =
    access === 'public' ||
    access === 'signed-in' ||
    (Array.isArray(roles) && roles.length > 0 && roles.every((r) => typeof r === 'string' && r !== ''));
  if (!valid)
    throw new CodeDefinitionError(
      `${what}: access must be { roles: ['<role>', …] } (at least one), 'signed-in' or 'public'; there is no default`,
    );
  if (typeof endpoint.handler !== 'function') throw new CodeDefinitionError(`${what}: handler must be a function`);
  if (endpoint.status !== undefined && ![200, 201, 202].includes(endpoint.status))
    throw new CodeDefinitionError(`${what}: status must be 200, 201 or 202`);
}

export function defineEndpoint<S extends ServiceTypes, I extends z.ZodType, O extends z.ZodType>(
  endpoint: EndpointDefinition<S, I, O>,
): EndpointDefinition<S, I, O> {
  checkEndpoint(endpoint as EndpointDefinition<Anything, Anything, Anything>);
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
