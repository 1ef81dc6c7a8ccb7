/**
 * The S3 backend (storage.backend of type "s3", docs/storage.md "Backends"): each object is
 * `<prefix><key>` in one bucket of AWS S3 or any S3-compatible store. Uploads go through
 * lib-storage's Upload: a file smaller than a part is one PutObject, a larger one a multipart
 * upload of PART_BYTES parts, QUEUE_SIZE of them in flight, so an upload holds at most about
 * (QUEUE_SIZE + 1) × PART_BYTES in memory whatever its size. Either way S3 shows the object only
 * once it is complete; a body that fails aborts the multipart upload, and the sweep aborts what
 * a crash left pending (list() yields pending uploads too). A store that cannot be reached or
 * refuses answers a 503 Problem (`storage-unavailable`) and is logged.
 */
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  NoSuchKey,
  ListMultipartUploadsCommand,
  paginateListObjectsV2,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Problem } from '../http/index.ts';
import { ObjectMissing, type ByteRange, type StorageBackend, type StoredObject } from './backend.ts';

/** storage.backend when its type is "s3" (runtime/config/schema.ts). */
export interface S3Settings {
  readonly bucket: string;
  readonly region?: string | undefined;
  readonly endpoint?: string | undefined;
  readonly forcePathStyle?: boolean | undefined;
  readonly prefix?: string | undefined;
  readonly accessKeyIdEnv?: string | undefined;
  readonly secretAccessKeyEnv?: string | undefined;
}

/** S3's smallest part (but the last): what one part of an upload holds in memory. */
const PART_BYTES = 5 * 1024 * 1024;
/** Parts of one upload sent at a time. */
const QUEUE_SIZE = 2;
/** Seconds a client is asked to wait before retrying when the store is unavailable. */
export const STORAGE_RETRY_AFTER_SECONDS = 5;
/**
 * A request to the store that has no answer (its headers) within this is a failure, which the SDK
 * retries twice: a store that accepts connections but hangs answers 503 instead of holding the
 * request forever. It does not limit how long a download's bytes take to stream.
 */
const REQUEST_TIMEOUT_MS = 10_000;
/** Sockets to the store per process: each download in progress holds one. */
const MAX_SOCKETS = 256;

/** An object svcgen wrote (environment/bucket/uuid): the only keys read, written, listed or removed. */
const OBJECT_KEY =
  /^[a-z][a-z0-9_]*\/[a-z0-9][a-z0-9_-]*\/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** What list() yields for a multipart upload that never completed: its key and upload id, base64url. */
const PENDING = '.incoming/';

/** The documented switch (AWS SDK v3) that keeps its "NodeVersionSupportWarning" out of the logs. */
const NODE_WARNING_SWITCH = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/** What a client is told when an operation met a store that is down or refuses. */
const UNAVAILABLE_DETAIL: Record<string, string> = {
  upload: 'the file store did not take the upload; nothing was kept, retry in a moment',
  download: "the file store did not send the file's bytes; retry in a moment",
};

/** The 503 answered when the store cannot be reached or refuses a request. */
export function storageUnavailable(operation: string): Problem {
  return new Problem(
    'storage-unavailable',
    UNAVAILABLE_DETAIL[operation] ?? `the file store did not complete the ${operation}; retry in a moment`,
    [],
    { 'retry-after': String(STORAGE_RETRY_AFTER_SECONDS) },
  );
}

export class S3Backend implements StorageBackend {
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;

  constructor(
    settings: S3Settings,
    private readonly log: (message: string) => void = () => {},
    env: NodeJS.ProcessEnv = process.env,
    requestTimeoutMs = REQUEST_TIMEOUT_MS,
  ) {
    this.bucket = settings.bucket;
    this.prefix = normalPrefix(settings.prefix);
    const config: S3ClientConfig = {
      region: settings.region ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION ?? 'us-east-1',
      forcePathStyle: settings.forcePathStyle ?? false,
      requestHandler: {
        connectionTimeout: 5000,
        requestTimeout: requestTimeoutMs,
        throwOnRequestTimeout: true,
        httpAgent: { keepAlive: true, maxSockets: MAX_SOCKETS },
        httpsAgent: { keepAlive: true, maxSockets: MAX_SOCKETS },
      },
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      ...(settings.accessKeyIdEnv && settings.secretAccessKeyEnv
        ? { credentials: namedCredentials(settings.accessKeyIdEnv, settings.secretAccessKeyEnv, env) }
        : {}),
    };
    this.client = withoutNodeWarning(() => new S3Client(config));
  }

  private objectName(key: string): string {
    if (!OBJECT_KEY.test(key)) throw new Error(`not an object key: ${key}`);
    return this.prefix + key;
  }

  /** Logs what the store answered and turns it into the 503 Problem. */
  private unavailable(operation: string, key: string, error: unknown): Problem {
    const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    this.log(`file store (S3 bucket ${this.bucket}): ${operation} of ${key} failed: ${reason}`);
    return storageUnavailable(operation);
  }

