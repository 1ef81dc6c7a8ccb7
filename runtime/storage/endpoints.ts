/**
 * /gw/api/rest/_files/{bucket} (docs/storage.md): the data API's pipeline (tenancy, credentials,
 * bucket, rate limit, permission) in front of uploads, lists, metadata, downloads, deletes and
 * signed URLs. Metadata goes through the REST handlers of the query layer (bucket-access.ts);
 * bytes stream between the request, the backend and the response.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { finished } from 'node:stream/promises';
import { type Database, transactionDatabase } from '../db/index.ts';
import { header, Problem, readJson, jsonReply, type ApiRequest, type Reply } from '../http/index.ts';
import { claimStreamedKey, idempotencyKeyOf, type StreamedClaim } from '../idempotency/index.ts';
import { FILES_TABLE } from '../model/index.ts';
import { fileName, MAX_FILE_NAME_CHARS, signedUrlBody } from '../model/wire/index.ts';
import { callerId, type Principal } from '../principal/index.ts';
import { compileWrite, createPresets, type Action } from '../query/index.ts';
import {
  admit,
  answeringQueryErrors,
  callerContext,
  capturesEvents,
  deleteRecord,
  readScope,
  refuseManagement,
  runWrite,
  tableContext,
  type DataContext,
} from '../data/index.ts';
import { resolveDataTenant, type Tenant } from '../tenancy/index.ts';
import { objectKey } from './backend.ts';
import { allowedBy, mediaType } from './content-types.ts';
import { sendContent, type FileRecord } from './download.ts';
import { UploadInspector } from './inspector.ts';
import { queueRemoval } from './jobs.ts';
import { incomingFile } from './incoming.ts';
import type { StorageDeps } from './deps.ts';
import { overRoom, roomFor, settle, settles } from './limits.ts';
import { uploadDeadline, type UploadDeadline } from './upload-deadline.ts';

export type { StorageDeps } from './deps.ts';

interface Caller {
  readonly tenant: Tenant;
  readonly principal: Principal;
  readonly bucket: string;
  readonly headers: Record<string, string>;
}

/** The data admission with the bucket as its resource (404), then management tokens refused (403). */
async function caller(deps: StorageDeps, req: ApiRequest): Promise<Caller> {
  const {
    tenant,
    principal,
    resource: bucket,
    headers,
  } = await admit(deps.limits, deps.config, req, () => knownBucket(deps, req));
  try {
    refuseManagement(principal, 'management tokens manage API keys and webhooks; they read and write no files');
  } catch (error) {
    throw withHeaders(error as Problem, headers);
  }
  return { tenant, principal, bucket, headers };
}

function knownBucket(deps: StorageDeps, req: ApiRequest): string {
  const name = req.params.bucket ?? '';
  if (!Object.hasOwn(deps.config.storage.buckets, name)) {
    const names = Object.keys(deps.config.storage.buckets);
    throw new Problem(
      'not-found',
      `there is no bucket named "${name}"${names.length ? `; buckets: ${names.join(', ')}` : ' (storage.buckets is empty)'}`,
    );
  }
  return name;
}

/** Adds `headers` to a Problem's own; its own win (a 429 of the upload limits says its own budget). */
function withHeaders(problem: Problem, headers: Record<string, string>): Problem {
  for (const [name, value] of Object.entries(headers))
    if (!Object.hasOwn(problem.headers, name)) problem.headers[name] = value;
  return problem;
}

/** The caller's context for `action` on the bucket's metadata, or 403 when no role of theirs allows it. */
function dataContext(deps: StorageDeps, req: ApiRequest, who: Caller, action: Action): DataContext {
  const policy = deps.access.policy(who.bucket, who.tenant.environment);
  const services = { ...deps, catalog: deps.access.catalog };
  const caller = callerContext(services, req, who.tenant, who.principal, policy.access(who.principal));
  return tableContext(caller, deps.access.table, action, `files in bucket ${who.bucket}`);
}

/** Runs `work` for an identified caller; a Problem it throws carries the rate-limit headers. */
async function withCaller<T>(deps: StorageDeps, req: ApiRequest, work: (who: Caller) => Promise<T>): Promise<T> {
  const who = await caller(deps, req);
  try {
    return await answeringQueryErrors(() => work(who));
  } catch (error) {
    if (error instanceof Problem) withHeaders(error, who.headers);
    throw error;
  }
}

