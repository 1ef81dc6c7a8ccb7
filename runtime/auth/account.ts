/**
 * A signed-in user's own account (docs/api.md §3 "Your account"): read it, change the password or
 * the e-mail address, list and end sessions, delete the account. Every route takes the user's
 * access token; the ones that change the password, the address or delete the account also take the
 * current password, checked and counted like a login, so a stolen access token alone changes none
 * of them. Revocations are written in the change's transaction and announced on commit (see
 * tokens/revocations.ts), so no server process keeps accepting what was ended.
 */
import { accountContext } from './account-context.ts';
import { emailChangeHandlers } from './account-email.ts';
import { passwordChangeHandlers } from './account-password.ts';
import { accountSessionHandlers } from './account-sessions.ts';
import type { UserAuth } from './user-auth.ts';

export function accountHandlers(auth: UserAuth) {
  const context = accountContext(auth);
  return {
    ...accountSessionHandlers(auth, context),
    ...passwordChangeHandlers(auth, context),
    ...emailChangeHandlers(auth, context),
  };
}
