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

export async function startSession(db: Database, userId: string, ttlSeconds: number): Promise<{ sessionId: string; refreshToken: string }> {
  return db.transaction(async (tx) => {
    const sessionId = randomUUID();
    await tx.query('INSERT INTO svcgen.sessions (id, user_id) VALUES ($1, $2)', [sessionId, userId]);
    return { sessionId, refreshToken: await addRefreshToken(tx, sessionId, ttlSeconds) };
  });
}

export type Rotation =
  | { ok: true; userId: string; sessionId: string; refreshToken: string }
  | { ok: false; revokedSession?: string };

/** Spends a refresh token of this project and environment and issues the next one. */
export async function rotateRefreshToken(
  db: Database,
  scope: { projectId: string; environment: string },
  token: string,
  ttlSeconds: number,
): Promise<Rotation> {
  const hash = digest(token);
  return db.transaction(async (tx): Promise<Rotation> => {
    const spent = await tx.query<{ session_id: string; user_id: string }>(
      `UPDATE svcgen.refresh_tokens r SET used_at = now()
       FROM svcgen.sessions s JOIN svcgen.users u ON u.id = s.user_id
       WHERE r.token_hash = $1 AND r.used_at IS NULL AND r.expires_at > now()
         AND s.id = r.session_id AND s.revoked_at IS NULL AND u.project_id = $2 AND u.environment = $3
       RETURNING r.session_id, s.user_id`,
      [hash, scope.projectId, scope.environment],
    );
    const row = spent[0];
    if (row) return { ok: true, userId: row.user_id, sessionId: row.session_id, refreshToken: await addRefreshToken(tx, row.session_id, ttlSeconds) };
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
export async function endSession(db: Database, sessionId: string, tokenId: string, expiresAtSeconds: number): Promise<void> {
  await db.transaction(async (tx) => {
    await Revocations.revokeSessions(tx, { sessionId });
    await Revocations.denyToken(tx, tokenId, expiresAtSeconds);
  });
}
