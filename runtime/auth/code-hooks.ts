/**
 * The project's auth hooks (docs/own-code.md "Auth hooks"), run where sign-up, confirmation, token
 * issue and mail happen. Each call is bounded by code.hookTimeoutMs; what a hook throws is answered
 * in the auth surface's terms, as table hooks answer theirs (runtime/data/hooks.ts):
 * - `refuse(...)` (a 422 Problem) → 422 `{ error: 'AUTH_REFUSED', violations }`;
 * - any other Problem below 500 → that Problem, as thrown (its status and body); not from `claims`,
 *   whose every throw fails the token's issue;
 * - a Problem of 500 or more, or a database fault (503) → as it is, logged;
 * - a hook past code.hookTimeoutMs, or anything else → 500 `internal` naming the request id (also
 *   the body's `requestId`), the detail only in the log.
 * Without hooks nothing here adds work: each method returns at once.
 */
import { databaseFault, gatedTransaction, type Database, type Queryable } from '../db/index.ts';
import { AuthError, Problem, requestIdOf, type ApiRequest } from '../http/index.ts';
import type { Mailer, MailMessage } from '../mail/index.ts';
import type { Logger } from '../observability/index.ts';
import type { UserPrincipal } from '../principal/index.ts';
import type { Policy } from '../query/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import {
  checkExtraClaims,
  checkMailAnswer,
  codeContext,
  type AuthMail,
  type CodeRegistry,
  type CodeServices,
  type SignedUpUser,
} from '../usercode/index.ts';

/** A hook ran past code.hookTimeoutMs. */
class HookTimedOut extends Error {
  constructor(readonly hook: string) {
    super(`auth.${hook} did not finish within code.hookTimeoutMs`);
    this.name = 'HookTimedOut';
  }
}

/** A user principal for code that runs before the user has a session (afterSignUp, afterConfirm). */
const NO_SESSION = '00000000-0000-0000-0000-000000000000';

export interface AuthHookUser {
  readonly id: string;
  readonly email: string;
  readonly roles: readonly string[];
}

export class AuthCodeHooks {
  private wired: { codeServices: CodeServices; policy: Policy } | undefined;
  private readonly mailing = new Set<Promise<void>>();

  constructor(
    private readonly registry: CodeRegistry,
    private readonly timeoutMs: number,
    private readonly mailer: Mailer,
    private readonly log: (message: string) => void,
  ) {}

  /** The services the contexts of afterSignUp and afterConfirm act through, once the server has them. */
  wire(services: { codeServices: CodeServices; policy: Policy }): void {
    this.wired = services;
  }

  /** Refuses the sign-up when the project's beforeSignUp throws (before anything is created). */
  async beforeSignUp(req: ApiRequest, tenant: Tenant, email: string): Promise<void> {
    const hook = this.registry.auth.beforeSignUp;
    if (!hook) return;
    await this.run(req, 'beforeSignUp', () => hook({ email, environment: tenant.environment }));
  }

  /** afterSignUp in the sign-up's transaction `tx`, acting as the new user. */
  async afterSignUp(req: ApiRequest, tenant: Tenant, db: Database, tx: Queryable, user: AuthHookUser): Promise<void> {
    const hook = this.registry.auth.afterSignUp;
    if (hook) await this.inTransaction(req, 'afterSignUp', tenant, db, tx, user, hook);
  }

  /** afterConfirm in the confirmation's transaction `tx`, acting as the user. */
  async afterConfirm(req: ApiRequest, tenant: Tenant, db: Database, tx: Queryable, user: AuthHookUser): Promise<void> {
    const hook = this.registry.auth.afterConfirm;
    if (hook) await this.inTransaction(req, 'afterConfirm', tenant, db, tx, user, hook);
  }

  /**
   * The extra claims of an access token for `user`, checked (checkExtraClaims): a violation throws
   * an Error naming the rule, which the request answers with 500 and logs.
   */
  async claims(req: ApiRequest | undefined, tenant: Tenant, user: AuthHookUser): Promise<Record<string, unknown>> {
    const hook = this.registry.auth.claims;
    if (!hook) return {};
    // A Problem thrown here is no answer of the request: token issue fails with 500, as for any throw.
    return this.run(
      req,
      'claims',
      async () => {
        const checked = checkExtraClaims(await hook(signedUp(tenant, user)));
        if (!checked.ok) throw new Error(checked.problem);
        return checked.claims;
      },
      false,
    );
  }

