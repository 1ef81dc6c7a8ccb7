import { randomUUID } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LocalDiskBackend } from '../../runtime/storage/index.ts';

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'svcgen-local-disk-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const key = () => `master/attachments/${randomUUID()}`;

describe('LocalDiskBackend', () => {
  it('stores a stream under its key and reads it back, leaving nothing in .incoming', async () => {
    const backend = new LocalDiskBackend(root);
    const k = key();
    await backend.put(k, Readable.from(['hello ', 'world']));
    expect(await text(await backend.get(k))).toBe('hello world');
    expect(await readdir(path.join(root, '.incoming'))).toEqual([]);
  });

  it('creates its folders again when they are removed while it runs', async () => {
    const backend = new LocalDiskBackend(root);
    await backend.put(key(), Readable.from(['first']));
    await rm(root, { recursive: true, force: true });
    const k = key();
    await backend.put(k, Readable.from(['second']));
    expect(await text(await backend.get(k))).toBe('second');
    // only the target folder gone: the rename creates it again
    await rm(path.join(root, 'master'), { recursive: true, force: true });
    const k2 = key();
    await backend.put(k2, Readable.from(['third']));
    expect(await text(await backend.get(k2))).toBe('third');
  });

  it('reads an object of a known size up to 1 MiB in one chunk, a larger one in 64 KiB chunks, a range exactly', async () => {
    const backend = new LocalDiskBackend(root);
    const chunks = async (stream: Readable) => {
      const sizes: number[] = [];
      for await (const chunk of stream) sizes.push((chunk as Buffer).length);
      return sizes;
    };
    const MiB = 1024 * 1024;
    const small = key();
    await backend.put(small, Readable.from([Buffer.alloc(MiB, 1)]));
    expect(await chunks(await backend.get(small, undefined, MiB))).toEqual([MiB]);
    // without a size, as before: 64 KiB reads
    expect((await chunks(await backend.get(small))).length).toBe(16);
    expect(await chunks(await backend.get(small, { start: 10, end: 19 }, MiB))).toEqual([10]);
    const large = key();
    await backend.put(large, Readable.from([Buffer.alloc(MiB + 1, 2)]));
    const sizes = await chunks(await backend.get(large, undefined, MiB + 1));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(MiB + 1);
    expect(Math.max(...sizes)).toBe(64 * 1024);
    const empty = key();
    await backend.put(empty, Readable.from([]));
    expect(await chunks(await backend.get(empty, undefined, 0))).toEqual([]);
  });

  it('keeps nothing when the body fails', async () => {
    const backend = new LocalDiskBackend(root);
    const k = key();
    const failing = new Readable({
      read() {
        this.push('partial');
        this.destroy(new Error('client gone'));
      },
    });
    await expect(backend.put(k, failing)).rejects.toThrow('client gone');
    expect(await readdir(path.join(root, '.incoming'))).toEqual([]);
    const found: string[] = [];
    for await (const o of backend.list()) found.push(o.key);
    expect(found).toEqual([]);
  });
});