  async put(key: string, body: Readable): Promise<void> {
    const upload = new Upload({
      client: this.client,
      // Wrapped: lib-storage takes a `size` property of the body for its length (UploadInspector
      // has one, counting bytes so far), and this stream shows it nothing but the bytes.
      params: { Bucket: this.bucket, Key: this.objectName(key), Body: Readable.from(body, { objectMode: false }) },
      partSize: PART_BYTES,
      queueSize: QUEUE_SIZE,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (error) {
      // The body's own error (a size limit, a refused type, the client gone) is the answer; the
      // store's is a 503. Upload has aborted the multipart upload either way (or the sweep will).
      const failed = body.errored;
      body.destroy();
      if (failed) throw failed;
      throw this.unavailable('upload', key, error);
    }
  }

  async get(key: string, range?: ByteRange): Promise<Readable> {
    const name = this.objectName(key);
    try {
      const answer = await this.client.send(
        new GetObjectCommand({
          Bucket: this.bucket,
          Key: name,
          ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
        }),
      );
      const body = answer.Body;
      if (!(body instanceof Readable)) throw new Error('the store answered without a body');
      return body;
    } catch (error) {
      if (error instanceof NoSuchKey) throw new ObjectMissing(key);
      throw this.unavailable('download', key, error);
    }
  }

  async remove(key: string): Promise<void> {
    if (key.startsWith(PENDING)) {
      const pending = pendingUpload(key.slice(PENDING.length));
      if (!pending) throw new Error(`not a pending upload: ${key}`);
      try {
        await this.client.send(
          new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: pending.name, UploadId: pending.uploadId }),
        );
      } catch (error) {
        if ((error as { name?: string }).name === 'NoSuchUpload') return;
        throw this.unavailable('abort of a pending upload', pending.name, error);
      }
      return;
    }
    const name = this.objectName(key);
    try {
      // DeleteObject of a missing key succeeds: removal is idempotent by S3's own rule.
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: name }));
    } catch (error) {
      throw this.unavailable('removal', key, error);
    }
  }

  /**
   * svcgen's objects under the prefix (anything else in the bucket is never listed, so the sweep
   * cannot touch it), then its multipart uploads that never completed, as `.incoming/<token>`.
   */
  async *list(): AsyncIterable<StoredObject> {
    const Bucket = this.bucket;
    const Prefix = this.prefix || undefined;
    for await (const page of paginateListObjectsV2({ client: this.client }, { Bucket, Prefix })) {
      for (const object of page.Contents ?? []) {
        const key = object.Key?.slice(this.prefix.length);
        if (key && object.Key?.startsWith(this.prefix) && OBJECT_KEY.test(key) && object.LastModified)
          yield { key, modifiedAt: object.LastModified };
      }
    }
    let markers: { KeyMarker?: string; UploadIdMarker?: string } = {};
    for (;;) {
      const page = await this.client.send(new ListMultipartUploadsCommand({ Bucket, Prefix, ...markers }));
      for (const upload of page.Uploads ?? []) {
        const key = upload.Key?.slice(this.prefix.length);
        if (key && upload.Key?.startsWith(this.prefix) && OBJECT_KEY.test(key) && upload.UploadId && upload.Initiated)
          yield { key: PENDING + pendingToken(upload.Key!, upload.UploadId), modifiedAt: upload.Initiated };
      }
      if (!page.IsTruncated || !page.NextKeyMarker) break;
      markers = {
        KeyMarker: page.NextKeyMarker,
        ...(page.NextUploadIdMarker ? { UploadIdMarker: page.NextUploadIdMarker } : {}),
      };
    }
  }

  close(): void {
    this.client.destroy();
  }
}

/** "" or a prefix ending in "/" (config gives "files" or "files/"). */
function normalPrefix(prefix: string | undefined): string {
  if (!prefix) return '';
  return prefix.endsWith('/') ? prefix : `${prefix}/`;
}

function pendingToken(name: string, uploadId: string): string {
  return Buffer.from(JSON.stringify([name, uploadId])).toString('base64url');
}

function pendingUpload(token: string): { name: string; uploadId: string } | undefined {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (Array.isArray(parsed) && parsed.length === 2 && parsed.every((p) => typeof p === 'string'))
      return { name: parsed[0] as string, uploadId: parsed[1] as string };
  } catch {}
  return undefined;
}

/** Credentials read from the environment variables the config names (their values never sit in the config). */
function namedCredentials(idVar: string, secretVar: string, env: NodeJS.ProcessEnv) {
  const accessKeyId = env[idVar];
  const secretAccessKey = env[secretVar];
  const missing = [idVar, secretVar].filter((name) => !env[name]);
  if (missing.length || !accessKeyId || !secretAccessKey)
    throw new Error(
      `storage.backend names ${missing.join(' and ')} for the S3 credentials, but ${missing.length > 1 ? 'they are' : 'it is'} not set`,
    );
  return { accessKeyId, secretAccessKey, ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}) };
}

/**
 * Builds the client with the SDK's documented switch for its Node version warning turned on,
 * unless the operator set it: the SDK checks it once, when the first client is built, and
 * otherwise prints a multi-line warning into the server's output on Node 20.
 */
function withoutNodeWarning<T>(build: () => T): T {
  if (process.env[NODE_WARNING_SWITCH] !== undefined) return build();
  process.env[NODE_WARNING_SWITCH] = 'true';
  try {
    return build();
  } finally {
    delete process.env[NODE_WARNING_SWITCH];
  }
}
