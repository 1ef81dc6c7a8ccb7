/**
 * API keys and management tokens in PostgreSQL, with an in-process cache of resolved keys.
 * Revocation reaches every server process through the shared LISTEN channel, and a cached key is
 * used only after the channel's barrier (one round trip shared by concurrent requests) proves every
 * revocation committed before the request was heard; while the channel is down nothing is cached.
 */
import type { z } from 'zod';
import { notify, type Database, type NotificationChannel } from '../db/index.ts';
import {
  unauthorized,
  type ApiKeyPrincipal,
  type Credential,
  type CredentialResolver,
  type ManagementPrincipal,
  type Principal,
} from '../principal/index.ts';
import type { Tenant } from '../tenancy/index.ts';
import { contextKeyProblem } from '../model/index.ts';
import type { apiKey } from '../model/wire/index.ts';
import {
  API_KEY_PATTERN,
  MANAGEMENT_TOKEN_PATTERN,
  constantTimeEqual,
  digestSecret,
  newId,
  newSecret,
} from './secrets.ts';

/** A key as listed (runtime/model/wire/keys.ts). */
export type ApiKeyRecord = z.output<typeof apiKey>;

export interface NewApiKey {
  projectId: string;
  environment: string;
  name: string;
  prefix: string;
  roles: string[];
  context: Record<string, string>;
}

interface KeyRow {
  id: string;
  name: string;
  prefix: string;
  environment: string;
  roles: string[];
  context: Record<string, string>;
  created_at: Date;
  last_used_at: Date | null;
}

function toRecord(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    environment: row.environment,
    roles: row.roles,
    context: row.context,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at ? row.last_used_at.toISOString() : null,
  };
}

/** The channel topic of a key revocation; the payload is the key's digest. */
export const REVOKED_TOPIC = 'api-key-revoked';
const CACHE_TTL_MS = 60_000;
const LAST_USED_FLUSH_MS = 10_000;

/** Callers check context keys first (422, usage error); this only makes sure no bad one is ever stored. */
export async function createApiKey(db: Database, input: NewApiKey): Promise<ApiKeyRecord & { key: string }> {
  for (const name of Object.keys(input.context)) {
    const problem = contextKeyProblem(name);
    if (problem) throw new Error(problem);
  }
  const key = newSecret('svk');
  const rows = await db.query<KeyRow>(
    `INSERT INTO svcgen.api_keys (id, project_id, environment, name, prefix, key_hash, roles, context)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     RETURNING id, name, prefix, environment, roles, context, created_at, last_used_at`,
    [
      newId('key'),
      input.projectId,
      input.environment,
      input.name,
      input.prefix,
      digestSecret(key),
      input.roles,
      JSON.stringify(input.context),
    ],
  );
  return { ...toRecord(rows[0]!), key };
}

export async function listApiKeys(db: Database, projectId: string, environment: string): Promise<ApiKeyRecord[]> {
  const rows = await db.query<KeyRow>(
    `SELECT id, name, prefix, environment, roles, context, created_at, last_used_at FROM svcgen.api_keys
     WHERE project_id = $1 AND environment = $2 AND revoked_at IS NULL ORDER BY created_at, id`,
    [projectId, environment],
  );
  return rows.map(toRecord);
}

/**
 * Revokes a key and tells every server process (NOTIFY on commit); returns the key's digest, or
 * undefined when no active key has that id.
 */
export async function revokeApiKey(
  db: Database,
  projectId: string,
  id: string,
  environment?: string,
): Promise<string | undefined> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<{ key_hash: string }>(
      `UPDATE svcgen.api_keys SET revoked_at = now()
       WHERE id = $1 AND project_id = $2 AND revoked_at IS NULL AND ($3::text IS NULL OR environment = $3)
       RETURNING key_hash`,
      [id, projectId, environment ?? null],
    );
    if (rows.length === 0) return undefined;
    await notify(tx, REVOKED_TOPIC, rows[0]!.key_hash);
    return rows[0]!.key_hash;
  });
}

export async function createManagementToken(
  db: Database,
  name: string,
): Promise<{ id: string; name: string; token: string }> {
  const token = newSecret('svm');
  const id = newId('mt');
  await db.query('INSERT INTO svcgen.management_tokens (id, name, token_hash) VALUES ($1, $2, $3)', [
    id,
    name,
    digestSecret(token),
  ]);
  return { id, name, token };
}

interface CachedKey {
  principal: ApiKeyPrincipal;
  projectId: string;
  prefix: string;
  expiresAt: number;
}

export interface ResolvedApiKey {
  principal: ApiKeyPrincipal;
  projectId: string;
  prefix: string;
}

/** A found key admitted for this request's scheme and tenant, or the 401 that says why not. */
function admitKey(key: ResolvedApiKey | undefined, credential: Credential, tenant: Tenant): Principal | undefined {
  if (!key) return undefined;
  if (!credential.bearer && credential.scheme.toLowerCase() !== key.prefix.toLowerCase()) {
    throw unauthorized(`this API key is sent as "${key.prefix} <key>" or "Bearer <key>"`);
  }
  if (key.projectId !== tenant.projectId) throw unauthorized('this API key belongs to another project');
  if (key.principal.environment !== tenant.environment) {
    throw unauthorized(
      `this API key belongs to environment "${key.principal.environment}", not "${tenant.environment}"`,
    );
  }
  return key.principal;
}

export class CredentialStore implements CredentialResolver {
  private readonly keys = new Map<string, CachedKey>();
  /** Key id → when it was last used (ms since the epoch), until the next flush. */
  private readonly lastUsed = new Map<string, number>();
  private flushTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  /** Bumped by every revocation seen; a lookup that raced one does not cache its (stale) answer. */
  private invalidations = 0;

