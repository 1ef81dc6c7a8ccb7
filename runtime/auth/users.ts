/** User accounts in svcgen.users, one set per project and environment. */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { Queryable } from '../db/index.ts';
import type { publicUser as PublicUser } from '../model/wire/index.ts';

export interface UserRow {
  id: string;
  email: string;
  password_hash: string;
  first_name: string;
  last_name: string;
  roles: string[];
  verified_at: Date | null;
  locked_until: Date | null;
}

/** The `user` of login and confirm-signup answers (docs/api.md §3). */
export function publicUser(row: UserRow): z.output<typeof PublicUser> {
  return { id: row.id, email: row.email, firstName: row.first_name, lastName: row.last_name, roles: row.roles };
}

/** E-mail addresses are compared without case and surrounding spaces. */
export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

const COLUMNS = 'id, email, password_hash, first_name, last_name, roles, verified_at, locked_until';

export interface Scope {
  readonly projectId: string;
  readonly environment: string;
}

export async function findUser(db: Queryable, scope: Scope, email: string): Promise<UserRow | undefined> {
  const rows = await db.query<UserRow>(
    `SELECT ${COLUMNS} FROM svcgen.users WHERE project_id = $1 AND environment = $2 AND email = $3`,
    [scope.projectId, scope.environment, normalizeEmail(email)],
  );
  return rows[0];
}

export async function findUserById(db: Queryable, id: string): Promise<UserRow | undefined> {
  return (await db.query<UserRow>(`SELECT ${COLUMNS} FROM svcgen.users WHERE id = $1`, [id]))[0];
}

/** Inserts a user; undefined when the e-mail is taken in this environment. */
export async function insertUser(
  db: Queryable,
  scope: Scope,
  user: {
    email: string;
    passwordHash: string;
    firstName: string;
    lastName: string;
    roles: string[];
    verified: boolean;
  },
): Promise<UserRow | undefined> {
  const rows = await db.query<UserRow>(
    `INSERT INTO svcgen.users (id, project_id, environment, email, password_hash, first_name, last_name, roles, verified_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $9::boolean THEN now() END)
     ON CONFLICT (project_id, environment, email) DO NOTHING
     RETURNING ${COLUMNS}`,
    [
      randomUUID(),
      scope.projectId,
      scope.environment,
      normalizeEmail(user.email),
      user.passwordHash,
      user.firstName,
      user.lastName,
      user.roles,
      user.verified,
    ],
  );
  return rows[0];
}

export async function clearFailedLogins(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE svcgen.users SET failed_logins = 0, locked_until = NULL WHERE id = $1 AND (failed_logins > 0 OR locked_until IS NOT NULL)`,
    [id],
  );
}

export async function markVerified(db: Queryable, id: string): Promise<void> {
  await db.query(
    'UPDATE svcgen.users SET verified_at = coalesce(verified_at, now()), updated_at = now() WHERE id = $1',
    [id],
  );
}

/** A reset replaces the password and clears the lockout; the code proved the mailbox, so it verifies too. */
export async function resetPassword(db: Queryable, id: string, passwordHash: string): Promise<void> {
  await db.query(
    `UPDATE svcgen.users SET password_hash = $2, failed_logins = 0, locked_until = NULL,
       verified_at = coalesce(verified_at, now()), updated_at = now() WHERE id = $1`,
    [id, passwordHash],
  );
}

/** A password change by the signed-in user, over the hash their current password was checked against. */
export async function setPassword(
  db: Queryable,
  id: string,
  checkedHash: string,
  passwordHash: string,
): Promise<boolean> {
  const rows = await db.query(
    'UPDATE svcgen.users SET password_hash = $3, updated_at = now() WHERE id = $1 AND password_hash = $2 RETURNING id',
    [id, checkedHash, passwordHash],
  );
  return rows.length > 0;
}

/**
 * Gives the account a new address (proved by a code sent there). False when another account of
 * its project and environment has it: checked first, and the unique index settles a race.
 */
export async function setEmail(db: Queryable, id: string, email: string): Promise<boolean> {
  try {
    const rows = await db.query(
      `UPDATE svcgen.users u SET email = $2, verified_at = coalesce(u.verified_at, now()), updated_at = now()
       WHERE u.id = $1 AND NOT EXISTS (
         SELECT 1 FROM svcgen.users o WHERE o.project_id = u.project_id AND o.environment = u.environment AND o.email = $2 AND o.id <> u.id)
       RETURNING u.id`,
      [id, normalizeEmail(email)],
    );
    return rows.length > 0;
  } catch (error) {
    if ((error as { code?: string }).code === '23505') return false;
    throw error;
  }
}

/** Whether another account of the scope has the address. */
export async function emailTaken(db: Queryable, scope: Scope, email: string, exceptId: string): Promise<boolean> {
  const rows = await db.query(
    `SELECT 1 FROM svcgen.users WHERE project_id = $1 AND environment = $2 AND email = $3 AND id <> $4`,
    [scope.projectId, scope.environment, normalizeEmail(email), exceptId],
  );
  return rows.length > 0;
}

/** Deletes the account; its codes, sessions and refresh tokens go with it (ON DELETE CASCADE). */
export async function deleteUser(db: Queryable, id: string): Promise<boolean> {
  return (await db.query('DELETE FROM svcgen.users WHERE id = $1 RETURNING id', [id])).length > 0;
}
