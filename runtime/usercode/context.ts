/**
 * The CodeContext user code receives, built here only: for a hook from the write's DataContext,
 * for an endpoint from its admitted caller, for a job or schedule as the system. What it acts on
 * (the data API, jobs) comes from CodeServices, which the server wires (runtime/server/features).
 */
import type { Database, Queryable } from '../db/index.ts';
import { environmentSchema, ident, insideTransaction, onCommit, transactionDatabase } from '../db/index.ts';
import type { MailMessage } from '../mail/index.ts';
import type { Logger } from '../observability/index.ts';
import type { Principal } from '../principal/index.ts';
import type { Access } from '../query/index.ts';
import type { Caller, CodeContext, CodeLog, CodeMail, JobOptions, ServiceTypes, Sql } from './definitions.ts';
import { mailContentProblem } from './auth-hooks.ts';
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
  /** Hands a mail to the server's mailer (it queues, retries and never throws). */
  mail(message: MailMessage): void;
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

/**
 * `sql\`...\`` as parameterised SQL: each interpolated value is a parameter, never text. The
 * statement runs with the environment's schema as its search_path, as a database function does
 * (docs/own-code.md "SQL"), so that `"Product"` is the table of the caller's environment; the path
 * is set for that statement only and restored after it, so svcgen's own statements of the same
 * transaction resolve their names as before.
 */
function sqlOn(db: Database, environment: string): Sql {
  const path = ident(environmentSchema(environment));
  // In the caller's transaction the path is restored after the statement; in one of its own
  // (outside a transaction) set_config(..., true) ends with it, and nothing else runs in it.
  const inTransaction = async (tx: Queryable, text: string, values: unknown[]) => {
    const [{ previous }] = (await tx.query(
      `SELECT current_setting('search_path') AS previous, set_config('search_path', $1, true)`,
      [path],
    )) as [{ previous: string }];
    const rows = await tx.query(text, values);
    await tx.query(`SELECT set_config('search_path', $1, true)`, [previous]);
    return rows;
  };
  const alone = async (tx: Queryable, text: string, values: unknown[]) => {
    await tx.query(`SELECT set_config('search_path', $1, true)`, [path]);
    return tx.query(text, values);
  };
  return (strings, ...values) => {
    let text = strings[0]!;
    for (let i = 0; i < values.length; i++) text += `$${i + 1}${strings[i + 1]}`;
    const rows = insideTransaction(db)
      ? inTransaction(db, text, values)
      : db.transaction((tx) => alone(tx, text, values));
    return rows as Promise<never[]>;
  };
}

/** Longest line RFC 5322 allows; a longer subject would be folded or refused by the SMTP server. */
const MAX_SUBJECT_LENGTH = 998;

/**
 * `message` checked as ctx.mail takes it (docs/own-code.md "Mail"): a mistake throws a TypeError
 * at the call, where its stack names the code, rather than failing later in the background.
 */
function checkedMail(origin: string, message: CodeMail): MailMessage {
  const fail = (problem: string): never => {
    throw new TypeError(`ctx.mail (${origin}): ${problem}`);
  };
  if (typeof message !== 'object' || message === null) fail('give { to, subject, text, html? }');
  const { to, subject, text, html } = message;
  // One address, no list and no header: a line break or comma would let a value add recipients.
  if (typeof to !== 'string' || !/^[^\s@,;<>"]+@[^\s@,;<>"]+$/.test(to))
    fail(`to must be one address, e.g. name@example.com`);
  const problem = mailContentProblem(subject, text, html);
  if (problem) fail(problem);
  if (subject.length > MAX_SUBJECT_LENGTH) fail(`subject must be at most ${MAX_SUBJECT_LENGTH} characters`);
  return { to, subject, text, ...(html !== undefined ? { html } : {}), meta: { kind: 'code', origin } };
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
  // Made on first use: most code reads ctx.data only, and a log child costs a sizeable part of a
  // small endpoint's time (docs/own-code.md "Cost").
  let sql: Sql | undefined;
  let log: CodeLog | undefined;
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
    get sql() {
      sql ??= sqlOn(scope.db, scope.environment);
      return sql;
    },
    mail(message) {
      const checked = checkedMail(scope.origin, message);
      onCommit(scope.db, () => services.mail(checked));
    },
    get log() {
      log ??= codeLog(services.logger, scope);
      return log;
    },
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
