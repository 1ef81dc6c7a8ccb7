/**
 * What a project's own code declares (docs/own-code.md): hooks per table and action, endpoints,
 * jobs, schedules and auth hooks, typed with the project's generated types. These are the public
 * types of the `svcgen` package; the runtime reads a definition through runtime/usercode/registry.ts.
 *
 * A project's generated/code.ts binds them to its own tables:
 *
 *   import { defineCode, defineEndpoint, defineJob } from './generated/code.ts';
 *
 * `ServiceTypes` is what that binding knows: the generated typed client (`Client`, whose methods
 * are the data API of user code) and each table's shape (`<Table>Table` of generated/client.ts).
 */
import type { z } from 'zod';

/**
 * A value of any project's types: definitions of different projects (or tables) meet in one
 * registry, where `unknown` would refuse them for the variance of their function members.
 */
// biome-ignore lint/suspicious/noExplicitAny: see above
export type Anything = any;

/** The generated types a project's code is checked against (generated/code.ts's `Service`). */
export interface ServiceTypes {
  /** The generated typed client's interface: `data.Order.get(1)`, `data.Order.list({ where })`. */
  readonly client: object;
  /** Per table, its `<Table>Table` shape of generated/client.ts (record, create, update, filter, …). */
  readonly tables: Record<string, TableTypes>;
}

/** The parts of a table's shape hooks are typed with. */
export interface TableTypes {
  readonly record: object;
  readonly create: object;
  readonly update: object;
}

/** Any project: what `defineCode` checks against without generated types. */
export interface AnyService extends ServiceTypes {
  readonly client: Record<string, Anything>;
  readonly tables: Record<
    string,
    { record: Record<string, Anything>; create: Record<string, Anything>; update: Record<string, Anything> }
  >;
}

// The caller.

/**
 * Who a request runs for: the data API acts with its roles unless the code says asSystem(). Every
 * kind has `roles` (empty for anonymous and system), so `ctx.caller.roles.includes('admin')` reads
 * the same whoever calls.
 */
export type Caller =
  | {
      readonly kind: 'user';
      readonly userId: string;
      readonly email: string;
      readonly roles: readonly string[];
      readonly environment: string;
    }
  | {
      readonly kind: 'apiKey';
      readonly keyId: string;
      readonly roles: readonly string[];
      /** The key's context pairs (`$context.<key>` in role filters). */
      readonly context: Readonly<Record<string, string>>;
      readonly environment: string;
    }
  /** An endpoint declared `access: 'public'` called without credentials. */
  | { readonly kind: 'anonymous'; readonly roles: readonly string[]; readonly environment: string }
  /** Jobs, schedules and asSystem(): no caller; the code acts as the system (docs/own-code.md). */
  | { readonly kind: 'system'; readonly roles: readonly string[]; readonly environment: string };

/** A structured log of user code: entries carry the request id (or job id) and the code's name. */
export interface CodeLog {
  info(message: string, details?: Record<string, unknown>): void;
  warn(message: string, details?: Record<string, unknown>): void;
  error(message: string, details?: Record<string, unknown>): void;
}

/** Parameterised SQL in the current transaction, outside the permission layer (docs/own-code.md "SQL"). */
export type Sql = <Row = Record<string, unknown>>(
  strings: TemplateStringsArray,
  ...values: unknown[]
) => Promise<Row[]>;

/**
 * What every piece of user code receives. Everything it does runs in one database transaction when
 * there is one (a hook's write, `transaction()`), so that it commits or rolls back as a whole.
 */
export interface CodeContext<S extends ServiceTypes = AnyService> {
  readonly caller: Caller;
  /** The request id (`X-Request-Id`) or, in a job, `job:<id>`. */
  readonly requestId: string;
  readonly environment: string;
  /** The data API acting as the caller, under the caller's permissions (docs/permissions.md). */
  readonly data: S['client'];
  /** The data API acting as the system: every table, every row, no role filter. Flagged in docs/own-code.md. */
  asSystem(): S['client'];
  /** Runs `work` in one transaction: its data calls, SQL and queued jobs commit or roll back together. */
  transaction<T>(work: (ctx: CodeContext<S>) => Promise<T>): Promise<T>;
  /** Parameterised SQL in the current transaction (no permission checks; docs/own-code.md "SQL"). */
  readonly sql: Sql;
  /**
   * Sends a mail through the server's mailer once the current transaction commits, never when it
   * rolls back (docs/own-code.md "Mail"). Returns at once; delivery and its retries run in the background.
   */
  mail(message: CodeMail): void;
  readonly log: CodeLog;
}

