/** The long-lived parts of a running server, built once at start and shared by every request. */
import type { Config } from '../config/index.ts';
import type { Database } from '../db/index.ts';
import type { CredentialStore } from '../keys/index.ts';
import type { Policy } from '../permissions/index.ts';
import type { Catalog, CursorCodec } from '../query/index.ts';
import type { ServiceModule } from '../model/index.ts';
import type { SharedRateLimiter } from './rate-limit.ts';

export interface Services {
  readonly config: Config;
  readonly service: ServiceModule;
  readonly db: Database;
  readonly catalog: Catalog;
  readonly policy: Policy;
  readonly credentials: CredentialStore;
  readonly cursors: CursorCodec;
  readonly rateLimiter: SharedRateLimiter;
  readonly basePath: string;
  readonly log: (message: string) => void;
}