  constructor(
    private readonly db: Database,
    private readonly channel: NotificationChannel,
    private readonly envManagementToken: string | undefined,
  ) {}

  start(): void {
    this.unsubscribe = this.channel.subscribe(REVOKED_TOPIC, {
      onMessage: (hash) => {
        this.invalidations++;
        this.keys.delete(hash);
      },
      onGap: () => {
        this.invalidations++;
        this.keys.clear();
      },
    });
    this.flushTimer = setInterval(() => void this.flushLastUsed(), LAST_USED_FLUSH_MS);
    this.flushTimer.unref();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    if (this.flushTimer) clearInterval(this.flushTimer);
    await this.flushLastUsed();
  }

  /**
   * The authentication stage's resolver for management tokens (Bearer) and API keys: at once for
   * a key this process has cached while its revocation proof is fresh (most requests), else after
   * the database or the proof's round trip.
   */
  resolve(credential: Credential, tenant: Tenant): Principal | undefined | Promise<Principal | undefined> {
    if (credential.bearer) {
      const management = this.resolveManagementToken(credential.token);
      if (management instanceof Promise) {
        return management.then((found) => found ?? this.resolveKey(credential, tenant));
      }
      if (management) return management;
    }
    return this.resolveKey(credential, tenant);
  }

  private resolveKey(credential: Credential, tenant: Tenant): Principal | undefined | Promise<Principal | undefined> {
    const key = this.resolveApiKey(credential.token);
    return key instanceof Promise
      ? key.then((found) => admitKey(found, credential, tenant))
      : admitKey(key, credential, tenant);
  }

  /** Revokes a key; this process forgets it at once, the others when the notification arrives. */
  async revoke(projectId: string, id: string): Promise<boolean> {
    const hash = await revokeApiKey(this.db, projectId, id);
    if (hash === undefined) return false;
    this.invalidations++;
    this.keys.delete(hash);
    return true;
  }

  /**
   * Finds an unrevoked API key by its value; undefined when unknown, malformed or revoked. At once
   * when the key is cached and this process has heard every revocation whose writer has returned
   * (runtime/db/announcements.ts); otherwise a promise.
   */
  resolveApiKey(key: string): ResolvedApiKey | undefined | Promise<ResolvedApiKey | undefined> {
    if (!API_KEY_PATTERN.test(key)) return undefined;
    const hash = digestSecret(key);
    const now = Date.now();
    const cached = this.keys.get(hash);
    if (!cached || cached.expiresAt < now) return this.lookUpApiKey(hash, now);
    if (this.channel.isCurrent()) return this.used(cached, now);
    // The proof is stale: wait for one round trip. A revocation heard meanwhile removed the entry,
    // unless the key was not cached under it (a fresher entry of the same key is no reason to
    // look it up again: under load those lookups kept replacing the entry and set each other off).
    return this.heardEverything().then((heard) =>
      heard && this.keys.has(hash) ? this.used(cached, now) : this.lookUpApiKey(hash, now),
    );
  }

  private used(cached: CachedKey, now: number): CachedKey {
    this.lastUsed.set(cached.principal.keyId, now);
    return cached;
  }

  private async lookUpApiKey(hash: string, now: number): Promise<ResolvedApiKey | undefined> {
    const generation = this.invalidations;
    const epoch = this.channel.epoch;
    const rows = await this.db.query<KeyRow & { project_id: string }>(
      `SELECT id, project_id, name, prefix, environment, roles, context, created_at, last_used_at
       FROM svcgen.api_keys WHERE key_hash = $1 AND revoked_at IS NULL`,
      [hash],
    );
    const row = rows[0];
    if (!row) {
      this.keys.delete(hash);
      return undefined;
    }
    const cached: CachedKey = {
      principal: {
        kind: 'apiKey',
        keyId: row.id,
        environment: row.environment,
        roles: row.roles,
        context: row.context,
      },
      projectId: row.project_id,
      prefix: row.prefix,
      expiresAt: now + CACHE_TTL_MS,
    };
    // Without a live listener a cached key could outlive its revocation, so cache only with one.
    if (this.channel.live && epoch === this.channel.epoch && generation === this.invalidations)
      this.keys.set(hash, cached);
    return this.used(cached, now);
  }

  private async heardEverything(): Promise<boolean> {
    try {
      await this.channel.current();
      return true;
    } catch {
      return false;
    }
  }

  /** A management token: the environment's at once; a stored one (never cached) from the database. */
  resolveManagementToken(token: string): ManagementPrincipal | undefined | Promise<ManagementPrincipal | undefined> {
    if (this.envManagementToken && constantTimeEqual(token, this.envManagementToken)) {
      return { kind: 'management', tokenId: 'env' };
    }
    if (!MANAGEMENT_TOKEN_PATTERN.test(token)) return undefined;
    return this.db
      .query<{ id: string }>('SELECT id FROM svcgen.management_tokens WHERE token_hash = $1 AND revoked_at IS NULL', [
        digestSecret(token),
      ])
      .then((rows) => (rows[0] ? { kind: 'management', tokenId: rows[0].id } : undefined));
  }

  /** Writes the batched last-used times: one statement every few seconds, not one per request. */
  async flushLastUsed(): Promise<void> {
    if (this.lastUsed.size === 0) return;
    const entries = [...this.lastUsed];
    this.lastUsed.clear();
    await this.db
      .query(
        `UPDATE svcgen.api_keys k SET last_used_at = greatest(k.last_used_at, u.at)
         FROM unnest($1::text[], $2::timestamptz[]) AS u(id, at) WHERE k.id = u.id`,
        [entries.map(([id]) => id), entries.map(([, at]) => new Date(at).toISOString())],
      )
      .catch(() => {});
  }
}
