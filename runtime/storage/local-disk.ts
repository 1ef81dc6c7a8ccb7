/**
 * The local-disk backend (storage.root): each object is a file at <root>/<key>. Uploads stream
 * into <root>/.incoming/<random> and are renamed into place once complete, so a reader never sees
 * a partial file and a crash leaves only an incoming file (or an object without metadata), which
 * the sweep removes after the grace period.
 */
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream, open as openCallback } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import {
  ObjectMissing,
  UPLOAD_BUFFER_BYTES,
  type ByteRange,
  type StorageBackend,
  type StoredObject,
} from './backend.ts';

const INCOMING = '.incoming';
const openDescriptor = promisify(openCallback);
/** Objects (or ranges) up to this size are read in one piece: the memory a download holds at most beyond the default 64 KiB. */
const ONE_READ_BYTES = 1024 * 1024;
/** An object (environment/bucket/uuid) or an incoming file (what list() yields for it). */
const KEY = /^(\.incoming\/[0-9a-f-]{36}|[a-z0-9_]+\/[a-z0-9_-]+\/[0-9a-f-]{36})$/;

export class LocalDiskBackend implements StorageBackend {
  /** Folders known to exist: an upload creates its two folders once, not on every upload (two file system calls fewer each). */
  private readonly folders = new Set<string>();

  constructor(private readonly root: string) {}

  /** Keys come from objectKey (validated environment, bucket and uuid) or list(); refuse anything else outright. */
  private pathOf(key: string): string {
    if (!KEY.test(key)) throw new Error(`not an object key: ${key}`);
    return path.join(this.root, ...key.split('/'));
  }

  async put(key: string, body: Readable): Promise<void> {
    const target = this.pathOf(key);
    const incoming = path.join(this.root, INCOMING, randomUUID());
    const fd = await this.inFolder(incoming, () => openDescriptor(incoming, 'wx'));
    try {
      // A plain descriptor, not a FileHandle: the stream closes it with fs.close, where a
      // FileHandle's close event makes the already-finished stream build (and drop) an error with
      // its stack trace, ~80 µs of every upload (bench/RESULTS.md "File storage").
      await pipeline(body, createWriteStream('', { fd, highWaterMark: UPLOAD_BUFFER_BYTES }));
      await this.inFolder(target, () => rename(incoming, target));
    } catch (error) {
      await rm(incoming, { force: true });
      throw error;
    }
  }

  /** Runs `work` on `file` once its folder exists; a folder removed meanwhile (ENOENT) is created again, once. */
  private async inFolder<T>(file: string, work: () => Promise<T>): Promise<T> {
    const folder = path.dirname(file);
    if (!this.folders.has(folder)) {
      await mkdir(folder, { recursive: true });
      this.folders.add(folder);
    }
    try {
      return await work();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      await mkdir(folder, { recursive: true });
      return await work();
    }
  }

  async get(key: string, range?: ByteRange, size?: number): Promise<Readable> {
    const file = this.pathOf(key);
    const bounds = range ?? (size !== undefined && size > 0 ? { start: 0, end: size - 1 } : undefined);
    const length = bounds ? bounds.end - bounds.start + 1 : undefined;
    // Open first, so a missing file is a rejection here rather than an error on the stream mid-response.
    const stream = createReadStream(file, {
      ...bounds,
      // Up to ONE_READ_BYTES in a single read: one thread-pool round trip and one socket write
      // instead of 64 KiB at a time (a 1 MiB download costs ~1 ms less CPU); larger ones stream.
      ...(length !== undefined && length <= ONE_READ_BYTES ? { highWaterMark: length } : {}),
    });
    await new Promise<void>((resolve, reject) => {
      stream.once('open', () => resolve());
      stream.once('error', (error: NodeJS.ErrnoException) =>
        reject(error.code === 'ENOENT' ? new ObjectMissing(key) : error),
      );
    });
    return stream;
  }

  async remove(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  async *list(): AsyncIterable<StoredObject> {
    for (const { key, file } of await this.walk()) {
      const info = await stat(file).catch(() => undefined);
      if (info?.isFile()) yield { key, modifiedAt: info.mtime };
    }
  }

  /** Files two levels below the root (environment/bucket/id) and the incoming ones, keyed as `.incoming/<name>`. */
  private async walk(): Promise<{ key: string; file: string }[]> {
    const found: { key: string; file: string }[] = [];
    const dirs = async (dir: string) =>
      (await readdir(dir, { withFileTypes: true }).catch(() => [])).filter((d) => d.isDirectory()).map((d) => d.name);
    for (const name of await readdir(path.join(this.root, INCOMING)).catch(() => [] as string[]))
      found.push({ key: `${INCOMING}/${name}`, file: path.join(this.root, INCOMING, name) });
    for (const env of (await dirs(this.root)).filter((d) => d !== INCOMING)) {
      for (const bucket of await dirs(path.join(this.root, env))) {
        for (const id of await readdir(path.join(this.root, env, bucket)).catch(() => [] as string[]))
          found.push({ key: `${env}/${bucket}/${id}`, file: path.join(this.root, env, bucket, id) });
      }
    }
    return found;
  }
}