  /**
   * Sends `message` (svcgen's own text of `mail`), or what the project's mail hook renders; nothing
   * when it answers 'sent'. Never throws and never holds up the request: the hook runs in the
   * background, and a throw, a timeout or a bad answer is logged and sends nothing, as a mail the
   * mail server gave up on.
   */
  send(mail: AuthMail, message: MailMessage, req?: ApiRequest): void {
    const hook = this.registry.auth.mail;
    if (!hook) {
      this.mailer.send(message);
      return;
    }
    const requestId = req ? requestIdOf(req) : undefined;
    const pending = this.bounded('mail', () => hook(mail))
      .then((answer) => {
        const checked = checkMailAnswer(answer);
        if (!checked.ok) throw new Error(checked.problem);
        if (checked.answer === 'sent') return;
        this.mailer.send(checked.answer ? { ...message, ...checked.answer } : message);
      })
      .catch((error: unknown) =>
        this.log(
          `the ${mail.kind} mail to ${mail.to} was not sent${requestId ? ` (request ${requestId})` : ''}: ${
            error instanceof HookTimedOut
              ? `auth.mail of your code did not finish within code.hookTimeoutMs (${this.timeoutMs} ms)`
              : `auth.mail of your code failed: ${(error as Error)?.message ?? String(error)}`
          }`,
        ),
      )
      .finally(() => this.mailing.delete(pending));
    this.mailing.add(pending);
  }

  /** Resolves once every mail hook that has started has finished (shutdown, tests). */
  async idle(): Promise<void> {
    while (this.mailing.size > 0) await Promise.allSettled([...this.mailing]);
  }

  private async inTransaction(
    req: ApiRequest,
    hook: 'afterSignUp' | 'afterConfirm',
    tenant: Tenant,
    db: Database,
    tx: Queryable,
    user: AuthHookUser,
    run: NonNullable<CodeRegistry['auth']['afterSignUp']>,
  ): Promise<void> {
    if (!this.wired) throw new Error(`auth.${hook} ran before the server had started`);
    const principal: UserPrincipal = {
      kind: 'user',
      userId: user.id,
      email: user.email,
      environment: tenant.environment,
      roles: [...user.roles],
      sessionId: NO_SESSION,
      tokenId: NO_SESSION,
    };
    // Statements sent after the hook returned, threw or was abandoned never reach the transaction.
    let open = true;
    const gated = gatedTransaction(
      db.pool,
      tx,
      () => open,
      () => new Error(`auth.${hook} has ended (returned, failed or timed out): its context takes no more statements`),
    );
    const ctx = codeContext(this.wired.codeServices, {
      environment: tenant.environment,
      principal,
      access: this.wired.policy.access(principal),
      db: gated,
      requestId: requestIdOf(req) ?? '',
      origin: `auth ${hook}`,
    });
    try {
      await this.run(req, hook, () => run({ user: signedUp(tenant, user), ctx }));
    } finally {
      open = false;
    }
  }

  /** Runs a hook within code.hookTimeoutMs and maps what it throws (see the top of this file). */
  private async run<T>(
    req: ApiRequest | undefined,
    hook: string,
    work: () => T | Promise<T>,
    problemsAnswer = true,
  ): Promise<T> {
    try {
      return await this.bounded(hook, work);
    } catch (error) {
      throw this.failure(req, hook, error, problemsAnswer);
    }
  }

  private failure(req: ApiRequest | undefined, hook: string, error: unknown, problemsAnswer: boolean): unknown {
    if (problemsAnswer) {
      if (error instanceof Problem && error.kind === 'validation') {
        const violations =
          error.errors.length > 0 ? error.errors : [{ field: 'body', rule: 'refused', message: error.detail }];
        return new AuthError('AUTH_REFUSED', { violations });
      }
      if ((error instanceof Problem && error.status < 500) || error instanceof AuthError) return error;
    }
    const requestId = (req && requestIdOf(req)) ?? '';
    const where = `auth.${hook}`;
    const log = this.logger().child({ requestId, code: `auth ${hook}` });
    if (error instanceof HookTimedOut) {
      log.error({ timeoutMs: this.timeoutMs }, `${where} did not finish within code.hookTimeoutMs; it was abandoned`);
      // A fault of the service's own code, as a table hook's (docs/own-code.md "Hooks"): 500, no Retry-After.
      return new Problem(
        'internal',
        `${where} did not finish within ${this.timeoutMs} ms (code.hookTimeoutMs); the server's log has the detail under request id ${requestId}`,
        [],
        {},
        { requestId },
      );
    }
    if ((error instanceof Problem && error.status >= 500) || databaseFault(error)) {
      log.warn({ err: error }, `${where} met a fault of the server`);
      return error;
    }
    log.error({ err: error }, `${where} failed`);
    return new Problem(
      'internal',
      `${where} failed; the server's log has the detail under request id ${requestId}`,
      [],
      {},
      { requestId },
    );
  }

  /** The structured log (the code feature's); before the server is wired, none is needed. */
  private logger(): Logger {
    if (!this.wired) throw new Error('auth hooks ran before the server had started');
    return this.wired.codeServices.logger;
  }

  private bounded<T>(hook: string, work: () => T | Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new HookTimedOut(hook)), this.timeoutMs);
    });
    return Promise.race([Promise.resolve().then(work), timeout]).finally(() => clearTimeout(timer));
  }
}

function signedUp(tenant: Tenant, user: AuthHookUser): SignedUpUser {
  return { id: user.id, email: user.email, roles: [...user.roles], environment: tenant.environment };
}
