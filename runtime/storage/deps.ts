/** What the storage endpoints need from the running server (runtime/server/features/storage.ts builds it). */
import type { Config } from '../config/index.ts';
import type { Admission, Database } from '../db/index.ts';
import type { ApiRequest, Reply } from '../http/index.ts';
import type { Principal } from '../principal/index.ts';
import type { CursorCodec } from '../query/index.ts';
import type { RateDecision } from '../rate-limit/index.ts';
import type { DataContext } from '../data/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import type { WatchedTables } from '../events/index.ts';
import type { StorageBackend } from './backend.ts';
import type { BucketAccess } from './bucket-access.ts';
import type { InFlight } from './in-flight.ts';
import type { UrlSigner } from './signed-urls.ts';

export interface StorageDeps {
  readonly config: Config;
  readonly db: Database;
  readonly backend: StorageBackend;
  readonly access: BucketAccess;
  readonly signer: UrlSigner;
  readonly basePath: string;
  readonly expensiveReads: Admission;
  readonly cursors: CursorCodec;
  readonly watchedTables: WatchedTables;
  /** The data API's credential check and rate limits (runtime/data/admission.ts dataLimits), shared with it. */
  readonly limits: {
    authenticate(req: ApiRequest, tenant: Tenant): Principal | Promise<Principal>;
    data(tenant: Tenant, principal: Principal): RateDecision | Promise<RateDecision>;
    /**
     * Counts a request without credentials (a public bucket, a signed URL) against its client
     * address's share, a caller's share of the data budget; over it → 429 Problem.
     */
    anonymous(req: ApiRequest, environment: string): Promise<RateDecision>;
    /** Counts an upload against storage.limits.uploadsPerMinutePerCaller (when set); over it → 429 Problem. */
    uploads(tenant: Tenant, principal: Principal): Promise<void>;
  };
  /**
   * The data API's answers of a list and of a record by id, which file metadata answers as
   * (runtime/rest's handlers, wired by runtime/server/features/storage.ts).
   */
  readonly records: {
    list(ctx: DataContext): Promise<Reply>;
    read(ctx: DataContext): Promise<Reply>;
  };
  readonly rateLimitHeaders: (decision: RateDecision) => Record<string, string>;
  /** Uploads and downloads in progress per caller in this process (storage.limits.concurrent*PerCaller). */
  readonly inFlight: { readonly uploads: InFlight; readonly downloads: InFlight };
  /** The server's log, for what an operator should hear of (a download cut by storage.downloadStallTimeoutMs). */
  readonly log: (message: string) => void;
  /** The client address of a request (per http trustProxy): whom a download without credentials counts against. */
  readonly clientAddress: (req: ApiRequest) => string;
}
