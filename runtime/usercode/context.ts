/**
 * The CodeContext user code receives, built here only: for a hook from the write's DataContext,
 * for an endpoint from its admitted caller, for a job or schedule as the system. What it acts on
 * (the data API, jobs) comes from CodeServices, which the server wires (runtime/server/features).
 */
import type { Database, Queryable } from '../db/index.ts';
import { transactionDatabase } from '../db/index.ts';
import type { Logger } from '../observability/index.ts';
import type { Principal } from '../principal/index.ts';
import type { Access } from '../query/index.ts';
import type { Caller, CodeContext, CodeLog, JobOptions, ServiceTypes, Sql } from './definitions.ts';
import { withInternals } from './internals.ts';
import { describeIssues, JobPayloadError } from './job-payload.ts';
import { isSystemPrincipal } from './system.ts';

/** Who the code acts for, and where: the parts of a request (or job) a context is made of. */
export interface CodeScope {
  readonly environment: string;
  /** The caller's principal and access; absent for the system (jobs, schedules) and for `anonymous`. */
  readonly principal?: Principal;
  /**
   * A public endpoint called without credentials: the caller is `anonymous`, and its data API
   * holds no grant (every call 403) rather than acting as the system.
   */
  readonly anonymous?: boolean;
  readonly access?: Access;
  /** The connection or open transaction the code's statements run on. */
  readonly db: Database;
  /** The request id, or `job:<id>` in a job. */
  readonly requestId: string;
  /** For log entries: `hook Order.beforeUpdate`, `endpoint checkout`, `job sendReceipt`. */
  readonly origin: string;
}

/** What contexts act through, from the running server or worker. */
export interface CodeServices {
  readonly logger: Logger;
  /** The data API (the generated client's interface) acting as `scope`'s caller, or as the system when `system`. */
  dataApi(scope: CodeScope, system: boolean): object;
  /** Queues a job on `db` (the context's transaction): nothing is queued if it rolls back. */
  enqueue(db: Queryable, environment: string, name: string, payload: unknown, options: JobOptions): Promise<void>;
}

export function callerOf(principal: Principal | undefined, environment: string, anonymous = false): Caller {
  if (anonymous) return { kind: 'anonymous', roles: [], environment };
  if (principal === undefined || isSystemPrincipal(principal)) return { kind: 'system', roles: [], environment };
  switch (principal.kind) {
    case 'user':
      return {
        kind: 'user',
        userId: principal.userId,
        email: principal.email,
        roles: principal.roles,
        environment: principal.environment,
      };
    case 'apiKey':
      return {
        kind: 'apiKey',
        keyId: principal.keyId,
        roles: principal.roles,
        context: principal.context,
        environment: principal.environment,
      };
    case 'management':
      // Management tokens read no data (docs/permissions.md); no code runs for one.
      throw new TypeError('a management token does not run user code');
  }
}

function codeLog(logger: Logger, scope: CodeScope): CodeLog {
  const child = logger.child({ requestId: scope.requestId, code: scope.origin });
  return {
    info: (message, details) => child.info(details ?? {}, message),
    warn: (message, details) => child.warn(details ?? {}, message),
    error: (message, details) => child.error(details ?? {}, message),
  };
}

/** `sql\`...\`` as parameterised SQL: each interpolated value is a parameter, never text. */
function sqlOn(db: Queryable): Sql {
  return (strings, ...values) => {
    let text = strings[0]!;
    for (let i = 0; i < values.length; i++) text += `$${i + 1}${strings[i + 1]}`;
    return db.query(text, values) as Promise<never[]>;
  };
}

/** `payload` as it travels in the queue: its JSON form. */
function jsonOf(name: string, payload: unknown): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch (error) {
    throw new JobPayloadError(name, `(payload): not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (text === undefined) throw new JobPayloadError(name, '(payload): not JSON (undefined or a function)');
  return JSON.parse(text);
}

/** The context of `scope`: its data API and SQL on scope.db; transaction() nests as a savepoint. */
export function codeContext<S extends ServiceTypes>(services: CodeServices, scope: CodeScope): CodeContext<S> {
  let data: object | undefined;
  let system: object | undefined;
  const ctx: CodeContext<S> = {
    caller: callerOf(scope.principal, scope.environment, scope.anonymous),
    requestId: scope.requestId,
    environment: scope.environment,
    get data() {
      data ??= services.dataApi(scope, scope.principal === undefined && !scope.anonymous);
      return data as S['client'];
    },
    asSystem() {
      system ??= services.dataApi(scope, true);
      return system as S['client'];
    },
    transaction: (work) =>
      scope.db.transaction((tx) =>
        work(codeContext<S>(services, { ...scope, db: transactionDatabase(scope.db.pool, tx) })),
      ),
    sql: sqlOn(scope.db),
    log: codeLog(services.logger, scope),
  };
  return withInternals(ctx, {
    enqueue: async (name, schema, payload, options) => {
      // What is queued is the payload's JSON, and the job parses that when it runs: it is the JSON
      // that must match (docs/own-code.md "Jobs"), so that a run gets what the enqueue checked.
      const json = jsonOf(name, payload);
      const parsed = schema.safeParse(json);
      if (!parsed.success) throw new JobPayloadError(name, describeIssues(parsed.error));
      await services.enqueue(scope.db, scope.environment, name, json, options);
    },
  });
}
