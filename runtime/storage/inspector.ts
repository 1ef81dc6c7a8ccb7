/**
 * The stream an upload passes through on its way to the backend: it counts bytes (over the bucket's
 * maxBytes → 413 at once, while streaming), hashes them (sha256), and holds back only the first
 * SNIFF_BYTES until their type is checked (415). Nothing else is buffered.
 */
import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { Problem } from '../http/index.ts';
import { UPLOAD_BUFFER_BYTES } from './backend.ts';
import { contentMismatch, SNIFF_BYTES } from './content-types.ts';

export class UploadInspector extends Transform {
  private readonly hash = createHash('sha256');
  private head: Buffer[] | undefined = [];
  private headSize = 0;
  size = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly declared: string,
    /** A further bound on the size (a daily budget, a bucket quota): its Problem once passed, cutting the upload. */
    private readonly cap: (size: number) => Problem | undefined = () => undefined,
  ) {
    super({ highWaterMark: UPLOAD_BUFFER_BYTES });
  }

  private digest: string | undefined;

  /** Hex sha256 of every byte that went through, once the stream has finished. */
  sha256(): string {
    this.digest ??= this.hash.digest('hex');
    return this.digest;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      done(new Problem('payload-too-large', `the file is larger than this bucket's limit of ${this.maxBytes} bytes`));
      return;
    }
    const capped = this.cap(this.size);
    if (capped) {
      done(capped);
      return;
    }
    this.hash.update(chunk);
    if (!this.head) {
      done(null, chunk);
      return;
    }
    this.head.push(chunk);
    this.headSize += chunk.length;
    if (this.headSize < SNIFF_BYTES) done();
    else this.releaseHead(done);
  }

  override _flush(done: TransformCallback): void {
    if (this.head) this.releaseHead(done);
    else done();
  }

  private releaseHead(done: TransformCallback): void {
    const head = Buffer.concat(this.head!, this.headSize);
    this.head = undefined;
    contentMismatch(this.declared, head).then(
      (mismatch) => (mismatch ? done(new Problem('unsupported-media-type', mismatch)) : done(null, head)),
      done,
    );
  }
}
