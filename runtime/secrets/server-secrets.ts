import { randomBytes } from 'node:crypto';
import type { Database } from '../db/index.ts';

/**
 * A server-side secret (e.g. the cursor signing key): made on first start and kept in the
 * database, so every server process on the database shares it and none is in the repo.
 */
export async function serverSecret(db: Database, name: string): Promise<string> {
  await db.query('INSERT INTO svcgen.secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    name,
    randomBytes(32).toString('base64url'),
  ]);
  const rows = await db.query<{ value: string }>('SELECT value FROM svcgen.secrets WHERE name = $1', [name]);
  return rows[0]!.value;
}