/** withCaller for handlers that answer with a Reply: it carries the rate-limit headers too. */
function asCaller(deps: StorageDeps, req: ApiRequest, work: (who: Caller) => Promise<Reply>): Promise<Reply> {
  return withCaller(deps, req, async (who) => {
    const reply = await work(who);
    reply.headers = { ...reply.headers, ...who.headers };
    return reply;
  });
}

function bucketPath(deps: StorageDeps, bucket: string): string {
  return `${deps.basePath}/_files/${encodeURIComponent(bucket)}`;
}

function checkName(name: string | undefined, from: string): string {
  if (name === undefined || name === '')
    throw new Problem('validation', `the file needs a name: ${from}`, [
      { field: 'name', rule: 'required', message: 'a file name is required' },
    ]);
  if (!fileName.safeParse(name).success)
    throw new Problem(
      'validation',
      `file names have 1 to ${MAX_FILE_NAME_CHARS} characters and no control characters`,
      [{ field: 'name', rule: 'format', message: `1 to ${MAX_FILE_NAME_CHARS} characters, no control characters` }],
    );
  return name;
}

/** Whom uploads and downloads in progress count against: the caller, per project and environment. */
function inFlightKey(who: Caller): string {
  return `${who.tenant.projectId}:${who.tenant.environment}:${callerId(who.principal)}`;
}

/** POST /_files/{bucket}: multipart (a `file` part) or a raw body with Content-Type and ?name=. */
export async function upload(deps: StorageDeps, req: ApiRequest, raw: IncomingMessage): Promise<Reply> {
  // Bounded by progress, not by http.requestTimeoutMs (docs/storage.md "Long uploads").
  const deadline = uploadDeadline(raw, deps.config.storage);
  let release: (() => void) | undefined;
  let closing = false;
  try {
    return await asCaller(deps, req, (who) => {
      dataContext(deps, req, who, 'create'); // 403 before anything is counted
      try {
        release = deps.inFlight.uploads.take(inFlightKey(who));
      } catch (error) {
        // Refused for holding too many connections already: this one is not kept open to drain a body.
        closing = true;
        throw error;
      }
      return storeUpload(deps, req, raw, who, deadline);
    });
  } catch (error) {
    // A body cut off by the deadline is unread: the answer closes the connection.
    if ((closing || deadline.expired) && error instanceof Problem) error.headers.connection = 'close';
    throw error;
  } finally {
    deadline.done();
    // The connection stays the upload's until its body has all arrived (a refused one's rest is
    // drained) or the connection closes (docs/storage.md "Limits and quotas").
    if (release) finished(raw).then(release, release);
  }
}

async function storeUpload(
  deps: StorageDeps,
  req: ApiRequest,
  raw: IncomingMessage,
  who: Caller,
  deadline: UploadDeadline,
): Promise<Reply> {
  await deps.limits.uploads(who.tenant, who.principal);
  const settings = deps.config.storage.buckets[who.bucket]!;
  const declaredLength = Number(raw.headers['content-length']);
  const known = Number.isFinite(declaredLength) && raw.headers['content-length'] !== undefined;
  // A multipart body carries a little more than its file; a raw one is the file.
  if (known && declaredLength > settings.maxBytes + 64 * 1024)
    throw new Problem('payload-too-large', `the file is larger than this bucket's limit of ${settings.maxBytes} bytes`);
  const at = { environment: who.tenant.environment, bucket: who.bucket, caller: callerId(who.principal) };
  const key = idempotencyKeyOf(req);
  if (key === undefined) return storeFile(deps, req, raw, who, deadline, at, undefined);
  const { uploadTimeoutMs } = deps.config.storage;
  const claim = await claimStreamedKey(
    deps.db,
    key,
    at.caller,
    who.tenant,
    Math.ceil((uploadTimeoutMs ?? 3_600_000) / 1000),
  );
  try {
    return await storeFile(deps, req, raw, who, deadline, at, claim);
  } catch (error) {
    if (claim.kind === 'first') await claim.release();
    throw error;
  }
}

/**
 * The upload itself; under an Idempotency-Key a `seen` claim reads the bytes only to compare them
 * (replayed or 422, nothing kept) and a `first` one stores its answer with the file's row.
 */
