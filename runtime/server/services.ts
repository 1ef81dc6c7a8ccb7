/** The long-lived parts of a running server, built once at start and shared by every request. */
import type { UserAuth } from '../auth/index.ts';
import type { Config } from '../config/index.ts';
import type { Admission, Database, NotificationChannel, Readiness } from '../db/index.ts';
import type { CredentialStore } from '../keys/index.ts';
import type { Catalog, CursorCodec, Policy } from '../query/index.ts';
import type { ServiceModule } from '../model/index.ts';
import type { CredentialResolver } from '../principal/index.ts';
import type { SharedRateLimiter } from '../rate-limit/index.ts';
import type { SecretBox } from '../secrets/index.ts';
import type { WatchedTables } from '../webhooks/index.ts';
import type { Logger } from '../observability/index.ts';

export interface Services {
  readonly config: Config;
  readonly service: ServiceModule;
  readonly db: Database;
  /** The budget expensive reads wait in (database.expensiveReadConcurrency, expensiveReadQueue). */
  readonly expensiveReads: Admission;
  readonly catalog: Catalog;
  readonly policy: Policy;
  readonly channel: NotificationChannel;
  readonly credentials: CredentialStore;
  /** The authentication stage asks these in turn: API keys and management tokens, user access tokens. */
  readonly resolvers: readonly CredentialResolver[];
  readonly cursors: CursorCodec;
  readonly rateLimiter: SharedRateLimiter;
  readonly auth: UserAuth;
  /** Seals what must be read back: signing keys, webhook secrets. */
  readonly box: SecretBox;
  /** Tables with active webhook subscriptions: whether a write captures events. */
  readonly watchedTables: WatchedTables;
  /** What /readyz answers: database reachable, migrations applied, LISTEN connection up. */
  readonly readiness: Readiness;
  readonly basePath: string;
  readonly log: (message: string) => void;
  /** Structured entries: one per request (at info) and request errors. */
  readonly logger: Logger;
  /** Set when GET /metrics is on: the bearer token scrapers send. */
  readonly metricsToken?: string;
}
