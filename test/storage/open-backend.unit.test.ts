/** openBackend (runtime/storage/open-backend.ts): which backend storage.backend names, and where local disk keeps bytes. */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../runtime/config/index.ts';
import { LocalDiskBackend, openBackend, S3Backend } from '../../runtime/storage/index.ts';

const storageOf = (storage: Record<string, unknown>) =>
  parseConfig({ project: { id: 'p' }, storage }, 'svcgen.config.json').storage;
const rootOf = (backend: unknown) => (backend as unknown as { root: string }).root;

describe('openBackend', () => {
  it('is local disk under storage.root by default, under storage.backend.root when given', () => {
    const byDefault = openBackend(storageOf({}), '/srv/shop', () => {});
    expect(byDefault).toBeInstanceOf(LocalDiskBackend);
    expect(rootOf(byDefault)).toBe(path.resolve('/srv/shop/.svcgen/files'));
    expect(rootOf(openBackend(storageOf({ root: 'files' }), '/srv/shop', () => {}))).toBe('/srv/shop/files');
    const both = openBackend(
      storageOf({ root: 'files', backend: { type: 'local', root: '/data/files' } }),
      '/srv/shop',
      () => {},
    );
    expect(rootOf(both)).toBe('/data/files');
  });

  it('is the S3 backend for type s3', () => {
    const backend = openBackend(
      storageOf({ backend: { type: 's3', bucket: 'shop-files', region: 'eu-west-1' } }),
      '/srv',
      () => {},
    );
    expect(backend).toBeInstanceOf(S3Backend);
    (backend as S3Backend).close();
  });
});