async function storeFile(
  deps: StorageDeps,
  req: ApiRequest,
  raw: IncomingMessage,
  who: Caller,
  deadline: UploadDeadline,
  at: { environment: string; bucket: string; caller: string },
  claim: StreamedClaim | undefined,
): Promise<Reply> {
  const ctx = dataContext(deps, req, who, 'create');
  // Whether the row's event is captured: asked now, so that its round trip (if any) overlaps the body's bytes.
  const captures = capturesEvents(ctx);
  captures.catch(() => {}); // awaited below unless the upload is refused first
  const settings = deps.config.storage.buckets[who.bucket]!;
  const declaredLength = Number(raw.headers['content-length']);
  const known = Number.isFinite(declaredLength) && raw.headers['content-length'] !== undefined;
  const multipart = /^multipart\//i.test(header(req, 'content-type') ?? '');
  // A replay stores nothing: no room is needed.
  const room =
    claim?.kind === 'seen'
      ? { dailyBytes: undefined, quotaBytes: undefined }
      : await roomFor(deps.db, deps.config, settings, at, known && !multipart ? declaredLength : undefined);
  const incoming = incomingFile(raw, req, settings.maxBytes);
  incoming.catch(() => {}); // a refusal that loses the race to the deadline is not reported twice
  const file = await Promise.race([incoming, deadline.expiry]);
  const refuse = (problem: Problem): never => {
    file.discard();
    throw problem;
  };
  const contentType = mediaType(file.declaredType);
  if (!contentType) refuse(new Problem('unsupported-media-type', 'declare the file\'s media type (e.g. "image/png")'));
  if (!allowedBy(settings.contentTypes, contentType!))
    refuse(
      new Problem(
        'unsupported-media-type',
        `bucket ${who.bucket} does not accept ${contentType}; it accepts ${settings.contentTypes.join(', ')}`,
      ),
    );
  let name = '';
  try {
    name = checkName(file.name, file.nameSource);
  } catch (error) {
    refuse(error as Problem);
  }
  const id = randomUUID();
  const storedAt = objectKey(who.tenant.environment, who.bucket, id);
  const inspector = new UploadInspector(settings.maxBytes, contentType!, (size) =>
    overRoom(deps.config, who.bucket, room, size),
  );
  // A body that breaks off or a malformed multipart tail: the request's fault (400), never a 500.
  const unreadable = (error: Error) =>
    error instanceof Problem ? error : new Problem('bad-request', `the upload could not be read: ${error.message}`);
  if (file.stream.errored) throw unreadable(file.stream.errored);
  file.stream.on('error', (error) => inspector.destroy(unreadable(error)));
  // put() reports the inspector's refusal; this listener keeps one raised before put() listens
  // (a small body is inspected while the backend is still preparing) from being uncaught.
  inspector.on('error', () => {});
  deadline.onExpire((problem) => inspector.destroy(problem));
  file.stream.pipe(inspector);
  const requestHash = () =>
    createHash('sha256')
      .update(JSON.stringify([req.method, req.path, name, contentType, inspector.sha256()]))
      .digest('hex');
  if (claim?.kind === 'seen') {
    try {
      await finished(inspector.resume());
    } catch (error) {
      file.discard();
      throw error;
    }
    return claim.answer(requestHash());
  }
  try {
    await deps.backend.put(storedAt, inspector);
  } catch (error) {
    file.discard();
    throw error;
  }
  const stored = { id, name, contentType: contentType!, size: inspector.size, sha256: inspector.sha256() };
  try {
    // With no limit to settle and no key to record, the row (and its captured event) is one
    // INSERT, atomic on its own: no BEGIN and COMMIT round trips around it.
    if (claim === undefined && !settles(deps.config, settings))
      return await insertMetadata(deps, ctx, who, stored, await captures);
    return await deps.db.transaction(async (tx) => {
      await settle(tx, deps.config, settings, at, inspector.size);
      const db = transactionDatabase(deps.db.pool, tx);
      const reply = await insertMetadata({ ...deps, db }, { ...ctx, db }, who, stored, await captures);
      if (claim?.kind === 'first') await claim.finish(db, requestHash(), reply);
      return reply;
    });
  } catch (error) {
    await deps.backend.remove(storedAt).catch(() => {});
    throw error;
  }
}

