/**
 * The project's auth hooks (docs/own-code.md "Auth hooks"), run where sign-up, confirmation, token
 * issue and mail happen. Each call is bounded by code.hookTimeoutMs; what a hook throws is answered
 * in the auth surface's terms:
 * - `refuse(...)` (a 422 Problem) → 422 `{ error: 'AUTH_REFUSED', violations }`;
 * - any other Problem → that Problem, as thrown (its status and body); not from `claims`, whose
 *   every throw fails the token's issue with 500;
 * - a hook past code.hookTimeoutMs → 503 `unavailable` with Retry-After, logged;
 * - anything else → 500 with the request id only (the log has the error).
 * Without hooks nothing here adds work: each method returns at once.
 */
import type { Database, Queryable } from '../db/index.ts';
import { transactionDatabase } from '../db/index.ts';
import { AuthError, Problem, requestIdOf, type ApiRequest } from '../http/index.ts';
import type { Mailer, MailMessage } from '../mail/index.ts';
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
  constructor(hook: string, ms: number) {
    super(`auth.${hook} of your code did not finish within code.hookTimeoutMs (${ms} ms); it was abandoned`);
    this.name = 'HookTimedOut';
  }
}

/** A user principal for code that runs before the user has a session (afterSignUp, afterConfirm). */
const NO_SESSION = '00000000-0000-0000-0000-000000000000';

/** The statements of `tx` until close(): an abandoned or finished hook cannot reach a connection its transaction gave back. */
function fenced(tx: Queryable, hook: string): { db: Queryable; close(): void } {
  let open = true;
  const check = () => {
    if (!open) throw new Error(`auth.${hook} of your code is over; its transaction no longer takes statements`);
  };
  return {
    db: {
      query: async (text, values) => {
        check();
        return tx.query(text, values);
      },
      queryArrays: async (text, values) => {
        check();
        return tx.queryArrays(text, values);
      },
    },
    close: () => {
      open = false;
    },
  };
}

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
    const answer = await this.run(req, 'claims', () => hook(signedUp(tenant, user)), false);
    const checked = checkExtraClaims(answer);
    if (!checked.ok) throw new Error(checked.problem);
    return checked.claims;
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
          `the ${mail.kind} mail to ${mail.to} was not sent${requestId ? ` (request ${requestId})` : ''}: auth.mail of your code failed: ${(error as Error)?.message ?? String(error)}`,
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
    const fence = fenced(tx, hook);
    const ctx = codeContext(this.wired.codeServices, {
      environment: tenant.environment,
      principal,
      access: this.wired.policy.access(principal),
      db: transactionDatabase(db.pool, fence.db),
      requestId: requestIdOf(req) ?? '',
      origin: `auth ${hook}`,
    });
    try {
      await this.run(req, hook, () => run({ user: signedUp(tenant, user), ctx }));
    } finally {
      fence.close();
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
      if (error instanceof HookTimedOut) {
        const requestId = req ? requestIdOf(req) : undefined;
        this.log(`${error.message}${requestId ? ` (request ${requestId})` : ''}`);
        throw new Problem('unavailable', `the server's auth.${hook} code did not finish in time; try again`, [], {
          'retry-after': '1',
        });
      }
      if (problemsAnswer && error instanceof Problem && error.kind === 'validation') {
        const violations =
          error.errors.length > 0 ? error.errors : [{ field: 'body', rule: 'refused', message: error.detail }];
        throw new AuthError('AUTH_REFUSED', { violations });
      }
      if (problemsAnswer && (error instanceof Problem || error instanceof AuthError)) throw error;
      throw new Error(`auth.${hook} of your code threw: ${(error as Error)?.message ?? String(error)}`, {
        cause: error,
      });
    }
  }

  private bounded<T>(hook: string, work: () => T | Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new HookTimedOut(hook, this.timeoutMs)), this.timeoutMs);
    });
    return Promise.race([Promise.resolve().then(work), timeout]).finally(() => clearTimeout(timer));
  }
}

function signedUp(tenant: Tenant, user: AuthHookUser): SignedUpUser {
  return { id: user.id, email: user.email, roles: [...user.roles], environment: tenant.environment };
}
