/** The long-lived parts of a running server, built once at start and shared by every request. */
import type { UserAuth } from '../auth/index.ts';
import type { Admission, Readiness } from '../db/index.ts';
import type { CredentialStore } from '../keys/index.ts';
import type { FunctionSpec } from '../model/index.ts';
import type { Catalog, CursorCodec, Policy } from '../query/index.ts';
import type { CredentialResolver } from '../principal/index.ts';
import type { LiveHub } from '../realtime/hub.ts';
import type { WatchedTables } from '../events/index.ts';
import type { CodeServices } from '../usercode/index.ts';
import type { WriteHooks } from '../data/index.ts';
import type { Mailer } from '../mail/index.ts';
import type { Foundation } from './foundation.ts';

/** The foundation and what the features add (./features/index.ts checks each one is provided). */
export interface Services extends Foundation {
  /** The budget expensive reads wait in (database.expensiveReadConcurrency, expensiveReadQueue). */
  readonly expensiveReads: Admission;
  readonly catalog: Catalog;
  readonly policy: Policy;
  readonly credentials: CredentialStore;
  /** The authentication stage asks these in turn: user access tokens, API keys and management tokens. */
  readonly resolvers: readonly CredentialResolver[];
  readonly cursors: CursorCodec;
  readonly auth: UserAuth;
  /** The server's outgoing mail (mail.smtpUrl or the dev transport): auth's mails and ctx.mail of user code. */
  readonly mailer: Mailer;
  /** Tables with active webhook subscriptions: whether a write captures events. */
  readonly watchedTables: WatchedTables;
  /** Live GraphQL subscribers of this process and the changes they get (docs/realtime.md). */
  readonly liveHub: LiveHub;
  /** The configured database functions with their signatures (runtime/server/features/functions.ts). */
  readonly functions: ReadonlyMap<string, FunctionSpec>;
  /** What the project's own code acts through (runtime/server/features/code.ts). */
  readonly codeServices: CodeServices;
  /** The code's table hooks, as every write of the data layer runs them (runtime/data/hooks.ts). */
  readonly writeHooks: WriteHooks;
  /** What /readyz answers: database reachable, migrations applied, LISTEN connection up. */
  readonly readiness: Readiness;
}