/** The metadata row, inserted once the bytes are stored: the file becomes visible with it (and its event is captured). */
async function insertMetadata(
  deps: StorageDeps,
  ctx: DataContext,
  who: Caller,
  file: { id: string; name: string; contentType: string; size: number; sha256: string },
  captures: boolean,
): Promise<Reply> {
  const scope = readScope(ctx);
  const written = ['name', 'contentType', 'size', 'sha256', 'ownerId'];
  const presets = createPresets(scope, ctx.table, written.slice(0, -1));
  const ownerId = presets.ownerId ?? (who.principal.kind === 'user' ? who.principal.userId : null);
  const values = { ...file, ownerId, bucket: who.bucket, environment: who.tenant.environment };
  const write = compileWrite(
    scope,
    { kind: 'insert', table: ctx.table, values, written },
    { kind: 'record' },
    captures,
  );
  // A refusal names the rule's own fields, not the bucket and environment every rule here pins.
  const filterFields = write.filterFields.filter((f) => f !== 'bucket' && f !== 'environment');
  const rows = await runWrite(deps.db, ctx.table, { ...write, filterFields }, scope, values);
  const json = (rows[0]?.[0] as string | null) ?? '{}';
  return {
    status: 201,
    headers: {
      'content-type': 'application/json; charset=utf-8',
      location: `${bucketPath(deps, who.bucket)}/${file.id}`,
    },
    body: `{"data":${json}}`,
  };
}

/** GET /_files/{bucket}: the data API's list over the bucket's metadata (filters, sort, select, pages). */
export function list(deps: StorageDeps, req: ApiRequest): Promise<Reply> {
  return asCaller(deps, req, (who) => deps.records.list(dataContext(deps, req, who, 'read')));
}

/** A file's metadata as the caller may read it: `{ data }` of the REST read, or a 404 Problem. */
async function readMetadata(deps: StorageDeps, req: ApiRequest, who: Caller): Promise<FileRecord> {
  const reply = await deps.records.read(dataContext(deps, req, who, 'read'));
  return (JSON.parse(reply.body!) as { data: FileRecord }).data;
}

/** GET /_files/{bucket}/{id}: metadata (public buckets answer without credentials). */
export async function metadata(deps: StorageDeps, req: ApiRequest): Promise<Reply> {
  if (isAnonymousPublic(deps, req)) {
    const { environment } = resolveDataTenant(req, deps.config);
    const bucket = knownBucket(deps, req);
    const headers = deps.rateLimitHeaders(await deps.limits.anonymous(req, environment));
    return jsonReply(200, { data: await publicRecord(deps.db, environment, bucket, req) }, headers);
  }
  return asCaller(deps, req, (who) => deps.records.read(dataContext(deps, req, who, 'read')));
}

