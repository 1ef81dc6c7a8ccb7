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