/** A mail of your own code: plain text, with an optional HTML alternative. */
export interface CodeMail {
  /** One address (`name@host`). */
  readonly to: string;
  /** One line, at most 998 characters. */
  readonly subject: string;
  readonly text: string;
  readonly html?: string;
}

// Hooks.

/** A refusal naming fields: 422 validation, each entry in the Problem's `errors`. */
export type FieldMessages = Readonly<Record<string, string>>;

export interface BeforeCreate<S extends ServiceTypes, T extends TableTypes> {
  readonly input: T['create'];
  readonly ctx: CodeContext<S>;
}
export interface BeforeUpdate<S extends ServiceTypes, T extends TableTypes> {
  /** The merge patch as validated. */
  readonly input: T['update'];
  /** The record as it is before the update (every field, read as the system). */
  readonly previous: T['record'];
  readonly ctx: CodeContext<S>;
}
export interface BeforeDelete<S extends ServiceTypes, T extends TableTypes> {
  readonly previous: T['record'];
  readonly ctx: CodeContext<S>;
}
/** A write as it happened: `record` is null after a delete, `previous` null after a create. */
export interface AfterWrite<S extends ServiceTypes, T extends TableTypes> {
  readonly action: 'create' | 'update' | 'delete';
  readonly record: T['record'] | null;
  readonly previous: T['record'] | null;
  readonly ctx: CodeContext<S>;
}

type MaybePromise<T> = T | Promise<T>;

/**
 * Hooks of one table (docs/own-code.md "Hooks"). They run for every path that writes the table:
 * REST single, bulk and by filter, GraphQL mutations, the data API of user code, file references.
 */
export interface TableHooks<S extends ServiceTypes, T extends TableTypes> {
  /** May return a changed input; throw `refuse(...)` to answer 422 naming fields. */
  beforeCreate?(args: BeforeCreate<S, T>): MaybePromise<T['create'] | undefined>;
  beforeUpdate?(args: BeforeUpdate<S, T>): MaybePromise<T['update'] | undefined>;
  beforeDelete?(args: BeforeDelete<S, T>): MaybePromise<void>;
  /** Inside the write's transaction: a throw rolls back the write and its events. */
  afterWrite?(args: AfterWrite<S, T>): MaybePromise<void>;
  /** After the commit, for side effects: a failure is logged and never undoes the write. */
  afterCommit?(args: AfterWrite<S, T>): MaybePromise<void>;
}

// Endpoints.

/** Who may call an endpoint; nobody unless said (docs/own-code.md "Endpoints"). */
export type EndpointAccess = { readonly roles: readonly string[] } | 'signed-in' | 'public';

export type EndpointMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface EndpointDefinition<
  S extends ServiceTypes = AnyService,
  I extends z.ZodType = z.ZodType,
  O extends z.ZodType = z.ZodType,
> {
  /** The operation's name: its operationId, client method and GraphQL field. */
  readonly name: string;
  readonly method: EndpointMethod;
  /** Below the data API's prefix (`/checkout` → `/gw/api/rest/checkout`); `:name` segments are path parameters. */
  readonly path: string;
  readonly summary?: string;
  /** The body (POST, PUT, PATCH) or the query and path parameters (GET, DELETE). */
  readonly input: I;
  readonly output: O;
  readonly access: EndpointAccess;
  /** 200 by default; 201 for a create. */
  readonly status?: 200 | 201 | 202;
  handler(input: z.output<I>, ctx: CodeContext<S>): Promise<z.input<O>>;
}

// Jobs and schedules.

export interface JobOptions {
  /** Same key, one pending job: a newer one replaces it (graphile-worker's job key). */
  readonly jobKey?: string;
  readonly runAt?: Date;
  readonly maxAttempts?: number;
}