/** A request without credentials for a public bucket: it reads by id with no role. */
function isAnonymousPublic(deps: StorageDeps, req: ApiRequest): boolean {
  const name = req.params.bucket ?? '';
  const { buckets } = deps.config.storage;
  return Object.hasOwn(buckets, name) && buckets[name]!.public && header(req, 'authorization') === undefined;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A file of a bucket by id with no caller's rules (public buckets, signed URLs); 404 when there is none. */
async function publicRecord(db: Database, environment: string, bucket: string, req: ApiRequest): Promise<FileRecord> {
  const id = req.params.id ?? '';
  const rows = UUID.test(id)
    ? await db.query<FileRecord>(
        `SELECT id::text AS id, bucket, name, content_type AS "contentType", size::float8 AS size, sha256,
           owner_id AS "ownerId", to_char(created_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt"
         FROM svcgen.files WHERE id = $1 AND environment = $2 AND bucket = $3`,
        [id, environment, bucket],
      )
    : [];
  if (!rows[0]) throw new Problem('not-found', `no ${FILES_TABLE} record with id ${JSON.stringify(id)}`);
  return rows[0];
}

/**
 * GET /_files/{bucket}/{id}/content: the bytes, by credentials, a signed URL's token, or anonymously
 * from a public bucket. A Reply when there is no body to stream (304, 416); undefined once streamed.
 */
export async function content(deps: StorageDeps, req: ApiRequest, res: ServerResponse): Promise<Reply | undefined> {
  const token = req.query.get('token');
  if (token !== null) {
    const bucket = knownBucket(deps, req);
    const verdict = deps.signer.verify(token, bucket, req.params.id ?? '');
    if (!verdict.ok) throw new Problem('unauthorized', `${verdict.reason}; ask for a new signed URL`);
    const headers = deps.rateLimitHeaders(await deps.limits.anonymous(req, verdict.environment));
    return downloading(deps, anonymousKey(deps, req, verdict.environment), async () => {
      const record = await publicRecord(deps.db, verdict.environment, bucket, req);
      return sendContent(deps, req, res, verdict.environment, record, headers);
    });
  }
  if (isAnonymousPublic(deps, req)) {
    const { environment } = resolveDataTenant(req, deps.config);
    const bucket = knownBucket(deps, req);
    const headers = deps.rateLimitHeaders(await deps.limits.anonymous(req, environment));
    return downloading(deps, anonymousKey(deps, req, environment), async () => {
      const record = await publicRecord(deps.db, environment, bucket, req);
      return sendContent(deps, req, res, environment, record, headers);
    });
  }
  return withCaller(deps, req, (who) => {
    dataContext(deps, req, who, 'read'); // 403 before a download slot is taken
    return downloading(deps, inFlightKey(who), async () =>
      sendContent(deps, req, res, who.tenant.environment, await readMetadata(deps, req, who), who.headers),
    );
  });
}

/**
 * A download without credentials (a signed URL, a public bucket) counts against its client
 * address, as its rate limit does: not against whoever signed the URL, whose links a page may
 * show to any number of visitors (docs/storage.md "Limits and quotas").
 */
function anonymousKey(deps: StorageDeps, req: ApiRequest, environment: string): string {
  return `${deps.config.project.id}:${environment}:address:${deps.clientAddress(req)}`;
}

/** Runs a download in one of `key`'s download slots (429 when it has none left), given back once the bytes are sent. */
async function downloading<T>(deps: StorageDeps, key: string, send: () => Promise<T>): Promise<T> {
  const release = deps.inFlight.downloads.take(key);
  try {
    return await send();
  } finally {
    release();
  }
}

/** DELETE /_files/{bucket}/{id}: the row (and its event) in one transaction with the job that removes the bytes. */
export function remove(deps: StorageDeps, req: ApiRequest): Promise<Reply> {
  return asCaller(deps, req, (who) =>
    deleteFile(deps.db, dataContext(deps, req, who, 'delete'), who.tenant.environment, who.bucket),
  );
}

/**
 * Deletes the file `ctx.req.params.id` as `ctx` may: its row (capturing the `_files` DELETE event)
 * and, in the same transaction, the job that removes its bytes. The HTTP delete and
 * `svcgen files rm` (./operator.ts) both go through here.
 */
export function deleteFile(db: Database, ctx: DataContext, environment: string, bucket: string): Promise<Reply> {
  return db.transaction(async (tx) => {
    const id = ctx.req.params.id!;
    await answeringQueryErrors(() => deleteRecord({ ...ctx, db: transactionDatabase(db.pool, tx) }, id));
    await queueRemoval(tx, objectKey(environment, bucket, id.toLowerCase()));
    return { status: 204 };
  });
}

/** POST /_files/{bucket}/{id}/signed-url: `{ expiresIn? }` (seconds) → 200 `{ data: { url, expiresAt } }`. */
export function signedUrl(deps: StorageDeps, req: ApiRequest): Promise<Reply> {
  return asCaller(deps, req, async (who) => {
    const { signedUrlTtl, signedUrlMaxTtl } = deps.config.storage;
    const body = (await req.readBody()) === undefined ? {} : await readJson(req);
    const parsed = signedUrlBody.safeParse(body);
    const expiresIn = parsed.data?.expiresIn ?? signedUrlTtl;
    if (!parsed.success || expiresIn > signedUrlMaxTtl)
      throw new Problem('validation', `the body is { "expiresIn"?: seconds from 1 to ${signedUrlMaxTtl} }`, [
        { field: 'expiresIn', rule: 'range', message: `an integer from 1 to ${signedUrlMaxTtl}` },
      ]);
    const record = await readMetadata(deps, req, who);
    const expires = Math.floor(Date.now() / 1000) + expiresIn;
    const token = deps.signer.sign({ environment: who.tenant.environment, bucket: who.bucket, id: record.id }, expires);
    return jsonReply(200, {
      data: {
        url: `${bucketPath(deps, who.bucket)}/${record.id}/content?token=${token}`,
        expiresAt: new Date(expires * 1000).toISOString(),
      },
    });
  });
}
