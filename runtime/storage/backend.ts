/**
 * Where file bytes live. Small on purpose so that another store (S3) is one more implementation:
 * bytes go in as a stream and become visible under their key only once complete, come out as a
 * stream (a byte range of it), are removed idempotently, and can be listed for the orphan sweep.
 */
import type { Readable } from 'node:stream';

/**
 * Bytes an upload's streams buffer at each step (the default is 16 KiB): the upload inspector's two
 * sides (./inspector.ts) and the local disk's file. With the socket's 64 KiB chunks a 16 KiB buffer
 * is full after every chunk, pausing the request until the file took it; with 256 KiB the request
 * keeps flowing (hashed meanwhile) while the disk writes, and chunks that arrived during a write go
 * to the file together in one writev. bench:storage upload 1 MiB: 60-61 % of bare with 16 KiB,
 * 66-81 % with 256 KiB, 64-65 % with 1 MiB. At most ~0.7 MiB more per upload in flight.
 */
export const UPLOAD_BUFFER_BYTES = 256 * 1024;

export interface StoredObject {
  readonly key: string;
  /** When its bytes were last written: the sweep leaves young objects alone (an upload may still be committing). */
  readonly modifiedAt: Date;
}

/** Inclusive byte offsets, as in an HTTP Range. */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

export interface StorageBackend {
  /**
   * Writes `body` under `key`. The object exists only once the stream has ended and every byte is
   * stored; if `body` fails (a size limit, a refused type, the client gone), nothing is left behind
   * and the promise rejects with body's error.
   */
  put(key: string, body: Readable): Promise<void>;
  /**
   * The bytes of `key` (or of `range` of them); rejects with ObjectMissing when there is no such
   * object. `size`, the object's size as its metadata says, lets a backend size its reads.
   */
  get(key: string, range?: ByteRange, size?: number): Promise<Readable>;
  /** Removes `key`; removing a missing object is not an error. */
  remove(key: string): Promise<void>;
  /** Every stored object, including leftovers of uploads that never completed. */
  list(): AsyncIterable<StoredObject>;
}

export class ObjectMissing extends Error {
  constructor(readonly key: string) {
    super(`no stored object ${key}`);
    this.name = 'ObjectMissing';
  }
}

/** Where a file's bytes are kept: derived from its metadata, so the row needs no column for it. */
export function objectKey(environment: string, bucket: string, id: string): string {
  return `${environment}/${bucket}/${id}`;
}

/** The parts of a key objectKey made, or undefined for anything else found in the store. */
export function parseObjectKey(key: string): { environment: string; bucket: string; id: string } | undefined {
  const parts = key.split('/');
  if (parts.length !== 3) return undefined;
  const [environment, bucket, id] = parts as [string, string, string];
  return { environment, bucket, id };
}