export interface JobDefinition<S extends ServiceTypes = AnyService, P extends z.ZodType = z.ZodType> {
  readonly name: string;
  readonly payload: P;
  /** Default 5; retries back off exponentially (graphile-worker). */
  readonly maxAttempts?: number;
  run(payload: z.output<P>, ctx: CodeContext<S>): Promise<void>;
  /** Queues the job in `ctx`'s transaction: nothing is queued if it rolls back. The payload is validated here. */
  enqueue(ctx: CodeContext<S>, payload: z.input<P>, options?: JobOptions): Promise<void>;
}

export interface ScheduleDefinition {
  /** Unique among schedules: the crontab entry's identifier. */
  readonly name: string;
  /** A crontab time (`0 3 * * *`, UTC), as graphile-worker reads it. */
  readonly cron: string;
  /** The job it queues, with this payload. */
  readonly job: string;
  readonly payload?: unknown;
  /**
   * Runs missed while no worker ran (a deploy, say) within this many seconds are made up for when
   * one starts; default 0: a missed run is skipped (docs/own-code.md "Schedules").
   */
  readonly backfillSeconds?: number;
}

// Auth.

export interface SignUpAttempt {
  readonly email: string;
  readonly environment: string;
}
export interface SignedUpUser {
  readonly id: string;
  readonly email: string;
  readonly roles: readonly string[];
  readonly environment: string;
}
/**
 * A mail svcgen sends (docs/own-code.md "Auth hooks"); user code may render it (return the text) or
 * send it itself (return 'sent'). `subject` and `text` are svcgen's own, to wrap or translate.
 */
export interface AuthMail {
  readonly kind:
    | 'confirm-signup'
    | 'reset-password'
    | 'change-email'
    | 'account-locked'
    | 'email-changed'
    | 'password-changed'
    | 'account-deleted';
  readonly to: string;
  readonly environment: string;
  /** svcgen's own subject and plain text of this mail. */
  readonly subject: string;
  readonly text: string;
  /** The 6-digit code (confirm-signup, reset-password, change-email). */
  readonly code?: string;
  /** How many minutes the code is valid (auth.codeTtl), with the code. */
  readonly validMinutes?: number;
  /** The new address (change-email, sent to it; email-changed, sent to the old one). */
  readonly newEmail?: string;
  /** When the lock ends, ISO 8601 UTC (account-locked). */
  readonly lockedUntil?: string;
}
export interface RenderedMail {
  readonly subject: string;
  readonly text: string;
  readonly html?: string;
}

export interface AuthHooks<S extends ServiceTypes> {
  /** Throw `refuse(...)` to refuse a sign-up (422 AUTH_REFUSED). `email` is trimmed and lower-cased. */
  beforeSignUp?(attempt: SignUpAttempt): MaybePromise<void>;
  /** In the sign-up's transaction: a throw undoes the sign-up. `ctx` acts as the new user. */
  afterSignUp?(args: { user: SignedUpUser; ctx: CodeContext<S> }): MaybePromise<void>;
  /** In the confirmation's transaction: a throw undoes the confirmation (the code stays valid). */
  afterConfirm?(args: { user: SignedUpUser; ctx: CodeContext<S> }): MaybePromise<void>;
  /** Extra claims of access tokens (JSON, at most MAX_EXTRA_CLAIMS_BYTES when serialised; reserved claims refused). */
  claims?(user: SignedUpUser): MaybePromise<Record<string, unknown>>;
  /** Renders (or sends) a mail; undefined keeps svcgen's own text. */
  mail?(mail: AuthMail): MaybePromise<RenderedMail | 'sent' | undefined>;
}

// The whole.

export interface CodeDefinition<S extends ServiceTypes = AnyService> {
  readonly hooks?: { readonly [T in keyof S['tables']]?: TableHooks<S, S['tables'][T]> };
  readonly endpoints?: readonly EndpointDefinition<S, Anything, Anything>[];
  readonly jobs?: readonly JobDefinition<S, Anything>[];
  readonly schedules?: readonly ScheduleDefinition[];
  readonly auth?: AuthHooks<S>;
}
