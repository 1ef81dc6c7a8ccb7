/**
 * Sessions and their refresh tokens: opaque, single use, stored as SHA-256 digests, grouped in a
 * session. A refresh marks the presented token used and issues the next one in one transaction
 * (the row lock makes concurrent refreshes with one token take turns: exactly one succeeds).
 * Presenting a used token again revokes the whole session (docs/api.md §3 "Tokens and sessions").
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Database, Queryable } from '../db/index.ts';
import { Revocations } from './tokens/index.ts';

function digest(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

async function addRefreshToken(tx: Queryable, sessionId: string, ttlSeconds: number): Promise<string> {
  const token = randomBytes(32).toString('base64');
  await tx.query(
    `INSERT INTO svcgen.refresh_tokens (token_hash, session_id, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3))`,
    [digest(token), sessionId, ttlSeconds],
  );
  return token;
}

/**
 * Starts a session for the account as it was when its credentials were checked. The user row is
 * share-locked and must still have that password and e-mail: a login that raced with a password
 * change, e-mail change or account deletion gets no session (undefined), and one that got in first
 * is seen (and ended) by the change, which waits for the lock.
 */
export async function startSession(
  db: Database,
  user: { id: string; password_hash: string; email: string },
  ttlSeconds: number,
): Promise<{ sessionId: string; refreshToken: string } | undefined> {
  return db.transaction(async (tx) => {
    const still = await tx.query(
      'SELECT 1 FROM svcgen.users WHERE id = $1 AND password_hash = $2 AND email = $3 FOR SHARE',
      [user.id, user.password_hash, user.email],
    );
    if (still.length === 0) return undefined;
    const sessionId = randomUUID();
    await tx.query('INSERT INTO svcgen.sessions (id, user_id) VALUES ($1, $2)', [sessionId, user.id]);
    return { sessionId, refreshToken: await addRefreshToken(tx, sessionId, ttlSeconds) };
  });
}

export type Rotation<T = undefined> =
  | { ok: true; userId: string; sessionId: string; refreshToken: string; issued: T }
  | { ok: false; revokedSession?: string };

/**
 * Spends a refresh token of this project and environment and issues the next one. `issue` runs in
 * the transaction once the token is spent: what it answers comes back as `issued`, and a throw of
 * it leaves the token unspent.
 */
export async function rotateRefreshToken<T = undefined>(
  db: Database,
  scope: { projectId: string; environment: string },
  token: string,
  ttlSeconds: number,
  issue?: (tx: Queryable, userId: string, sessionId: string) => Promise<T>,
): Promise<Rotation<T>> {
  const hash = digest(token);
  return db.transaction(async (tx): Promise<Rotation<T>> => {
    const spent = await tx.query<{ session_id: string; user_id: string }>(
      `UPDATE svcgen.refresh_tokens r SET used_at = now()
       FROM svcgen.sessions s JOIN svcgen.users u ON u.id = s.user_id
       WHERE r.token_hash = $1 AND r.used_at IS NULL AND r.expires_at > now()
         AND s.id = r.session_id AND s.revoked_at IS NULL AND u.project_id = $2 AND u.environment = $3
       RETURNING r.session_id, s.user_id`,
      [hash, scope.projectId, scope.environment],
    );
    const row = spent[0];
    if (row)
      return {
        ok: true,
        userId: row.user_id,
        sessionId: row.session_id,
        refreshToken: await addRefreshToken(tx, row.session_id, ttlSeconds),
        issued: (await issue?.(tx, row.user_id, row.session_id)) as T,
      };
    const reused = await tx.query<{ session_id: string }>(
      `SELECT r.session_id FROM svcgen.refresh_tokens r JOIN svcgen.sessions s ON s.id = r.session_id JOIN svcgen.users u ON u.id = s.user_id
       WHERE r.token_hash = $1 AND r.used_at IS NOT NULL AND u.project_id = $2 AND u.environment = $3`,
      [hash, scope.projectId, scope.environment],
    );
    if (!reused[0]) return { ok: false };
    await Revocations.revokeSessions(tx, { sessionId: reused[0].session_id });
    return { ok: false, revokedSession: reused[0].session_id };
  });
}

/** Logout: the session ends (its refresh token stops) and the access token is denied until it expires. */
export async function endSession(
  db: Database,
  sessionId: string,
  tokenId: string,
  expiresAtSeconds: number,
): Promise<void> {
  await db.transaction(async (tx) => {
    await Revocations.revokeSessions(tx, { sessionId });
    await Revocations.denyToken(tx, tokenId, expiresAtSeconds);
  });
}

export interface SessionRow {
  id: string;
  created_at: Date;
  last_used_at: Date;
  expires_at: Date | null;
}

/** How many sessions GET /auth/sessions lists (the most recently used). */
export const LISTED_SESSIONS = 100;

/**
 * The user's live sessions, most recently used first: not revoked, with a refresh token that can
 * still be spent, and always `current` (its access token is live even when its refresh token ran
 * out). A session is used when it starts and at each refresh; data requests do not write.
 */
export async function listSessions(db: Queryable, userId: string, current: string): Promise<SessionRow[]> {
  return db.query<SessionRow>(
    `SELECT s.id, s.created_at, coalesce(t.last_used_at, s.created_at) AS last_used_at, t.expires_at
     FROM svcgen.sessions s
     LEFT JOIN LATERAL (
       SELECT max(r.created_at) AS last_used_at, max(r.expires_at) FILTER (WHERE r.used_at IS NULL AND r.expires_at > now()) AS expires_at
       FROM svcgen.refresh_tokens r WHERE r.session_id = s.id
     ) t ON true
     WHERE s.user_id = $1 AND s.revoked_at IS NULL AND (t.expires_at IS NOT NULL OR s.id = $2)
     ORDER BY last_used_at DESC, s.id
     LIMIT $3`,
    [userId, current, LISTED_SESSIONS],
  );
}
