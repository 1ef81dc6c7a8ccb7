/**
 * `svcgen files ls|rm` (README "Command line", docs/storage.md "Operators"): files seen and removed
 * at the database, with no API caller. A removal goes through the HTTP delete's own path
 * (deleteFile): the row and its `_files` DELETE event in one transaction with the job that removes
 * the bytes, which the server's worker (or the next `serve`) runs.
 */
import type { Config } from '../config/index.ts';
import type { Database } from '../db/index.ts';
import type { Principal } from '../principal/index.ts';
import { callerContext, tableContext } from '../data/index.ts';
import type { WatchedTables } from '../events/index.ts';
import { BucketAccess, OPERATOR_ROLE } from './bucket-access.ts';
import { deleteFile } from './endpoints.ts';

export interface ListedFile {
  id: string;
  environment: string;
  bucket: string;
  name: string;
  contentType: string;
  size: number;
  sha256: string;
  ownerId: string | null;
  createdAt: string;
}

/** The files of `environment` (and `bucket`, when given), oldest first. */
export async function listFiles(db: Database, environment: string, bucket?: string): Promise<ListedFile[]> {
  return db.query<ListedFile>(
    `SELECT id::text AS id, environment, bucket, name, content_type AS "contentType", size::float8 AS size, sha256,
       owner_id AS "ownerId", to_char(created_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt"
     FROM svcgen.files WHERE environment = $1 AND ($2::text IS NULL OR bucket = $2)
     ORDER BY created_at, id`,
    [environment, bucket ?? null],
  );
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Without a server's record of subscriptions, every removal captures its event (the capture finds the subscribers). */
const ALWAYS_CAPTURE = { watches: async () => true } as unknown as WatchedTables;

/**
 * Removes the file `id` of `environment`: its bucket when it was found, undefined when there is
 * no such file (nothing changed).
 */
export async function removeFile(
  db: Database,
  config: Config,
  environment: string,
  id: string,
): Promise<string | undefined> {
  if (!UUID.test(id)) return undefined;
  const [row] = await db.query<{ bucket: string }>(
    'SELECT bucket FROM svcgen.files WHERE id = $1 AND environment = $2',
    [id, environment],
  );
  if (!row) return undefined;
  const access = new BucketAccess(config);
  const policy = access.operatorPolicy(row.bucket, environment);
  const principal: Principal = {
    kind: 'apiKey',
    keyId: 'svcgen files rm',
    environment,
    roles: [OPERATOR_ROLE],
    context: {},
  };
  const path = `/_files/${row.bucket}/${id}`;
  const req = {
    method: 'DELETE',
    path,
    query: new URLSearchParams(),
    headers: {},
    params: { bucket: row.bucket, id },
    ip: '',
    receivedAt: performance.now(),
    readBody: async () => undefined,
    onClientGone: () => () => {},
  };
  const services = {
    catalog: access.catalog,
    db,
    // A delete by key reads no pages and no cursors.
    expensiveReads: undefined as never,
    cursors: undefined as never,
    watchedTables: ALWAYS_CAPTURE,
    basePath: '',
  };
  const tenant = { projectId: config.project.id, environment };
  const ctx = tableContext(
    callerContext(services, req, tenant, principal, policy.access(principal)),
    access.table,
    'delete',
  );
  await deleteFile(db, ctx, environment, row.bucket);
  return row.bucket;
}
