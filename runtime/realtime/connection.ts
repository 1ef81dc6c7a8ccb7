/**
 * What the parts of the subscription server share (docs/realtime.md): the close codes, a
 * subscriber's connection (a WebSocket or an SSE stream), who is on it, and what the server needs
 * of the running server.
 */
import type { GraphQLSchema } from 'graphql';
import type { RolePrincipal } from '../principal/index.ts';
import type { Access, Catalog, FileAccess } from '../query/index.ts';
import type { resolveDataTenant, Tenant } from '../tenancy/index.ts';
import type { DataLimits } from '../data/index.ts';
import type { LiveHub } from './hub.ts';

/** Close codes of docs/realtime.md beyond graphql-ws's own (4400, 4401, 4403, 4408, 4409, 4429). */
export const CLOSE = {
  /** The API key was revoked, or the session or token ended (logout, expiry). */
  credentialEnded: 4401,
  /** The client reads changes slower than they come: its buffer is full. */
  tooSlow: 1013,
  /** The server is stopping. */
  goingAway: 1001,
  /** The server lost its channel to the database: changes may have been missed. */
  interrupted: 1011,
  /** The user's roles changed: what they may see changed (docs/realtime.md). */
  rolesChanged: 4403,
} as const;

/**
 * A subscriber's connection: a WebSocket, or a Server-Sent Events stream (sse.ts). `close` ends it
 * with one of the codes above (an SSE stream sends the code in a last event, docs/realtime.md).
 */
export interface LiveConnection {
  close(code: number, reason: string): void;
  /** Bytes written but not yet sent to the client. */
  readonly bufferedAmount: number;
  /** Changes taken from the subscription's queue but not yet written (an SSE stream's library queue). */
  readonly queued?: number;
  /** Drops the connection without a closing handshake (a WebSocket's terminate()). */
  terminate?(): void;
}

/**
 * The Retry-After of a connection cap's 429 (per process at the upgrade or an SSE request, per
 * caller for an SSE request; docs/realtime.md "Lifecycle and limits"): a connection frees when a
 * client leaves, which no clock tells, so a client is asked to wait a few seconds, not hammer.
 */
export const CAP_RETRY_AFTER_SECONDS = 5;

/** config.realtime (docs/config.md). */
export interface RealtimeLimits {
  readonly maxConnections: number;
  readonly maxConnectionsPerCaller: number;
  readonly maxSubscriptionsPerConnection: number;
  readonly maxQueuedChanges: number;
  readonly maxBufferedBytes: number;
}

/** What the realtime server needs of the running server. */
export interface RealtimeDeps {
  readonly config: Parameters<typeof resolveDataTenant>[1];
  readonly catalog: Catalog;
  access(principal: RolePrincipal): Access;
  schemaFor(principal: RolePrincipal): GraphQLSchema;
  /** The data API's credential check (runtime/data dataLimits), shared with it. */
  authenticate: DataLimits['authenticate'];
  readonly hub: LiveHub;
  /** The caller's access to each bucket's files (undefined when no bucket is configured). */
  files?(principal: RolePrincipal): FileAccess | undefined;
  /** The configured bucket names. */
  readonly buckets?: readonly string[];
  log(message: string, error?: unknown): void;
  /** What a client did wrong that the server has nothing to fix for (a frame over the size limit). */
  debug?(message: string, error?: unknown): void;
}

/** Who is on a socket (set by connection_init) or an SSE stream (from its headers). */
export interface Caller {
  readonly tenant: Tenant;
  readonly principal: RolePrincipal;
  /** What ends the credential: the API key's digest, or the user's session and token ids. */
  readonly revokedBy: readonly string[];
  expiryTimer?: NodeJS.Timeout;
}
