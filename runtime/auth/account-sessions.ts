/**
 * Reading a signed-in user's account and sessions, and ending sessions (docs/api.md §3 "Your
 * account"): no current password needed, and all in the user's read budget.
 */
import { AuthError, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import type { AccountContext } from './account-context.ts';
import { listSessions } from './refresh-tokens.ts';
import { Revocations } from './tokens/index.ts';
import type { UserAuth } from './user-auth.ts';
import * as users from './users.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function accountSessionHandlers(auth: UserAuth, { signedIn, remember }: AccountContext) {
  const { db } = auth;

  async function me(req: ApiRequest): Promise<Reply> {
    const { user } = await signedIn(req, 'read');
    return jsonReply(200, users.publicUser(user));
  }

  async function sessions(req: ApiRequest): Promise<Reply> {
    const { claims, user } = await signedIn(req, 'read');
    const rows = await listSessions(db, user.id, claims.sessionId);
    return jsonReply(200, {
      sessions: rows.map((s) => ({
        id: s.id,
        createdAt: s.created_at.toISOString(),
        lastUsedAt: s.last_used_at.toISOString(),
        expiresAt: s.expires_at?.toISOString() ?? null,
        current: s.id === claims.sessionId,
      })),
    });
  }

  async function endSession(req: ApiRequest): Promise<Reply> {
    const { claims, user } = await signedIn(req, 'read');
    const id = req.params.id ?? '';
    // Unknown, ended and other users' sessions get one answer: nothing tells them apart.
    const sessionId = UUID.test(id) ? id.toLowerCase() : undefined;
    const current = sessionId === claims.sessionId;
    const ended = sessionId
      ? await db.transaction(async (tx) => {
          const revoked = await Revocations.revokeSessions(tx, { sessionId, userId: user.id });
          if (current && revoked.length > 0) await Revocations.denyToken(tx, claims.tokenId, claims.expiresAt);
          return revoked;
        })
      : [];
    if (ended.length === 0) throw new AuthError('AUTH_SESSION_NOT_FOUND');
    remember(ended, current ? claims.tokenId : undefined);
    return jsonReply(200, {
      message: current ? 'session ended; this was the current session: you are logged out' : 'session ended',
    });
  }

  async function endOtherSessions(req: ApiRequest): Promise<Reply> {
    const { claims, user } = await signedIn(req, 'read');
    const ended = await db.transaction((tx) =>
      Revocations.revokeSessions(tx, { userId: user.id, exceptSessionId: claims.sessionId }),
    );
    remember(ended);
    return jsonReply(200, { message: 'every other session ended', ended: ended.length });
  }

  return { me, sessions, endSession, endOtherSessions };
}
