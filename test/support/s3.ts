/**
 * A real S3-protocol server for tests (s3rver, files in a temporary folder), with one bucket.
 *
 * s3rver 3.7 stores multipart uploads but answers AbortMultipartUpload with 405 and
 * ListMultipartUploads with 501. The two are added here over its own store (its uploads folder,
 * one folder per upload id holding the key), so the tests can check that an upload which fails
 * leaves no pending upload behind, and the S3 backend can abort and list them as it does on S3.
 */
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ListMultipartUploadsCommand, ListObjectsV2Command, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';
import { S3Backend } from '../../runtime/storage/index.ts';

export const S3_BUCKET = 'svcgen-test';
/** s3rver's built-in credentials. */
export const S3_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface TestS3 {
  readonly endpoint: string;
  readonly port: number;
  /** A client of its own, for looking at the bucket behind the server's back. */
  readonly client: S3Client;
  /** Every object key in the bucket. */
  objects(): Promise<string[]>;
  /** Keys of multipart uploads that were started and neither completed nor aborted. */
  pendingUploads(): Promise<string[]>;
  put(key: string, body: string): Promise<void>;
  /** Makes every pending multipart upload look `seconds` older, for good (a part written later does not make it young). */
  ageUploads(seconds: number): Promise<void>;
  /** Stops the server (the store is then unreachable: connections are refused). */
  stop(): Promise<void>;
  /** Starts it again on the same port and folder. */
  start(): Promise<void>;
  close(): Promise<void>;
}

type Ctx = {
  method: string;
  url: string;
  status: number;
  type: string;
  body: unknown;
};

function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/**
 * AbortMultipartUpload and ListMultipartUploads over s3rver's store (path-style requests). An
 * upload's Initiated is its folder's time less the seconds `aged` holds for its id (ageUploads):
 * kept apart from the folder's time, which a part still being written when its uploader was killed
 * moves on again.
 */
function multipartCalls(server: S3rver, aged: ReadonlyMap<string, number>) {
  const store = server.store;
  return async (ctx: Ctx, next: () => Promise<unknown>) => {
    const url = new URL(ctx.url, 'http://s3');
    const [, bucket = '', ...rest] = url.pathname.split('/');
    const key = rest.map(decodeURIComponent).join('/');
    const uploads = store.getResourcePath(bucket, undefined, 'uploads');
    const uploadId = url.searchParams.get('uploadId');
    if (ctx.method === 'DELETE' && key && uploadId) {
      const dir = path.join(uploads, path.basename(uploadId));
      if (!(await stat(dir).catch(() => undefined))) {
        ctx.status = 404;
        ctx.type = 'application/xml';
        ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>no such upload</Message></Error>`;
        return;
      }
      await rm(dir, { recursive: true, force: true });
      ctx.status = 204;
      return;
    }
    if (ctx.method === 'GET' && !key && url.searchParams.has('uploads')) {
      const prefix = url.searchParams.get('prefix') ?? '';
      const entries: string[] = [];
      for (const id of await readdir(uploads).catch(() => [] as string[])) {
        const name = await readFile(path.join(uploads, id, 'key'), 'utf8').catch(() => undefined);
        if (name === undefined || !name.startsWith(prefix)) continue;
        const folderTime = (await stat(path.join(uploads, id))).mtime.getTime();
        const initiated = new Date(folderTime - (aged.get(id) ?? 0) * 1000).toISOString();
        entries.push(
          `<Upload><Key>${xml(name)}</Key><UploadId>${xml(id)}</UploadId><Initiated>${initiated}</Initiated><StorageClass>STANDARD</StorageClass></Upload>`,
        );
      }
      ctx.status = 200;
      ctx.type = 'application/xml';
      ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>${xml(bucket)}</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>${entries.join('')}</ListMultipartUploadsResult>`;
      return;
    }
    return next();
  };
}

export async function startS3(): Promise<TestS3> {
  const directory = await mkdtemp(path.join(tmpdir(), 'svcgen-s3-'));
  let port = 0;
  let server: S3rver | undefined;
  /** Seconds each pending upload (by id) was made to look older (ageUploads). */
  const aged = new Map<string, number>();
  const start = async () => {
    const s = new S3rver({
      port,
      address: '127.0.0.1',
      silent: true,
      directory,
      configureBuckets: [{ name: S3_BUCKET, configs: [] }],
    });
    (s as unknown as { middleware: unknown[] }).middleware.unshift(multipartCalls(s, aged));
    const info = await s.run();
    port = info.port;
    server = s;
  };
  await start();
  const endpoint = `http://127.0.0.1:${port}`;
  // Built the way the backend builds its own: without the SDK's Node version warning (runtime/storage/s3.ts).
  const client = new S3Backend(
    { bucket: S3_BUCKET, endpoint, forcePathStyle: true, accessKeyIdEnv: 'ID', secretAccessKeyEnv: 'SECRET' },
    () => {},
    { ID: S3_CREDENTIALS.accessKeyId, SECRET: S3_CREDENTIALS.secretAccessKey },
  ).client;
  const stop = async () => {
    await server?.close();
    server = undefined;
  };
  return {
    endpoint,
    port,
    client,
    async objects() {
      const page = await client.send(new ListObjectsV2Command({ Bucket: S3_BUCKET }));
      return (page.Contents ?? []).map((o) => o.Key!).sort();
    },
    async pendingUploads() {
      const page = await client.send(new ListMultipartUploadsCommand({ Bucket: S3_BUCKET }));
      return (page.Uploads ?? []).map((u) => u.Key!);
    },
    async ageUploads(seconds) {
      const uploads = server!.store.getResourcePath(S3_BUCKET, undefined, 'uploads');
      for (const id of await readdir(uploads).catch(() => [] as string[])) aged.set(id, (aged.get(id) ?? 0) + seconds);
    },
    async put(key, body) {
      await client.send(new PutObjectCommand({ Bucket: S3_BUCKET, Key: key, Body: body }));
    },
    stop,
    start,
    async close() {
      client.destroy();
      await stop();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
